"""Reference-based detectors against a local MediaWiki stand-in: ``python -m builder wiki`` and ``context`` fetch and
chunk the articles of embedded-sample rows from a server on 127.0.0.1, then the reference_* signals score every claim
against them (a per-claim loop over the definitions, stub NLI and encoder), and ``much run --reference`` prints
them. Real articles need the internet (the MediaWiki API)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from much_metric.baselines import _lexical
from much_metric.baselines.samples import split_sentences
from tests.much_metric._baselines_helpers import HashNli
from tests.much_metric.baselines._sampling import HashEncoder, fetch_reference


@pytest.fixture(scope="module")
def english_rows():
    import much_dataset

    data = much_dataset.load("sample", split="test")
    return data.select([i for i, lang in enumerate(data["lang"]) if lang == "en"][:3])


def test_reference_signals_follow_their_definitions_on_fetched_articles(tmp_path, english_rows):
    from much_metric.baselines import ResourceOptions, compute_signals
    from much_metric.models import load_tokenizer

    rows = list(english_rows)
    fetch_reference(tmp_path, rows, own=[rows[0]], missing=[rows[2]], context=True)
    pages = {json.loads(line)["wiki_url"]: json.loads(line)
             for line in (tmp_path / "wiki.jsonl").read_text().splitlines()}
    contexts = {json.loads(line)["generation_id"]: json.loads(line)
                for line in (tmp_path / "context.jsonl").read_text().splitlines()}
    assert pages[rows[2]["wiki_url"]]["status"] == "missing" and contexts[rows[0]["generation_id"]]["chunks"]

    tokenizer, nli, encoder = load_tokenizer("smollm2"), HashNli(), HashEncoder()
    signals = ["reference_article_nli_ent", "reference_article_nli_unv", "reference_chunks_nli_con",
               "reference_article_rouge1", "reference_chunks_rougel", "reference_article_entities",
               "reference_chunks_cosine"]
    runs = compute_signals(english_rows, signals, resources=ResourceOptions(
        tokenizer=tokenizer, nli=nli, encoder=encoder, reference=tmp_path), progress=False)

    for row in rows:
        page = pages[row["wiki_url"]]
        article = [u for s in page["sections"] for u in split_sentences(s["text"])]
        chunks = [u for c in contexts[row["generation_id"]]["chunks"] for u in split_sentences(c)]
        for index, chunk in enumerate(row["token_chunks"]):
            claim = tokenizer.decode([row["output_tokens"][t] for t in sorted(chunk)], skip_special_tokens=True).strip()
            ent = max((nli.one(u, claim)[2] for u in article), default=0.0)
            con = max((nli.one(u, claim)[0] for u in article), default=0.0)
            expected = {
                "reference_article_nli_ent": 1 - ent,
                "reference_article_nli_unv": 1 - max(ent, con),
                "reference_chunks_nli_con": max((nli.one(u, claim)[0] for u in chunks), default=0.0),
                "reference_article_rouge1": 1 - max((_lexical.rouge1_precision(claim, u) for u in article),
                                                    default=0.0),
                "reference_chunks_rougel": 1 - max((_lexical.rougel_precision(claim, u) for u in chunks), default=0.0),
                "reference_article_entities": 0.0 if not _lexical.entities(claim) else 1 - np.mean(
                    [e in _lexical.entities(" ".join(article)) or e in " ".join(article).casefold()
                     for e in _lexical.entities(claim)]),
            }
            if chunks:
                c = encoder.encode([claim])[0]
                expected["reference_chunks_cosine"] = 1 - max(
                    (1 + v @ c / np.linalg.norm(v) / np.linalg.norm(c)) / 2 for v in encoder.encode(chunks))
            else:
                expected["reference_chunks_cosine"] = 1.0
            for name, value in expected.items():
                values = runs[name + "@claim"].values[row["generation_id"]]  # claim-level: one value per claim
                assert len(values) == len(row["token_chunks"]) and values[index] == pytest.approx(value, abs=1e-9), name
    # the row whose article is its own answer: every claim with words is found word for word
    own = runs["reference_article_rouge1@claim"].values[rows[0]["generation_id"]]
    assert (own == 0).mean() > 0.9
    # the missing page supports nothing
    missing_ent = runs["reference_article_nli_ent@claim"].values[rows[2]["generation_id"]]
    assert set(np.unique(missing_ent)) <= {0.0, 1.0} and missing_ent.max() == 1.0
    assert runs["reference_article_rouge1@claim"].metadata["resources"]["reference"]["source"] == str(tmp_path)


def test_a_row_without_an_article_is_named(tmp_path, english_rows):
    from much_metric.baselines import ResourceOptions, compute_signals
    from much_metric.models import load_tokenizer

    fetch_reference(tmp_path, list(english_rows)[:2])
    gid = english_rows[2]["generation_id"]
    with pytest.raises(ValueError, match=f"generation_id={gid!r}: no wiki.jsonl row"):
        compute_signals(english_rows, ["reference_article_rouge1"], resources=ResourceOptions(
            tokenizer=load_tokenizer("smollm2"), reference=tmp_path), progress=False)
    with pytest.raises(ValueError, match="no context.jsonl row"):
        compute_signals(english_rows.select([0]), ["reference_chunks_rouge1"], resources=ResourceOptions(
            tokenizer=load_tokenizer("smollm2"), reference=tmp_path), progress=False)


@pytest.mark.slow
def test_much_run_reference_prints_the_rows(tmp_path, capsys):
    """What a user runs: builder wiki against the stand-in for the sample's English rows, then much run --reference."""
    import much_dataset
    from much_metric.cli import main

    data = much_dataset.load("sample", split="test", config="en")
    fetch_reference(tmp_path, list(data))
    code = main(["run", "--source", "sample", "--config", "en", "--signals",
                 "token_likelihood,reference_article_rouge1,reference_article_entities", "--reference", str(tmp_path),
                 "--bootstrap", "50", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "Reference article ROUGE-1" in printed and "Reference article entities" in printed
    assert f"reference {tmp_path}: articles for {len(data):,} rows" in printed
