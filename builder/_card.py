"""The markdown body of the exported dataset card (the YAML header is :mod:`much_dataset.card`'s).

The template is ``dataset_card.md`` at the repository root (``$name`` placeholders, :class:`string.Template`); the
body gets the real counts, the table of generation configs and, for Mu-SHROOM imports, the provenance and
attribution that say what the data is.
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from much_dataset import schema

__all__ = ["TEMPLATE_PATH", "BUILDER_VERSION", "card_body", "card_license", "card_title", "counts_table",
           "configs_table"]

TEMPLATE_PATH = Path(__file__).resolve().parent.parent / "dataset_card.md"
BUILDER_VERSION = "0.1.0"

MUCH_ATTRIBUTION = """MUCH: released by its authors under the license of `orailix/MUCH`; cite the MUCH paper
(Multilingual Claim Hallucination Benchmark). The questions and Wikipedia URLs come from Mu-SHROOM (CC-BY-4.0)."""

MUSHROOM_ATTRIBUTION = """The texts, questions and human hallucination annotations are the test split of **Mu-SHROOM**
(SemEval-2025 Task 3, `Helsinki-NLP/mu-shroom`), licensed **CC-BY-4.0**; this derived data is shared under the
same license. Cite: Raúl Vázquez et al., 2025, "SemEval-2025 Task 3: Mu-SHROOM, the Multilingual Shared Task on
Hallucinations and Related Observable Overgeneration Mistakes". Changes: outputs re-tokenised and teacher-forced
through the proxy model named above, segmented into claims, span annotations turned into claim labels."""

PROXY_PROVENANCE = """**What this data is.** Real text from real LLMs with real human labels, scored by a proxy model.
The `prompt` and `output` texts are the Mu-SHROOM test outputs of the models listed in the configs table (`source`),
and `labels` come from Mu-SHROOM's human annotations ($label_rule). The `output_tokens`, `logits_token_ids` and
`logits_values` are NOT those of the generating models: every output (plus the proxy's EOS text) was
teacher-forced through the proxy model **$observers** (one forward pass, softmax without temperature, top 24; where
the proxy ranked the real token below 24 it replaces the 24th candidate). It is a realistic, small, offline
stand-in for MUCH to exercise the toolkit; it is not MUCH and its scores are not the paper's. Built with
`python -m builder import-mushroom --observer <proxy> --labels $label_key` then `export`; the toolkit's embedded
sample (`much_dataset.load("sample")`) is regenerated bit for bit by `python scripts/data/make_sample.py`."""

_LABEL_RULES = {
    "hard": "Mu-SHROOM's majority `hard_labels` spans: a claim is -1 when its characters intersect one",
    "reference": "the reference's rule: a claim is -1 when its characters intersect a soft-label span that every "
                 "annotator marked (probability 1.0, span end inclusive)",
}


def counts_table(rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """Markdown table: rows and claims per split and language (trash counted but not published)."""
    lines = ["| split | " + " | ".join(schema.LANGUAGES)
             + " | rows | claims (EOS claim included) | hallucinated claims |",
             "|---" * (len(schema.LANGUAGES) + 4) + "|"]
    for split, split_rows in rows.items():
        if not split_rows:  # an empty split is not in the folder: a "0" row would only read as missing data
            continue
        per_lang = Counter(r[schema.LANG] for r in split_rows)
        claims = sum(len(r[schema.TOKEN_CHUNKS]) for r in split_rows)
        labelled = [r for r in split_rows if schema.LABELS in r]
        bad = sum(sum(1 for v in r[schema.LABELS] if v == schema.HALLUCINATED) for r in labelled)
        bad_text = str(bad) if labelled or not split_rows else "—"
        note = " (not published)" if split == "trash" else ""
        lines.append(f"| {split}{note} | " + " | ".join(str(per_lang.get(lang, 0)) for lang in schema.LANGUAGES)
                     + f" | {len(split_rows)} | {claims} | {bad_text} |")
    return "\n".join(lines)


def configs_table(configs: Sequence[Mapping[str, Any]], rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """Markdown table of the generation configs used, with their published row counts."""
    used = Counter(r[schema.GENERATION_CONFIG] for split in ("train", "test") for r in rows.get(split, ()))
    lines = ["| generation_config | model_name | source | observer | temperature | seed | top_p | top_k | "
             "max_new_tokens | rows |", "|---" * 10 + "|"]
    for config in sorted(configs, key=lambda c: (str(c.get("model_name")), -float(c.get("temperature", 0)))):
        cid = config[schema.GENERATION_CONFIG]
        config = {k: str(v).replace("|", "\\|") for k, v in config.items()}  # a "|" would split the cell
        lines.append(
            f"| `{cid}` | {config['model_name']} | {config.get('source_model', config['model_name'])} | "
            f"{config.get('observer_model', config['model_name'])} | {config['temperature']} | {config['seed']} | "
            f"{config['top_p']} | {config['top_k']} | {config['max_new_tokens']} | {used.get(cid, 0)} |")
    return "\n".join(lines)


def card_license(configs: Sequence[Mapping[str, Any]], *, label_judge: str) -> str | None:
    """The card's ``license``: CC-BY-4.0 for data derived from Mu-SHROOM; None (MUCH's own, set on the hub)."""
    return "cc-by-4.0" if label_judge == "mushroom" or any("source_model" in c for c in configs) else None


def card_title(configs: Sequence[Mapping[str, Any]], *, label_judge: str) -> str:
    """The card's title and ``pretty_name``: a Mu-SHROOM-derived sample must not call itself MUCH."""
    if label_judge == "mushroom" or any("source_model" in c for c in configs):
        observers = any(c.get("observer_model") and c.get("observer_model") != c.get("source_model") for c in configs)
        return "MUCH-format sample built from Mu-SHROOM (proxy-scored)" if observers else "Mu-SHROOM in MUCH format"
    return "MUCH: Multilingual Claim Hallucination Benchmark"


def card_body(rows: Mapping[str, Sequence[Mapping[str, Any]]], configs: Sequence[Mapping[str, Any]], *,
              label_judge: str, label_rule: str | None = None, template: str | None = None) -> str:
    """The card body (markdown) from the template, with real counts and configs."""
    if template is None:
        template = TEMPLATE_PATH.read_text(encoding="utf-8")
    observers = sorted({c["observer_model"] for c in configs
                        if c.get("observer_model") and c.get("observer_model") != c.get("source_model")})
    is_mushroom = label_judge == "mushroom" or any("source_model" in c for c in configs)
    title = card_title(configs, label_judge=label_judge)
    if is_mushroom:
        provenance = string.Template(PROXY_PROVENANCE).safe_substitute(
            observers=", ".join(observers) or "(the generating models themselves)",
            label_rule=_LABEL_RULES.get(label_rule or "", "span annotations"),
            label_key=label_rule or "reference") if observers else (
            "Mu-SHROOM test outputs teacher-forced through the models that generated them "
            "(the reference's Mu-SHROOM import, docs/reference-behaviour.md#mushroom-import); "
            "labels from Mu-SHROOM's human annotations.")
        attribution = MUSHROOM_ATTRIBUTION
    else:
        provenance = (f"Generations sampled by the configs below; claim labels from the LLM judge `{label_judge}` "
                      "(kept only where the two judges agree), human labels on the test split.")
        attribution = MUCH_ATTRIBUTION
    return string.Template(template).safe_substitute(
        title=title, builder_version=BUILDER_VERSION, provenance=provenance, counts_table=counts_table(rows),
        configs_table=configs_table(configs, rows), attribution=attribution,
        splits=", ".join(f"`{split}`" for split in ("train", "test") if rows.get(split)) or "none",
    )
