"""The per-run memos of the sampling detectors are the toolkit's one bounded, locked cache (issue 56): an encoder's
text vectors and a sample set's sentences stay within their bound on a split larger than it, give the same values as
without a cache, and survive threads."""

from __future__ import annotations

import pickle
import threading

import numpy as np

from much_metric._cache import BoundedCache


class _CountingEncoder:
    """An encoder of the toolkit's cached kind whose vectors are a function of the text (so evictions are visible
    only as repeated work, never as other numbers)."""

    def __new__(cls, max_texts: int):
        from much_metric.baselines.encoders import _Cached

        class Counting(_Cached):
            name = "counting"

            def __init__(self) -> None:
                super().__init__(max_texts)
                self.encoded = 0

            def _encode(self, texts):
                self.encoded += len(texts)
                return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float64)

        return Counting()


def test_the_encoder_cache_is_bounded_and_exact():
    encoder = _CountingEncoder(max_texts=8)
    assert isinstance(encoder._cache, BoundedCache)
    texts = [f"answer {i}" for i in range(50)]
    first = encoder.encode(texts + texts[:5])  # more distinct texts than the cache holds, one call
    assert len(encoder._cache) <= 8
    again = encoder.encode(texts)
    np.testing.assert_array_equal(first[:50], again)
    np.testing.assert_array_equal(first[50:], first[:5])
    encoder.encode(texts[:3])
    before = encoder.encoded
    encoder.encode(texts[:3])  # the most recent ones are kept: no new work
    assert encoder.encoded == before


def test_the_encoder_cache_survives_eight_threads():
    encoder = _CountingEncoder(max_texts=16)
    texts = [f"t{i}" for i in range(64)]
    expected = _CountingEncoder(max_texts=100).encode(texts)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(offset: int) -> None:
        start.wait()
        try:
            for step in range(30):
                chosen = [(offset * 7 + step * 3 + k) % 64 for k in range(12)]
                np.testing.assert_array_equal(encoder.encode([texts[i] for i in chosen]), expected[chosen])
        except BaseException as error:  # noqa: BLE001 - every failure is the finding
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(encoder._cache) <= 16


def test_the_sentences_of_a_sample_set_are_bounded(monkeypatch):
    from much_metric.baselines import samples as samples_module

    monkeypatch.setattr(samples_module, "SENTENCE_ROWS", 10)
    texts = {f"g{i}": (f"First {i}. Second {i}!", f"Other {i}? Yes.") for i in range(100)}
    sample_set = samples_module.SampleSet(texts)
    assert isinstance(sample_set._sentences, BoundedCache)
    for gid in texts:
        assert sample_set.sentences(gid) == tuple(tuple(samples_module.split_sentences(t)) for t in texts[gid])
    assert len(sample_set._sentences) == 10
    assert sample_set.first(1).sentences("g3") == (("First 3.", "Second 3!"),)
    copied = pickle.loads(pickle.dumps(sample_set))  # a memo travels empty, the samples whole
    assert copied.texts == sample_set.texts and len(copied._sentences) == 0
