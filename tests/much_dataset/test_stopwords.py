"""The vendored stopword and punctuation sets equal what much-segmenter reads through nltk."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from much_dataset import stopwords
from tests import assets


@pytest.fixture(scope="module")
def nltk_stopwords():
    assets.vendored_nltk_data()
    from nltk.corpus import stopwords as corpus

    return corpus


@pytest.mark.parametrize("language", stopwords.LANGUAGES)
def test_each_list_is_what_nltk_reads(nltk_stopwords, language):
    words = nltk_stopwords.words(language)
    assert len(words) > 100
    assert stopwords._read_list(language) == frozenset(words)


def test_sets_equal_the_reference_sets(nltk_stopwords):
    reference = assets.much_segmenter_030()
    from much_segmenter import utils

    assert reference.much_segmentation  # the 0.3.0 package is the one whose helpers we read
    assert stopwords.NLTK_STOPWORDS == frozenset(utils.get_nltk_stopwords_set())
    assert stopwords.PUNCTUATION == frozenset(utils.get_punctuation_set())
    old = assets.much_segmenter_021()
    assert stopwords.PUNCTUATION == frozenset(old.utils.get_punctuation_set())
    assert stopwords.SEGMENTER_STOPWORDS == frozenset(utils.get_nltk_stopwords_set()) | utils.get_punctuation_set()


def test_evaluation_set_extends_segmenter_set():
    assert stopwords.SEGMENTER_STOPWORDS < stopwords.EVALUATION_STOPWORDS
    assert {"'s", "'re", "'ve", "'d", "'ll", "n't"} <= stopwords.EVALUATION_STOPWORDS
    assert not {"'s", "n't"} & stopwords.SEGMENTER_STOPWORDS


@pytest.mark.parametrize(
    ("text", "expected"),
    [("The", True), (" the ", True), ("DER", True), ("y", True), ("\n", True), ("", True), (" «", True),
     ("Paris", False), ("'s", True), ("theory", False), ("..", False)],
)
def test_is_stopword(text, expected):
    assert stopwords.is_stopword(text) is expected


def test_is_stopword_with_segmenter_vocabulary():
    assert stopwords.is_stopword("n't")
    assert not stopwords.is_stopword("n't", vocabulary=stopwords.SEGMENTER_STOPWORDS)


def test_stopword_mask_matches_per_token_decoding():
    tokenizer = assets.llama3_tokenizer()
    ids = tokenizer.encode("The cat, it's on the mat. Le chat est là ; der Hund!", add_special_tokens=False)
    expected = [tokenizer.decode([i]).lower().strip() in stopwords.EVALUATION_STOPWORDS for i in ids]
    mask = stopwords.stopword_mask(ids, tokenizer)
    assert mask.dtype == bool and mask.shape == (len(ids),)
    assert mask.tolist() == expected
    assert mask.any() and not mask.all()
    assert stopwords.stopword_mask(np.array(ids), tokenizer).tolist() == expected


def test_import_reads_no_nltk_data(tmp_path):
    """Importing the sets needs neither nltk nor its data (nothing is looked up or downloaded)."""
    code = (
        "import sys; import much_dataset.stopwords as s; "
        "assert 'nltk' not in sys.modules; assert len(s.NLTK_STOPWORDS) > 600; print('ok')"
    )
    env = {"NLTK_DATA": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            cwd=assets.REPO_ROOT, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
