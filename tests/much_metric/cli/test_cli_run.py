"""``much run`` end to end: an exported folder of real Mu-SHROOM answers (Llama-3 tokenizer), the probability
baselines plus CCP/SAR with a tiny DeBERTa NLI model saved to disk, table 3 output, JSON, resumability."""

from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pytest

from much_dataset import schema
from much_metric.baselines import max_likelihood, token_entropy
from much_metric.cli import run as run_command
from much_metric.scoring._api import score
from tests.much_metric._baselines_helpers import mushroom_rows, one_torch_thread, tiny_nli_parts


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


def _much(argv: list[str]) -> int:
    from much_metric.cli import main  # the real `much` entry point

    return main(argv)


def _export(folder, tokenizer, n: int = 12) -> list[dict]:
    rng = np.random.default_rng(5)
    rows = []
    for index, row in enumerate(mushroom_rows(tokenizer, n, repeat_first=False, max_tokens=14)):
        tokens = row[schema.OUTPUT_TOKENS]
        content = list(range(len(tokens) - 1))
        chunks = [content[i : i + 3] for i in range(0, len(content), 3)] + [[len(tokens) - 1]]
        labels = [int(v) for v in np.where(rng.random(len(chunks) - 1) < 0.4, -1, 1)] + [1]
        labels[0], labels[-2] = -1, 1  # both classes present
        rows.append({
            **row,
            schema.GENERATION_CONFIG: "test-config",
            schema.LANG: "en",
            schema.WIKI_URL: "https://en.wikipedia.org/wiki/Test",
            schema.PROMPT: f"Question {index}?",
            schema.OUTPUT: tokenizer.decode(tokens),
            schema.TOKEN_CHUNKS: chunks,
            schema.LABELS: labels,
            schema.HUMAN_LABELS_0: list(schema.NO_HUMAN_LABEL),
            schema.HUMAN_LABELS_1: list(schema.NO_HUMAN_LABEL),
            schema.STOPWORD_MASK: [bool(v) for v in rng.random(len(tokens)) < 0.2],
        })
    (folder / "rows").mkdir(parents=True)
    for split, part in (("train", rows[: n // 2]), ("test", rows[n // 2 :])):
        with open(folder / "rows" / f"{split}.jsonl", "w", encoding="utf-8") as handle:
            for row in part:
                handle.write(json.dumps(row) + "\n")
    return rows


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    model, tokenizer = tiny_nli_parts()
    root = tmp_path_factory.mktemp("much_run")
    tokenizer.save_pretrained(root / "llm_tokenizer")
    model.save_pretrained(root / "nli")
    tokenizer.save_pretrained(root / "nli")
    rows = _export(root / "data", tokenizer)
    return root, rows


def test_probability_baselines_table_json_and_resume(workspace, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, rows = workspace
    out, report = root / "signals", root / "report.json"
    argv = ["run", "--source", str(root / "data"), "--bootstrap", "40", "--out", str(out), "--json", str(report),
            "--generation-time", "50", "--no-progress", "--no-nli"]
    assert _much(argv) == 0
    printed = capsys.readouterr().out
    for text in ("Method", "Segmentation", "ROC-AUC", "PR-AUC", "Max Likelihood", "Token Likelihood",
                 "Token Entropy-24", "Recall@P>=80%", "TPR@FPR<=10%", "LLM generation time: 50.0s (given)"):
        assert text in printed
    assert "not measured" in printed  # no tokenizer for a local folder unless --tokenizer
    payload = json.loads(report.read_text())
    assert [r["signal_name"] for r in payload["results"]] == ["max_likelihood", "token_likelihood", "token_entropy_24"]
    assert payload["n_samples"] == len(rows)
    # The metric equals scoring the direct baseline values (stored as float32 in the signal files).
    ordered = sorted(rows, key=lambda r: r[schema.GENERATION_ID])
    by_id = {r[schema.GENERATION_ID]: r for r in rows}
    results = {r["signal_name"]: r for r in payload["results"]}
    for name, values in (("max_likelihood", max_likelihood(ordered)), ("token_entropy_24", token_entropy(ordered))):
        values = [v.astype(np.float32).astype(np.float64) for v in values]
        expected = score(values, [r[schema.TOKEN_CHUNKS] for r in ordered], [r[schema.LABELS] for r in ordered],
                         stopword_mask=[by_id[r[schema.GENERATION_ID]][schema.STOPWORD_MASK] for r in ordered]
                         ).to_dict()
        assert results[name]["roc_auc"] == pytest.approx(expected["roc_auc"])
        assert results[name]["pr_auc"] == pytest.approx(expected["pr_auc"])
        assert results[name]["n_claims"] == expected["n_claims"]
        assert len(results[name]["intervals"]["roc_auc"]) == 2
    assert {p.name for p in out.iterdir()} >= {"max_likelihood.parquet", "timings.json"}
    # The printed follow-up command runs as printed (it once lacked evaluate's required --source).
    hint = re.search(r"`(much evaluate [^`]*)` scores them again", " ".join(printed.split()))
    assert hint is not None, printed
    words = shlex.split(hint.group(1))
    assert words[words.index("--source") + 1] == str(root / "data")
    assert _much([*words[1:], "--bootstrap", "0", "--no-progress"]) == 0
    assert "Max Likelihood" in capsys.readouterr().out
    # Rerun: nothing recomputed, same numbers.
    assert _much(argv) == 0
    again = json.loads(report.read_text())
    assert all(r["samples_computed"] == 0 for r in again["results"])
    assert [r["roc_auc"] for r in again["results"]] == [r["roc_auc"] for r in payload["results"]]


def test_ccp_sar_with_local_nli_model_and_tokenizer(workspace, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, rows = workspace
    argv = ["run", "--source", str(root / "data"), "--split", "test", "--tokenizer", str(root / "llm_tokenizer"),
            "--nli-model", str(root / "nli"), "--signals", "ccp_5_2,sar_2", "--signals", "max_likelihood",
            "--bootstrap", "0", "--no-progress", "--json", str(root / "ccp.json")]
    assert _much(argv) == 0
    printed = capsys.readouterr().out
    assert "CCP-5-2_nli" in printed and "SAR-2_nli" in printed
    payload = json.loads((root / "ccp.json").read_text())
    names = [r["signal_name"] for r in payload["results"]]
    assert names == ["ccp_5_2_nli", "sar_2_nli", "max_likelihood"]  # table 3 order; suffix from the NLI folder
    assert payload["n_samples"] == len(rows) // 2
    assert payload["segmentation_seconds"] is not None and payload["segmentation_seconds"] >= 0
    assert all(0 <= r["roc_auc"] <= 1 for r in payload["results"])


def test_signal_aliases():
    assert run_command._signal_names(["table3"]) == ["ccp_10_8", "sar_8", "max_likelihood", "token_likelihood",
                                                     "token_entropy_24"]
    table7 = run_command._signal_names(["table7", "sar_8"])
    assert len(table7) == 14 and table7.count("sar_8") == 1 and "ccp_24_3" in table7


def test_default_run_offline_skips_nli_with_a_note(workspace, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, _ = workspace
    assert _much(["run", "--source", str(root / "data"), "--bootstrap", "0", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "CCP and SAR skipped" in printed
    rows = [line for line in printed.splitlines() if line.startswith(("CCP", "SAR", "Token Entropy"))]
    assert rows and all(row.startswith("Token Entropy") for row in rows)  # no CCP/SAR row
    assert "KTC skipped: no token-neighbour statistics for this data" in printed  # none shipped for this data
    assert not any(line.startswith("KTC") for line in printed.splitlines())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--signals", "entropy_24"], "unknown signal 'entropy_24'"),
        (["--aggregator", "median"], "--aggregator must be one of"),
        (["--bootstrap", "39"], "--bootstrap must be 0 (no intervals) or at least 40"),
        (["--bootstrap", "-1"], "--bootstrap must be 0 (no intervals) or at least 40"),
        (["--generation-time", "soon"], "neither a number of seconds nor a file"),
        (["--signals", "ccp_10_8", "--tokenizer", "smollm2", "--nli-model", "/nonexistent/nli"],
         "cannot load the NLI model"),
    ],
)
def test_errors_exit_2_with_a_message(workspace, capsys, monkeypatch, extra, message):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, _ = workspace
    assert _much(["run", "--source", str(root / "data"), "--bootstrap", "0", "--no-progress", *extra]) == 2
    assert message in capsys.readouterr().err


def test_run_on_the_embedded_sample(capsys, monkeypatch):
    """The README's main command, on the real embedded sample with the SmolLM2 tokenizer (segmentation timed)."""
    import os

    from much_dataset.card import is_parquet_folder
    from much_dataset.loader import SAMPLE_DIR

    if not is_parquet_folder(SAMPLE_DIR):
        message = f"the embedded sample is missing ({SAMPLE_DIR}); the builder's sample step writes it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # SmolLM2's tokenizer ships with the package: nothing to install
    assert _much(["run", "--source", "sample", "--bootstrap", "50", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Baselines on the embedded sample: Mu-SHROOM outputs scored with a small proxy model" in printed
    assert "Token Entropy-24" in printed and "not the paper's numbers" in printed
    assert "samples segment exactly as their token_chunks" in printed  # segmentation was timed with SmolLM2's tokenizer
    assert "CCP and SAR skipped" in printed  # offline: the default NLI model is not cached
    assert "split=test," in printed  # the split the sample has, not "all"
    # KTC is a default where its statistics ship: the sample's, with the corpus they come from.
    assert "KTC neighbour statistics (shipped with the sample): SmolLM2-135M-Instruct: Mu-SHROOM" in printed
    table3, operating = printed.split("Operating points", 1)
    # table 3 with its AP and paired Δ columns is wider than 120 too: KTC once per block (issue 57)
    table3_blocks = table3.split("Table 3")[-1].split("Flags:")[0].strip().split("\n\n")
    assert sum(line.startswith("KTC-4-0.3 ") for line in table3.splitlines()) == len(table3_blocks)
    blocks = operating.split("[floor: random] = ")[0].strip().split("\n\n")  # a table wider than 120 is split
    assert sum(line.startswith("KTC-4-0.3 ") for line in operating.splitlines()) == len(blocks)  # once per block
    assert ("\nTable 3's methods (Mu-SHROOM sample, proxy model: not the paper's numbers) (CCP/SAR skipped: "
            "the NLI model") in printed

