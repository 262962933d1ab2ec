"""LM-Polygraph's and UQLM's own estimators as MUCH signals (a ``much.baselines`` plugin; docs/peers.md).

Importing this package imports neither peer: they load when a signal is computed.
"""

from much_peers._catalogue import LMPOLYGRAPH, LMPOLYGRAPH_REFUSED, UQLM, UQLM_REFUSED
from much_peers._inputs import CONVENTIONS, claim_tokens, to_unit

__all__ = ["CONVENTIONS", "LMPOLYGRAPH", "LMPOLYGRAPH_REFUSED", "UQLM", "UQLM_REFUSED", "claim_tokens", "to_unit"]
__version__ = "0.1.0"
