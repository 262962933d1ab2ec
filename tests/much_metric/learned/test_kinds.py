"""A detector kind is one record and one module: the estimators are generated from the records (scikit-learn's
``clone`` works on them), a new kind with a hyper-parameter of its own trains, saves, loads and scores with that
hyper-parameter reaching its module, and an installed package adds a kind through the ``much.detector_kinds``
entry point."""

from __future__ import annotations

import numbers
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from much_dataset.params import Interval  # noqa: E402
from much_metric.learned import (  # noqa: E402
    FEATURES,
    KINDS,
    ClaimHeadDetector,
    Kind,
    LinearDetector,
    ProbeDetector,
    SequenceDetector,
    estimator_class,
    load_detector,
    register_kind,
    token_features,
    unregister_kind,
)
from much_metric.scoring import Aggregation  # noqa: E402
from tests.much_metric.learned._synthetic import planted_rows  # noqa: E402

REPO = Path(__file__).resolve().parents[3]

#: The one module of the new kind: a two-layer token MLP whose width is a hyper-parameter no built-in kind has.
WIDE_MODULE = textwrap.dedent('''
    import numpy as np
    import torch
    from torch import nn


    class WideModule(nn.Module):
        def __init__(self, n_inputs, *, rng, width=4):
            super().__init__()
            self.hidden = nn.Linear(n_inputs, width)
            self.read_out = nn.Linear(width, 1)
            with torch.no_grad():
                for parameter in self.parameters():
                    parameter.copy_(torch.from_numpy(rng.normal(0, 0.1, tuple(parameter.shape)).astype(np.float32)))

        def forward(self, inputs):
            return self.read_out(torch.tanh(self.hidden(inputs))).squeeze(-1)
''')


def _wide_kind(module: str, **extra_defaults) -> Kind:
    """The new kind's one entry: inputs, defaults and one constraint per hyper-parameter."""
    positive = Interval(numbers.Integral, 1, 10_000)
    return Kind("wide", lambda arrays, context=None: token_features(arrays), FEATURES, module,
                defaults={"learning_rate": 0.05, "batch_size": 16, "max_epochs": 2, "patience": 2, "width": 4,
                          **extra_defaults},
                constraints={"learning_rate": Interval(numbers.Real, 0, 10, closed="right"), "batch_size": positive,
                             "max_epochs": positive, "patience": positive, "width": Interval(numbers.Integral, 1, 64),
                             **dict.fromkeys(extra_defaults, positive)},
                description="A token MLP of a given width (test kind).")


@pytest.fixture
def wide_module(tmp_path, monkeypatch):
    (tmp_path / "wide_kind_module.py").write_text(WIDE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "wide_kind_module:WideModule"
    sys.modules.pop("wide_kind_module", None)


@pytest.mark.parametrize("cls", [LinearDetector, SequenceDetector, ProbeDetector, ClaimHeadDetector])
def test_sklearn_clone_works_on_every_estimator(cls):
    from sklearn.base import clone

    model = cls(aggregation=Aggregation(aggregator="mean", stopword_handling="exclude"), random_state=7)
    copy = clone(model)
    assert type(copy) is cls and copy is not model
    assert copy.get_params() == model.get_params() and copy.get_params(deep=False) == model.get_params()
    assert set(model.get_params()) == {"aggregation", *KINDS[cls.kind].defaults, "random_state"}
    assert clone(copy.set_params(random_state=8)).random_state == 8


def test_an_out_of_bounds_hyperparameter_names_the_estimator_and_the_constraint():
    with pytest.raises(ValueError, match=r"SequenceDetector: hidden must be an integer in \[1, 1,024\], got 0"):
        SequenceDetector(hidden=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'hiden'"):
        SequenceDetector(hiden=8)
    with pytest.warns(FutureWarning, match="aggregation=Aggregation"):
        model = LinearDetector(aggregator="max")
    assert model.aggregation == Aggregation(aggregator="max")


def test_a_kind_with_a_new_hyperparameter_is_one_entry_and_one_module(wide_module, tmp_path):
    """The width reaches the module (the module builder used to pass hidden/layers/heads only and silently build
    the default width), the folder records and checks it, and the folder scores like a built-in's."""
    from sklearn.base import clone

    from much_metric.baselines import resolve, token_arrays

    register_kind(_wide_kind(wide_module))
    try:
        cls = estimator_class("wide")
        assert cls.__name__ == "WideDetector" and "test kind" in cls.__doc__
        model = cls(width=6, random_state=1)
        assert clone(model).get_params() == model.get_params()
        rows = planted_rows(24, seed=3)
        model.fit(rows[:16], rows[16:], progress=False)
        assert model.detector_.weights["hidden.weight"].shape == (6, len(FEATURES))
        folder = model.save(tmp_path / "wide")
        detector = load_detector(folder)
        assert detector.hyperparameters["width"] == 6 and detector.kind.name == "wide"
        np.testing.assert_allclose(detector.token_scores(rows[16:]), model.token_scores(rows[16:]), rtol=1e-6)
        scores = resolve(f"learned:{folder}").compute(token_arrays(rows[:4]), {}, {})
        assert scores.shape == (sum(len(r["output_tokens"]) for r in rows[:4]),)
        with pytest.raises(ValueError, match=r"WideDetector: width must be an integer in \[1, 64\], got 0"):
            cls(width=0)
    finally:
        unregister_kind("wide")
    assert "wide" not in KINDS


def test_a_hyperparameter_the_module_does_not_take_is_refused_not_dropped(wide_module):
    register_kind(_wide_kind(wide_module, depth=3))
    try:
        model = estimator_class("wide")(depth=2)
        with pytest.raises(ValueError, match="hyper-parameter 'depth' is neither .* it would be ignored"):
            model.fit(planted_rows(12, seed=1)[:8], planted_rows(12, seed=1)[8:], progress=False)
    finally:
        unregister_kind("wide")


def test_an_installed_package_adds_a_kind_through_its_entry_point(tmp_path):
    """The group ``much.detector_kinds`` is read like ``much.baselines``: the kind is listed, its estimator
    generated, and ``much train --help`` offers it."""
    site = tmp_path / "site"
    (site / "wide_plugin").mkdir(parents=True)
    (site / "wide_plugin" / "module.py").write_text(WIDE_MODULE)
    (site / "wide_plugin" / "__init__.py").write_text(textwrap.dedent('''
        import numbers
        from much_dataset.params import Interval
        from much_metric.learned import FEATURES, Kind, token_features

        POSITIVE = Interval(numbers.Integral, 1, 10_000)
        WIDE = Kind("wide", lambda arrays, context=None: token_features(arrays), FEATURES,
                    "wide_plugin.module:WideModule",
                    defaults={"learning_rate": 0.05, "batch_size": 16, "max_epochs": 2, "patience": 2, "width": 4},
                    constraints={"learning_rate": Interval(numbers.Real, 0, 10, closed="right"), "batch_size": POSITIVE,
                                 "max_epochs": POSITIVE, "patience": POSITIVE, "width": POSITIVE})
    '''))
    dist = site / "wide_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: wide-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[much.detector_kinds]\nwide = wide_plugin:WIDE\n")
    code = ("import inspect\n"
            "from much_metric.learned import KINDS, estimator_class\n"
            "from much_metric.cli import build_parser\n"
            "print(sorted(KINDS), inspect.signature(estimator_class('wide')))\n"
            "build_parser().parse_args(['train', '--detector', 'wide', '--out', 'x'])\n"
            "print('parsed')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "'wide'" in out.stdout and "width=4" in out.stdout and "parsed" in out.stdout
