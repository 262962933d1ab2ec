"""filter: MUCH's sample filter (docs/reference-behaviour.md#filters): judge disagreement, sampled token outside the top
24, no EOS -> trash.

Every generation that has a segmentation gets one row in ``filter.jsonl``: ``generation_id, split, reason``.
``reason`` is ``null`` for kept samples, else the first rule that fails, checked in this order:

* ``no_eos`` -- the last output token is not an EOS/EOT id of the generating model (cut at max_new_tokens);
* ``outside_top_k`` -- some sampled token is not among the stored top-24 candidates (a logits row longer than 24,
  or the sampled id missing from its row);
* ``missing_labels`` -- a judge has no labels for the sample (its ``annotate`` call failed or never ran);
* ``judge_disagreement`` -- the judges' label lists differ on at least one claim.

The judges are ``--judges`` when given, else every ``labels.<key>.jsonl`` in ``--out`` (what ``annotate`` wrote, by
whatever names ``--judge MODEL=KEY`` gave them); fewer than two, or a named judge without its file, is refused with
the label files present and the flag to pass, and an empty label file is refused naming it and its judge (exit 2). A
run that keeps no sample at all exits 1 (its counts are still written), so a pipeline cannot trash every row in
silence.

Kept samples go to ``test`` when annotator ``an1`` labelled them (``human.an1.jsonl``), else ``train`` (the
reference's export rule, docs/reference-behaviour.md#hub-columns). The file is a pure function of its inputs and is
rewritten atomically on every
run, so re-run ``filter`` after ``human`` to move the human-labelled samples to ``test``. The counts the paper reports
(kept, per reason) and Cohen's kappa between the two judges go to ``filter.report.json`` and stdout. Kappa is over
claims: every non-EOS claim of every sample that both judges labelled (before filtering, the paper's figure 3a; the
EOS claim is excluded because its label is +1 by construction).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from builder.errors import BuilderError
from builder.filter_labels import label_files, read_label_records
from builder.store import atomic_write_text, read_store
from much_dataset.schema import GENERATION_CONFIG, GENERATION_ID, LOGITS_TOKEN_IDS, OUTPUT_TOKENS, TOP_K

__all__ = [
    "KNOWN_EOS_IDS",
    "REASONS",
    "EosResolver",
    "sampled_outside_top_k",
    "classify",
    "judge_kappa",
    "label_files",
    "pick_judges",
    "add_arguments",
    "run",
]

#: EOS/EOT ids of the generating models, so the no-EOS rule works offline (docs/reference-behaviour.md#sampling,
#: #segmentation). Verified against the
#: models' tokenizers: Llama-3 <|end_of_text|> 128001, <|eom_id|> 128008, <|eot_id|> 128009; Ministral </s> 2;
#: Gemma-3 <eos> 1, <end_of_turn> 106; SmolLM2 <|endoftext|> 0, <|im_end|> 2.
KNOWN_EOS_IDS: dict[str, tuple[int, ...]] = {
    "meta-llama/Llama-3.2-3B-Instruct": (128001, 128008, 128009),
    "meta-llama/Llama-3.1-8B-Instruct": (128001, 128008, 128009),
    "mistralai/Ministral-8B-Instruct-2410": (2,),
    "google/gemma-3-4b-it": (1, 106),
    "HuggingFaceTB/SmolLM2-135M-Instruct": (0, 2),
}
# Special tokens that end a turn in the reference's get_known_eos_or_eot (docs/reference-behaviour.md#segmentation),
# Gemma's <eos>, ChatML's.
_EOT_NAMES = ("<end_of_turn>", "<|eot_id|>", "<EOT>", "<end>", "<eos>", "<|im_end|>", "<|endoftext|>")

REASONS = ("no_eos", "outside_top_k", "missing_labels", "judge_disagreement")
#: The paper's two judges (what ``annotate`` names them by default).
DEFAULT_JUDGES = ("gpt-4o", "gpt-4.1")


def sampled_outside_top_k(row: Mapping[str, Any], *, top_k: int = TOP_K) -> bool:
    """Whether any sampled token is not among the ``top_k`` stored candidates of its position.

    True when a ``logits_token_ids`` row is longer than ``top_k`` (the generator kept extra candidates to reach the
    sampled one) or the sampled id is absent from the first ``top_k`` ids of its row.
    """
    rows = row[LOGITS_TOKEN_IDS]
    tokens = row[OUTPUT_TOKENS]
    if len(rows) != len(tokens):
        raise ValueError(f"generation_id={row.get(GENERATION_ID)!r}: field {LOGITS_TOKEN_IDS!r} has {len(rows)} rows "
                         f"but {OUTPUT_TOKENS!r} has {len(tokens)} tokens")
    for candidates, token in zip(rows, tokens, strict=True):
        if len(candidates) > top_k or token not in candidates[:top_k]:
            return True
    return False


def _tokenizer_eos_ids(spec: str) -> tuple[int, ...]:
    """EOS/EOT ids of a tokenizer: its ``eos_token_id`` and the ids of the known end-of-turn tokens it has."""
    path = Path(spec)
    if path.is_file() and path.suffix == ".json":  # a bare tokenizer.json: no eos_token setting, names only
        from tokenizers import Tokenizer

        vocab = Tokenizer.from_file(str(path)).get_vocab(with_added_tokens=True)
        names = ("</s>", "<|end_of_text|>", "<|eom_id|>", *_EOT_NAMES)
        return tuple(dict.fromkeys(vocab[name] for name in names if name in vocab))
    from much_metric.models import load_tokenizer

    tokenizer = load_tokenizer(spec)
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    vocab = tokenizer.get_vocab()
    ids += [vocab[name] for name in _EOT_NAMES if name in vocab]
    return tuple(dict.fromkeys(int(i) for i in ids))


class EosResolver:
    """EOS ids per generation: explicit ``eos_ids`` > ``tokenizer`` > the config's model in :data:`KNOWN_EOS_IDS`.

    ``configs`` maps a ``generation_config`` ID to its ``configs.jsonl`` row (for ``model_name``). A row carrying an
    ``ends_with_eos`` flag is trusted as is, and so is ``generate``'s ``finished`` (the engine stopped at the model's
    own EOS) unless ``eos_ids`` or ``tokenizer`` is given, so a new model's rows need no EOS table entry.
    """

    def __init__(self, *, eos_ids: Sequence[int] | None = None, tokenizer: str | None = None,
                 configs: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._fixed = tuple(eos_ids) if eos_ids else None
        self._tokenizer = tokenizer  # loaded on first need: most rows come from a model of the table
        self._configs = configs or {}

    def ids_for(self, row: Mapping[str, Any]) -> tuple[int, ...]:
        if self._fixed is None and self._tokenizer is not None:
            self._fixed = _tokenizer_eos_ids(self._tokenizer)
        if self._fixed is not None:
            return self._fixed
        config = self._configs.get(row.get(GENERATION_CONFIG, ""), {})
        model = config.get("model_name")
        if model in KNOWN_EOS_IDS:
            return KNOWN_EOS_IDS[model]
        raise ValueError(f"generation_id={row.get(GENERATION_ID)!r}: cannot tell the EOS ids of field "
                         f"{GENERATION_CONFIG!r}={row.get(GENERATION_CONFIG)!r} (model {model!r}); pass --eos-ids or "
                         "--tokenizer")

    def ends_with_eos(self, row: Mapping[str, Any]) -> bool:
        if "ends_with_eos" in row:
            return bool(row["ends_with_eos"])
        if isinstance(row.get("finished"), bool) and self._fixed is None and self._tokenizer is None:
            return row["finished"]  # generate's record: ended with the generating model's own EOS
        tokens = row[OUTPUT_TOKENS]
        return bool(tokens) and int(tokens[-1]) in self.ids_for(row)


def classify(row: Mapping[str, Any], judge_labels: Sequence[Sequence[int] | None],
             ends_with_eos: Callable[[Mapping[str, Any]], bool]) -> str | None:
    """The trash reason of one generation (see the module docstring), or ``None`` when it is kept."""
    if not ends_with_eos(row):
        return "no_eos"
    if sampled_outside_top_k(row):
        return "outside_top_k"
    if any(labels is None for labels in judge_labels):
        return "missing_labels"
    first = list(judge_labels[0])
    if any(list(labels) != first for labels in judge_labels[1:]):
        return "judge_disagreement"
    return None


def judge_kappa(pairs: Iterable[tuple[Sequence[int], Sequence[int]]]) -> tuple[float, int]:
    """Cohen's kappa over the non-EOS claims of label-list pairs (the last entry of each list is dropped).

    Returns ``(kappa, n_claims)``; kappa is NaN when there is no claim or when it is undefined (both annotators
    used one and the same class: 0/0). Pairs of different lengths are an error.
    """
    import warnings

    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import cohen_kappa_score

    first: list[int] = []
    second: list[int] = []
    for a, b in pairs:
        if len(a) != len(b):
            raise ValueError(f"label lists of different lengths: {len(a)} vs {len(b)}")
        first.extend(a[:-1])
        second.extend(b[:-1])
    if not first:
        return float("nan"), 0
    with warnings.catch_warnings():  # undefined kappa is reported as NaN, documented above
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        kappa = cohen_kappa_score(np.asarray(first), np.asarray(second), labels=[-1, 1])
    return float(kappa), len(first)


def pick_judges(out: Path, judges: Sequence[str] | None) -> list[str]:
    """The judges whose labels must agree: ``judges`` when given (each with its file), else every label file of
    ``out``; :class:`BuilderError` naming the files present and ``--judges`` otherwise."""
    present = label_files(out)
    names = ", ".join(path.name for path in present.values()) or "none"
    if judges:
        missing = [judge for judge in judges if judge not in present]
        if missing:
            raise BuilderError(f"--judges {' '.join(judges)}: no labels.{missing[0]}.jsonl in {out} (label files "
                               f"present: {names}); pass --judges with the keys `annotate` wrote")
        return list(dict.fromkeys(judges))
    if len(present) < 2:
        raise BuilderError(f"filter needs the labels of at least two judges; label files in {out}: {names}. Run "
                           "`python -m builder annotate` with two --judge, or pass --judges KEY KEY")
    return [*(j for j in DEFAULT_JUDGES if j in present), *(j for j in present if j not in DEFAULT_JUDGES)]


def load_labels(out: Path, name: str, *, prefix: str = "labels", rows: Collection[str] | None = None,
                required: bool = False) -> dict[str, list[int]]:
    """``labels`` per generation_id from ``<prefix>.<name>.jsonl``, checked (:mod:`builder.filter_labels`: ``rows``
    the generation_ids they must be among, ``required`` an existing file must hold a record)."""
    records = read_label_records(out / f"{prefix}.{name}.jsonl", rows=rows, required=required)
    return {gid: list(record["labels"]) for gid, record in records.items()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judges", nargs="+", default=None,
                        help="judge keys whose labels.<key>.jsonl must agree (default: every labels.<key>.jsonl in "
                             "--out, as annotate wrote them; at least two)")
    parser.add_argument("--test-annotator", default="an1",
                        help="kept samples labelled by this human annotator go to the test split (default an1)")
    parser.add_argument("--eos-ids", type=int, nargs="+", default=None,
                        help="EOS/EOT ids of the generating model (default: from configs.jsonl's model_name)")
    parser.add_argument("--tokenizer", default=None, help="tokenizer to read the EOS/EOT ids from")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.shard not in (None, "0/1"):
        raise BuilderError("filter is a whole-dataset step (kappa, counts): run it without --shard")
    if args.judges is not None and len(set(args.judges)) < 2:
        raise BuilderError("--judges needs at least two judge keys")
    judges = pick_judges(out, args.judges)
    configs = {r[GENERATION_CONFIG]: r for r in read_store(out / "configs.jsonl")}
    resolver = EosResolver(eos_ids=args.eos_ids, tokenizer=args.tokenizer, configs=configs)
    n_chunks = {r[GENERATION_ID]: len(r["token_chunks"]) for r in read_store(out / "segments.jsonl")}
    labels = {judge: load_labels(out, judge, rows=n_chunks, required=True) for judge in judges}
    for judge, rows in labels.items():
        for gid, values in rows.items():
            if gid in n_chunks and len(values) != n_chunks[gid]:
                raise ValueError(f"labels.{judge}.jsonl: generation_id={gid!r}: field 'labels' has {len(values)} "
                                 f"entries but the sample has {n_chunks[gid]} claims")
    human_test = set(load_labels(out, args.test_annotator, prefix="human", rows=n_chunks))

    rows, counts = [], Counter()
    for generation in read_store(out / "generations.jsonl"):
        gid = generation[GENERATION_ID]
        if gid not in n_chunks:
            continue
        reason = classify(generation, [labels[j].get(gid) for j in judges], resolver.ends_with_eos)
        split = "trash" if reason else ("test" if gid in human_test else "train")
        rows.append({GENERATION_ID: gid, "split": split, "reason": reason})
        counts[reason or split] += 1
    rows.sort(key=lambda r: r[GENERATION_ID])
    atomic_write_text(out / "filter.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))

    first, second = judges[:2]
    both = [(labels[first][g], labels[second][g]) for g in sorted(set(labels[first]) & set(labels[second]))]
    kappa, n_claims = judge_kappa(both)
    report = {
        "judges": judges,
        "samples": len(rows),
        "kept": counts["train"] + counts["test"],
        "train": counts["train"],
        "test": counts["test"],
        "trash": {reason: counts[reason] for reason in REASONS},
        # JSON has no NaN: an undefined kappa (no claim, or one class only) is null
        "kappa": {"judges": [first, second], "value": kappa if np.isfinite(kappa) else None, "claims": n_claims,
                  "samples": len(both), "eos_claim": "excluded"},
    }
    atomic_write_text(out / "filter.report.json", json.dumps(report, indent=2, allow_nan=False) + "\n")
    print(f"filter: {report['kept']}/{report['samples']} kept (train {report['train']}, test {report['test']}); "
          f"trash {report['trash']}; Cohen's kappa {first} vs {second} = {kappa:.3f} on {n_claims} claims")
    if rows and not report["kept"]:
        print(f"filter: error: every one of the {len(rows)} samples is trashed ({report['trash']}): nothing to export",
              file=sys.stderr)
        return 1
    return 0
