"""The one dtype rule of the builder: the dtype an engine computes MUCH's values in, and the one a replay uses.

MUCH's values are ``softmax(logits / T)``; in bfloat16 they differ from float32 by up to ~0.08 and reorder
near-ties, so the dtype is part of what a row *is*. The rule, for every engine and every step that re-forwards rows:

* ``generate`` computes in ``--dtype`` when given, else :func:`default_dtype` of the device (float32 on CPU,
  bfloat16 on a GPU, the reference's), never an engine's own "auto" (vLLM's "auto" downcasts a float32 checkpoint
  to bfloat16 on CPU). The dtype is recorded in every row (``dtype``) and in the config's ``configs.jsonl`` row, and
  ``export`` keeps it in ``rows/configs.jsonl``; one config has one dtype (a resumed run in another dtype is refused).
* ``verify``, ``replay`` and ``internals`` re-forward in ``--dtype`` when given, else in the dtype the rows record
  (:func:`recorded_dtype`: the rows' ``dtype`` field, else the ``configs.jsonl`` next to the source file), else in
  the device default. Rows of several dtypes in one selection are refused (pick them with ``--shard``/``--limit``
  or ``--dtype``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from builder.errors import BuilderError
from much_dataset import schema

__all__ = ["DTYPES", "DTYPE_FIELD", "default_dtype", "engine_dtype", "run_dtype", "recorded_dtype", "replay_dtype",
           "check_config_dtype", "DTYPE_SIZED_DIFFERENCE", "dtype_hint"]

#: The dtypes an engine may compute MUCH's values in (torch names).
DTYPES = ("float32", "bfloat16", "float16")
#: The field of a row and of a ``configs.jsonl`` row that holds it.
DTYPE_FIELD = "dtype"
#: A largest difference above this between stored and re-forwarded values has the size a dtype change makes
#: (bfloat16 against float32: up to ~0.08), far above what float32 engines differ by (~1e-5).
DTYPE_SIZED_DIFFERENCE = 1e-3


def default_dtype(device: str) -> str:
    """bfloat16 on a CUDA device (the reference's), float32 anywhere else (CPU, MPS)."""
    return "bfloat16" if str(device).startswith("cuda") else "float32"


def _checked(dtype: str, option: str = "--dtype") -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise BuilderError(f"{option} must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return name


def engine_dtype(requested: str | None, device: str) -> str:
    """The dtype an engine computes in: ``requested`` (checked) or the device's default."""
    return _checked(requested) if requested else default_dtype(device)


def run_dtype(engine: str, requested: str | None, device: str | None) -> str | None:
    """The dtype a ``generate`` or ``samples`` run computes in: ``requested`` or the default of the device the engine
    runs on; for ``openai``, only what ``requested`` declares about the server (None: not declared; ``generate``
    then asks the server, :func:`builder.generation.openai.server_dtype`)."""
    if engine == "openai":
        return engine_dtype(requested, "server") if requested else None
    if engine == "vllm":
        import torch

        return engine_dtype(requested, "cuda" if torch.cuda.is_available() else "cpu")
    from builder._llm import pick_device

    return engine_dtype(requested, pick_device(device))


def _config_dtypes(source: Path) -> dict[str, str]:
    """``generation_config -> dtype`` of the ``configs.jsonl`` next to ``source`` ({} when absent)."""
    from builder.store import read_store

    path = Path(source).parent / "configs.jsonl"
    if not path.is_file():
        return {}
    return {str(r[schema.GENERATION_CONFIG]): str(r[DTYPE_FIELD]) for r in read_store(path)
            if r.get(DTYPE_FIELD) and schema.GENERATION_CONFIG in r}


def recorded_dtype(rows: Iterable[dict[str, Any]], source: str | Path) -> str | None:
    """The one dtype ``rows`` were computed in (their ``dtype`` field, else their config's in the ``configs.jsonl``
    next to ``source``), or None when nothing records it; :class:`BuilderError` when they record several."""
    by_config = None
    found: dict[str, str] = {}
    for row in rows:
        dtype = row.get(DTYPE_FIELD)
        if not dtype:
            if by_config is None:
                by_config = _config_dtypes(Path(source))
            dtype = by_config.get(str(row.get(schema.GENERATION_CONFIG)))
        if dtype:
            found.setdefault(_checked(dtype, f"{source}: field {DTYPE_FIELD!r}"), str(row.get(schema.GENERATION_ID)))
    if len(found) > 1:
        examples = ", ".join(f"{dtype} (e.g. generation_id={gid!r})" for dtype, gid in sorted(found.items()))
        raise BuilderError(f"{source}: the selected rows were computed in several dtypes: {examples}; select rows of "
                           "one dtype (--shard, --limit, --generation-config) or force one with --dtype")
    return next(iter(found), None)


def replay_dtype(requested: str | None, rows: Iterable[dict[str, Any]], source: str | Path) -> str | None:
    """The dtype to re-forward ``rows`` in: ``--dtype`` when given, else the recorded one, else None (the device's
    default, :func:`default_dtype`, chosen when the model is loaded)."""
    return _checked(requested) if requested else recorded_dtype(rows, source)


def check_config_dtype(existing: dict[str, Any] | None, dtype: str | None) -> None:
    """Refuse to add rows in ``dtype`` to a config whose ``configs.jsonl`` row records another one."""
    if existing is None or dtype is None or not existing.get(DTYPE_FIELD) or existing[DTYPE_FIELD] == dtype:
        return
    raise BuilderError(f"config {existing.get(schema.GENERATION_CONFIG)} was generated in {existing[DTYPE_FIELD]} "
                       f"(configs.jsonl) and this run would add rows in {dtype}: one config has one dtype; pass "
                       f"--dtype {existing[DTYPE_FIELD]}, or write to another --out")


def dtype_hint(recorded: str | None, used: str, largest_difference: float) -> str:
    """Why a re-forward in ``used`` differs from rows that record ``recorded`` (None: nothing), when the dtype is the
    likely cause (a difference above :data:`DTYPE_SIZED_DIFFERENCE` with a dtype unknown or other); else ""."""
    if not largest_difference > DTYPE_SIZED_DIFFERENCE or recorded == used:
        return ""
    others = " or ".join(d for d in DTYPES if d != used)
    if recorded is None:
        return (f"the rows record no dtype (dtype null: e.g. generate --engine openai against a server started "
                f"without --dtype; vLLM's 'auto' computes in bfloat16 on CPU) and were re-forwarded in {used}: a "
                f"difference of this size is what another dtype makes; check with verify --dtype {others}, and "
                f"generate with the server and generate both given --dtype (docs/generation.md)")
    return (f"the rows record {recorded} but were re-forwarded in {used} (--dtype): a difference of this size is "
            f"what the dtype makes; verify without --dtype re-forwards in {recorded}")
