"""torch parts of the detectors (imported only when training or running the sequence detector).

* :func:`claim_loss` -- the metric's token-to-claim aggregation made differentiable, and the binary cross-entropy of
  the claim uncertainties against the claim labels (1 = hallucinated). It mirrors
  :func:`much_metric.scoring.aggregate_flat` term by term, so what is optimised is what ``much run`` measures:

  - ``product``: ``u_c = 1 - prod_t (1 - s_t)``; computed in log space, ``log(1 - s_t) = -softplus(z_t)`` for a
    token logit ``z_t`` (``s_t = sigmoid(z_t)``), and ``log u_c = log(1 - exp(sum_t log(1 - s_t)))``;
  - ``mean``: ``u_c = sum_t s_t / n_c``; ``max``: ``u_c = max_t s_t``;
  - ``geometric``: ``u_c = 1 - (prod_t (1 - s_t) + 1e-5) ** (1 / n_c)``;
  - stopwords ``"null"``: stopword tokens score 0 (a factor 1 in the product) but count in ``n_c``; ``"exclude"``:
    they leave the claim unless the claim has nothing else.

* :class:`LinearModule` (estimator :class:`~much_metric.learned.LinearDetector`) -- ``z_t = w . x_t + b`` on the
  standardised features of :func:`token_features` (logistic regression on token-probability features, as Quevedo
  et al. 2024, "Detecting hallucinations in large language model generation: a token probability approach"; with
  the WEPR rank-wise entropy terms among the features the learned weights are WEPR's per-rank weights, arXiv
  2509.04492). Trained on claim labels through the aggregator instead of token labels, which MUCH does not have.
* :class:`SequenceModule` (estimator :class:`~much_metric.learned.SequenceDetector`) -- a one-layer causal GRU over
  the per-token top-24 vectors of :func:`sequence_inputs`, then a linear read-out per token: HALT (arXiv
  2602.02888) reads the top-20 log-probabilities of each step with a small recurrent model and predicts one
  answer-level label; LOS-Net (AAAI 2026) uses a small transformer over the top-k distribution sequence. Here the
  read-out is per token (one score per output token, higher = more uncertain) and the loss is on MUCH's claims
  through the aggregator; the GRU is unidirectional, so token ``t``'s score depends on tokens ``<= t`` only and the
  monitor gives the offline scores.

* :class:`ClaimHeadModule` (estimator :class:`~much_metric.learned.ClaimHeadDetector`) -- the claim head on an
  internals pack: a linear projection of each token's attention features, top-24 log-probabilities and claim
  features, transformer encoder layers whose attention is masked to the token's own claim (``segments``), and a
  per-token read-out, trained through the aggregator like the others (after the uncertainty heads of Shelmanov et
  al., EMNLP 2025, which feed attention features, top-k probabilities and a claim mask to a small transformer).

Parameters are initialised from a ``numpy`` generator (no global torch seed is touched).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from much_metric._cache import BoundedCache
from much_metric.learned._data import Batch

GEOMETRIC_EPS = 1e-5


def _init(module: nn.Module, rng: np.random.Generator) -> None:
    """Uniform(+-1/sqrt(fan_in)) matrices, zero biases, unit layer-norm scales."""
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            bound = 1.0 / np.sqrt(parameter.shape[-1]) if parameter.ndim > 1 else 0.0
            values = rng.uniform(-bound, bound, size=tuple(parameter.shape)) if bound else np.zeros(parameter.shape)
            if ".norm" in name and name.endswith("weight"):
                values = np.ones(parameter.shape)
            parameter.copy_(torch.from_numpy(values.astype(np.float32)))


class LinearModule(nn.Module):
    def __init__(self, n_inputs: int, *, rng: np.random.Generator) -> None:
        super().__init__()
        self.linear = nn.Linear(n_inputs, 1)
        _init(self, rng)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> token logits (B, T)."""
        return self.linear(inputs).squeeze(-1)


class SequenceModule(nn.Module):
    def __init__(self, n_inputs: int, *, rng: np.random.Generator, hidden: int = 32) -> None:
        super().__init__()
        self.gru = nn.GRU(n_inputs, hidden, batch_first=True)
        self.read_out = nn.Linear(hidden, 1)
        _init(self, rng)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        states, _ = self.gru(inputs)
        return self.read_out(states).squeeze(-1)


class ClaimHeadModule(nn.Module):
    """The claim head: a linear projection of each token's inputs, ``layers`` transformer encoder layers whose
    attention stays within the token's claim (``segments``; post-norm, feed-forward 2 x hidden, ReLU, no dropout so
    that training is deterministic), and a linear read-out per token. A claim's token logits therefore depend on
    that claim's tokens only (padding and other claims are masked out of every attention)."""

    def __init__(self, n_inputs: int, *, rng: np.random.Generator, hidden: int = 32, layers: int = 1,
                 heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.project = nn.Linear(n_inputs, hidden)
        self.encoder = nn.ModuleList([nn.TransformerEncoderLayer(hidden, heads, dim_feedforward=2 * hidden,
                                                                 dropout=0.0, batch_first=True)
                                      for _ in range(layers)])
        self.read_out = nn.Linear(hidden, 1)
        _init(self, rng)

    def forward(self, inputs: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, D) inputs and (B, T) claim ids (-1 = padding; None: one claim per sample) -> logits (B, T)."""
        batch, width = inputs.shape[:2]
        if segments is None:
            segments = torch.zeros((batch, width), dtype=torch.long)
        allowed = (segments[:, :, None] == segments[:, None, :]) & (segments[:, None, :] >= 0)
        allowed = allowed | torch.eye(width, dtype=torch.bool)[None]  # a padding position attends to itself
        mask = (~allowed).repeat_interleave(self.heads, dim=0)  # True = may not attend
        states = self.project(inputs)
        for layer in self.encoder:
            states = layer(states, src_mask=mask)
        return self.read_out(states).squeeze(-1)


def build(kind: Any, n_inputs: int, *, random_state: int, hyper: Mapping[str, Any] | None = None) -> nn.Module:
    """The torch module of ``kind`` (a :class:`~much_metric.learned.Kind`: its ``module`` class), initialised from
    ``random_state``, given every hyper-parameter its constructor names (:meth:`Kind.module_parameters`: the kind's
    recorded values, overridden by ``hyper``). The kind passes itself, so this module never imports the kind table."""
    parameters = kind.module_parameters({**kind.hyperparameters, **(hyper or {})})
    return kind.module_class()(n_inputs, rng=np.random.default_rng(random_state), **parameters)


#: Torch modules built from a detector's weights (keyed by the weights' identity, kept alive by the entry).
_MODULES: BoundedCache[tuple[Any, ...], tuple[Any, nn.Module]] = BoundedCache(8)


def forward(model: nn.Module, batch: Batch) -> torch.Tensor:
    """The model's token logits (B, T) of a padded batch; a segmented kind's module (its batches carry each token's
    claim id) gets them as its second argument."""
    inputs = torch.from_numpy(batch.inputs)
    if batch.segments is not None:
        return model(inputs, torch.from_numpy(batch.segments))
    return model(inputs)


def logits_of(kind: Any, weights: dict[str, np.ndarray], inputs: np.ndarray,
              layout: tuple[np.ndarray, np.ndarray | None], hyper: Mapping[str, Any]) -> np.ndarray:
    """Flat token logits ``(N_tokens,)`` of standardised ``inputs`` under the module of ``kind`` with ``weights``;
    ``layout`` = (sample ``offsets``, each token's claim id for the claim head or None); batched by length, padding
    never reaches a real token."""
    offsets, segments = layout
    from much_metric.learned import _data

    parameters = kind.module_parameters({**kind.hyperparameters, **hyper})
    key = (id(weights), kind.name, kind.module, inputs.shape[1], tuple(sorted(parameters.items())))

    def loaded() -> tuple[Any, nn.Module]:
        module = build(kind, inputs.shape[1], random_state=0, hyper=parameters)
        module.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()
                                if not k.startswith("input_")})
        return weights, module.eval()  # the weights are kept so that their id is not reused

    # the live monitor rescores at each closed claim: build the module once per weights
    module = _MODULES.get_or_compute(key, loaded, valid=lambda entry: entry[0] is weights)[1]
    prepared = _data.Prepared(inputs, offsets, np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64),
                              None, np.zeros(0, np.float32), [], segments)
    out = np.empty(len(inputs), dtype=np.float64)
    for samples in _data.batches(prepared, batch_size=64, rng=None):
        flat = token_logits(module, _data.batch(prepared, samples))
        out[_data.concatenated_ranges(offsets[samples], offsets[samples + 1] - offsets[samples])] = flat
    return out


def _segment_sum(values: torch.Tensor, segment: torch.Tensor, n: int) -> torch.Tensor:
    return torch.zeros(n, dtype=values.dtype).index_add(0, segment, values)


def claim_uncertainty(logits: torch.Tensor, batch: Batch, *, aggregator: str, stopword_handling: str
                      ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Claim uncertainties ``u_c`` (n_claims,) and, for the product aggregator, ``log(1 - u_c)`` (else None)."""
    z = logits.reshape(-1)[torch.from_numpy(batch.positions)]
    claim_of = torch.from_numpy(batch.claim_of)
    n_claims = len(batch.lengths)
    lengths = torch.from_numpy(batch.lengths.astype(np.float32))
    zero = torch.zeros(len(z), dtype=torch.bool) if batch.stopword is None else torch.from_numpy(batch.stopword)
    if stopword_handling == "exclude" and batch.stopword is not None:
        content = _segment_sum((~zero).float(), claim_of, n_claims)
        keep = ~zero | (content == 0)[claim_of]
        z, claim_of = z[keep], claim_of[keep]
        lengths = torch.where(content == 0, lengths, content)
        zero = torch.zeros(len(z), dtype=torch.bool)
    log_survival_token = torch.where(zero, torch.zeros_like(z), -nn.functional.softplus(z))  # log(1 - s_t)
    score = torch.where(zero, torch.zeros_like(z), torch.sigmoid(z))
    if aggregator == "mean":
        return _segment_sum(score, claim_of, n_claims) / lengths, None
    if aggregator == "max":
        return torch.zeros(n_claims).scatter_reduce(0, claim_of, score, reduce="amax", include_self=False), None
    log_survival = _segment_sum(log_survival_token, claim_of, n_claims)
    if aggregator == "product":
        return -torch.expm1(log_survival), log_survival
    return 1.0 - torch.pow(torch.exp(log_survival) + GEOMETRIC_EPS, 1.0 / lengths), None


def claim_loss(logits: torch.Tensor, batch: Batch, *, aggregator: str, stopword_handling: str) -> torch.Tensor:
    """Mean binary cross-entropy of the claim uncertainties against the labels (1 = hallucinated)."""
    uncertainty, log_certain = claim_uncertainty(logits, batch, aggregator=aggregator,
                                                 stopword_handling=stopword_handling)
    target = torch.from_numpy(batch.target)
    if log_certain is not None:  # product: exact log-space BCE, stable when a claim has many tokens
        log_certain = torch.clamp(log_certain, max=-1e-7)
        log_uncertain = torch.log(-torch.expm1(log_certain))
        return -(target * log_uncertain + (1.0 - target) * log_certain).mean()
    uncertainty = torch.clamp(uncertainty, 1e-7, 1.0 - 1e-7)
    return nn.functional.binary_cross_entropy(uncertainty, target)


def token_logits(model: nn.Module, batch: Batch) -> np.ndarray:
    """Flat token logits of a batch, in sample then token order (padding dropped)."""
    with torch.no_grad():
        logits = forward(model, batch)
    return logits.numpy()[batch.mask]
