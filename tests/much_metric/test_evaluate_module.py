"""The ``evaluate`` wrapper: loadable three ways from a fresh modules cache, offline, and equal to the core."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from much_dataset import schema
from much_metric.scoring import Bootstrap
from much_metric.scoring._api import score
from tests.much_metric._metric_helpers import columns, mushroom_rows

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import json, sys, evaluate
import much_metric
from much_metric.scoring import Bootstrap
how, inputs_path, out_path = sys.argv[1:4]
inputs = json.load(open(inputs_path))
if how == "name":
    module = evaluate.load("much_metric")
elif how == "path":
    module = evaluate.load(inputs["module_path"])
else:
    module = much_metric.load_metric()
results = {}
for aggregator in ("product", "geometric"):
    results[aggregator] = module.compute(
        predictions=inputs["scores"], references=inputs["labels"], token_chunks=inputs["chunks"],
        stopword_mask=inputs["mask"], aggregator=aggregator, by={"lang": inputs["lang"]},
        bootstrap=Bootstrap(n_resamples=40),
    )
json.dump({"results": results, "module": type(module).__module__}, open(out_path, "w"))
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    data = columns(mushroom_rows(limit=150))
    payload = {
        "scores": data["scores"], "labels": data[schema.LABELS], "chunks": data[schema.TOKEN_CHUNKS],
        "mask": data[schema.STOPWORD_MASK], "lang": data[schema.LANG], "module_path": str(REPO / "much_metric"),
    }
    path = tmp_path_factory.mktemp("inputs") / "inputs.json"
    path.write_text(json.dumps(payload))
    return payload, path


def _run(how: str, cwd: Path, inputs_path: Path, tmp_path: Path) -> dict:
    env = dict(os.environ)
    # A fresh, empty modules cache and hub cache, and no network: evaluate must copy the script itself.
    env.update(HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               HF_EVALUATE_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONPATH=str(REPO))
    script, out = tmp_path / "run.py", tmp_path / "out.json"
    script.write_text(_SCRIPT)
    completed = subprocess.run([sys.executable, str(script), how, str(inputs_path), str(out)], cwd=cwd, env=env,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert (tmp_path / "modules").is_dir()
    return json.loads(out.read_text())


@pytest.mark.parametrize("how", ["name", "path", "helper"])
def test_loads_from_fresh_cache_and_equals_core(inputs, tmp_path, how):
    payload, inputs_path = inputs
    cwd = REPO if how == "name" else tmp_path  # by name only from the repository root
    got = _run(how, cwd, inputs_path, tmp_path)
    assert got["module"].startswith("evaluate_modules.metrics.much_metric.")
    for aggregator, result in got["results"].items():
        expected = score(payload["scores"], payload["chunks"], payload["labels"], stopword_mask=payload["mask"],
                         aggregation=aggregator, by={"lang": payload["lang"]}, bootstrap=Bootstrap(n_resamples=40))
        assert result == json.loads(json.dumps(expected.to_dict()))
    copied = list((tmp_path / "modules").rglob("*.py"))
    assert any(p.name == "much_metric.py" for p in copied)


def test_card_and_metric_info():
    card = (REPO / "much_metric" / "README.md").read_text(encoding="utf-8")
    for needed in ("EOS", "higher", "stopword_handling", 'much_dataset.load("sample"', "evaluate.load", "-1",
                   "score_type", "Bootstrap", "load_metric", "Aggregation("):
        assert needed in card, needed


_EXAMPLE_RUNNER = r"""
import re, sys, datasets, much_dataset
from much_dataset import schema
from much_dataset.synthetic import make_rows
# Stand-in for the embedded sample (synthetic rows with the real typed features).
ds = datasets.Dataset.from_list(make_rows(60), features=schema.features())
much_dataset.load = lambda *args, split=None, **kwargs: ds if split else datasets.DatasetDict({"test": ds})
blocks = re.findall(r"```python\n(.*?)```", open(sys.argv[1], encoding="utf-8").read(), re.S)
end = next(i for i, block in enumerate(blocks) if "same =" in block)  # the evaluate block, after the score one
assert end >= 1 and "much_metric.score(" in blocks[0] and "evaluate.load(" in blocks[end]
namespace = {}
for block in blocks[: end + 1]:  # in order, as a reader pastes them
    exec(block, namespace)
assert namespace["same"]["roc_auc"] == namespace["result"].roc_auc
print("ok", namespace["result"].roc_auc)
"""


def test_card_example_runs(tmp_path):
    env = dict(os.environ)
    env.update(HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               HF_EVALUATE_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    script = tmp_path / "example.py"
    script.write_text(_EXAMPLE_RUNNER)
    completed = subprocess.run([sys.executable, str(script), str(REPO / "much_metric" / "README.md")], cwd=tmp_path,
                               env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.splitlines()[-1].startswith("ok ")


def test_the_module_card_names_every_metric_of_the_table():
    from much_metric.scoring import METRIC_TABLE

    card = (REPO / "much_metric" / "README.md").read_text(encoding="utf-8")
    missing = [metric.key for metric in METRIC_TABLE if f"`{metric.key}`" not in card]
    assert missing == [], f"much_metric/README.md lacks the metric(s) {missing}: add a row to its Metrics table"


def test_claim_scores_path_equals_score_claims():
    from much_metric.much_metric import MuchMetric
    from much_metric.scoring import score_claims

    chunks = [[[0], [1, 2], [3]], [[0, 1], [2]]]
    labels = [[-1, 1, 1], [1, 1]]
    per_chunk = [[0.9, 0.2, 0.0], [0.4, 0.0]]
    got = MuchMetric()._compute(per_chunk, labels, token_chunks=chunks, claim_scores=True)
    expected = score_claims(per_chunk, chunks, labels).to_dict()
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == value or (value != value and got[key] != got[key]), key  # nan == nan here
    assert got["level"] == "claim" and got["n_claims"] == 3


_BY_NAME = r"""
import json, sys, evaluate
inputs = json.load(open(sys.argv[1]))
module = evaluate.load("much")
result = module.compute(predictions=inputs["scores"], references=inputs["labels"], token_chunks=inputs["chunks"],
                        stopword_mask=inputs["mask"])
json.dump({"result": result, "module": type(module).__module__}, open(sys.argv[2], "w"))
"""


def test_evaluate_load_much_from_any_directory_after_install_metric(inputs, tmp_path):
    """`much install-metric` once, then `evaluate.load("much")` in another process, another cwd, offline."""
    payload, inputs_path = inputs
    env = dict(os.environ)
    env.update(HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               HF_EVALUATE_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONPATH=str(REPO))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    installed = subprocess.run([sys.executable, "-m", "much_metric", "install-metric"], cwd=tmp_path / "a", env=env,
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert str(tmp_path / "modules") in installed.stdout
    script, out = tmp_path / "by_name.py", tmp_path / "out.json"
    script.write_text(_BY_NAME)
    completed = subprocess.run([sys.executable, str(script), str(inputs_path), str(out)], cwd=tmp_path / "b", env=env,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["module"].startswith("evaluate_modules.metrics.evaluate-metric--much.")
    expected = score(payload["scores"], payload["chunks"], payload["labels"], stopword_mask=payload["mask"])
    assert got["result"] == json.loads(json.dumps(expected.to_dict()))


def test_install_metric_is_idempotent_and_rejects_paths(tmp_path):
    from much_metric.evaluate_module import install_metric

    first = install_metric(hf_modules_cache=tmp_path)
    assert install_metric(hf_modules_cache=tmp_path) == first
    assert first.read_bytes() == (REPO / "much_metric" / "much_metric.py").read_bytes()
    with pytest.raises(ValueError, match="bare module name"):
        install_metric(name="a/b", hf_modules_cache=tmp_path)


_CLAIM_MODE = r"""
import json, sys, evaluate
module = evaluate.load(sys.argv[1])
# P(True)-style confidences: the hallucinated claims (label -1) get the lowest confidence, so as uncertainties
# (1 - p) they rank first: ROC-AUC 1.0 is right; read as uncertainties directly it would be 0.0.
chunks = [[[0], [1, 2], [3]], [[0, 1], [2], [3]], [[0], [1]]]
labels = [[-1, 1, 1], [1, -1, 1], [1, 1]]
confidences = [[0.1, 0.8, 0.5], [0.9, 0.2, 0.5], [0.7, 0.5]]
out = {"confidence": module.compute(predictions=confidences, references=labels, token_chunks=chunks,
                                    claim_scores=True, score_type="confidence")["roc_auc"],
       "raw": module.compute(predictions=confidences, references=labels, token_chunks=chunks,
                             claim_scores=True)["roc_auc"],
       "errors": {}}
masks = [[False] * 4, [False] * 4, [False] * 2]
for name, value in (("aggregator", "nonsense"), ("aggregator", "max"), ("stopword_handling", "exclude"),
                    ("stopword_mask", masks)):
    try:
        module.compute(predictions=confidences, references=labels, token_chunks=chunks, claim_scores=True,
                       **{name: value})
        out["errors"][name + "=" + str(value)[:8]] = None
    except ValueError as error:
        out["errors"][name + "=" + str(value)[:8]] = str(error)
try:
    module.compute(predictions=[[0.1, 0.2]], references=[[-1, 1]], token_chunks=[[[0], [1]]], aggregator="nonsense")
    out["token_nonsense"] = None
except ValueError as error:
    out["token_nonsense"] = str(error)
json.dump(out, open(sys.argv[2], "w"))
"""


def test_claim_mode_through_evaluate_load_honours_confidence_and_rejects_token_options(tmp_path):
    """``evaluate.load(<this package's module folder>)`` in a fresh process and modules cache, offline: in claim
    mode the confidence option is applied (ROC-AUC 1.0 where 1.0 is right) and token-level options are errors."""
    env = dict(os.environ)
    env.update(HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               HF_EVALUATE_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONPATH=str(REPO))
    script, out = tmp_path / "claims.py", tmp_path / "out.json"
    script.write_text(_CLAIM_MODE)
    completed = subprocess.run([sys.executable, str(script), str(REPO / "much_metric"), str(out)], cwd=tmp_path,
                               env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["confidence"] == 1.0
    assert got["raw"] == 0.0
    assert set(got["errors"]) == {"aggregator=nonsense", "aggregator=max", "stopword_handling=exclude",
                                  "stopword_mask=[[False,"}
    for option, message in got["errors"].items():
        assert message is not None, f"{option} was accepted in claim mode"
        assert option.split("=")[0] in message and "claim_scores=True" in message, message
    assert got["token_nonsense"] is not None and "aggregator must be one of" in got["token_nonsense"]


def test_load_metric_installs_the_name_once(monkeypatch):
    """load_metric() installs ``evaluate.load("much")`` on first use only, not on every call."""
    from much_metric import evaluate_module

    if not evaluate_module.tested_version("evaluate"):
        pytest.skip("install_metric needs evaluate 0.4.x")
    calls = []
    real = evaluate_module.install_metric
    monkeypatch.setattr(evaluate_module, "install_metric", lambda **kw: calls.append(kw) or real(**kw))
    evaluate_module._install_once.cache_clear()
    try:
        metrics = [evaluate_module.load_metric() for _ in range(3)]
    finally:
        evaluate_module._install_once.cache_clear()
    assert len(calls) == 1 and calls[0]["hf_modules_cache"] == os.environ.get("HF_MODULES_CACHE")
    assert all(m.name == metrics[0].name for m in metrics)
