"""``much evaluate`` on a data-loading error exits 2 every time: no native thread left to abort the process at exit
("terminate called without an active exception", exit 134, seen in 15-20 % of runs on some machines)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from much_dataset import card, synthetic
from much_metric.signals import write_signals

REPO_ROOT = Path(__file__).resolve().parents[3]
RUNS = 20
AT_ONCE = 4  # processes in flight (the runs are I/O and import bound; keeps the test near 20 s on 2 cores)


@pytest.fixture(scope="module")
def broken_export(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("broken")
    rows = synthetic.make_rows(24, seed=21)
    folder = tmp / "much"
    card.write_parquet_folder({"train": rows[:16], "test": rows[16:]}, folder)
    shard = sorted((folder / "data").glob("*/train-*.parquet"))[0]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])  # a truncated shard
    scores = tmp / "signals.jsonl"
    write_signals(scores, [{"generation_id": r["generation_id"], "signal_name": "ml",
                            "values": (1 - np.asarray(r["logits_values"])[:, 0]).tolist()} for r in rows])
    return folder, scores, tmp


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--config", "xx"]], ids=["truncated-shard", "bad-config"])
def test_data_loading_error_exits_2_every_time(broken_export, extra):
    folder, scores, tmp = broken_export
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(tmp / "cache")}
    argv = [sys.executable, "-m", "much_metric", "evaluate", "--source", str(folder), "--scores", str(scores),
            "--bootstrap", "0", *extra]
    results = []
    for start in range(0, RUNS, AT_ONCE):
        running = [subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                   for _ in range(start, min(start + AT_ONCE, RUNS))]
        results += [(process.wait(timeout=120), process.stderr.read()) for process in running]
    codes = [code for code, _ in results]
    assert codes == [2] * RUNS, [err for code, err in results if code != 2][:1]
    for _, err in results:
        assert err.startswith("much evaluate: error: ") and "terminate called" not in err
        assert err.count("\n") == 1, err
