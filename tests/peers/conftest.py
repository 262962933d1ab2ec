"""The much-peers plugin's tests. Its numpy-only parts (claims, carriers, refusals) run in every environment (the
plugin folder is put on the path when the plugin is not installed); the adapter tests need LM-Polygraph and UQLM
and skip without them, unless MUCH_REQUIRE_PEERS=1 (scripts/run_peer_tests.sh sets it) makes a missing peer an
error."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from tests._tools import require_module

PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "much-peers"
if importlib.util.find_spec("much_peers") is None:
    sys.path.insert(0, str(PLUGIN))


def require(module: str):
    """Import a peer, or skip the test; a failure instead when MUCH_REQUIRE_PEERS=1 (the peers' environment)."""
    return require_module("peers", module, "the peers are installed by scripts/run_peer_tests.sh only")
