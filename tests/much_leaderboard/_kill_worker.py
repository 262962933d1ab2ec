"""Subprocess for the kill test: submit one archive to a store with a slow (many resamples) scoring."""

from __future__ import annotations

import sys
from pathlib import Path

from much_leaderboard import EvaluationData, Leaderboard

if __name__ == "__main__":
    folder, archive = sys.argv[1], Path(sys.argv[2])
    board = Leaderboard(folder, data=EvaluationData(n_resamples=20_000))
    board.submit(archive.read_bytes(), {"method": "killed while scoring"})
    print("finished", flush=True)
