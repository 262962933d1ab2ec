"""filter: the three trash rules, the EOS ids, kappa against scikit-learn, and the step's report."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from builder import filter as flt
from builder.cli import main
from builder.store import read_store
from tests import assets
from tests.builder.fake_servers import write_sample_artifacts


def _row(tokens, rows, gid="g"):
    return {"generation_id": gid, "output_tokens": tokens, "logits_token_ids": rows}


@settings(deadline=None, max_examples=60)
@given(st.lists(st.integers(0, 23), min_size=1, max_size=20), st.data())
def test_sampled_outside_top_k(ranks, data):
    tokens = [1000 + i for i in range(len(ranks))]
    rows = []
    for token, rank in zip(tokens, ranks, strict=True):
        row = [5000 + j for j in range(24)]
        row[rank] = token
        rows.append(row)
    assert not flt.sampled_outside_top_k(_row(tokens, rows))
    position = data.draw(st.integers(0, len(tokens) - 1))
    mutation = data.draw(st.sampled_from(["rank_25", "absent"]))
    broken = [list(r) for r in rows]
    if mutation == "rank_25":  # the generator kept candidates down to the sampled token, ranked 25th
        broken[position] = [c for c in broken[position] if c != tokens[position]] + [4999, tokens[position]]
    else:
        broken[position] = [c if c != tokens[position] else 4998 for c in broken[position]]
    assert flt.sampled_outside_top_k(_row(tokens, broken))


def test_sampled_outside_top_k_names_the_sample_on_misaligned_rows():
    with pytest.raises(ValueError, match="generation_id='bad'.*logits_token_ids"):
        flt.sampled_outside_top_k(_row([1, 2], [[1]], gid="bad"))


def test_eos_resolver_sources():
    configs = {"c": {"model_name": "google/gemma-3-4b-it"}, "x": {"model_name": "my/unknown-model"}}
    resolver = flt.EosResolver(configs=configs)
    assert resolver.ends_with_eos({"generation_config": "c", "output_tokens": [5, 106]})
    assert not resolver.ends_with_eos({"generation_config": "c", "output_tokens": [5, 7]})
    assert resolver.ends_with_eos({"generation_config": "x", "output_tokens": [5], "ends_with_eos": True})
    with pytest.raises(ValueError, match="generation_id='g9'.*generation_config.*--eos-ids"):
        resolver.ends_with_eos({"generation_id": "g9", "generation_config": "x", "output_tokens": [5]})
    assert flt.EosResolver(eos_ids=[7], configs=configs).ends_with_eos({"generation_config": "x",
                                                                        "output_tokens": [5, 7]})


def test_known_eos_ids_match_the_real_tokenizers():
    llama = assets.llama3_tokenizer()
    assert {llama.convert_ids_to_tokens(i) for i in (128001, 128009)} == {"<|end_of_text|>", "<|eot_id|>"}
    assert set(flt.KNOWN_EOS_IDS["meta-llama/Llama-3.1-8B-Instruct"]) >= {128001, 128009}
    assert flt.KNOWN_EOS_IDS["mistralai/Ministral-8B-Instruct-2410"] == (assets.ministral_tokenizer().eos_token_id,)
    assets.require("gemma3")
    assert set(flt._tokenizer_eos_ids(str(assets.gemma3_dir()))) == set(flt.KNOWN_EOS_IDS["google/gemma-3-4b-it"])


def test_classify_checks_the_rules_in_order():
    ok = {"output_tokens": [1, 2], "logits_token_ids": [[1] + [9] * 23, [2] + [9] * 23]}
    ends = lambda row: row["output_tokens"][-1] == 2  # noqa: E731
    assert flt.classify(ok, [[1, 1], [1, 1]], ends) is None
    assert flt.classify(ok, [[1, 1], [-1, 1]], ends) == "judge_disagreement"
    assert flt.classify(ok, [[1, 1], None], ends) == "missing_labels"
    outside = {**ok, "logits_token_ids": [[9] * 24, [2] + [9] * 23]}
    assert flt.classify(outside, [[1, 1], [-1, 1]], ends) == "outside_top_k"
    assert flt.classify({**outside, "output_tokens": [1, 3]}, [[1, 1], None], ends) == "no_eos"


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@settings(deadline=None, max_examples=50)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=10), st.integers(0, 10**6))
def test_judge_kappa_matches_sklearn_on_non_eos_claims(lengths, seed):
    rng = np.random.default_rng(seed)
    pairs = [(list(rng.choice([-1, 1], n)) + [1], list(rng.choice([-1, 1], n)) + [1]) for n in lengths]
    kappa, n_claims = flt.judge_kappa(pairs)
    a = [v for x, _ in pairs for v in x[:-1]]
    b = [v for _, y in pairs for v in y[:-1]]
    assert n_claims == sum(lengths) == len(a)
    expected = cohen_kappa_score(a, b, labels=[-1, 1])
    assert (np.isnan(kappa) and np.isnan(expected)) or kappa == pytest.approx(expected)


def test_judge_kappa_edge_cases():
    assert np.isnan(flt.judge_kappa([])[0])
    with pytest.raises(ValueError, match="different lengths"):
        flt.judge_kappa([([1, 1], [1])])


def _labels(out, name, rows, prefix="labels"):
    (out / f"{prefix}.{name}.jsonl").write_text(
        "".join(json.dumps({"generation_id": g, "labels": labels}) + "\n" for g, labels in rows.items()))


def test_filter_step_splits_reports_counts_and_kappa(tmp_path, capsys):
    generations = write_sample_artifacts(tmp_path, assets.llama3_tokenizer())
    chunks = {r["generation_id"]: len(r["token_chunks"]) for r in read_store(tmp_path / "segments.jsonl")}
    agree = {g: [1] * chunks[g] for g in chunks}
    other = dict(agree)
    other["gen01"] = [-1] + [1] * (chunks["gen01"] - 1)  # disagreement on one claim
    del other["gen02"]  # gpt-4.1 failed on gen02
    _labels(tmp_path, "gpt-4o", agree)
    _labels(tmp_path, "gpt-4.1", other)
    _labels(tmp_path, "an1", {"gen03": [1] * chunks["gen03"]}, prefix="human")
    assert main(["filter", "--out", str(tmp_path)]) == 0
    rows = {r["generation_id"]: r for r in read_store(tmp_path / "filter.jsonl")}
    assert {g: (r["split"], r["reason"]) for g, r in rows.items()} == {
        "gen00": ("train", None), "gen01": ("trash", "judge_disagreement"), "gen02": ("trash", "missing_labels"),
        "gen03": ("test", None), "gen04": ("trash", "no_eos"), "gen05": ("trash", "outside_top_k"),
        "gen06": ("train", None)}
    assert len(rows) == len(generations)
    report = json.loads((tmp_path / "filter.report.json").read_text())
    assert report["kept"] == 3 and report["train"] == 2 and report["test"] == 1
    assert report["trash"] == {"no_eos": 1, "outside_top_k": 1, "missing_labels": 1, "judge_disagreement": 1}
    both = sorted(set(agree) & set(other))
    a = [v for g in both for v in agree[g][:-1]]
    b = [v for g in both for v in other[g][:-1]]
    assert report["kappa"]["claims"] == len(a)
    assert report["kappa"]["value"] == pytest.approx(cohen_kappa_score(a, b, labels=[-1, 1]))
    before = (tmp_path / "filter.jsonl").read_bytes()
    assert main(["filter", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "filter.jsonl").read_bytes() == before  # deterministic rewrite, no duplicates
    assert main(["filter", "--out", str(tmp_path), "--shard", "0/2"]) == 2
    assert re.search("without --shard", capsys.readouterr().err)


def test_eos_resolver_reads_a_tokenizer_json_lazily(monkeypatch):
    path = str(assets.llama3_tokenizer_json())
    assert set(flt._tokenizer_eos_ids(path)) == {128001, 128009}  # <|end_of_text|>, <|eot_id|>
    calls = []
    monkeypatch.setattr(flt, "_tokenizer_eos_ids", lambda spec: calls.append(spec) or (128009,))
    resolver = flt.EosResolver(tokenizer=path)
    assert calls == []  # nothing loaded until a row needs it
    assert resolver.ends_with_eos({"generation_config": "?", "output_tokens": [1, 128009]})
    assert not resolver.ends_with_eos({"generation_config": "?", "output_tokens": [1, 128001]})
    assert calls == [path]


def test_filter_step_names_labels_that_do_not_match_the_claims(tmp_path):
    write_sample_artifacts(tmp_path, assets.llama3_tokenizer())
    _labels(tmp_path, "gpt-4o", {"gen00": [1, 1]})
    _labels(tmp_path, "gpt-4.1", {"gen00": [1, 1]})  # not empty: an empty label file is refused before
    with pytest.raises(ValueError, match="labels.gpt-4o.jsonl: generation_id='gen00': field 'labels' has 2"):
        main(["--traceback", "filter", "--out", str(tmp_path)])


def _strict_json(path):
    def refuse(constant):
        raise ValueError(f"{path.name} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_judges_by_any_name_are_found_and_nothing_is_trashed_in_silence(tmp_path, capsys):
    """annotate --judge MODEL=KEY writes labels.<KEY>.jsonl: filter finds those judges (no flag), export follows
    filter's judges, a sample without labels is in the trash split with its reason; a filter that would trash every
    sample exits 1, wrong or too few judges are refused naming the label files present and --judges, an empty label
    file naming it and its judge, and the report is strict JSON (an undefined kappa is null, not NaN)."""
    write_sample_artifacts(tmp_path, assets.llama3_tokenizer())
    chunks = {r["generation_id"]: len(r["token_chunks"]) for r in read_store(tmp_path / "segments.jsonl")}
    agree = {g: [1] * chunks[g] for g in chunks}
    _labels(tmp_path, "alpha", agree)
    (tmp_path / "labels.beta.failures.jsonl").write_text("")  # never a judge
    assert main(["filter", "--out", str(tmp_path)]) == 2
    assert re.search(r"at least two judges; label files in .*: labels.alpha.jsonl\. .*--judges",
                     capsys.readouterr().err)
    _labels(tmp_path, "beta", {g: v for g, v in agree.items() if g != "gen02"})  # beta failed on gen02
    assert main(["filter", "--out", str(tmp_path), "--judges", "gpt-4o", "gpt-4.1"]) == 2
    assert re.search(r"no labels.gpt-4o.jsonl in .* \(label files present: labels.alpha.jsonl, labels.beta.jsonl\)"
                     r"; pass --judges", capsys.readouterr().err)
    assert main(["filter", "--out", str(tmp_path)]) == 0
    report = _strict_json(tmp_path / "filter.report.json")
    assert report["judges"] == ["alpha", "beta"] and report["kappa"]["value"] is None  # one class only: undefined
    assert report["trash"] == {"no_eos": 1, "outside_top_k": 1, "missing_labels": 1, "judge_disagreement": 0}
    assert report["kept"] == 4
    assert main(["export", "--out", str(tmp_path), "--no-check"]) == 0
    assert "labels from alpha" in capsys.readouterr().out
    trash = {r["generation_id"]: r["trash_reason"] for r in read_store(tmp_path / "rows" / "trash.jsonl")}
    assert trash == {"gen02": "missing_labels", "gen04": "no_eos", "gen05": "outside_top_k"}
    kept = [r for split in ("train", "test") for r in read_store(tmp_path / "rows" / f"{split}.jsonl")]
    assert len(kept) == 4 and all(r["labels"] == agree[r["generation_id"]] for r in kept)

    _labels(tmp_path, "beta", {})  # beta labelled nothing: bad input (exit 2) naming the file and the judge
    assert main(["filter", "--out", str(tmp_path)]) == 2
    assert "labels.beta.jsonl: no label record of judge 'beta'" in capsys.readouterr().err
    _labels(tmp_path, "beta", {g: [-1] * n for g, n in chunks.items()})  # beta disagrees everywhere
    assert main(["filter", "--out", str(tmp_path)]) == 1
    assert "every one of the 7 samples is trashed" in capsys.readouterr().err
    assert _strict_json(tmp_path / "filter.report.json")["kept"] == 0
