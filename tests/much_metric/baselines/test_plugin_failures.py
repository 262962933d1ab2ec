"""Issue #44: a plugin's estimator that raises is reported naming the signal and the plugin (exit 2, not the "bug"
exit), a built-in that raises keeps the bug exit but names the signal, and a peer's signal without the much-peers
plugin says which plugin provides it and how to install it."""

from __future__ import annotations

import numpy as np
import pytest

from much_metric.baselines import Baseline, register, registry, resolve, unregister
from much_metric.cli import main


def _raises(arrays):
    raise TypeError("unsupported operand type(s) for +: 'NoneType' and 'int'")


@pytest.fixture
def broken_plugin(monkeypatch):
    register(Baseline(name="broken_peer", compute=_raises, description="a plugin whose estimator raises"))
    real = registry.origin
    monkeypatch.setattr(registry, "origin", lambda name: "entry point 'broken' (broken_pkg:BASELINES)"
                        if name == "broken_peer" else real(name))
    yield
    unregister("broken_peer")


def test_a_plugin_estimator_that_raises_names_the_signal_and_exits_2(broken_plugin, capsys):
    code = main(["run", "--source", "sample", "--config", "en", "--no-nli", "--signals", "broken_peer", "--bootstrap",
                 "0", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()[-1]  # (a progress bar may come before it)
    assert code == 2 and err.startswith("much run: error: "), err
    assert "signal 'broken_peer'" in err and "TypeError" in err and "entry point 'broken'" in err


def test_a_builtin_that_raises_stays_a_bug_but_names_the_signal():
    register(Baseline(name="broken_builtin", compute=_raises))
    try:
        spec = resolve("broken_builtin")
        with pytest.raises(RuntimeError, match="signal 'broken_builtin': its computation raised TypeError"):
            spec.compute(type("A", (), {"n_samples": 1, "n_tokens": 1, "offsets": np.array([0, 1])})(), {}, {})
    finally:
        unregister("broken_builtin")


@pytest.mark.parametrize("signal", ["lmpolygraph:MaximumClaimProbability", "uqlm:sequence_probability"])
def test_a_peer_signal_without_the_plugin_names_it_and_how_to_install_it(signal, capsys):
    if any(name.startswith(("lmpolygraph", "uqlm")) for name in registry.available()):
        pytest.skip("the much-peers plugin is installed here")
    with pytest.raises(ValueError, match=r"much-peers plugin, which is not installed.*plugins/much-peers"):
        resolve(signal)
    assert main(["run", "--source", "sample", "--signals", signal, "--bootstrap", "0"]) == 2
    assert "much-peers" in capsys.readouterr().err
