"""A newcomer's first commands fail at once, naming the fix: no data loaded, no network touched, no long work first.

"At once" is checked by what the command does before failing (fixtures that fail the test on any data loading or
socket connection), not by a clock: a wall-time bound fails on a loaded machine and proves nothing on an idle one.
"""

from __future__ import annotations

import socket

import pytest

import much_dataset
from much_metric.cli import main


@pytest.fixture
def no_data_loading(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("data loaded before the arguments were checked")

    monkeypatch.setattr(much_dataset, "load", forbidden)


@pytest.fixture
def unreachable_hub(monkeypatch):
    """Online mode, and any connection attempt fails the test: the rule must not even probe the hub."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")

    def no_network(*args, **kwargs):
        raise AssertionError(f"the command touched the network before failing: {args[1:] or kwargs}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)


@pytest.mark.parametrize("command", ["run", "evaluate"])
@pytest.mark.parametrize("data", ["nonexistent_folder", "./nonexistent_folder", "a/b/c", "~/nonexistent_much"])
def test_data_that_is_not_a_folder_nor_a_hub_id_fails_at_once(command, data, tmp_path, capsys, monkeypatch,
                                                               no_data_loading, unreachable_hub):
    monkeypatch.chdir(tmp_path)
    scores = tmp_path / "s.jsonl"
    scores.write_text("")
    argv = [command, "--source", data] + (["--scores", str(scores)] if command == "evaluate" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"much {command}: error: --source {data}: no such folder"), err
    assert "owner/name" in err and err.count("\n") == 1


def test_spans_without_the_mushroom_files_says_how_to_get_them(tmp_path, capsys, monkeypatch, no_data_loading):
    """After `pip install .` the repository's data/mushroom is absent: the message names --mushroom and the files."""
    from much_metric.report import _spans

    monkeypatch.setattr(_spans, "DEFAULT_MUSHROOM", tmp_path / "site-packages" / "data" / "mushroom")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    scores = tmp_path / "s.jsonl"
    scores.write_text("")
    assert main(["evaluate", "--source", "sample", "--scores", str(scores), "--spans"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much evaluate: error: --spans: no Mu-SHROOM JSONL file at") and err.count("\n") == 1
    assert "--mushroom FOLDER" in err and "mushroom.<lang>-tst.v1.extra.jsonl" in err
    assert "Helsinki-NLP/mu-shroom" in err


def test_spans_with_a_missing_mushroom_option_fails_before_loading(tmp_path, capsys, no_data_loading):
    scores = tmp_path / "s.jsonl"
    scores.write_text("")
    assert main(["evaluate", "--source", "sample", "--scores", str(scores), "--spans",
                 "--mushroom", str(tmp_path / "nope")]) == 2
    assert "no Mu-SHROOM JSONL file" in capsys.readouterr().err


@pytest.fixture
def without(monkeypatch):
    """Make packages look uninstalled to ``importlib.util.find_spec`` (how the checks look for them)."""
    import importlib.util

    real = importlib.util.find_spec

    def hide(*packages):
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a, **k: None if name.split(".")[0] in packages else real(name, *a, **k))

    return hide


def test_nli_signal_without_torch_names_the_models_extra_before_any_loading(tmp_path, capsys, monkeypatch, without,
                                                                            no_data_loading, unreachable_hub):
    from much_metric.benchmark import resources

    monkeypatch.setattr(resources, "llm_tokenizers", lambda *a: pytest.fail("tokenizers loaded first"))
    without("torch")
    assert main(["run", "--source", "sample", "--signals", "ccp_10_8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much run: error: --signals ccp_10_8: needs an NLI model") and err.count("\n") == 1
    assert "pip install '.[models]'" in err


def test_report_without_matplotlib_fails_before_the_evaluation(tmp_path, capsys, without, no_data_loading):
    without("matplotlib")
    scores = tmp_path / "s.jsonl"
    scores.write_text("")
    assert main(["evaluate", "--source", "sample", "--scores", str(scores), "--report", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much evaluate: error: --report draws its figures with matplotlib") and err.count("\n") == 1
    assert "pip install '.[report]'" in err


def test_sample_outputs_say_they_are_not_much(tmp_path, capsys, monkeypatch):
    """Header and report title of `much evaluate --source sample` say it is Mu-SHROOM scored with a proxy model."""
    import numpy as np

    from much_metric.signals import write_signals

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rows = much_dataset.load("sample", split="test")
    scores = tmp_path / "ml.jsonl"
    write_signals(scores, [{"generation_id": g, "signal_name": "max_likelihood",
                            "values": (1 - np.asarray(v)[:, 0]).tolist()}
                           for g, v in zip(rows["generation_id"], rows["logits_values"], strict=True)])
    report = tmp_path / "r.html"
    assert main(["evaluate", "--source", "sample", "--scores", str(scores), "--bootstrap", "0",
                 "--report", str(report)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("Evaluation on the embedded sample: Mu-SHROOM outputs scored with a small proxy model")
    assert "not MUCH" in first
    page = report.read_text()
    assert "<h1>Evaluation on the embedded sample: Mu-SHROOM outputs scored with a small proxy model" in page
    assert "MUCH evaluation" not in page


def test_constant_floor_pr_auc_is_explained_and_matches_the_formula():
    """The printed legend states (1 + prevalence) / 2; check it is what the metric gives for a constant score."""
    import numpy as np

    from much_metric.cli._text import FLOOR_NOTE
    from much_metric.scoring import score

    assert "(1 + prevalence) / 2" in FLOOR_NOTE and "trapezoid" in FLOOR_NOTE
    rng = np.random.default_rng(0)
    labels = [[int(x) for x in rng.choice([1, -1], size=5, p=[0.7, 0.3])] for _ in range(40)]
    chunks = [[[i] for i in range(5)] for _ in labels]
    result = score([np.full(5, 0.5) for _ in labels], chunks, labels)
    prevalence = result.n_hallucinated / result.n_claims  # over the claims the metric scores
    assert result.pr_auc == pytest.approx((1 + prevalence) / 2, abs=1e-9)


def test_ktc_has_one_label_in_run_evaluate_and_the_report():
    from much_metric.baselines.methods.ktc import KTC_DEFAULT
    from much_metric.baselines.registry import display_method, display_name, resolve

    stored = KTC_DEFAULT.signal_name  # what `much run` writes (ktc_RYxmoyp1awYParfCjjxgnQ)
    assert display_name(stored) == display_name("ktc_nu4_tau0.3") == "KTC-4-0.3"
    assert display_name("ktc") == resolve("ktc").display == "KTC-4-0.3"  # the name asked, as the name stored
    assert display_name(stored) == resolve("ktc_nu4_tau0.3").display  # the label `much run` prints
    assert display_method(f"{stored} (product)") == "KTC-4-0.3 (product)"
    assert display_name("my_plugin_signal") == "my_plugin_signal"  # unknown names stay as they are


def test_all_probability_leaves_nll_out_under_the_product_aggregator(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["run", "--source", "sample", "--signals", "all-probability", "--bootstrap", "0", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert not any(line.startswith("NLL ") for line in printed.splitlines())
    flat = " ".join(printed.split())  # prose lines are wrapped at 120 columns
    assert "note: NLL left out: its token scores lie outside [0, 1]" in flat and "--aggregator mean" in flat
    assert any(line.startswith("Max Likelihood ") for line in printed.splitlines())
    assert main(["run", "--source", "sample", "--signals", "nll", "--aggregator", "mean", "--bootstrap", "0",
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert sum(line.startswith("NLL ") for line in printed.splitlines()) == 2  # both tables
