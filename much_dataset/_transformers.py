"""Import ``transformers`` without its "PyTorch was not found" notice, for the light install's tokenizer-only use.

The light install (``pip install .``) has transformers and tokenizers but no torch: every command that loads a
tokenizer, or imports ``evaluate`` (which imports transformers), would print transformers' import-time notice
"PyTorch was not found. Models won't be available ..." although the toolkit only needs tokenizers there. The notice
is dropped by a logging filter on the ``transformers`` logger that exists only while the import runs: no
environment variable, log level or other library state is changed, and every other transformers message still shows.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from types import ModuleType

__all__ = ["quiet_torch_notice", "import_transformers"]

#: The start of transformers' import-time notice when torch is missing.
TORCH_NOTICE = "PyTorch was not found"


class _DropTorchNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(TORCH_NOTICE)


@contextlib.contextmanager
def quiet_torch_notice() -> Iterator[None]:
    """Within the block, the ``transformers`` logger drops the "PyTorch was not found" notice (and nothing else)."""
    logger = logging.getLogger("transformers")
    dropping = _DropTorchNotice()
    logger.addFilter(dropping)
    try:
        yield
    finally:
        logger.removeFilter(dropping)


def import_transformers() -> ModuleType:
    """``import transformers`` under :func:`quiet_torch_notice` (a no-op once it is imported)."""
    with quiet_torch_notice():
        import transformers
    return transformers
