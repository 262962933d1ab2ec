"""Secrets never reach the builder's files: API keys and ``Authorization`` values are masked before writing.

A provider may echo the key in an error text ("Incorrect API key provided: sk-...") and the builder stores error
texts in ``*.failures.jsonl``. :func:`redact` masks, in any text about to be persisted,

* the value of every environment variable whose name says it holds a secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``,
  ``*PASSWORD*``; so the variable named by ``--api-key-env`` and ``HF_TOKEN`` are covered) when at least 8
  characters long, and
* what follows ``Authorization:`` / ``Bearer`` / ``api_key=`` / ``token=``.
"""

from __future__ import annotations

import os
import re

__all__ = ["redact", "MASK"]

MASK = "[REDACTED]"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
_PATTERNS = re.compile(
    r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?(?:bearer\s+|basic\s+|token\s+)?|bearer\s+|"
    r"(?:api[_-]?key|access[_-]?token|token)[\"']?\s*[:=]\s*[\"']?)([^\s\"',;}]+)")


def _secret_values() -> list[str]:
    values = {value for name, value in os.environ.items() if _SECRET_NAME.search(name) and len(value) >= 8}
    return sorted(values, key=len, reverse=True)  # longer first: a secret containing another is masked whole


def redact(text: str, *, patterns: bool = True) -> str:
    """``text`` with secret values (and, when ``patterns``, authorization material) replaced by :data:`MASK`.

    Data records (model outputs, pages) pass ``patterns=False``: only exact secret values are masked there, so that a
    text that merely says "token = 5" is kept as it is.
    """
    for value in _secret_values():
        if value in text:
            text = text.replace(value, MASK)
    return _PATTERNS.sub(lambda m: m.group(1) + MASK, text) if patterns else text
