"""The MUCH ``evaluate`` module: ``much_metric.load_metric()`` and the ``evaluate.load("much")`` name.

``evaluate.load(name)`` resolves a bare name in this order: a local ``./name/name.py``, the hub module
``evaluate-metric/name``, then evaluate's module cache (``$HF_MODULES_CACHE/evaluate_modules/metrics/
evaluate-metric--name/<hash>/name.py``, the copy a previous hub load left). :func:`install_metric` writes the
metric script shipped in this package into that cache under the name ``much``, with evaluate's own function, so
that ``evaluate.load("much")`` works from any directory and offline (there is no ``evaluate-metric/much`` on the
hub; online, evaluate asks the hub first, gets a 404 and falls back to the cache). ``much install-metric`` runs it;
:func:`load_metric` runs it on first use.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from much_metric._compat import tested_version

__all__ = ["load_metric", "install_metric", "MODULE_PATH", "METRIC_NAME"]

#: Folder holding ``much_metric.py``, the evaluate module script (this package's folder).
MODULE_PATH = Path(__file__).resolve().parent
#: The name ``evaluate.load`` knows the metric by after :func:`install_metric`.
METRIC_NAME = "much"


def install_metric(*, name: str = METRIC_NAME, hf_modules_cache: str | Path | None = None) -> Path:
    """Install the metric script into evaluate's module cache, so that ``evaluate.load(name)`` finds it offline.

    Parameters
    ----------
    name : str, default "much"
        The name for ``evaluate.load``.
    hf_modules_cache : str or Path, optional
        evaluate's module cache (default: ``$HF_MODULES_CACHE``, else ``~/.cache/huggingface/modules``).

    Returns
    -------
    Path
        The installed script. Idempotent: the folder is named after the script's hash, as evaluate does, so a new
        version of the package installs next to the old one and, being the newest, is the one loaded.
    """
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"name must be a bare module name such as 'much', got {name!r}")
    if not tested_version("evaluate"):
        # The cache writer below is evaluate's private helper: only on the versions we tested. The public path,
        # evaluate.load(<path of this package's much_metric.py>) or much_metric.load_metric(), works on any version.
        raise ImportError("install_metric supports evaluate 0.4.x only; use much_metric.load_metric() or "
                          "evaluate.load(much_metric.evaluate_module.MODULE_PATH) instead")
    from much_dataset._transformers import quiet_torch_notice

    with quiet_torch_notice():  # evaluate imports transformers; the light install has no torch
        from evaluate.loading import _create_importable_file, init_dynamic_modules

    dynamic_modules_path = init_dynamic_modules(hf_modules_cache=str(hf_modules_cache) if hf_modules_cache else None)
    _, digest = _create_importable_file(
        local_path=str(MODULE_PATH / "much_metric.py"), local_imports=[], additional_files=[],
        dynamic_modules_path=dynamic_modules_path, module_namespace="metrics", name=f"evaluate-metric/{name}",
        download_mode=None,
    )
    return Path(dynamic_modules_path, "metrics", f"evaluate-metric--{name}", digest, f"{name}.py")


def load_metric(**kwargs: Any):
    """``evaluate.load`` of the MUCH metric script shipped in this package (works offline, from any directory).

    Also installs the ``evaluate.load("much")`` name (:func:`install_metric`) on first use. Keyword arguments
    (``experiment_id``, ``keep_in_memory``, ``cache_dir``, ...) are passed to ``evaluate.load``.
    The name is installed once per process and module cache (``$HF_MODULES_CACHE``), not on every call: a later
    call only loads.
    """
    import os

    from much_dataset._transformers import quiet_torch_notice

    with quiet_torch_notice():  # evaluate imports transformers; the light install has no torch
        import evaluate

    if tested_version("evaluate"):
        _install_once(os.environ.get("HF_MODULES_CACHE"))
    return evaluate.load(str(MODULE_PATH), **kwargs)


@functools.cache
def _install_once(hf_modules_cache: str | None) -> Path:
    """:func:`install_metric` into ``hf_modules_cache`` (None: evaluate's default), once per process and cache.
    Idempotent, so two threads racing on the first call install the same file twice at worst."""
    return install_metric(hf_modules_cache=hf_modules_cache)
