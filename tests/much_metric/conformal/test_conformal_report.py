""""Claims kept at alpha" over an evaluation table: the same numbers as claims_kept on each row's claims, in the
report (a table and the retention-vs-alpha figure) and in the JSON."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest

from much_dataset import schema
from much_dataset.synthetic import make_rows
from much_metric.conformal import Splits, claims_from_result, claims_kept, claims_kept_of_table, format_claims_kept
from much_metric.report import EvaluationOptions, evaluate_signals


@pytest.fixture(scope="module")
def table():
    rows = make_rows(160, seed=7)
    signals = {
        "max_likelihood": {r[schema.GENERATION_ID]: 1 - np.asarray(r[schema.LOGITS_VALUES])[:, 0] for r in rows},
        "random": {r[schema.GENERATION_ID]: np.random.default_rng(i).random(len(r[schema.OUTPUT_TOKENS]))
                   for i, r in enumerate(rows)},
    }
    return evaluate_signals(rows, signals, evaluation=EvaluationOptions(aggregation=("product", "max"),
                                                                        bootstrap=None))


def test_claims_kept_of_a_table_is_claims_kept_of_its_rows_on_the_same_splits(table):
    splits = Splits(n_splits=12, random_state=3)
    kept = claims_kept_of_table(table, alphas=(0.1, 0.2), splits=splits)
    assert set(kept.kept) == {"max_likelihood (product)", "max_likelihood (max)", "random (product)",
                              "random (max)"}
    row = next(r for r in table.results if r.signal_name == "random" and r.aggregator == "max")
    alone = claims_kept({"x": claims_from_result(row, table.generation_ids)}, alphas=(0.1, 0.2), splits=splits)
    np.testing.assert_array_equal(kept.kept["random (max)"][0.2], alone.kept["x"][0.2])
    text = format_claims_kept(kept)
    assert "alpha 0.2, paired:" in text and "random (max)" in text


def test_report_and_json_carry_the_claims_kept_section_and_figure(table, tmp_path):
    from much_metric.benchmark import DataOptions, EvaluationReport

    kept = claims_kept_of_table(table, alphas=(0.05, 0.1, 0.2), splits=Splits(n_splits=6))
    plain = EvaluationReport(source="synthetic", data=DataOptions(), evaluation=EvaluationOptions(), table=table)
    report = EvaluationReport(source="synthetic", data=DataOptions(), evaluation=EvaluationOptions(), table=table,
                              claims_kept=kept)
    plain.write_html(tmp_path / "plain.html")
    report.write_html(tmp_path / "kept.html", figures=tmp_path / "figures")
    page, before = (tmp_path / "kept.html").read_text(), (tmp_path / "plain.html").read_text()
    pngs = re.findall(r"src=.data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(pngs) == len(re.findall(r"src=.data:image/png;base64,", before)) + 1
    assert base64.b64decode(pngs[-1]).startswith(b"\x89PNG")
    assert "<h2>Claims kept at &alpha;</h2>" in page and page.index("Claims kept") < page.index("<h2>Glossary")
    assert (tmp_path / "figures" / "claims_kept.png").is_file()
    payload = report.to_dict()["claims_kept"]
    assert payload["n_splits"] == 6 and set(payload["detectors"]) == set(kept.kept)
    assert "claims_kept" not in plain.to_dict()
