"""human: terminal tool for human claim annotation of a fixed, seeded sample
(docs/reference-behaviour.md#human-annotation, paper section 3.5).

``python -m builder human --out DIR --annotator an0 --lang en --size 50`` shows the guidelines (the same as the
judges'), then for each sample the question, Wikipedia URL, output, numbered claims, infobox and top-3 chunks, and
asks one label per non-EOS claim: ``1``/``y`` (correct) or ``-1``/``n`` (hallucinated); ``u`` undoes the previous
answer, ``h`` shows the guidelines again, ``q`` quits (the sample in progress is not saved). After the last claim,
Enter saves, ``u`` undoes, ``r`` restarts the sample. Every sample is saved to ``human.<annotator>.jsonl`` as soon as
it is confirmed (``labels`` with the EOS claim's +1 appended), and a rerun resumes with the next unlabelled one.

Selection (the reference's ``get_fixed_random_annotations``): the generation ids of the language, sorted, shuffled
with ``numpy.random.RandomState(53)``; those the filter keeps (judges agree, EOS, top-24) are taken in that order up to
``--size``. Plain ``input()``/``print()``, so it can be driven through stdin.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from builder import _judge_prompt as prompt
from builder.filter import DEFAULT_JUDGES, EosResolver, classify, load_labels
from builder.store import JsonlStore, read_store
from much_dataset.schema import CORRECT, GENERATION_CONFIG, GENERATION_ID, HALLUCINATED, LANG, OUTPUT, PROMPT

__all__ = ["SELECTION_SEED", "draw_annotation_sample", "ask_labels", "add_arguments", "run"]

SELECTION_SEED = 53
_ANSWERS = {"1": CORRECT, "+1": CORRECT, "y": CORRECT, "yes": CORRECT,
            "-1": HALLUCINATED, "n": HALLUCINATED, "no": HALLUCINATED}
HELP = "1/y = correct, -1/n = hallucinated, u = undo, h = guidelines, q = save & quit"


def draw_annotation_sample(ids: Sequence[str], eligible: Callable[[str], bool], size: int, *,
                   seed: int = SELECTION_SEED) -> list[str]:
    """The fixed human-annotation sample: sorted ``ids`` shuffled by ``RandomState(seed)``, eligible, first ``size``.

    Deterministic: the same ids give the same sample, and a larger ``size`` extends a smaller one.
    """
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    order = sorted(ids)
    np.random.RandomState(seed).shuffle(order)
    selected = []
    for gid in order:
        if len(selected) == size:
            break
        if eligible(gid):
            selected.append(gid)
    return selected


class _Quit(Exception):
    pass


def _read(input_fn: Callable[[str], str], text: str) -> str:
    try:
        return input_fn(text).strip().lower()
    except EOFError as error:  # stdin closed: behave like q
        raise _Quit from error


def ask_labels(n_claims: int, *, input_fn: Callable[[str], str] = input,
               print_fn: Callable[[str], None] = print) -> list[int] | None:
    """Ask one label per claim (undo, help, confirm, redo); the labels, or ``None`` if the annotator quit."""
    labels: list[int] = []
    try:
        while True:
            while len(labels) < n_claims:
                answer = _read(input_fn, f"claim #{len(labels):>2} [{HELP}]: ")
                if answer in _ANSWERS:
                    labels.append(_ANSWERS[answer])
                elif answer == "u":
                    if labels:
                        labels.pop()
                    else:
                        print_fn("nothing to undo in this sample")
                elif answer == "h":
                    print_fn(prompt.GUIDELINES)
                elif answer == "q":
                    raise _Quit
                else:
                    print_fn(f"unknown answer {answer!r}: {HELP}")
            print_fn("labels: " + " ".join(f"#{i}={v:+d}" for i, v in enumerate(labels)))
            answer = _read(input_fn, "Enter = save, u = undo last, r = redo sample, q = quit without saving: ")
            if answer == "":
                return labels
            if answer == "u" and labels:
                labels.pop()
            elif answer == "r":
                labels = []
            elif answer == "q":
                raise _Quit
    except _Quit:
        return None


def _show(print_fn: Callable[[str], None], position: str, generation: Mapping[str, Any], texts: Sequence[str],
          infobox: Mapping[str, Any], chunks: Sequence[str]) -> None:
    print_fn(f"\n{'=' * 100}\n[{position}] {generation[GENERATION_ID]} ({generation[LANG]})")
    print_fn(f"\n# Question\n{generation[PROMPT]}\n\n# Wikipedia\n{generation['wiki_url']}")
    print_fn("\n# Output\n" + textwrap.fill(generation[OUTPUT].strip(), width=100))
    print_fn("\n# Claims\n" + prompt.format_segments(texts[:-1]) + f"\n     (EOS claim {texts[-1]!r} = +1)")
    print_fn("\n# Infobox\n" + json.dumps(infobox or {}, indent=2, ensure_ascii=False))
    print_fn("\n# Relevant chunks\n" + ("\n---\n".join(chunks) if chunks else "(none)"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--annotator", required=True, help="annotator name, e.g. an0 or an1")
    parser.add_argument("--lang", required=True, help="language of the samples (en, fr, es, de)")
    parser.add_argument("--size", type=int, default=50, help="number of samples of this language")
    parser.add_argument("--tokenizer", default=None,
                        help="generating model's tokenizer to decode claims (default: the config's model_name)")
    parser.add_argument("--judges", nargs="+", default=list(DEFAULT_JUDGES), help="judge keys that must agree")
    parser.add_argument("--eos-ids", type=int, nargs="+", default=None)


def run(args: argparse.Namespace, *, input_fn: Callable[[str], str] = input,
        print_fn: Callable[[str], None] = print) -> int:
    from builder.annotate import Decoders

    out = Path(args.out)
    configs = {r[GENERATION_CONFIG]: r for r in read_store(out / "configs.jsonl")}
    generations = {r[GENERATION_ID]: r for r in read_store(out / "generations.jsonl") if r[LANG] == args.lang}
    segments = {r[GENERATION_ID]: r for r in read_store(out / "segments.jsonl")}
    contexts = {r[GENERATION_ID]: r for r in read_store(out / "context.jsonl")}
    infoboxes = {r["wiki_url"]: r.get("infobox") or {} for r in read_store(out / "wiki.jsonl")}
    judge_labels = {judge: load_labels(out, judge) for judge in args.judges}
    resolver = EosResolver(eos_ids=args.eos_ids, tokenizer=args.tokenizer, configs=configs)

    def eligible(gid: str) -> bool:
        return gid in segments and classify(generations[gid], [judge_labels[j].get(gid) for j in args.judges],
                                            resolver.ends_with_eos) is None

    selected = draw_annotation_sample(list(generations), eligible, args.size)
    store = JsonlStore(out / f"human.{args.annotator}.jsonl")
    pending = [gid for gid in selected if gid not in store]
    print_fn(prompt.GUIDELINES)
    print_fn(f"{args.annotator}: {len(selected)} samples selected for {args.lang!r} "
             f"({len(selected) - len(pending)} already done, {len(pending)} to go)")
    decoders = Decoders(args.tokenizer, configs)
    for index, gid in enumerate(pending, start=len(selected) - len(pending) + 1):
        generation = generations[gid]
        chunks = segments[gid]["token_chunks"]
        texts = prompt.chunk_texts(generation["output_tokens"], chunks, decoders.for_row(generation))
        _show(print_fn, f"{index}/{len(selected)}", generation, texts, infoboxes.get(generation["wiki_url"], {}),
              contexts.get(gid, {}).get("chunks", []))
        labels = ask_labels(len(chunks) - 1, input_fn=input_fn, print_fn=print_fn)
        if labels is None:
            print_fn(f"stopped; {len(store)} samples saved in {store.path.name}. Run again to resume.")
            return 0
        store.append({GENERATION_ID: gid, "annotator": args.annotator, LANG: args.lang, "labels": [*labels, CORRECT],
                      "annotated_at": datetime.now(UTC).isoformat(timespec="seconds")})
        print_fn(f"saved {gid}")
    print_fn(f"done: {len(selected)} samples of {args.lang!r} labelled by {args.annotator}")
    return 0
