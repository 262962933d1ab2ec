"""The lazily loaded registries (baselines, detector kinds) load once under a lock: threads that use one for the
first time at the same moment all see every entry. Before the lock, the first thread marked the registry loaded
before importing the methods, and a second thread read it half-filled: ``unknown signal 'semantic_isotropy'``, a
toolkit bug reported as the user's error."""

from __future__ import annotations

import sys
import threading
import time

import pytest


@pytest.fixture
def fast_switching():
    """Switch threads every microsecond so that the first use of a registry interleaves between threads."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _at_once(work, n_threads: int = 8) -> list[BaseException]:
    """``work()`` in ``n_threads`` threads released together by a barrier; the exceptions raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)

    def worker() -> None:
        start.wait()
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - every failure is the finding
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def test_the_baselines_registry_loads_once_for_eight_threads(fast_switching, monkeypatch):
    from much_metric.baselines import registry

    names = ("semantic_isotropy", "token_entropy_24", "ccp_10_8", "rauq")
    for _ in range(12):  # a fresh, unloaded registry each round: the first use is the race
        monkeypatch.setattr(registry, "_REGISTRY", registry._Registry())
        errors = _at_once(lambda: [registry.resolve(name) for name in names])
        assert errors == [], errors[:3]
        assert len(registry.available()) == len(set(registry.available()))


class _SlowEntryPoint:
    """An installed plugin's entry point whose import takes a while (the window where a half-loaded registry shows)."""

    def __init__(self, name: str, value: object) -> None:
        self.name, self.value, self.module, self._loaded = name, f"slow_plugin:{name}", "slow_plugin", value

    def load(self) -> object:
        time.sleep(0.05)
        return self._loaded


def _with_entry_points(monkeypatch, group: str, entry_points: list) -> None:
    import importlib.metadata

    original = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda **kw: entry_points if kw.get("group") == group else original(**kw))


def test_the_baselines_registry_waits_for_a_slow_plugin(monkeypatch):
    """A plugin's baseline is there for every thread, also while its module is still being imported by the first."""
    from much_metric.baselines import registry

    plugin = registry.Baseline(name="slow_plugin_signal", compute=lambda arrays: None)
    _with_entry_points(monkeypatch, registry.ENTRY_POINT_GROUP, [_SlowEntryPoint("slow", plugin)])
    for _ in range(3):
        monkeypatch.setattr(registry, "_REGISTRY", registry._Registry())
        errors = _at_once(lambda: registry.resolve("slow_plugin_signal"))
        assert errors == [], errors[:3]


def test_the_detector_kinds_load_once_for_eight_threads(monkeypatch):
    """The kinds registry has the same shape: a plugin's kind is known to every thread that asks at once."""
    import dataclasses

    from much_metric.learned import _kinds

    slow = dataclasses.replace(_kinds.BUILTIN_KINDS["linear"], name="slow_kind")
    _with_entry_points(monkeypatch, _kinds.ENTRY_POINT_GROUP, [_SlowEntryPoint("slow_kind", slow)])
    for _ in range(3):
        kinds = _kinds._Kinds()
        monkeypatch.setattr(_kinds, "KINDS", kinds)
        errors = _at_once(lambda: _kinds.kind_of("slow_kind"))
        assert errors == [], errors[:3]
        assert sorted(kinds) == sorted([*_kinds.BUILTIN_KINDS, "slow_kind"])
