"""Runtime relative to LLM generation (paper table 3): generation-time estimates and segmentation timing.

Table 3 reports each baseline's segmentation and UQ wall time as a fraction of the time the LLM took to generate
the answers (2,758 s for MUCH in the paper, appendix B). :func:`generation_time` picks the denominator:

* an explicit number of seconds (``--generation-time 1234``);
* a JSON file written by ``scripts/tools/estimate_generation_time.py``, which timed a model on this machine: its rate
  (seconds per generated token, or per question) is extrapolated to the samples being evaluated;
* otherwise a documented default: for ``orailix/MUCH``, the paper's 2,758 s for 4,873 samples, pro rata
  (measured on the authors' GPU cluster, not on this machine); for anything else (the embedded sample),
  :data:`DEFAULT_TOKENS_PER_SECOND` tokens per second -- SmolLM2-135M-Instruct sampling on 2 CPU cores -- times
  the number of output tokens. Both defaults are estimates; run the script for a measurement.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "PAPER_GENERATION_SECONDS",
    "PAPER_N_SAMPLES",
    "DEFAULT_TOKENS_PER_SECOND",
    "GenerationTime",
    "generation_time",
    "read_timings",
    "format_runtime",
    "time_segmentation",
]

#: LLM generation time of MUCH's 4,873 samples in the paper (appendix B: 4,540 s x 4,873/6,448 x 4.26/5.30).
PAPER_GENERATION_SECONDS = 2758.0
PAPER_N_SAMPLES = 4873
#: SmolLM2-135M-Instruct (GGUF Q4_1, dequantised, float32) sampling speed on 2 CPU cores, tokens/s (measured for
#: shared/reference/offline_models.md). Used only when no measurement is given.
DEFAULT_TOKENS_PER_SECOND = 11.0


@dataclass(frozen=True)
class GenerationTime:
    """LLM generation time of the evaluated samples, in seconds, and where the number comes from."""

    seconds: float
    source: str


def _is_number(value: Any) -> bool:
    """A real JSON number (int or float, not a bool), finite."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond float64
        return False


def _json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, an integer past Python's digit limit
        raise ValueError(f"{path}: not valid JSON ({error}); {what}") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: a JSON {type(record).__name__}, not an object; {what}")
    return record


def read_timings(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read a ``timings.json`` (``much run --out`` writes it): ``{signal: {"seconds": s, "n_samples": n, ...}}``.

    ``seconds`` must be a finite number >= 0 (not a boolean, not a string), ``n_samples`` / ``n_tokens`` (optional)
    integers >= 0; other fields are kept as they are. Anything else raises ``ValueError`` naming the file, the
    signal and the field. Returns the records with ``seconds`` as float.
    """
    path = Path(path)
    shape = 'expected {"<signal>": {"seconds": <number>, ...}, ...} as `much run --out` writes it'
    timings = _json_object(path, shape)
    out = {}
    for name, record in timings.items():
        if not isinstance(record, dict):
            raise ValueError(f"{path}: signal {name!r}: a {type(record).__name__}, not an object; {shape}")
        if "seconds" not in record:
            raise ValueError(f"{path}: signal {name!r}: no field 'seconds'; {shape}")
        seconds = record["seconds"]
        if not _is_number(seconds) or seconds < 0:
            raise ValueError(f"{path}: signal {name!r}: field 'seconds' is {seconds!r} ({type(seconds).__name__}); "
                             "need a finite number of seconds >= 0")
        for field in ("n_samples", "n_tokens"):
            count = record.get(field, 0)
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ValueError(f"{path}: signal {name!r}: field {field!r} is {count!r} ({type(count).__name__}); "
                                 "need an integer >= 0")
        out[name] = {**record, "seconds": float(seconds)}
    return out


def _from_file(path: Path, n_samples: int, n_tokens: int) -> GenerationTime:
    record = _json_object(path, "expected a JSON object written by scripts/tools/estimate_generation_time.py")
    mode = record.get("extrapolate", "tokens")
    if mode not in ("tokens", "questions"):
        raise ValueError(f"{path}: field 'extrapolate' must be 'tokens' or 'questions', got {mode!r}")
    key = "seconds_per_token" if mode == "tokens" else "seconds_per_question"
    rate = record.get(key)
    if not _is_number(rate) or not rate > 0:
        raise ValueError(f"{path}: field {key!r} must be a positive number (extrapolate={mode!r}), got {rate!r}")
    count = n_tokens if mode == "tokens" else n_samples
    unit = "output token" if mode == "tokens" else "question"
    return GenerationTime(
        rate * count,
        f"measured with {record.get('model', 'a model')} on {record.get('device', 'this machine')}: "
        f"{rate:.4g} s per {unit} x {count:,} ({path.name})",
    )


def generation_time(
    value: Any,
    *,
    data_source: str,
    n_samples: int,
    n_tokens: int,
) -> GenerationTime:
    """The generation time that runtimes are divided by (see the module docstring).

    Parameters
    ----------
    value : float, str or None
        Seconds (number or numeric string), a path to a JSON file from ``scripts/tools/estimate_generation_time.py``,
        or None for the default.
    data_source : str
        The ``--source`` argument (``"orailix/MUCH"`` selects the paper's figure).
    n_samples, n_tokens : int
        Samples and output tokens (EOS included) being evaluated.
    """
    from much_dataset.schema import HUB_REPO_ID

    if value is not None and not isinstance(value, str | Path):
        if not _is_number(value) or not value > 0:
            raise ValueError(f"generation time must be a positive number of seconds, got {value!r}")
        return GenerationTime(float(value), "given")
    if isinstance(value, str | Path):
        path = Path(value)
        if path.is_file():
            return _from_file(path, n_samples, n_tokens)
        try:
            seconds = float(str(value))
        except ValueError:
            raise ValueError(f"--generation-time: {str(value)!r} is neither a number of seconds nor a file") from None
        return generation_time(seconds, data_source=data_source, n_samples=n_samples, n_tokens=n_tokens)
    if data_source == HUB_REPO_ID:
        return GenerationTime(
            PAPER_GENERATION_SECONDS * n_samples / PAPER_N_SAMPLES,
            f"paper, appendix B: {PAPER_GENERATION_SECONDS:,.0f} s for {PAPER_N_SAMPLES:,} samples, pro rata "
            "(the authors' GPU cluster, not this machine)",
        )
    return GenerationTime(
        n_tokens / DEFAULT_TOKENS_PER_SECOND,
        f"estimate: {n_tokens:,} output tokens at {DEFAULT_TOKENS_PER_SECOND:g} tokens/s (SmolLM2-135M on 2 CPU "
        "cores); measure with scripts/tools/estimate_generation_time.py and pass --generation-time FILE",
    )


def _compact(value: float, unit: str) -> str:
    """Table 3's number style: no decimals from 100, one from 1, three below, ``<0.001`` at the bottom."""
    if value >= 100:
        return f"{value:,.0f}{unit}"
    if value >= 1:
        return f"{value:.1f}{unit}"
    return f"{value:.3f}{unit}" if value >= 0.001 else f"<0.001{unit}"


def format_runtime(seconds: float, generation_seconds: float) -> str:
    """``"6.0s (0.218%)"`` -- wall time and its share of LLM generation, as table 3; ``"n/a"`` if nan (unmeasured)."""
    if seconds is None or math.isnan(seconds):
        return "n/a"
    return f"{_compact(seconds, 's')} ({_compact(100.0 * seconds / generation_seconds, '%')})"


def time_segmentation(dataset: Any, tokenizer: Any, *, compat: str = "0.3.0", progress: bool = True,
                      batch_size: int = 1024) -> tuple[float, int]:
    """Wall time of segmenting every output of a split into claims with :func:`much_metric.segmentation.segment_many`.

    Uses the stored ``output_tokens`` (as the reference segments generations), ``batch_size`` samples per call.
    Returns ``(seconds, n_agree)``, ``n_agree`` = samples whose segmentation equals their ``token_chunks`` column
    (a consistency check; a dataset segmented with another compat version or tokenizer agrees less).
    """
    from tqdm.auto import tqdm

    from much_dataset.schema import GENERATION_ID, OUTPUT, OUTPUT_TOKENS, TOKEN_CHUNKS
    from much_metric.segmentation import SegmenterInputError, prepare, segment_many

    prepare()  # imports nltk and compiles its rules: a one-off cost of the process, not of segmenting
    if hasattr(dataset, "select_columns"):
        columns = dataset.select_columns([GENERATION_ID, OUTPUT, OUTPUT_TOKENS, TOKEN_CHUNKS]).to_dict()
        ids, outputs, tokens, chunks = (columns[key] for key in (GENERATION_ID, OUTPUT, OUTPUT_TOKENS, TOKEN_CHUNKS))
    else:
        rows = list(dataset)
        ids, outputs, tokens, chunks = ([row.get(key) for row in rows]
                                        for key in (GENERATION_ID, OUTPUT, OUTPUT_TOKENS, TOKEN_CHUNKS))
    agree = 0
    elapsed = 0.0
    with tqdm(total=len(outputs), desc="segmentation", unit="sample", disable=not progress, leave=False) as bar:
        for start in range(0, len(outputs), batch_size):
            stop = start + batch_size
            began = time.perf_counter()
            try:
                result = segment_many(outputs[start:stop], tokenizer, tokens[start:stop], compat=compat)
            except SegmenterInputError as error:
                index = getattr(error, "index", None)
                sample = f"{GENERATION_ID}={ids[start + index]!r}" if index is not None else f"samples {start}.."
                raise SegmenterInputError(f"{sample}: fields {OUTPUT!r} / {OUTPUT_TOKENS!r} cannot be segmented: "
                                          f"{error}") from error
            elapsed += time.perf_counter() - began
            agree += sum([list(c) for c in mine] == [list(c) for c in theirs]
                         for mine, theirs in zip(result, chunks[start:stop], strict=True))
            bar.update(len(result))
    return elapsed, agree
