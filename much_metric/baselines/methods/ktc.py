"""KTC, Kernel Token Contradiction: the reference's sixth method (docs/reference-behaviour.md#signals; config IDs
docs/reference-behaviour.md#config-ids).

For every output token, the ``delta`` most likely candidates form a graph whose edge (a, b) says how much a and b do
*not* contradict each other: 1 when one raw vocabulary string is a prefix of the other (``prefix_entail``), else
``1 - |N_a & N_b| / min(|N_a|, |N_b|)`` with ``N_x`` the ``nu`` most frequent corpus neighbours of token x (1 when a
set is empty) -- two tokens that appear between the same neighbours can replace each other, so sampling one rather
than the other is a real choice. The heat kernel of that graph, weighted by the candidate probabilities, has a
normalised von Neumann entropy: the token's uncertainty (higher = more likely hallucinated).

Signal names: ``ktc_{config_id}`` (the reference's, for the 55 configs it published or any :class:`KTCConfig`
registered with :func:`register_config`), the alias ``ktc`` (nu=4, tau=0.3, the best "auto" config, stored as
``ktc_RYxmoyp1awYParfCjjxgnQ``) and ``ktc_nu{nu}_tau{tau}`` (heat kernel, scale normalisation, other fields at their
defaults; stored under the reference ID too, so files are interchangeable with the reference's).

Differences from the reference (docs/reference-behaviour.md#ktc-options), all documented:

* ``token_position`` selects statistics: the scores are computed only with statistics counted with that position
  (0 = left+right, 1 = right); the reference never passed it to the adjacency and always used position 0
  (``reference=True`` restores that). ``sigma`` belongs to the reference's NLI adjacency, which the paper does not
  use: it is part of the ID and unused, as there.
* ``language_specific=True`` (per-language statistics) is not supported: a clear error, not a silent fallback.
* float64 instead of float32; ties among neighbours with equal counts go to the smaller id (see
  :mod:`much_metric.baselines.neighbours`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset.params import Interval, InvalidParameterError, check_param
from much_metric.baselines._arrays import TokenArrays, per_sample
from much_metric.baselines._ktc_kernels import (
    KERNELS,
    NORMALIZATIONS,
    check_device,
    heat_kernel_taylor,
    kernel_settings,
    ktc_scores_of_built_adjacency,
)
from much_metric.baselines.neighbours import NeighbourStats, PerSampleNeighbours, load_neighbours
from much_metric.baselines.registry import Baseline, Requirements

__all__ = [
    "KTCConfig",
    "KTC_DEFAULT",
    "KTC_NAMED_CONFIGS",
    "KTC_REFERENCE_CONFIGS",
    "SAMPLE_NEIGHBOURS",
    "default_neighbours",
    "heat_kernel_taylor",
    "ktc",
    "ktc_adjacency",
    "register_config",
]

#: The statistics shipped for the embedded sample (SmolLM2 tokenizer); ``scripts/data/make_sample_neighbours.py`` says
#: which corpus they count and rebuilds them.
SAMPLE_NEIGHBOURS = Path(__file__).resolve().parents[2] / "data" / "neighbours" / "smollm2.npz"


@dataclasses.dataclass(frozen=True)
class KTCConfig:
    """The reference's ``KTCConfig``: field names, order and defaults are part of its ID
    (docs/reference-behaviour.md#config-ids)."""

    kernel_method: str = "heat"
    normalization_method: str = "scale"
    prefix_entail: bool = True
    language_specific: bool = False
    token_position: int = 0
    delta: int = 24
    nu: int = 8
    sigma: int = 3
    tau: float = 0.3
    alpha: float = 0.5

    def __post_init__(self) -> None:
        if self.kernel_method not in KERNELS:
            raise ValueError(f"kernel_method must be one of {KERNELS}, got {self.kernel_method!r}")
        if self.normalization_method not in NORMALIZATIONS:
            raise ValueError(f"normalization_method must be one of {NORMALIZATIONS}, got "
                             f"{self.normalization_method!r}")
        for name in ("prefix_entail", "language_specific"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise InvalidParameterError(f"{name} must be a bool, got {getattr(self, name)!r}")
            object.__setattr__(self, name, bool(getattr(self, name)))
        for name, low in (("token_position", 0), ("delta", 2), ("nu", 1), ("sigma", -1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
            object.__setattr__(self, name, int(value))
        # str() of the value enters the ID: 0 and 0.0 would differ, so the float fields are floats (ALPHA=0 -> 0.0).
        for name in ("tau", "alpha"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
                raise InvalidParameterError(f"{name} must be a number, got {value!r}")
            object.__setattr__(self, name, float(value))
        check_param("tau", self.tau, Interval(numbers.Real, 0, math.inf, closed="left"), owner="KTCConfig")
        check_param("alpha", self.alpha, Interval(numbers.Real, 0, 1), owner="KTCConfig")

    @property
    def id(self) -> str:
        """Every field, sorted by name, as ``name=str(value)\\n`` lines; MD5; URL-safe base64; 22 characters."""
        text = "".join(f"{f.name}={getattr(self, f.name)}\n"
                       for f in sorted(dataclasses.fields(self), key=lambda f: f.name))
        return base64.urlsafe_b64encode(hashlib.md5(text.encode("utf-8")).digest()).decode("ascii")[:22]

    @property
    def signal_name(self) -> str:
        return f"ktc_{self.id}"


#: The reference's 55 published configs (``output/ktc_configs``): the 30-config grid nu x tau (heat, scale) and the
#: "comb" ablation nu x alpha at tau = 0.3 (its script ``3b_ktc_signals.sh``).
KTC_REFERENCE_CONFIGS: tuple[KTCConfig, ...] = (
    *(KTCConfig(nu=nu, tau=tau) for nu in (3, 4, 5, 6, 8) for tau in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7)),
    *(KTCConfig(normalization_method="comb", nu=nu, tau=0.3, alpha=alpha)
      for nu in (3, 4, 5, 6, 8) for alpha in (0.0, 0.25, 0.5, 0.75, 1.0)),
)
#: The 8 configs the reference's notebook names, as (nu, tau).
KTC_NAMED_CONFIGS: tuple[KTCConfig, ...] = tuple(
    KTCConfig(nu=nu, tau=tau) for nu, tau in ((3, 0.2), (3, 0.3), (4, 0.2), (4, 0.3), (4, 0.4), (5, 0.2), (5, 0.3),
                                              (6, 0.2)))
#: ``ktc``: the best "auto" config (ROC-AUC 0.7524 in the reference, docs/reference-behaviour.md#reference-numbers).
KTC_DEFAULT = KTCConfig(nu=4, tau=0.3)

_KNOWN: dict[str, KTCConfig] = {config.id: config for config in KTC_REFERENCE_CONFIGS}


def register_config(config: KTCConfig) -> str:
    """Make ``ktc_<config.id>`` a known signal name; returns that name."""
    if not isinstance(config, KTCConfig):
        raise InvalidParameterError(f"expected a KTCConfig, got {type(config).__name__}")
    _KNOWN[config.id] = config
    return config.signal_name


def _config_label(params: Any) -> str:
    """``KTC-4-0.3`` (the ``ktc_nu{nu}_tau{tau}`` label) for a config that differs from the defaults only in nu and
    tau, else ``KTC <config id>``."""
    config_id = str(params["config_id"])
    config = _KNOWN.get(config_id)
    if config is not None and KTCConfig(nu=config.nu, tau=config.tau) == config:
        return f"KTC-{config.nu}-{config.tau:g}"
    return f"KTC {config_id}"


def _config_of(config_id: str) -> KTCConfig:
    if config_id not in _KNOWN:
        raise ValueError(f"unknown KTC config id {config_id!r}: the reference's 55 configs are known; register "
                         "another with much_metric.baselines.methods.ktc.register_config(KTCConfig(...))")
    return _KNOWN[config_id]


def ktc_adjacency(candidate_ids: Any, stats: NeighbourStats, *, nu: int, prefix_entail: bool = True) -> np.ndarray:
    """KTC's adjacency of every token's candidates (docs/reference-behaviour.md#signals), vectorised.

    Parameters
    ----------
    candidate_ids : array-like of shape (n_tokens, delta), integer
    stats : NeighbourStats
        Of the tokenizer that produced the ids.
    nu : int
        Size of the neighbour sets.
    prefix_entail : bool, default True
        Entry 1 when one raw vocabulary string is a prefix of the other (needs ``stats.vocabulary``).

    Returns
    -------
    ndarray of shape (n_tokens, delta, delta), float64
        Symmetric, unit diagonal; off-diagonal ``1 - |N_a & N_b| / min(|N_a|, |N_b|)`` (1 if a set is empty).
    """
    ids = np.asarray(candidate_ids, dtype=np.int64)
    if ids.ndim != 2:
        raise ValueError(f"candidate_ids must have shape (n_tokens, delta), got {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= stats.vocab_size):
        token = int(np.argwhere((ids < 0) | (ids >= stats.vocab_size))[0][0])
        raise ValueError(f"token {token}: candidate ids {ids[token].tolist()} fall outside the {stats.vocab_size} ids "
                         f"of these neighbour statistics ({stats.tokenizer}): wrong tokenizer?")
    n, delta = ids.shape
    neighbours = stats.top(nu)[ids]  # (n, delta, nu), -1 padded; the ids of one neighbour set are distinct
    sizes = (neighbours >= 0).sum(axis=2)
    overlap = _overlap_counts(neighbours)
    # 1 - overlap / min(|N_a|, |N_b|) from a (nu + 1) x (nu + 1) table (1 where a set is empty): the same float
    # division as per pair, without a division per entry.
    width = neighbours.shape[2] + 1
    small, count = np.meshgrid(np.arange(width), np.arange(width), indexing="ij")
    table = np.where(small > 0, 1.0 - count / np.maximum(small, 1), 1.0).ravel()
    sizes = sizes.astype(np.int16 if width < 128 else np.int64)
    code = np.minimum(sizes[:, :, None], sizes[:, None, :])
    code *= width
    code += overlap
    adjacency = table.take(code)
    if prefix_entail:
        rank, last = stats.prefix_ranges
        r, end = rank[ids], last[ids]
        a_prefix_of_b = (r[:, :, None] <= r[:, None, :]) & (r[:, None, :] <= end[:, :, None])
        np.putmask(adjacency, a_prefix_of_b | a_prefix_of_b.transpose(0, 2, 1), 1.0)
    adjacency[:, np.arange(delta), np.arange(delta)] = 1.0
    return adjacency


def _overlap_counts(neighbours: np.ndarray) -> np.ndarray:
    """``|N_a & N_b|`` for every candidate pair of every token, from ``(n, delta, nu)`` -1 padded neighbour ids.

    Compares the nu x nu slot pairs (cheaper than sets or sorting for small nu). Padding -1 on one side and -2 (or
    -3 for the filler slots) on the other never matches. Because the ids of one set are distinct, slot ``k`` of
    ``N_a`` matches at most one slot of ``N_b``: for nu <= 8 the nu match flags of a pair, padded to 4 or 8 bytes,
    are read as one integer whose non-zero-ness is that slot's contribution.
    """
    n, delta, nu = neighbours.shape
    other = np.where(neighbours >= 0, neighbours, -2)
    overlap = np.zeros((n, delta, delta), dtype=np.int8 if nu < 128 else np.int64)
    word = np.uint32 if nu <= 4 else np.uint64 if nu <= 8 else None
    if word is None:
        for k in range(nu):
            left = neighbours[:, :, None, k]
            for m in range(nu):
                overlap += left == other[:, None, :, m]
        return overlap
    width = np.dtype(word).itemsize
    if nu < width:
        other = np.concatenate([other, np.full((n, delta, width - nu), -3, dtype=other.dtype)], axis=2)
    for k in range(nu):
        flags = neighbours[:, :, None, None, k] == other[:, None, :, :]  # (n, delta, delta, width), contiguous
        overlap += flags.view(word)[..., 0] != 0
    return overlap


def _check_stats(stats: Any, config: KTCConfig, reference: bool) -> NeighbourStats:
    if isinstance(stats, str | Path):
        stats = load_neighbours(stats)
    if not isinstance(stats, NeighbourStats):
        raise InvalidParameterError(f"neighbours must be NeighbourStats, a path, a hub id or PerSampleNeighbours, got "
                        f"{type(stats).__name__}")
    if not reference and stats.position != config.token_position:
        raise ValueError(f"KTC config {config.id} has token_position={config.token_position} but the neighbour "
                         f"statistics of {stats.tokenizer} were counted with position={stats.position} (pass "
                         "reference=True to ignore token_position as the reference does)")
    return stats


_TOKENS_PER_BLOCK = 4096


def _ktc_flat(arrays: TokenArrays, config: KTCConfig, neighbours: Any, *, reference: bool = False,
              device: str | None = None) -> np.ndarray:
    if config.language_specific:
        raise ValueError("KTC with language_specific=True needs per-language statistics, which this toolkit does not "
                         "support; use language_specific=False (the paper's configs)")
    if neighbours is None:
        raise ValueError("KTC needs token-neighbour statistics (neighbours=...): see `much neighbours`")
    arrays = arrays.sorted_by_probability()
    if not 2 <= config.delta <= arrays.probabilities.shape[1]:
        raise ValueError(f"KTC delta={config.delta} needs at least that many stored candidates, the data has "
                         f"{arrays.probabilities.shape[1]}")
    if isinstance(neighbours, PerSampleNeighbours):
        keys = []
        for gid in arrays.generation_ids:
            if gid not in neighbours.key_of:
                raise ValueError(f"generation_id={gid!r}: no neighbour statistics are known for this sample")
            keys.append(neighbours.key_of[gid])
        groups = {key: np.flatnonzero(np.asarray([k == key for k in keys])) for key in dict.fromkeys(keys)}
        for key in groups:
            if key not in neighbours.stats:
                raise ValueError(f"no neighbour statistics for {key!r} (needed by {len(groups[key])} samples)")
        out = np.empty(arrays.n_tokens)
        for key, samples in groups.items():
            out[arrays.token_index(samples)] = _ktc_flat(arrays.select(samples), config, neighbours.stats[key],
                                                         reference=reference, device=device)
        return out
    stats = _check_stats(neighbours, config, reference)
    if config.prefix_entail:
        _ = stats.prefix_ranges  # built once here, not by each thread

    settings = kernel_settings(tau=config.tau, kernel=config.kernel_method, normalization=config.normalization_method,
                               alpha=config.alpha, device=device)

    def block(start: int) -> np.ndarray:
        part = slice(start, start + _TOKENS_PER_BLOCK)
        try:
            adjacency = ktc_adjacency(arrays.candidate_ids[part, : config.delta], stats, nu=config.nu,
                                      prefix_entail=config.prefix_entail)
            return ktc_scores_of_built_adjacency(arrays.probabilities[part, : config.delta], adjacency, settings)
        except ValueError as error:
            text = str(error)
            if text.startswith("token "):  # name the sample instead of the block's token index
                index, _, rest = text[len("token "):].partition(":")
                raise ValueError(f"{arrays.where(start + int(index))}:{rest}") from None
            raise

    starts = range(0, arrays.n_tokens, _TOKENS_PER_BLOCK)
    workers = min(len(starts), os.cpu_count() or 1)
    if workers <= 1:
        parts = [block(start) for start in starts]
    else:
        # LAPACK and most numpy kernels release the GIL: blocks run in parallel on the available cores.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(block, starts))
    return np.concatenate(parts) if parts else np.zeros(0)


def ktc(dataset: Any, config: KTCConfig | None = None, *, neighbours: Any, reference: bool = False,
        device: str | None = None) -> list[np.ndarray]:
    """KTC token scores of a split.

    Parameters
    ----------
    dataset : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
    config : KTCConfig, optional
        Default :data:`KTC_DEFAULT` (nu=4, tau=0.3).
    neighbours : NeighbourStats, PerSampleNeighbours, path or hub id
        Statistics of the generating LLM's tokenizer (one per sample with :class:`PerSampleNeighbours`).
    reference : bool, default False
        Ignore ``token_position`` as the reference does (any statistics are used).
    device : str, optional
        Torch device (e.g. ``"cuda"``) for the batched eigen-decomposition of the kernels, the floor of KTC's cost;
        None (default) computes everything with numpy on the CPU. Same scores to float64 rounding
        (``benchmarks/bench_gpu.py`` compares both on a GPU).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1]; higher = more uncertain.
    """
    config = KTC_DEFAULT if config is None else config
    return per_sample(_ktc_flat, dataset, config, neighbours, reference=reference, device=check_device(device))


def default_neighbours(dataset: Any) -> NeighbourStats | None:
    """The shipped SmolLM2 statistics when ``dataset`` is the embedded sample (``"sample"`` or a split whose
    ``generation_config`` values are all the sample's), else None."""
    if not SAMPLE_NEIGHBOURS.is_file():
        return None
    stats = NeighbourStats.from_file(SAMPLE_NEIGHBOURS)
    if isinstance(dataset, str):
        return stats if dataset == "sample" else None
    configs = set(stats.meta.get("generation_configs", ()))
    column = None
    if hasattr(dataset, "column_names") and "generation_config" in dataset.column_names:
        column = dataset["generation_config"]
        column = column.to_pylist() if hasattr(column, "to_pylist") else list(column)
    elif isinstance(dataset, list) and dataset and all(isinstance(row, dict) for row in dataset):
        column = [row.get("generation_config") for row in dataset]
    if column and configs and set(column) <= configs:
        return stats
    return None


def _compute_config(arrays: TokenArrays, *, config_id: str, neighbours: Any = None) -> np.ndarray:
    return _ktc_flat(arrays, _config_of(config_id), neighbours)


def _compute_alias(arrays: TokenArrays, *, neighbours: Any = None) -> np.ndarray:
    return _ktc_flat(arrays, KTC_DEFAULT, neighbours)


def _compute_nu_tau(arrays: TokenArrays, *, nu: int, tau: float, neighbours: Any = None) -> np.ndarray:
    return _ktc_flat(arrays, KTCConfig(nu=nu, tau=tau), neighbours)


def _check_nu_tau(params: dict[str, Any]) -> None:
    KTCConfig(nu=params["nu"], tau=params["tau"])


_DESCRIPTION = ("normalised von Neumann entropy of the heat kernel of the top-delta candidates' neighbour-overlap "
                "graph, scaled by their probabilities (reference KTC, docs/reference-behaviour.md#signals)")

BASELINES = (
    Baseline(
        # the label of the config it stores (KTC-4-0.3), so `ktc` as asked and as stored is one name everywhere
        name="ktc", compute=_compute_alias, display=f"KTC-{KTC_DEFAULT.nu}-{KTC_DEFAULT.tau:g}", order=60,
        requirements=Requirements(top_k=KTC_DEFAULT.delta, resources=("neighbours",)),
        signal_name=lambda name, params, resources: KTC_DEFAULT.signal_name,
        description=f"KTC nu=4, tau=0.3 (stored as {KTC_DEFAULT.signal_name}): {_DESCRIPTION}",
    ),
    Baseline(
        name="ktc_nu{nu}_tau{tau}", compute=_compute_nu_tau, display="KTC-{nu}-{tau}",
        requirements=Requirements(top_k=KTCConfig().delta, resources=("neighbours",)),
        params={"tau": r"[0-9]+(?:\.[0-9]+)?"}, order=61, defaults=(), check=_check_nu_tau,
        signal_name=lambda name, params, resources: KTCConfig(nu=params["nu"], tau=params["tau"]).signal_name,
        description="KTC with nu neighbours and diffusion time tau, other fields at their defaults",
    ),
    Baseline(
        name="ktc_{config_id}", compute=_compute_config, display=_config_label,
        params={"config_id": r"[A-Za-z0-9_-]{22}"}, order=62, defaults=(),
        requirements=lambda params: Requirements(top_k=_config_of(str(params["config_id"])).delta,
                                                 resources=("neighbours",)),
        check=lambda params: _config_of(str(params["config_id"])) and None,
        description="KTC by the reference's config id (the 55 published configs, or register_config)",
    ),
)
