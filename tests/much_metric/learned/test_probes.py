"""Linear probes on internals packs: token targets from claims, article-grouped language folds, the probe itself."""

from __future__ import annotations

import numpy as np
import pytest

from much_metric.learned.probes import LinearProbe, article_key, language_folds, probe_inputs, token_targets


def test_token_targets_follow_claims_stopwords_and_the_last_chunk():
    chunks = [[0, 1], [2, 3, 4], [5], [6]]
    labels = [-1, 1, 0, 1]  # hallucinated, correct, unlabelled, EOS chunk
    stop = [False, True, False, False, False, False, False]
    assert token_targets(chunks, labels, stop, 7).tolist() == [1, -1, 0, 0, 0, -1, -1]


def test_article_key_is_shared_across_languages():
    assert article_key("https://de.wikipedia.org/wiki/David_F._Sandberg") == "david f. sandberg"
    assert article_key("https://en.wikipedia.org/wiki/David_F._Sandberg") == "david f. sandberg"
    assert article_key("https://fr.wikipedia.org/wiki/Cr%C3%A8me_br%C3%BBl%C3%A9e") == "crème brûlée"


def test_language_folds_drop_training_rows_about_test_articles():
    langs = ["en", "en", "fr", "fr", "de"]
    urls = ["https://en.wikipedia.org/wiki/A", "https://en.wikipedia.org/wiki/B", "https://fr.wikipedia.org/wiki/a",
            "https://fr.wikipedia.org/wiki/C", "https://de.wikipedia.org/wiki/D"]
    folds = {fold.language: fold for fold in language_folds(langs, urls)}
    assert folds["fr"].test.tolist() == [2, 3] and folds["fr"].train.tolist() == [1, 4] and folds["fr"].n_dropped == 1
    assert folds["de"].n_dropped == 0 and folds["de"].train.tolist() == [0, 1, 2, 3]
    plain = {fold.language: fold for fold in language_folds(langs, urls, group_articles=False)}
    assert plain["fr"].train.tolist() == [0, 1, 4]
    for fold in folds.values():
        assert not set(fold.train) & set(fold.test)


def test_probe_learns_a_direction_and_ignores_untargeted_tokens():
    rng = np.random.default_rng(0)
    direction = rng.standard_normal(16)
    x = rng.standard_normal((600, 16)).astype(np.float32)
    y = (x @ direction > 0).astype(np.int8)
    y[::7] = -1  # no target: not used
    probe = LinearProbe(C=1.0).fit(x[:400], y[:400])
    scores = probe.token_scores(x[400:])
    from sklearn.metrics import roc_auc_score

    keep = y[400:] >= 0
    assert roc_auc_score(y[400:][keep], scores[keep]) > 0.95
    with pytest.raises(ValueError, match="both classes"):
        LinearProbe().fit(x[:10], np.zeros(10, dtype=np.int8))
    with pytest.raises(ValueError, match="not fitted"):
        LinearProbe().token_scores(x)


def test_probe_inputs_concatenate_one_layer():
    pack = {"a": {"hidden": np.arange(2 * 3 * 4, dtype=np.float16).reshape(2, 3, 4)},
            "b": {"hidden": np.ones((1, 3, 4), dtype=np.float16)}}
    features, offsets = probe_inputs(pack, ["a", "b"], layer=1)
    assert features.shape == (3, 4) and features.dtype == np.float32 and offsets.tolist() == [0, 2, 3]
    np.testing.assert_array_equal(features[0], pack["a"]["hidden"][0, 1])
