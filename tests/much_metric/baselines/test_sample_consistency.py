"""Claim consistency across samples: every sample_* signal against a plain per-claim loop over its definition
(docs/sampling.md), on real SmolLM2 samples of embedded-sample rows with a stub NLI model and a stub encoder; the
lexical pieces on hand-checked strings; the errors that name the row."""

from __future__ import annotations

import numpy as np
import pytest

from much_metric.baselines import _lexical
from much_metric.baselines.samples import clean_text, split_sentences
from tests.much_metric._baselines_helpers import HashNli
from tests.much_metric.baselines._sampling import HashEncoder, sample_split, samples_dataset

SIGNALS = ["sample_nli_ent", "sample_nli_con", "sample_nli_diff", "sample_nli_unv", "sample_luq", "sample_graph_degree",
           "sample_cosine", "sample_rouge1", "sample_rougel", "sample_entities"]


@pytest.fixture(scope="module")
def computed():
    from much_metric.baselines import ResourceOptions, compute_signals
    from much_metric.models import load_tokenizer

    split = sample_split()
    nli, encoder = HashNli(), HashEncoder()
    tokenizer = load_tokenizer("smollm2")
    runs = compute_signals(split, SIGNALS, resources=ResourceOptions(tokenizer=tokenizer, nli=nli, encoder=encoder,
                                                                      samples=samples_dataset()), progress=False)
    return split, runs, nli, encoder, tokenizer


def _claims(row, tokenizer):
    return [tokenizer.decode([row["output_tokens"][t] for t in sorted(chunk)], skip_special_tokens=True).strip()
            for chunk in row["token_chunks"]]


def _samples_of(gid):
    return [clean_text(r["output"]) for r in samples_dataset() if r["generation_id"] == gid]


def _expected(name, claim, samples, answer, nli, encoder):
    """The definition of each signal, one claim at a time."""
    def entail(premise):
        return nli.one(premise, claim)[2]

    def contradict(premise):
        return nli.one(premise, claim)[0]

    sentences = [split_sentences(s) for s in samples]
    if name.startswith("sample_nli_"):
        ent = [max((entail(u) for u in group), default=0.0) for group in sentences]
        con = [max((contradict(u) for u in group), default=0.0) for group in sentences]
        score = name.rsplit("_", 1)[1]
        return {"ent": 1 - np.mean(ent), "con": np.mean(con), "diff": (1 - (np.mean(ent) - np.mean(con))) / 2,
                "unv": np.mean([1 - max(e, c) for e, c in zip(ent, con, strict=True)])}[score]
    if name == "sample_luq":
        return 1 - np.mean([entail(s) / (entail(s) + contradict(s)) for s in samples])
    if name == "sample_graph_degree":
        weights = [entail(r) for r in [answer, *samples]]
        return 1 - sum(w for w in weights if w >= 0.5) / len(weights)
    if name == "sample_cosine":
        c = encoder.encode([claim])[0]
        best = []
        for group in sentences:
            sims = [(1 + v @ c / np.linalg.norm(v) / np.linalg.norm(c)) / 2 for v in encoder.encode(group)]
            best.append(max(sims, default=0.0))
        return 1 - np.mean(best)
    if name == "sample_rouge1":
        return 1 - np.mean([max((_lexical.rouge1_precision(claim, u) for u in g), default=0.0) for g in sentences])
    if name == "sample_rougel":
        return 1 - np.mean([max((_lexical.rougel_precision(claim, u) for u in g), default=0.0) for g in sentences])
    if name == "sample_entities":
        mine = _lexical.entities(claim)
        if not mine:
            return 0.0
        found = [sum(e in _lexical.entities(" ".join(g)) or e in " ".join(g).casefold() for e in mine) / len(mine)
                 for g in sentences]
        return 1 - np.mean(found)
    raise AssertionError(name)


@pytest.mark.parametrize("name", SIGNALS)
def test_each_claim_has_its_definition_as_its_claim_level_value(computed, name):
    split, runs, nli, encoder, tokenizer = computed
    assert name not in runs and runs[name + "@claim"].spec.baseline.level == "claim"
    checked = 0
    for row in split:
        values = runs[name + "@claim"].values[row["generation_id"]]
        samples = _samples_of(row["generation_id"])
        answer = tokenizer.decode(row["output_tokens"], skip_special_tokens=True).strip()
        claims = _claims(row, tokenizer)
        assert len(values) == len(claims) == len(row["token_chunks"])  # one value per claim, EOS claim included
        for value, claim in zip(values, claims, strict=True):
            assert value == pytest.approx(_expected(name, claim, samples, answer, nli, encoder), abs=1e-9)
            checked += 1
        assert ((values >= 0) & (values <= 1)).all()
    assert checked > 40


def test_the_signals_record_their_resources(computed):
    _, runs, _, _, _ = computed
    assert runs["sample_nli_ent@claim"].metadata["resources"]["nli"]["name"] == "HashNli"
    assert runs["sample_cosine@claim"].metadata["resources"]["encoder"] == {"name": "hash-encoder"}
    assert runs["sample_rouge1@claim"].metadata["resources"]["samples"]["n_min"] == 4


def test_the_nli_pairs_go_in_one_call_premise_sentence_hypothesis_claim(computed):
    _, _, nli, _, tokenizer = computed
    split = sample_split()
    claims = {c for row in split for c in _claims(row, tokenizer)}
    sentences = {u for row in split for s in _samples_of(row["generation_id"]) for u in split_sentences(s)}
    asked = set(nli.calls)
    assert any(p in sentences and h in claims for p, h in asked)
    assert all(h in claims for _, h in asked)


def test_fewer_samples_change_the_scores_and_a_row_without_samples_is_named():
    from much_metric.baselines import ResourceOptions, compute_signals
    from much_metric.baselines.samples import open_samples
    from much_metric.models import load_tokenizer

    split = sample_split()
    tokenizer = load_tokenizer("smollm2")
    samples = open_samples(samples_dataset())
    two = compute_signals(split, ["sample_rouge1"], resources=ResourceOptions(
        tokenizer=tokenizer, samples=samples.first(2)), progress=False)["sample_rouge1@claim"]
    four = compute_signals(split, ["sample_rouge1"], resources=ResourceOptions(
        tokenizer=tokenizer, samples=samples), progress=False)["sample_rouge1@claim"]
    assert two.metadata["resources"]["samples"]["n_max"] == 2
    assert any(not np.array_equal(two.values[g], four.values[g]) for g in two.values)
    missing = samples_dataset().filter(lambda r: r["generation_id"] != split[0]["generation_id"])
    with pytest.raises(ValueError, match=f"generation_id={split[0]['generation_id']!r}: no samples"):
        compute_signals(split, ["sample_rouge1"], resources=ResourceOptions(tokenizer=tokenizer, samples=missing),
                        progress=False)


def test_bad_samples_are_refused_with_the_field():
    from much_metric.baselines.samples import sample_set

    with pytest.raises(ValueError, match="sample_index"):
        sample_set([{"generation_id": "g", "output": "x"}])
    with pytest.raises(ValueError, match="sample_index 0 appears twice"):
        sample_set([{"generation_id": "g", "sample_index": 0, "output": "x"},
                    {"generation_id": "g", "sample_index": 0, "output": "y"}])
    with pytest.raises(ValueError, match="field 'output' is not a string"):
        sample_set([{"generation_id": "g", "sample_index": 0, "output": None}])


def test_texts_sentences_and_lexical_measures():
    assert clean_text(" Canberra.<|im_end|>") == "Canberra."
    assert clean_text("Hi</s>") == "Hi"
    assert split_sentences("Paris is big. It is old!\nThe Seine flows. 3.5 km") == [
        "Paris is big.", "It is old!", "The Seine flows.", "3.5 km"]
    assert split_sentences("北京是首都。上海很大。") == ["北京是首都。", "上海很大。"]
    # the stopwords "was", "in" leave out: "born", "warsaw" both found
    assert _lexical.rouge1_precision("She was born in Warsaw", "Curie: born 1867 in Warsaw") == 1.0
    assert _lexical.rouge1_precision("born in Paris", "born in Warsaw") == 0.5
    assert _lexical.rougel_precision("born in Paris Warsaw", "Curie was born in Warsaw") == 0.75
    assert _lexical.best_rougel_precision("born in Warsaw", ["a b", "in Warsaw born", "born at Warsaw"]) == \
        pytest.approx(2 / 3)
    found = _lexical.entities("Marie Curie was born in Warsaw on 7 November 1867. She won the Nobel Prize.")
    # the pattern tagger skips a sentence's first word ("Marie", "She"): it cannot tell a name from any capital
    assert {"curie", "warsaw", "1867", "nobel prize"} <= found and not {"she", "marie"} & found


def test_the_entity_tagger_spacy_says_what_to_install():
    pytest.importorskip("numpy")
    try:
        import spacy  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="pip install spacy"):
            _lexical.entities("Paris", "spacy", "fr")
    with pytest.raises(ValueError, match="entity tagger must be one of"):
        _lexical.entities("Paris", "regex")
