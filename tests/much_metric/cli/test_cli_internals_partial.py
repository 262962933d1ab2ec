"""Issue #43: ``much run --internals PACK`` on a pack that holds part of the data scores the rows it holds, every
signal of the table on those same rows (the paired rule), instead of refusing the pack ("151 of 154 samples
missing")."""

from __future__ import annotations

import json

import numpy as np
import pytest

import much_dataset
from much_dataset.internals import InternalsError
from much_metric.baselines import token_arrays, token_likelihood
from much_metric.baselines.methods.rauq import rauq
from much_metric.cli import main
from much_metric.scoring import score
from tests.much_metric.baselines._packs import write_random_pack


@pytest.fixture(scope="module")
def english():
    return much_dataset.load("sample", config="en", split="test")


@pytest.fixture(scope="module")
def three_rows(english, tmp_path_factory):
    """A pack of 3 of the 154 English rows (rows 5, 40 and 100)."""
    pack = tmp_path_factory.mktemp("three")
    write_random_pack(pack, english.select([5, 40, 100]))
    return pack


def test_much_run_on_a_three_row_pack_prints_rows_for_those_three_samples(english, three_rows, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["run", "--source", "sample", "--config", "en", "--internals", str(three_rows), "--signals",
                 "rauq,attention_previous,token_likelihood", "--bootstrap", "0", "--no-progress",
                 "--json", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "scored (paired): 3 samples" in printed
    assert (f"paired: every row is scored on the same 3 of the 154 samples with ground truth; 151 left out: 151 not in "
            f"the internals pack {three_rows}, read by RAUQ, Attention to previous") in printed
    result = json.loads(out.read_text())
    assert {k: result["pairing"][k] for k in ("paired", "n_samples", "n_with_truth")} == {
        "paired": True, "n_samples": 3, "n_with_truth": 154}
    assert result["pairing"]["missing"] == {"rauq": 151, "attention_previous": 151}
    rows = english.select([5, 40, 100])
    claims = sum(len(chunks) - 1 for chunks in rows["token_chunks"])
    by_name = {row["signal_name"]: row for row in result["results"]}
    assert set(by_name) == {"rauq", "attention_previous", "token_likelihood"}
    assert all(row["n_samples"] == 3 and row["n_claims"] == claims for row in by_name.values())
    assert all(floor["n_claims"] == claims for floor in result["floors"])
    # The numbers are those of the methods on these 3 samples, computed independently.
    pack = much_dataset.load_internals(three_rows, dataset=rows)
    masks = rows["stopword_mask"]
    expected_rauq = score(rauq(token_arrays(rows), internals=pack), rows["token_chunks"], rows["labels"],
                          masks).roc_auc
    expected_tl = score(token_likelihood(rows), rows["token_chunks"], rows["labels"], masks).roc_auc
    assert by_name["rauq"]["roc_auc"] == pytest.approx(expected_rauq, abs=1e-12)
    assert by_name["token_likelihood"]["roc_auc"] == pytest.approx(expected_tl, abs=1e-12)
    assert np.isfinite(by_name["attention_previous"]["roc_auc"])


def test_unpaired_scores_the_probability_signal_on_every_row_and_labels_each(three_rows, capsys):
    assert main(["run", "--source", "sample", "--config", "en", "--internals", str(three_rows), "--signals",
                 "rauq,token_likelihood", "--bootstrap", "0", "--no-progress", "--no-paired"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "RAUQ [3 samples]" in printed and "Token Likelihood [154 samples]" in printed
    assert "not comparable with one another" in printed


def test_a_pack_of_another_dataset_or_tokenizer_is_still_refused(english, tmp_path, capsys):
    """Partial is fine; foreign is not: none of the samples, or a sample with another token count."""
    french = much_dataset.load("sample", config="fr", split="test").select(range(2))
    write_random_pack(tmp_path / "fr", french)
    assert main(["run", "--source", "sample", "--config", "en", "--internals", str(tmp_path / "fr"), "--signals",
                 "rauq", "--bootstrap", "0", "--no-progress"]) == 2
    assert "holds none of the 154 samples" in capsys.readouterr().err
    pack = much_dataset.load_internals(tmp_path / "fr")
    with pytest.raises(InternalsError, match=f"generation_id={french[0]['generation_id']!r}.*tokens, the data 1"):
        pack.held([french[0]["generation_id"]], [1])
