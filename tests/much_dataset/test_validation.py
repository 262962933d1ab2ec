"""much_dataset.validation: every defect is caught with the right generation_id and field; valid rows pass."""

from __future__ import annotations

import copy

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from much_dataset import schema, synthetic
from much_dataset.validation import InvalidSampleError, Problem, rows_to_table, validate_rows, validate_table
from tests.much_dataset._helpers import CORRUPTIONS, corrupted, naive_bad_rows

ROWS = synthetic.make_rows(12, seed=3)


def test_valid_rows_pass_unchanged():
    kept, problems = validate_rows(ROWS)
    assert problems == []
    assert kept == ROWS


def test_typed_array2d_table_passes():
    import datasets

    typed = datasets.Dataset(pa.Table.from_pylist(ROWS)).cast(schema.features())
    table = typed.data.table
    assert isinstance(table[schema.LOGITS_VALUES].type, pa.ExtensionType)
    kept, problems = validate_table(table)
    assert problems == [] and len(kept) == len(ROWS)


@pytest.mark.parametrize(("name", "field", "corrupt"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_each_defect_raises_naming_sample_and_field(name, field, corrupt):
    rows = corrupted(ROWS, 5, corrupt)
    # An emptied generation_id cannot name the row by id: the error then carries the (empty) id it has.
    expected_id = rows[5][schema.GENERATION_ID]
    with pytest.raises(InvalidSampleError) as caught:
        validate_rows(rows)
    assert caught.value.generation_id == expected_id
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)
    assert field in str(caught.value)


@pytest.mark.parametrize(("name", "field", "corrupt"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_each_defect_dropped_and_reported(name, field, corrupt):
    rows = corrupted(ROWS, 7, corrupt)
    kept, problems = validate_rows(rows, on_error="drop")
    assert [row[schema.GENERATION_ID] for row in kept] == [
        row[schema.GENERATION_ID] for index, row in enumerate(rows) if index != 7
    ]
    assert problems[0].field == field
    assert {problem.generation_id for problem in problems} == {rows[7][schema.GENERATION_ID]}
    table_kept, table_problems = validate_table(rows_to_table(rows), on_error="drop")
    assert len(table_kept) == len(rows) - 1
    assert table_problems == problems


def test_duplicate_generation_id_names_the_second_row():
    rows = copy.deepcopy(ROWS)
    rows[4][schema.GENERATION_ID] = rows[1][schema.GENERATION_ID]
    kept, problems = validate_rows(rows, on_error="drop")
    assert problems == [Problem(rows[1][schema.GENERATION_ID], schema.GENERATION_ID,
                                "duplicate generation_id (also row 1)")]
    # Only the later copy is dropped; the first row with that id is kept.
    assert [row[schema.GENERATION_ID] for row in kept] == [
        row[schema.GENERATION_ID] for index, row in enumerate(rows) if index != 4
    ]


def test_raise_message_counts_other_problems():
    rows = corrupted(ROWS, 2, lambda r: r[schema.LABELS].append(1))
    rows = corrupted(rows, 9, lambda r: r[schema.LOGITS_VALUES][0].__setitem__(0, float("nan")))
    with pytest.raises(InvalidSampleError, match=r"1 more problem\(s\) in 2 bad row\(s\) of 12") as caught:
        validate_rows(rows)
    assert caught.value.generation_id == rows[2][schema.GENERATION_ID]  # the first bad row wins


def test_human_label_sentinel_and_full_lists_accepted():
    rows = copy.deepcopy(ROWS)
    rows[0][schema.HUMAN_LABELS_0] = [schema.HALLUCINATED] * len(rows[0][schema.TOKEN_CHUNKS])
    rows[0][schema.HUMAN_LABELS_1] = list(schema.NO_HUMAN_LABEL)
    assert validate_rows(rows)[1] == []


def test_null_stopword_mask_means_not_computed():
    rows = copy.deepcopy(ROWS)
    rows[3][schema.STOPWORD_MASK] = None
    assert validate_rows(rows)[1] == []
    no_mask = synthetic.make_rows(4, seed=1, with_stopword_mask=False)
    assert validate_rows(no_mask)[1] == []


def test_top_k_none_accepts_wider_candidate_rows_but_not_mismatched():
    rows = copy.deepcopy(ROWS)
    for ids, values in zip(rows[0][schema.LOGITS_TOKEN_IDS], rows[0][schema.LOGITS_VALUES], strict=True):
        ids.extend([10**6, 10**6 + 1])
        values.extend([0.0, 0.0])
    with pytest.raises(InvalidSampleError, match="25|26"):
        validate_rows(rows)
    assert validate_rows(rows, top_k=None)[1] == []
    rows[0][schema.LOGITS_VALUES][0].pop()
    with pytest.raises(InvalidSampleError) as caught:
        validate_rows(rows, top_k=None)
    assert caught.value.field == schema.LOGITS_VALUES


def test_sampled_token_check_can_be_disabled():
    rows = corrupted(ROWS, 0, lambda r: r[schema.OUTPUT_TOKENS].__setitem__(1, 10**7))
    with pytest.raises(InvalidSampleError, match="not among"):
        validate_rows(rows)
    assert validate_rows(rows, check_sampled_token=False)[1] == []


def test_ties_are_not_unsorted():
    rows = copy.deepcopy(ROWS)
    # lower the first to the second (raising the second to the first could push the row's sum above 1)
    rows[0][schema.LOGITS_VALUES][0][0] = rows[0][schema.LOGITS_VALUES][0][1]
    assert validate_rows(rows)[1] == []


def test_missing_column_and_bad_options():
    table = rows_to_table(ROWS).drop_columns([schema.LABELS])
    with pytest.raises(ValueError, match="labels"):
        validate_table(table)
    with pytest.raises(ValueError, match="on_error"):
        validate_rows(ROWS, on_error="ignore")
    with pytest.raises(ValueError, match="top_k"):
        validate_rows(ROWS, top_k=0)


def test_wrong_value_type_names_sample_and_field():
    rows = corrupted(ROWS, 6, lambda r: r.__setitem__(schema.LABELS, ["yes", "no"]))
    with pytest.raises(InvalidSampleError) as caught:
        validate_rows(rows)
    assert (caught.value.generation_id, caught.value.field) == (rows[6][schema.GENERATION_ID], schema.LABELS)


def test_empty_table_is_valid():
    kept, problems = validate_table(rows_to_table(ROWS).slice(0, 0))
    assert problems == [] and len(kept) == 0


def test_sliced_table_is_checked_on_its_own_rows():
    # Arrow slices keep offsets into the parent buffers: flattening must honour them.
    rows = corrupted(ROWS, 1, lambda r: r[schema.LABELS].append(1))
    table = rows_to_table(rows)
    assert validate_table(table.slice(2, 8))[1] == []
    with pytest.raises(InvalidSampleError):
        validate_table(table.slice(1, 3))


# --- property tests -------------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 15), seed=st.integers(0, 10_000), mean_tokens=st.floats(4, 40))
def test_property_valid_synthetic_rows_always_pass(n, seed, mean_tokens):
    rows = synthetic.make_rows(n, seed=seed, mean_tokens=mean_tokens)
    kept, problems = validate_rows(rows)
    assert problems == [] and len(kept) == n


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), which=st.integers(0, len(CORRUPTIONS) - 1), data=st.data())
def test_property_single_corruption_always_caught(seed, which, data):
    rows = synthetic.make_rows(6, seed=seed)
    index = data.draw(st.integers(0, len(rows) - 1))
    name, field, corrupt = CORRUPTIONS[which]
    rows = corrupted(rows, index, corrupt)
    kept, problems = validate_rows(rows, on_error="drop")
    assert len(kept) == len(rows) - 1, name
    assert problems[0].field == field
    assert problems[0].generation_id == rows[index][schema.GENERATION_ID]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), picks=st.lists(st.tuples(st.integers(0, 9), st.integers(0, len(CORRUPTIONS) - 1)),
                                                   max_size=6))
def test_property_matches_naive_per_row_validator(seed, picks):
    """Differential: the vectorised validator flags exactly the rows a naive Python loop flags."""
    rows = synthetic.make_rows(10, seed=seed)
    for index, which in picks:
        # Skip id corruptions here: emptied/duplicated ids make "which row" ambiguous by construction.
        if CORRUPTIONS[which][1] == schema.GENERATION_ID:
            continue
        try:
            rows = corrupted(rows, index, CORRUPTIONS[which][2])
        except (IndexError, TypeError, AttributeError, AssertionError):
            continue  # a corruption that no longer applies to an already-corrupted row
    expected_bad = naive_bad_rows(rows)
    found = validate_table(rows_to_table(rows), on_error="drop")[1]
    index_of = {row[schema.GENERATION_ID]: i for i, row in enumerate(rows)}
    assert {index_of[p.generation_id] for p in found} == expected_bad


def test_large_table_vectorised_result_matches_naive():
    rows = synthetic.make_rows(300, seed=11)
    rng = np.random.default_rng(0)
    for index in rng.choice(len(rows), size=40, replace=False):
        which = int(rng.integers(len(CORRUPTIONS)))
        if CORRUPTIONS[which][1] != schema.GENERATION_ID:
            rows = corrupted(rows, int(index), CORRUPTIONS[which][2])
    found = validate_table(rows_to_table(rows), on_error="drop")[1]
    index_of = {row[schema.GENERATION_ID]: i for i, row in enumerate(rows)}
    assert {index_of[p.generation_id] for p in found} == naive_bad_rows(rows)
