"""``much-leaderboard serve`` (also ``python -m much_leaderboard serve``): the MUCH leaderboard as a local web
application (extra ``leaderboard``).

Example::

    much-leaderboard serve                          # embedded sample, store in ./much-leaderboard, port 7860
    much-leaderboard serve --data orailix/MUCH --store /data/board --hub-repo my-org/much-leaderboard

Submissions (a zip of a MUCH-signals folder) are validated, re-scored with the toolkit and shown in the table; the
built-in baselines are computed and added on first start. With ``--hub-repo`` every accepted entry is also committed
to that dataset repository (token from ``$HF_TOKEN`` or the saved login) and pulled back at start. The address is
resolved and bound before anything is loaded: an address that cannot be listened on is a one-line error (exit 2).
"""

from __future__ import annotations

import argparse
import socket

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
    serve.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default 1000)")
    serve.add_argument("--no-baselines", action="store_true", help="do not add the built-in baselines")
    serve.add_argument("--hub-repo", default=None, help="mirror accepted entries to this hub dataset repository")
    serve.add_argument("--endpoint", default=None, help="hub endpoint (default $HF_ENDPOINT or huggingface.co)")
    serve.add_argument("--daily-limit", type=int, default=5,
                       help="submissions one submitter (authors field) may make in any 24 hours (default 5)")
    serve.add_argument("--check", action="store_true", help="prepare the store, print the table size and exit")
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


def _serve(args: argparse.Namespace) -> int:
    import importlib.util

    from much_leaderboard._app import serve, start
    from much_metric.scoring import check_resamples

    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    check_resamples(args.bootstrap, "--bootstrap", zero=False)  # the rule much run / much evaluate read
    if args.daily_limit < 1:
        raise ValueError(f"--daily-limit must be a positive integer, got {args.daily_limit}")
    if not args.check:
        if importlib.util.find_spec("gradio") is None:
            raise ImportError(f"{_PROG} serve needs gradio", name="gradio")
        check_address(args.host, args.port)
    board = start(args.store, data=args.data, n_resamples=args.bootstrap, baselines=not args.no_baselines,
                  hub_repo=args.hub_repo, endpoint=args.endpoint, daily_limit=args.daily_limit)
    print(f"{_PROG}: {len(board.store.rows())} rows in {args.store} (evaluation data: {args.data})")
    if args.check:
        board.join()  # the built-in baselines' breakdown intervals and the ranking
        return 0
    print(f"{_PROG}: serving on http://{args.host}:{args.port}/ (Ctrl+C stops)", flush=True)
    serve(board, host=args.host, port=args.port)
    return 0


def main(argv: list[str] | None = None) -> int:
    """The ``much-leaderboard`` command (returns the exit code: 0, 2 for a one-line error, 1 for a bug, 130 on
    Ctrl+C: :func:`much_metric.commands.run_command`, the error loop of every command)."""
    args = build_parser().parse_args(argv)
    return run_command(_PROG, lambda: _serve(args), debug=debug_requested(args.traceback), subcommand="leaderboard")
