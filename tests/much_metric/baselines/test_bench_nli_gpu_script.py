"""benchmarks/bench_nli_gpu.py's CPU smoke mode: it runs, prints the device, and our CCP/SAR equal the reference
loops."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from tests.much_metric._baselines_helpers import one_torch_thread

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_nli_gpu.py"


def test_cpu_smoke_run(capsys):
    from tests import assets

    assets.require("llama3")
    spec = importlib.util.spec_from_file_location("bench_nli_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with one_torch_thread():
        assert module.main(["--device", "cpu", "--small", "--samples", "3", "--dtypes", "bfloat16"]) == 0
    printed = capsys.readouterr().out
    assert "device cpu, GPU: none (CPU)" in printed and "tiny DeBERTa (smoke run)" in printed
    ccp_diff, sar_diff = (float(v) for v in re.search(r"max \|diff\| CCP (\S+), SAR (\S+)", printed).groups())
    # ours (float32) = the reference's per-token / per-answer loops: CCP exactly, because both read the same NLI
    # probabilities computed once in this process; SAR sums them in another order (float rounding only)
    assert ccp_diff == 0.0 and sar_diff < 1e-6
    assert re.search(r"ours bfloat16: CCP-10-8 +[\d.]+s", printed)
    # The full-size architecture is deberta-large-mnli's (24 x 1024, 16 heads, relative attention c2p|p2c).
    assert module.DEBERTA_LARGE_MNLI["num_hidden_layers"] == 24 and module.DEBERTA_LARGE_MNLI["hidden_size"] == 1024
