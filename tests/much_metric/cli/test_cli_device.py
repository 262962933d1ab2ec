"""Issue #44: ``--device bogus`` is bad input, refused naming the option before any model is loaded (it was the
"bug" exit after loading the model, when the model was moved there)."""

from __future__ import annotations

import pytest

from much_metric import models
from much_metric.cli import main


@pytest.mark.parametrize("argv", [
    ["monitor", "--model", "smollm2", "--prompt", "q"],
    ["run", "--source", "sample", "--signals", "token_likelihood", "--bootstrap", "0"],
], ids=["monitor", "run"])
@pytest.mark.parametrize("device, reason", [("bogus", "not a torch device"), ("cuda:99", "device(s)")])
def test_a_bad_device_is_refused_before_any_model_loads(monkeypatch, capsys, argv, device, reason):
    monkeypatch.setattr(models, "load_causal_lm", lambda *a, **k: pytest.fail("a model was loaded"))
    assert main([*argv, "--device", device]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"--device {device!r}" in err and reason in err


def test_check_device_accepts_the_cpu():
    models.check_device("cpu")
    models.check_device(None)
    with pytest.raises(ValueError, match="--nli-device 'meta'"):
        models.check_device("meta", option="--nli-device")
