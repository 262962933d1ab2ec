"""The engine loop of ``generate`` and ``samples``: :func:`~builder.generation.engine.run_engine` under a progress bar
(rows per second, tokens per second), the engine closed whatever happens."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from builder.generation.engine import Engine, EngineRun, run_engine

__all__ = ["run_with_progress"]


def run_with_progress(engine: Engine, items: Sequence[dict[str, Any]], store: Any, *, config_id: str,
                      bar: tuple[str, str]) -> tuple[EngineRun, float]:
    """Run ``items`` through ``engine`` into ``store`` (:func:`run_engine`: validation, failures) with a progress
    bar (``bar``: its description and unit); the engine is closed afterwards (its Ray cluster, if any), also on an
    error. Returns the counts and the seconds taken."""
    from tqdm.auto import tqdm

    from builder.generation import close_engine

    started = time.perf_counter()
    desc, unit = bar
    with tqdm(total=len(items), desc=desc, unit=unit) as shown:
        def progress(counts: EngineRun) -> None:
            shown.update(1)
            shown.set_postfix(tok_s=f"{counts.tokens / (time.perf_counter() - started):.1f}")

        try:
            counts = run_engine(engine, items, store, config_id=config_id, progress=progress)
        finally:
            close_engine(engine)
    return counts, time.perf_counter() - started
