"""Issue 57, one name per method: "did you mean" instead of a long list, the signals a folder holds named when one
asked for is absent, one way to name several signals (comma lists and repeated flags), and the spans table under
the display names with the methods at the mark-everything baseline flagged."""

from __future__ import annotations

import numpy as np
import pytest

from much_dataset.params import UnknownNameError
from much_metric.cli import main


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from much_metric.signals import write_signals

    out = tmp_path_factory.mktemp("four")
    ids = ["g1", "g2"]
    for name in ("alpha_signal", "beta_signal", "gamma_signal", "delta_signal"):
        write_signals(out / f"{name}.jsonl", {name: {g: np.array([0.5, 0.1]) for g in ids}})
    return out


def test_an_absent_signal_names_those_the_folder_holds_and_the_closest(folder):
    from much_metric.signals import read_signals

    with pytest.raises(UnknownNameError) as caught:
        read_signals(folder, signal_names=["beta_signl"])
    message = str(caught.value)
    assert "did you mean 'beta_signal'" in message
    assert all(name in message for name in ("alpha_signal", "gamma_signal", "delta_signal"))
    assert "available: []" not in message


def test_much_evaluate_typo_exits_2_naming_the_available_signals(folder, capsys):
    assert main(["evaluate", "--source", "sample", "--scores", str(folder), "--signal", "gama_signal"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "did you mean 'gamma_signal'" in err and "missing key" not in err and "alpha_signal" in err


def test_the_baseline_is_named_as_the_signals_were(capsys):
    """--signals ktc stores ktc_RYxmoyp1awYParfCjjxgnQ (KTC-4-0.3): --baseline ktc names that row, as the signal was
    asked (it answered "unknown --baseline method 'ktc'")."""
    assert main(["run", "--source", "sample", "--signals", "ktc,max_likelihood", "--baseline", "ktc",
                 "--bootstrap", "0", "--no-progress"]) == 0
    assert "ref. = KTC-4-0.3 (product), named by --baseline" in " ".join(capsys.readouterr().out.split())


def test_much_evaluate_takes_the_signal_names_much_run_took(tmp_path, capsys):
    """much run --signals ktc stores ktc_<config id>; much evaluate --signals ktc selects that file (it answered
    "unknown signal 'ktc'"), and a name absent under both spellings still names what the folder holds."""
    out = tmp_path / "signals"
    assert main(["run", "--source", "sample", "--signals", "ktc,max_likelihood", "--out", str(out),
                 "--bootstrap", "0", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--source", "sample", "--scores", str(out), "--signals", "ktc", "--bootstrap", "0",
                 "--no-progress"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith(("KTC", "Max"))]
    assert set(rows) == {"KTC-4-0.3"}
    assert main(["evaluate", "--source", "sample", "--scores", str(out), "--signals", "ktc,token_likelihood",
                 "--bootstrap", "0", "--no-progress"]) == 2
    assert "'token_likelihood'" in capsys.readouterr().err


def test_a_metric_typo_suggests_the_metric(folder, capsys):
    """--rank names a metric: a typo answers with the closest one, as signal and method names do."""
    assert main(["evaluate", "--source", "sample", "--scores", str(folder), "--rank", "roc_acu"]) == 2
    assert "did you mean 'roc_auc'" in " ".join(capsys.readouterr().err.split())
    from much_metric.benchmark import ReportOptions

    with pytest.raises(ValueError, match="did you mean 'pr_auc'"):
        ReportOptions(rank="pr_acu")


def test_a_registry_typo_suggests_and_stays_short():
    from much_metric.baselines.registry import resolve

    with pytest.raises(ValueError) as caught:
        resolve("token_entrop_24")
    message = str(caught.value)
    assert "did you mean 'token_entropy_24'" in message and len(message) < 400


def test_names_flag_takes_comma_lists_and_repeats():
    from much_metric.cli import build_parser

    args = build_parser().parse_args(["evaluate", "--source", "sample", "--scores", "x", "--signals", "a,b",
                                      "--signal", "c", "--signals", " d , "])
    assert args.signals == ["a", "b", "c", "d"]


def test_spans_table_uses_display_names_and_flags_mark_all():
    from much_metric.cli._evaluate_tables import format_spans

    per = {"en": {"iou": 0.4, "cor": 0.1}}
    spans = {"n_items": 10, "n_fit_items": 10,
             "methods": {"ktc_RYxmoyp1awYParfCjjxgnQ (product)": {"threshold": 0.1, "iou": 0.402, "cor": 0.2,
                                                                  "per_language": per},
                         "max_likelihood (product)": {"threshold": 0.5, "iou": 0.300, "cor": 0.3,
                                                      "per_language": per}},
             "baselines": {"mark_all": {"iou": 0.400, "cor": 0.0, "per_language": per},
                           "mark_none": {"iou": 0.0, "cor": 0.0, "per_language": per}}}
    text = format_spans(spans)
    assert "KTC-4-0.3 (product)" in text and "ktc_RY" not in text
    ktc = next(line for line in text.splitlines() if line.startswith("KTC"))
    likelihood = next(line for line in text.splitlines() if line.startswith("Max Likelihood"))
    assert "at the mark-all baseline" in ktc and "mark-all" not in likelihood


def test_much_run_and_much_evaluate_print_one_row_order(tmp_path, capsys):
    """Issue 57: the rows in the same order in much run, much evaluate (files read alphabetically) and the report."""
    from much_metric.benchmark._evaluate import table_order

    signals = "token_entropy_24,ktc,max_likelihood"
    assert main(["run", "--source", "sample", "--signals", signals, "--bootstrap", "0", "--no-progress",
                 "--out", str(tmp_path / "s")]) == 0
    run_out = capsys.readouterr().out
    assert main(["evaluate", "--source", "sample", "--scores", str(tmp_path / "s"), "--bootstrap", "0",
                 "--no-progress"]) == 0
    evaluate_out = capsys.readouterr().out

    def order(printed: str, header: str) -> list[str]:
        table = printed[printed.index(header):].split("\n\n")[0].splitlines()[2:]
        return [line.split("  ")[0] for line in table if not line.startswith(("[", " "))]

    ran = order(run_out, "Method  ")
    assert ran == order(evaluate_out, "method  ") == ["Max Likelihood", "Token Entropy-24", "KTC-4-0.3"]
    assert table_order(["zeta", "token_entropy_24", "max_likelihood"]) == ["max_likelihood", "token_entropy_24",
                                                                             "zeta"]
