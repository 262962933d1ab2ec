import base64
import dataclasses
import io
import re

import numpy as np
import pytest

from much_dataset import schema
from much_dataset.synthetic import make_rows
from much_metric.report import EvaluationOptions, evaluate_signals
from much_metric.report import _html as _report
from much_metric.report._html import format_metric, render_report, write_report
from much_metric.scoring import Bootstrap


@pytest.fixture(scope="module")
def table():
    rows = make_rows(80, seed=2)
    # One language with no hallucinated claim: its curves are undefined and must not break the page.
    for row in rows:
        if row[schema.LANG] == "de":
            row[schema.LABELS] = [schema.CORRECT] * len(row[schema.LABELS])
    signals = {
        "max<likelihood>": {r[schema.GENERATION_ID]: 1 - np.asarray(r[schema.LOGITS_VALUES])[:, 0] for r in rows},
        "random": {r[schema.GENERATION_ID]: np.random.default_rng(i).random(len(r[schema.OUTPUT_TOKENS]))
                   for i, r in enumerate(rows)},
    }
    with pytest.warns(UserWarning, match="lang=de: no hallucinated claim"):
        return evaluate_signals(rows, signals,
                                evaluation=EvaluationOptions(aggregation=("product", "mean"), by=("lang",),
                                                             bootstrap=Bootstrap(n_resamples=40)))


def _pngs(page):
    return [base64.b64decode(data) for data in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def test_page_is_self_contained_with_figures_and_intervals(table):
    page = render_report(table, title="T", source="synthetic")
    pngs = _pngs(page)
    # methods x 2 aggregators, aggregators x 2 methods, 2 methods x lang breakdown
    assert len(pngs) == 2 + 2 + 2
    import matplotlib.image

    for png in pngs:
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        height, width = matplotlib.image.imread(io.BytesIO(png)).shape[:2]
        assert width > 500 and height > 200
    assert not re.search(r'(src|href)="(http|//)', page)  # nothing fetched from elsewhere
    assert "max&lt;likelihood&gt;" in page and "max<likelihood>" not in page
    assert "lang=de" in page and re.search(r"\d\.\d{3}<br><span class='ci'>\[\d\.\d{3}, \d\.\d{3}\]", page)
    product = next(r for r in table.results if r.signal_name == "random" and r.aggregator == "product")
    assert _report._value_cell(format_metric(product.score, "roc_auc")) in page


def test_single_aggregator_has_no_aggregator_section(table, tmp_path):
    single = dataclasses.replace(table, results=[r for r in table.results if r.aggregator == "product"])
    path = tmp_path / "out" / "report.html"
    write_report(path, single, source="synthetic")
    page = path.read_text()
    assert "Aggregators compared" not in page and len(_pngs(page)) == 1 + 2


def test_format_metric():
    assert format_metric({"roc_auc": 0.71234}, "roc_auc") == "0.712"
    assert format_metric({"roc_auc": float("nan"), "intervals": {"roc_auc": [float("nan")] * 2}}, "roc_auc") == "nan —"
    assert format_metric({"roc_auc": 0.5, "intervals": {"roc_auc": [0.4, 0.6]}}, "roc_auc") == "0.500 [0.400, 0.600]"
