"""``much run --nli-model en=...,fr=...``: one NLI model per language, two tiny random DeBERTa classifiers saved to
disk with different id2label orders; values equal each language scored alone by its own model; the model of every
sample is in the signal file's metadata."""

from __future__ import annotations

import json

import numpy as np
import pytest

from much_dataset import schema
from much_metric.baselines.methods.ccp import ccp
from much_metric.baselines.methods.sar import sar
from much_metric.baselines.nli import load_nli
from much_metric.baselines.nli_routing import routed_nli_name
from much_metric.models import load_tokenizer
from much_metric.signals import read_sample_metadata, read_signals
from tests.much_metric._baselines_helpers import one_torch_thread, tiny_nli_parts
from tests.much_metric.cli.test_cli_run import _export, _much

EN_LABELS = ((0, "CONTRADICTION"), (1, "NEUTRAL"), (2, "ENTAILMENT"))
XNLI_LABELS = ((0, "entailment"), (1, "neutral"), (2, "contradiction"))


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


def _save_model(folder, labels, seed):
    import torch

    model, tokenizer = tiny_nli_parts(labels)
    torch.manual_seed(seed)
    model = type(model)(model.config).eval()  # another random model per language group
    with torch.no_grad():
        model.classifier.weight.mul_(300.0)  # decisive (not all-neutral) argmax classes
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    with one_torch_thread():
        _, tokenizer = tiny_nli_parts()
        root = tmp_path_factory.mktemp("much_run_nli_mapping")
        tokenizer.save_pretrained(root / "llm_tokenizer")
        _save_model(root / "nli_en", EN_LABELS, 1)
        _save_model(root / "nli_x", XNLI_LABELS, 2)
        _export(root / "data", tokenizer, n=8)
    # Half the samples become French (every other one, in both splits): routing must follow the lang column.
    languages = {}
    for path in sorted((root / "data" / "rows").glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for index, row in enumerate(rows):
            row[schema.LANG] = "fr" if index % 2 else "en"
            languages[row[schema.GENERATION_ID]] = row
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return root, languages


def _run(root, nli_model, out, extra=()):
    return _much(["run", "--source", str(root / "data"), "--tokenizer", str(root / "llm_tokenizer"), "--nli-model",
                  nli_model, "--signals", "ccp_5_2,ccp_3_2,sar_2", "--bootstrap", "0", "--no-progress",
                  "--out", str(out), *extra])


def test_each_language_is_scored_by_its_own_model(workspace, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, rows = workspace
    en, x = str(root / "nli_en"), str(root / "nli_x")
    assert _run(root, f"en={en},fr={x}", tmp_path / "out", ["--json", str(tmp_path / "r.json")]) == 0
    printed = capsys.readouterr().out
    alias = routed_nli_name({"en": en, "fr": x})
    assert f"NLI model per language ({alias}): en={en}, fr={x}" in " ".join(printed.split())  # prose wraps at 120
    names = [r["signal_name"] for r in json.loads((tmp_path / "r.json").read_text())["results"]]
    assert names == [f"ccp_5_2_{alias}", f"ccp_3_2_{alias}", f"sar_2_{alias}"]

    decode = load_tokenizer(str(root / "llm_tokenizer"))
    scorers = {"en": load_nli(en, local_files_only=True, progress=False),
               "fr": load_nli(x, local_files_only=True, progress=False)}
    differs = 0
    for name, fn, kwargs in ((f"ccp_5_2_{alias}", ccp, {"delta": 5, "sigma": 2}),
                             (f"ccp_3_2_{alias}", ccp, {"delta": 3, "sigma": 2}),
                             (f"sar_2_{alias}", sar, {"sigma": 2})):
        path = tmp_path / "out" / f"{name}.parquet"
        stored = read_signals(path)[name]
        metadata = read_sample_metadata(path)
        for lang in ("en", "fr"):
            part = [row for row in rows.values() if row[schema.LANG] == lang]
            expected = fn(part, nli=scorers[lang], tokenizer=decode, **kwargs)
            other = fn(part, nli=scorers["fr" if lang == "en" else "en"], tokenizer=decode, **kwargs)
            for row, values, wrong in zip(part, expected, other, strict=True):
                gid = row[schema.GENERATION_ID]
                # tight on purpose: `much run` above and this recomputation ran the same NLI model in this process
                np.testing.assert_allclose(stored[gid], values.astype(np.float32), rtol=1e-6, err_msg=gid)
                assert metadata[gid] == {"nli_model": en if lang == "en" else x}
                differs += not np.allclose(values, wrong)
    assert differs > 0  # the two models disagree, so the routing is visible in the values

    # The same mapping from a JSON file gives the same signal names (and reuses the files: nothing recomputed).
    mapping = tmp_path / "nli.json"
    mapping.write_text(json.dumps({"fr": x, "en": en}))
    assert _run(root, str(mapping), tmp_path / "out", ["--json", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())["results"]
    assert [r["signal_name"] for r in again] == names and all(r["samples_computed"] == 0 for r in again)


def test_one_model_for_every_language_keeps_the_plain_signal_names(workspace, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, _ = workspace
    en = str(root / "nli_en")
    assert _run(root, f"en+fr={en}", tmp_path / "out", ["--json", str(tmp_path / "r.json")]) == 0
    names = [r["signal_name"] for r in json.loads((tmp_path / "r.json").read_text())["results"]]
    assert names == ["ccp_5_2_nli-en", "ccp_3_2_nli-en", "sar_2_nli-en"]  # as --nli-model <folder nli_en>


@pytest.mark.parametrize(("spec", "message"), [
    ("en={en}", "no NLI model for language 'fr'"),
    ("en={en},fr=/nonexistent/nli", "cannot load the NLI model '/nonexistent/nli' (--nli-model, for fr)"),
    ("en={en},en={en}", "names language 'en' twice"),
])
def test_mapping_errors_exit_2(workspace, tmp_path, capsys, monkeypatch, spec, message):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, _ = workspace
    assert _run(root, spec.format(en=root / "nli_en"), tmp_path / "out") == 2
    assert message in capsys.readouterr().err
