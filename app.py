"""Hugging Face Space entry of the MUCH leaderboard (``python app.py``; locally ``much-leaderboard serve``).

Settings (Space variables; the token is a Space *secret*, read by huggingface_hub from the environment only):

* ``MUCH_LEADERBOARD_REPO``: dataset repository that persists the entries (e.g. ``my-org/much-leaderboard``);
  unset: the store lives on the Space's disk only;
* ``HF_TOKEN`` (secret): a token with write access to that repository;
* ``MUCH_LEADERBOARD_DATA``: evaluation data, ``sample`` (default) or ``orailix/MUCH``;
* ``MUCH_LEADERBOARD_STORE``: store folder (default ``/data/much-leaderboard`` with persistent storage, else
  ``much-leaderboard``); ``MUCH_LEADERBOARD_BOOTSTRAP``: resamples (default 1000);
* ``MUCH_LEADERBOARD_DAILY_LIMIT``: submissions per submitter (authors field) in any 24 hours (default 5);
* ``MUCH_LEADERBOARD_PRIVATE_DATA`` and ``MUCH_LEADERBOARD_PRIVATE_LABELS``: a private split's rows (published without
  labels) and its label file on the Space's own disk (persistent storage of a private Space; never in a public repo),
  docs/leaderboard.md#hidden-split; ``MUCH_LEADERBOARD_PRIVATE_DAILY_LIMIT`` (default 1) and
  ``MUCH_LEADERBOARD_PRIVATE_BOARD_DAILY_LIMIT`` (all submitters together, default 10).
"""

from __future__ import annotations

import os

from much_leaderboard import HubMirror, PrivatePolicy, PrivateSplit, serve, start


def main() -> None:
    default_store = "/data/much-leaderboard" if os.path.isdir("/data") else "much-leaderboard"
    private_data, private_labels = (os.environ.get(f"MUCH_LEADERBOARD_PRIVATE_{name}") for name in ("DATA", "LABELS"))
    private = None
    if private_data and private_labels:
        policy = PrivatePolicy(daily_limit=int(os.environ.get("MUCH_LEADERBOARD_PRIVATE_DAILY_LIMIT", "1")),
                               board_daily_limit=int(os.environ.get("MUCH_LEADERBOARD_PRIVATE_BOARD_DAILY_LIMIT",
                                                                    "10")))
        private = PrivateSplit(private_data, private_labels, policy=policy)
    board = start(os.environ.get("MUCH_LEADERBOARD_STORE", default_store),
                  data=os.environ.get("MUCH_LEADERBOARD_DATA", "sample"),
                  n_resamples=int(os.environ.get("MUCH_LEADERBOARD_BOOTSTRAP", "1000")),
                  mirror=HubMirror(repo) if (repo := os.environ.get("MUCH_LEADERBOARD_REPO")) else None,
                  daily_limit=int(os.environ.get("MUCH_LEADERBOARD_DAILY_LIMIT", "5")), private=private)
    serve(board, host=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
          port=int(os.environ.get("GRADIO_SERVER_PORT", os.environ.get("PORT", "7860"))))


if __name__ == "__main__":
    main()
