"""Protocols: grouped by question, Wikipedia article and generation, purged, and refusing leakage on adversarial
inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import much_dataset
from much_metric.learned import LeakageError, check_disjoint, make_folds, row_info


def _row(gid, prompt, lang="en", config="c1", human=(0,), labels=(1, 1)):
    return {"generation_id": gid, "prompt": prompt, "lang": lang, "generation_config": config,
            "human_labels_0": list(human), "human_labels_1": list(human), "labels": list(labels)}


def _parts_disjoint(info, fold):
    for a, b in ((fold.train, fold.test), (fold.validation, fold.test), (fold.train, fold.validation)):
        assert not set(info.question[a]) & set(info.question[b])
        assert not set(info.generation_id[a]) & set(info.generation_id[b])
        if info.article is not None:
            assert not (set(info.article[a]) & set(info.article[b])) - {""}


def test_sample_leave_one_language_out():
    dataset = much_dataset.load("sample", split="test")
    info = row_info(dataset)
    folds = make_folds(info, "leave-one-language-out")
    assert [f.name for f in folds] == ["lang=de", "lang=en", "lang=es", "lang=fr"]
    for fold in folds:
        held_out = fold.name.split("=")[1]
        assert set(info.lang[fold.test]) == {held_out} and held_out not in set(info.lang[fold.train])
        assert len(fold.train) + len(fold.validation) + len(fold.test) + fold.n_purged == len(info)
        _parts_disjoint(info, fold)
    # Each language is tested exactly once.
    assert sorted(np.concatenate([f.test for f in folds]).tolist()) == list(range(len(info)))


def test_same_question_under_two_generation_ids_is_purged_from_training():
    rows = [_row(f"g{i}", f"Question {i}?", lang=("en", "fr")[i % 2]) for i in range(40)]
    # Adversarial: an English row repeats a French row's question (other case and spacing), another id.
    rows.append(_row("g-copy", "  QUESTION   1? ", lang="en"))
    info = row_info(rows)
    fold = make_folds(info, "leave-one-language-out", only="fr")[0]
    assert 40 not in fold.train and 40 not in fold.validation and fold.n_purged == 1
    _parts_disjoint(info, fold)
    # Without purging, the check refuses the split.
    with pytest.raises(LeakageError, match="question 'question 1\\?'"):
        check_disjoint(info, {"train": np.array([40]), "test": np.array([1])})


def test_duplicated_rows_are_refused_naming_the_generation():
    rows = [_row(f"g{i}", f"Q{i}", lang=("en", "de")[i % 2]) for i in range(10)] + [_row("g3", "Q3", lang="en")]
    with pytest.raises(ValueError, match="generation_id 'g3' occurs 2 times"):
        make_folds(row_info(rows), "leave-one-language-out")


def test_check_disjoint_refuses_a_shared_generation_and_a_shared_row():
    rows = [_row("a", "Q1"), _row("b", "Q2"), _row("a", "Q3")]
    info = row_info(rows)
    with pytest.raises(LeakageError, match="generation_id 'a'"):
        check_disjoint(info, {"train": np.array([0]), "test": np.array([2])})
    with pytest.raises(LeakageError, match="row"):
        check_disjoint(info, {"train": np.array([0, 1]), "validation": np.array([1])})


def test_leave_one_model_out_groups_temperatures_and_purges_shared_questions():
    llama3b_t1, llama3b_t07, gemma = "iNPhBxMXcn6uNgZtdDG7xQ", "bESSWQcqIaYZslTy7sy1Hg", "Q6U-toJrtxVpeYhI11BKiQ"
    rows = [_row(f"q{i}-{c}", f"Q{i}", config=c) for i in range(20) for c in (llama3b_t1, gemma)]
    rows += [_row(f"q{i}-t07", f"Q{i + 100}", config=llama3b_t07) for i in range(10)]
    rows += [_row(f"gemma-only-{i}", f"G{i}", config=gemma) for i in range(10)]
    info = row_info(rows)
    folds = {f.name: f for f in make_folds(info, "leave-one-model-out")}
    assert set(folds) == {"model=meta-llama/Llama-3.2-3B-Instruct", "model=google/gemma-3-4b-it"}
    llama = folds["model=meta-llama/Llama-3.2-3B-Instruct"]
    assert len(llama.test) == 30  # both temperatures of the model are held out together
    assert llama.n_purged == 20   # gemma's answers to the same 20 questions leave the training pool
    for fold in folds.values():
        _parts_disjoint(info, fold)


def test_auto_to_manual_trains_on_auto_train_rows_and_tests_on_manual_test_rows():
    rows = [_row(f"t{i}", f"Q{i}", lang="en") for i in range(30)]  # auto
    rows += [_row(f"m{i}", f"M{i}", human=(1, -1), labels=(1, -1)) for i in range(8)]  # manual
    rows += [_row("m-disagree", "M-d", human=(1, 1), labels=(1, 1)) | {"human_labels_1": [1, -1]}]
    rows += [_row("t-leak", "M0", lang="en")]  # a training question that is also a test question
    origin = ["train"] * 30 + ["test"] * 9 + ["train"]
    info = row_info(rows, origin=origin)
    fold = make_folds(info, "auto-to-manual")[0]
    assert sorted(info.generation_id[fold.test]) == sorted(f"m{i}" for i in range(8))
    assert fold.n_purged == 1 and "t-leak" not in set(info.generation_id[np.r_[fold.train, fold.validation]])
    _parts_disjoint(info, fold)


def test_auto_to_manual_on_a_test_only_sample_says_why():
    with pytest.raises(ValueError, match="test-only"):
        make_folds(row_info(much_dataset.load("sample", split="test")), "auto-to-manual")


def test_bad_protocol_options_are_refused():
    info = row_info([_row("a", "Q1", lang="en"), _row("b", "Q2", lang="de")])
    with pytest.raises(ValueError, match="protocol must be one of"):
        make_folds(info, "random")
    with pytest.raises(ValueError, match="validation_fraction"):
        make_folds(info, "leave-one-language-out", validation_fraction=1.5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["en", "fr", "de"])), min_size=12, max_size=60),
       st.integers(0, 5))
def test_folds_never_share_a_question_whatever_the_collisions(rows, seed):
    data = [_row(f"g{i}", f"Q{question}", lang=lang) for i, (question, lang) in enumerate(rows)]
    info = row_info(data)
    try:
        folds = make_folds(info, "leave-one-language-out", random_state=seed)
    except ValueError as error:  # too few rows left after purging, or a single language: refused, never leaked
        assert "too few" in str(error) or "at least 2" in str(error)
        return
    for fold in folds:
        _parts_disjoint(info, fold)
        assert len(fold.train) + len(fold.validation) + len(fold.test) + fold.n_purged == len(info)


def test_translated_questions_about_one_article_are_grouped_on_the_sample():
    """Issue #35: Mu-SHROOM translates its questions, so a held-out language's article is asked about in the other
    languages too (the sample holds 'Adolf_Galland' in de, es and fr, 'Abrus' in de, en and es). Those rows leave
    the training pool of the fold that holds the article out, and the fold says so."""
    from much_metric.learned import article_title
    from much_metric.learned.splits import RowInfo

    dataset = much_dataset.load("sample", split="test")
    info = row_info(dataset)
    assert article_title("https://de.wikipedia.org/wiki/Adolf_Galland") == "adolf_galland"
    assert article_title("https://es.wikipedia.org/wiki/Adolf%20Galland") == "adolf_galland"
    galland = np.flatnonzero(info.article == "adolf_galland")
    abrus = np.flatnonzero(info.article == "abrus")
    assert sorted(info.lang[galland]) == ["de", "es", "fr"] and sorted(info.lang[abrus]) == ["de", "en", "es"]
    assert len(set(info.question[galland])) == 3  # three different prompts: question grouping alone misses them
    fold = make_folds(info, "leave-one-language-out", only="de")[0]
    pool = np.r_[fold.train, fold.validation]
    assert not set(galland) & set(pool) and not set(abrus) & set(pool)
    test_articles = set(info.article[fold.test])
    assert not test_articles & set(info.article[pool])
    # What question/generation grouping alone would have kept: every non-de row about a held-out article.
    leaked = [i for i in np.flatnonzero(info.lang != "de") if info.article[i] in test_articles]
    assert fold.purged["article"] == len(leaked) > 50 and fold.n_purged == len(leaked)
    assert f"{len(leaked)} shared a Wikipedia article" in fold.describe()
    no_article = RowInfo(**{**info.__dict__, "article": None})
    old = make_folds(no_article, "leave-one-language-out", only="de")[0]
    assert set(leaked) <= set(np.r_[old.train, old.validation]) and old.n_purged == 0
    with pytest.raises(LeakageError, match="Wikipedia article '.+' is in both the train and the test part"):
        check_disjoint(info, {"train": old.train, "test": old.test})
