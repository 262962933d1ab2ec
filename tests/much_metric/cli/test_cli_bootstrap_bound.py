"""Issue #31: ``--bootstrap 100000000`` ran for minutes; the number of resamples is bounded (``MAX_RESAMPLES``,
declared once with its reason) and refused before any data loads."""

from __future__ import annotations

import pytest

import much_dataset
from much_metric.cli import main
from much_metric.scoring import MAX_RESAMPLES, check_resamples


@pytest.mark.parametrize("command", [["run", "--source", "sample", "--signals", "token_likelihood", "--no-progress"],
                                     ["evaluate", "--source", "sample", "--scores", "__file__"]])
def test_too_many_resamples_are_refused_at_once(capsys, monkeypatch, command):
    """Refused before any data loads: loading the data fails the test (what "at once" means, not a clock)."""

    def forbidden(*args, **kwargs):
        raise AssertionError("data loaded before --bootstrap was checked")

    monkeypatch.setattr(much_dataset, "load", forbidden)
    command = [__file__ if part == "__file__" else part for part in command]
    code = main([*command, "--bootstrap", "100000000"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"--bootstrap must be at most {MAX_RESAMPLES}" in err and "1/sqrt(B)" in err


def test_the_bound_itself_is_accepted():
    assert check_resamples(MAX_RESAMPLES, "--bootstrap") == MAX_RESAMPLES
    with pytest.raises(ValueError, match="at most"):
        check_resamples(MAX_RESAMPLES + 1, "--bootstrap")
