"""The ``much.baselines`` entry points: ``lmpolygraph:<Estimator>`` and ``uqlm:<scorer>`` signals.

Each signal runs the peer's own class on the split's stored top-24 and claims, maps its claim uncertainty into
[0, 1] by a strictly increasing function (ranks are the peer's, :func:`much_peers._inputs.to_unit`) and returns
it as a claim-level signal, one value per claim (:func:`much_metric.baselines.claims.claim_signal`), so that
``much run`` times it, writes its ``<name>@claim`` signal file and ranks the claims exactly as the peer does, whatever
the aggregator.

``lmpolygraph:<Estimator>`` / ``uqlm:<scorer>`` hand the peer each claim's non-stopword tokens (MUCH's rule);
``...:alltokens`` hands it every token of the claim (the peers' own convention). A refused or unknown name fails
when the name is resolved (``much run --signals``), before anything is loaded. The peers' signals are not in the
``all`` group (each costs a peer import): name them, or run ``benchmarks/bench_peers.py`` for every one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines import Baseline
from much_metric.baselines.claims import claim_signal
from much_peers import lmpolygraph, uqlm
from much_peers._catalogue import LMPOLYGRAPH
from much_peers._inputs import to_unit

__all__ = ["LMPOLYGRAPH_BASELINES", "UQLM_BASELINES", "peer_claim_signal"]

_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_SUFFIX = ":alltokens"


def peer_claim_signal(arrays: Any, peer: str, name: str, *, convention: str = "much") -> list[np.ndarray]:
    """A peer's estimator as a claim-level signal: per sample, its claim scores mapped into [0, 1]."""
    if peer == "lmpolygraph":
        claims = lmpolygraph.claim_scores(arrays, name, convention=convention)
        kind = LMPOLYGRAPH[name].kind
    elif peer == "uqlm":
        claims = uqlm.claim_scores(arrays, name, convention=convention)
        kind = "unit"
    else:
        raise ValueError(f"unknown peer {peer!r}; choose 'lmpolygraph' or 'uqlm'")
    flat = to_unit(np.concatenate(claims) if claims else np.zeros(0), kind)
    counts = np.cumsum([len(c) for c in claims])[:-1]
    return claim_signal(arrays, np.split(flat, counts), f"{peer}:{name}")


def _lmpolygraph(arrays: Any, *, estimator: str) -> list[np.ndarray]:
    return peer_claim_signal(arrays, "lmpolygraph", estimator)


def _lmpolygraph_all(arrays: Any, *, estimator: str) -> list[np.ndarray]:
    return peer_claim_signal(arrays, "lmpolygraph", estimator, convention="all")


def _uqlm(arrays: Any, *, scorer: str) -> list[np.ndarray]:
    return peer_claim_signal(arrays, "uqlm", scorer)


def _uqlm_all(arrays: Any, *, scorer: str) -> list[np.ndarray]:
    return peer_claim_signal(arrays, "uqlm", scorer, convention="all")


def _check_lmpolygraph(params: dict[str, Any]) -> None:
    lmpolygraph.check_estimator(params["estimator"])


def _check_uqlm(params: dict[str, Any]) -> None:
    uqlm.check_scorer(params["scorer"])


_ORDER = 200.0  # after the toolkit's own methods in tables and help

LMPOLYGRAPH_BASELINES = (
    Baseline(name="lmpolygraph:{estimator}", compute=_lmpolygraph, params={"estimator": _NAME},
             display=lambda p: f"LM-Polygraph {p['estimator']}", check=_check_lmpolygraph, order=_ORDER,
             level="claim",
             defaults=(),
             description="LM-Polygraph 0.7.0's own estimator on each claim's non-stopword tokens (much-peers "
                         "plugin; docs/peers.md)"),
    Baseline(name="lmpolygraph:{estimator}" + _SUFFIX, compute=_lmpolygraph_all, params={"estimator": _NAME},
             display=lambda p: f"LM-Polygraph {p['estimator']} (all tokens)", check=_check_lmpolygraph,
             order=_ORDER + 1, level="claim", defaults=(),
             description="as lmpolygraph:{estimator}, on every token of the claim (the peer's own convention)"),
)

UQLM_BASELINES = (
    Baseline(name="uqlm:{scorer}", compute=_uqlm, params={"scorer": _NAME},
             display=lambda p: f"UQLM {p['scorer']}", check=_check_uqlm, order=_ORDER + 2,
             level="claim",
             defaults=(),
             description="1 - UQLM 0.6.7's white-box confidence of each claim's non-stopword tokens as a response "
                         "(much-peers plugin; docs/peers.md)"),
    Baseline(name="uqlm:{scorer}" + _SUFFIX, compute=_uqlm_all, params={"scorer": _NAME},
             display=lambda p: f"UQLM {p['scorer']} (all tokens)", check=_check_uqlm, order=_ORDER + 3,
             level="claim",
             defaults=(),
             description="as uqlm:{scorer}, on every token of the claim (the peer's own convention)"),
)
