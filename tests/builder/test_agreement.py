"""agreement: confusion matrices and kappa between annotators, compared with an independent count and sklearn."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from builder import agreement
from builder.cli import main


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@settings(deadline=None, max_examples=50)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=12), st.integers(0, 10**6), st.floats(0, 1))
def test_compare_counts_claims_and_matches_sklearn_kappa(lengths, seed, overlap):
    rng = np.random.default_rng(seed)
    first = {f"g{i}": [int(v) for v in rng.choice([-1, 1], n)] + [1] for i, n in enumerate(lengths)}
    second = {g: ([int(v) for v in rng.choice([-1, 1], len(x) - 1)] + [1]) for g, x in first.items()
              if rng.random() < overlap or g == "g0"}
    second["only-in-second"] = [1, 1]
    result = agreement.label_agreement(first, second, names=("an0", "an1"))
    shared = sorted(set(first) & set(second))
    pairs = [(a, b) for g in shared for a, b in zip(first[g][:-1], second[g][:-1], strict=True)]
    counts = [[sum(1 for a, b in pairs if (a, b) == (x, y)) for y in (-1, 1)] for x in (-1, 1)]
    assert result["confusion"] == counts and result["samples"] == len(shared) and result["claims"] == len(pairs)
    expected = cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs], labels=[-1, 1])
    assert (np.isnan(result["kappa"]) and np.isnan(expected)) or result["kappa"] == pytest.approx(expected)


def test_compare_names_the_sample_with_mismatched_lengths():
    with pytest.raises(ValueError, match="generation_id='g1'.*an0.*an1"):
        agreement.label_agreement({"g1": [1, 1, 1]}, {"g1": [1, 1]}, names=("an0", "an1"))


def _write(path, rows):
    path.write_text("".join(json.dumps({"generation_id": g, "labels": v}) + "\n" for g, v in rows.items()))


def test_agreement_step_pairs_consensus_and_scope(tmp_path, capsys):
    _write(tmp_path / "labels.gpt-4o.jsonl", {"a": [1, -1, 1], "b": [1, 1], "c": [-1, 1]})
    _write(tmp_path / "labels.gpt-4.1.jsonl", {"a": [1, -1, 1], "b": [-1, 1], "c": [-1, 1]})
    _write(tmp_path / "human.an0.jsonl", {"a": [1, 1, 1], "b": [1, 1], "c": [-1, 1]})
    _write(tmp_path / "human.an1.jsonl", {"a": [1, -1, 1], "c": [-1, 1]})
    (tmp_path / "filter.jsonl").write_text("".join(json.dumps({"generation_id": g, "split": s, "reason": None}) + "\n"
                                                   for g, s in (("a", "train"), ("b", "trash"), ("c", "test"))))
    assert main(["agreement", "--out", str(tmp_path), "--annotators", "gpt", "an0", "an1"]) == 0
    result = json.loads((tmp_path / "agreement.json").read_text())
    by_pair = {tuple(p["annotators"]): p for p in result["pairs"]}
    assert set(by_pair) == {("gpt", "an0"), ("gpt", "an1"), ("an0", "an1")}
    # gpt consensus = a and c (b disagrees); an0 says +1 where gpt says -1 on a's second claim
    assert by_pair[("gpt", "an0")]["confusion"] == [[1, 1], [0, 1]] and by_pair[("gpt", "an0")]["samples"] == 2
    assert by_pair[("gpt", "an1")]["kappa"] == pytest.approx(1.0)
    assert "kappa = 1.000" in capsys.readouterr().out

    assert main(["agreement", "--out", str(tmp_path), "--annotators", "gpt-4o", "an0", "--scope", "kept"]) == 0
    kept = json.loads((tmp_path / "agreement.json").read_text())["pairs"][0]
    assert kept["samples"] == 2 and kept["claims"] == 3  # b (trash) left out
    assert main(["agreement", "--out", str(tmp_path), "--annotators", "gpt-4o", "an0"]) == 0
    assert json.loads((tmp_path / "agreement.json").read_text())["pairs"][0]["samples"] == 3
    with pytest.raises(FileNotFoundError, match="an7"):
        main(["--traceback", "agreement", "--out", str(tmp_path), "--annotators", "an0", "an7"])
