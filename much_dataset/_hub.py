"""Whether the Hugging Face hub answers, asked once with a short timeout before a hub load.

``datasets``/``transformers`` retry an unreachable hub for ~20 s and then fail with a long traceback of HTTP
frames. :func:`require_hub` asks the hub once (``HEAD <endpoint>/api/health``, :data:`HUB_TIMEOUT_S` seconds) and
raises one :class:`HubUnreachableError` that says what to do. Offline mode (``HF_HUB_OFFLINE=1`` and friends) skips
the check: then the libraries read their caches. Used by :func:`much_dataset.load` and by the ``much`` command line's
argument checks, so the library and the CLI give the same answer.
"""

from __future__ import annotations

import os

__all__ = ["HUB_TIMEOUT_S", "HubUnreachableError", "hub_offline", "hub_reachable", "require_hub", "unreachable_message"]

#: Seconds to wait for the hub before failing (``datasets``/``transformers`` would retry for ~20 s).
HUB_TIMEOUT_S = 3.0

_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


class HubUnreachableError(ConnectionError):
    """The Hugging Face hub did not answer within :data:`HUB_TIMEOUT_S` seconds (a ``ConnectionError``)."""


def hub_offline() -> bool:
    """Whether one of ``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE``/``TRANSFORMERS_OFFLINE`` switches the hub off."""
    return any(os.environ.get(name, "").lower() in ("1", "true", "yes", "on") for name in _OFFLINE_VARIABLES)


def hub_endpoint() -> str:
    """The hub's address: ``HF_ENDPOINT`` or https://huggingface.co."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hub_reachable(timeout: float = HUB_TIMEOUT_S) -> bool:
    """Whether the Hugging Face hub answers an HTTP request within ``timeout`` seconds (any status counts)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(hub_endpoint() + "/api/health", method="HEAD"),
                                    timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # the server answered
    except (OSError, ValueError):
        return False


def unreachable_message(what: str) -> str:
    """The one message for an unreachable hub; ``what`` names the argument (``--source orailix/MUCH``, ...)."""
    return (f"{what}: the Hugging Face hub is unreachable (no answer from {hub_endpoint()} within "
            f"{HUB_TIMEOUT_S:g} s). If it is already in your Hugging Face cache, rerun with HF_HUB_OFFLINE=1; "
            "otherwise pass a local folder (e.g. a `python -m builder export` folder or a saved copy)")


def require_hub(what: str, timeout: float = HUB_TIMEOUT_S) -> None:
    """Raise :class:`HubUnreachableError` at once if the hub is needed (not offline) and does not answer."""
    if not hub_offline() and not hub_reachable(timeout):
        raise HubUnreachableError(unreachable_message(what))
