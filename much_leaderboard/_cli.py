"""``much-leaderboard serve`` (also ``python -m much_leaderboard serve``): the MUCH leaderboard as a local web
application (extra ``leaderboard``).

Example::

    much-leaderboard serve                          # embedded sample, store in ./much-leaderboard, port 7860
    much-leaderboard serve --data orailix/MUCH --store /data/board --hub-repo my-org/much-leaderboard
    much-leaderboard serve --private-data hidden/much --private-labels hidden/private/labels.json
    much-leaderboard archive signals/public signals/private --out submission.zip   # a submitter's archive

Submissions (a zip of a MUCH-signals folder) are validated, re-scored with the toolkit and shown in the table; the
built-in baselines are computed and added on first start. With ``--hub-repo`` every accepted entry is also committed
to that dataset repository (token from ``$HF_TOKEN`` or the saved login) and pulled back at start. The address is
resolved and bound before anything is loaded: an address that cannot be listened on is a one-line error (exit 2).

``--private-data FOLDER --private-labels FILE`` adds a private split (``python -m builder export --withhold-labels``
wrote both): every row is ranked on it too, showing public rank, private rank and the shift; only the rounded
ROC-AUC over the whole split is ever shown (docs/leaderboard.md#hidden-split).
"""

from __future__ import annotations

import argparse
import socket
from typing import Any

from much_metric.commands import debug_requested, run_command

__all__ = ["build_parser", "check_address", "main"]

_PROG = "much-leaderboard"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=_PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traceback", action="store_true",
                        help="show the full traceback of an error instead of one line (also: MUCH_DEBUG=1)")
    actions = parser.add_subparsers(dest="action", required=True)
    serve = actions.add_parser("serve", help="run the leaderboard server")
    serve.add_argument("--store", default="much-leaderboard", help="store folder (default ./much-leaderboard)")
    serve.add_argument("--data", default="sample", help="evaluation data: sample (default), orailix/MUCH or a folder")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    serve.add_argument("--split", choices=("train", "test"), default=None,
                       help="serve only this split of --data (default: every split); `test` for a board over a new "
                            "export whose train split trains the learned detectors submitted to it")
    serve.add_argument("--bootstrap", type=int, default=1000,
                       help="bootstrap resamples for the intervals and P(rank) (default 1000; 0 = none, else at least "
                            "40: the rule of much run / much evaluate --bootstrap)")
    serve.add_argument("--no-baselines", action="store_true", help="do not add the built-in baselines")
    serve.add_argument("--hub-repo", default=None, help="mirror accepted entries to this hub dataset repository")
    serve.add_argument("--endpoint", default=None, help="hub endpoint (default $HF_ENDPOINT or huggingface.co)")
    serve.add_argument("--daily-limit", type=int, default=5,
                       help="submissions one submitter (authors field) may make in any 24 hours (default 5)")
    serve.add_argument("--private-data", default=None,
                       help="rows of a private split, published without labels (builder export --withhold-labels)")
    serve.add_argument("--private-labels", default=None,
                       help="their label file (with its .sha256 next to it): read by this server only")
    serve.add_argument("--private-daily-limit", type=int, default=1,
                       help="submissions with private values one submitter may make in any 24 hours (default 1)")
    serve.add_argument("--private-board-daily-limit", type=int, default=None,
                       help="submissions with private values all submitters together may make in any 24 hours "
                            "(default 10): the board-wide bound on what the labels can leak, whatever names submit")
    serve.add_argument("--private-decimals", type=int, default=2,
                       help="digits of the private ROC-AUC shown (default 2, at most 4)")
    serve.add_argument("--private-min-claims", type=int, default=1000,
                       help="least number of claims a private split must hold (default 1000)")
    serve.add_argument("--check", action="store_true", help="prepare the store, print the table size and exit")
    archive = actions.add_parser(
        "archive", help="one submission archive from the public split's and the private split's signal folders",
        description="Write the zip a board with a hidden split takes: every signal file of PUBLIC (much run --source "
                    "<public data> --out PUBLIC) merged with the same file of PRIVATE (much run --source <withheld "
                    "split> --out PRIVATE), with PUBLIC's timings.json, hardware.json and submission.json "
                    "(docs/leaderboard.md#hidden-split).")
    archive.add_argument("public", metavar="PUBLIC", help="signal folder of the public split")
    archive.add_argument("private", metavar="PRIVATE", help="signal folder of the private (withheld) split")
    archive.add_argument("--out", required=True, help="the archive to write (a .zip)")
    return parser


def check_address(host: str, port: int) -> None:
    """Resolve ``host`` and bind ``(host, port)`` once (then release it): raises ``ValueError`` with one line when
    the server could not listen there, before anything is loaded or served."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise ValueError(f"--host {host!r}: not an address this machine can resolve ({reason})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            raise ValueError(f"--host {host!r} --port {port}: cannot listen there "
                             f"({error.strerror or error})") from None


#: What the store folder holds (:mod:`much_leaderboard._store`): the database, the archives and the scores.
_STORE_FILES = ("leaderboard.sqlite", "leaderboard.sqlite-*", "private.sqlite", "private.sqlite-*", "archives/*",
                "scores/*")


def check_store_paths(store: str, inputs: list[tuple[str, str]]) -> None:
    """The output rules (:func:`much_metric.fileio.check_outputs`) for ``--store`` against what the server reads
    (``(flag, path)``: ``--data``, ``--private-data``, ``--private-labels``): the store never writes over a file of
    them."""
    import fnmatch
    from pathlib import Path

    from much_metric.fileio import Output, check_outputs

    def owns(name: Path) -> bool:
        return any(fnmatch.fnmatchcase(name.as_posix(), pattern) for pattern in _STORE_FILES)

    check_outputs([Output("--store", Path(store).expanduser(), folder=True, owns=owns)], inputs=inputs)


def _serve(args: argparse.Namespace) -> int:
    import importlib.util

    from much_leaderboard._app import serve, start
    from much_leaderboard._hub import HubMirror
    from much_metric.scoring import check_resamples

    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    check_resamples(args.bootstrap, "--bootstrap")  # one rule with much run / much evaluate: 0 = no intervals
    if args.daily_limit < 1:
        raise ValueError(f"--daily-limit must be a positive integer, got {args.daily_limit}")
    check_store_paths(args.store, [(flag, value) for flag, value in (
        ("--data", args.data), ("--private-data", args.private_data), ("--private-labels", args.private_labels))
        if value])
    private = _private_split(args)
    if not args.check:
        if importlib.util.find_spec("gradio") is None:
            raise ImportError(f"{_PROG} serve needs gradio", name="gradio")
        check_address(args.host, args.port)
    mirror = HubMirror(args.hub_repo, endpoint=args.endpoint) if args.hub_repo else None
    board = start(args.store, data=args.data, split=args.split, n_resamples=args.bootstrap,
                  baselines=not args.no_baselines, mirror=mirror, daily_limit=args.daily_limit, private=private)
    print(f"{_PROG}: {len(board.store.rows())} rows in {args.store} (evaluation data: {args.data}"
          f"{f', split {args.split}' if args.split else ''}, {len(board.data.dataset)} samples)")
    if private is not None:
        print(f"{_PROG}: private split {args.private_data}: {len(private.ids)} samples, {private.n_claims} claims "
              f"(labels sha256 {private.labels_sha256[:12]}...)")
    if args.check:
        board.join()  # the built-in baselines' breakdown intervals and the ranking
        return 0
    print(f"{_PROG}: serving on http://{args.host}:{args.port}/ (Ctrl+C stops)", flush=True)
    serve(board, host=args.host, port=args.port)
    return 0


def _archive(args: argparse.Namespace) -> int:
    from much_leaderboard._submission import write_submission_archive

    counts = write_submission_archive(args.public, args.private, args.out)
    print(f"{_PROG}: wrote {args.out}: {len(counts)} signal file(s) ({', '.join(sorted(counts))}), each with the "
          f"public rows of {args.public} and the {max(counts.values())} private rows of {args.private}; submit it "
          "to the board")
    return 0


def _private_split(args: argparse.Namespace) -> Any:
    """The private split of ``--private-data`` / ``--private-labels`` (both or neither), loaded and checked."""
    if (args.private_data is None) != (args.private_labels is None):
        raise ValueError("--private-data and --private-labels go together (the rows and their label file)")
    if args.private_data is None:
        return None
    from much_leaderboard._private import PrivatePolicy, PrivateSplit, check_label_file_place

    check_label_file_place(args.private_labels, args.data)  # the public rows' folder is published too

    board_wide = {} if args.private_board_daily_limit is None else {
        "board_daily_limit": args.private_board_daily_limit}
    policy = PrivatePolicy(decimals=args.private_decimals, min_claims=args.private_min_claims,
                           daily_limit=args.private_daily_limit, **board_wide)
    return PrivateSplit(args.private_data, args.private_labels, policy=policy)


def main(argv: list[str] | None = None) -> int:
    """The ``much-leaderboard`` command (returns the exit code: 0, 2 for a one-line error, 1 for a bug, 130 on
    Ctrl+C: :func:`much_metric.commands.run_command`, the error loop of every command)."""
    args = build_parser().parse_args(argv)
    action = _archive if args.action == "archive" else _serve
    return run_command(_PROG, lambda: action(args), debug=debug_requested(args.traceback), subcommand="leaderboard")
