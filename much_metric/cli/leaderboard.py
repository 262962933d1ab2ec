"""``much leaderboard serve``: the MUCH leaderboard as a local web application (extra ``leaderboard``).

Example::

    much leaderboard serve                          # embedded sample, store in ./much-leaderboard, port 7860
    much leaderboard serve --data orailix/MUCH --store /data/board --hub-repo my-org/much-leaderboard

Submissions (a zip of a MUCH-signals folder) are validated, re-scored with the toolkit and shown in the table; the
built-in baselines are computed and added on first start. With ``--hub-repo`` every accepted entry is also committed
to that dataset repository (token from ``$HF_TOKEN`` or the saved login) and pulled back at start.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("leaderboard", help="serve the MUCH leaderboard web application",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True)
    serve = actions.add_parser("serve", help="run the leaderboard server")
    serve.add_argument("--store", default="much-leaderboard", help="store folder (default ./much-leaderboard)")
    serve.add_argument("--data", default="sample", help="evaluation data: sample (default), orailix/MUCH or a folder")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    serve.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default 1000)")
    serve.add_argument("--no-baselines", action="store_true", help="do not seed the built-in baselines")
    serve.add_argument("--hub-repo", default=None, help="mirror accepted entries to this hub dataset repository")
    serve.add_argument("--endpoint", default=None, help="hub endpoint (default $HF_ENDPOINT or huggingface.co)")
    serve.add_argument("--check", action="store_true", help="prepare the store, print the table size and exit")
    serve.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import importlib.util

    from much_metric.leaderboard import serve, start

    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    if args.bootstrap < 1:
        raise ValueError(f"--bootstrap must be a positive integer, got {args.bootstrap}")
    if not args.check and importlib.util.find_spec("gradio") is None:
        raise ImportError("much leaderboard serve needs gradio", name="gradio")
    board = start(args.store, data=args.data, n_resamples=args.bootstrap, baselines=not args.no_baselines,
                  hub_repo=args.hub_repo, endpoint=args.endpoint)
    print(f"much leaderboard: {len(board.store.rows())} rows in {args.store} (evaluation data: {args.data})")
    if args.check:
        board.join()  # the built-in baselines' breakdown intervals and the ranking
        return 0
    print(f"much leaderboard: serving on http://{args.host}:{args.port}/ (Ctrl+C stops)", flush=True)
    serve(board, host=args.host, port=args.port)
    return 0
