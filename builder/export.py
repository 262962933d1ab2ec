"""export: complete rows per split + the published parquet folder and its dataset card
(docs/reference-behaviour.md#hub-columns, #export).

Joins ``generations.jsonl``, ``segments.jsonl``, ``labels.<judge>.jsonl``, ``human.<annotator>.jsonl`` and
``configs.jsonl`` by ``generation_id`` and writes

* ``<out>/rows/{train,test,trash}.jsonl`` -- the hub columns of :mod:`much_dataset.schema` + ``stopword_mask``
  (trash rows carry one column per judge instead of ``labels``, and ``trash_reason``: every generation that is not
  published is in ``trash.jsonl`` with its reason, a sample without the label judge's labels too), and
  ``rows/configs.jsonl`` (with ``engines``: the ``engine``, ``engine_version``, ``sampling`` and ``dtype`` of the
  published rows);
* ``<out>/much/`` -- parquet shards + ``README.md`` in the layout of :mod:`much_dataset.card` (train and test only),
  with the card body of :mod:`builder._card` (real counts, configs table, signals, attribution).

The split of a generation is ``filter.jsonl``'s when that file exists; otherwise the rule of
docs/reference-behaviour.md#hub-columns: trash when
two judges disagree, or when the row cannot be in MUCH (a token with more than 24 candidates, no final EOS:
docs/reference-behaviour.md#filters); test when annotator ``an1`` labelled it; else train. ``--split train|test`` puts
every kept row in one split
(the embedded sample: Mu-SHROOM's human labels, all in test). ``labels`` come from ``--judge`` (default ``gpt-4o``
when present, else the first judge ``filter`` compared, named in ``filter.report.json``, else the only judge).
The folder is loaded back with plain ``datasets.load_dataset`` and its row
counts checked before the step reports success; it replaces the previous ``much/`` only then.

``--withhold-labels`` makes the folder a hidden test split (:mod:`builder.withhold`): every kept row is published in
``test`` (the rows ``filter`` or the export rule would put in ``train`` too: the card calls the split a test split),
its rows have no label column and its card no label count; the labels go to ``--private-labels`` (default
``<out>/private/labels.json`` and its ``.sha256``), a file for the leaderboard server only.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from builder._locks import TEMP_SUFFIX, clean_owned, clean_stale, locked, locked_tempdir
from builder.errors import BuilderError, require_input
from builder.store import JsonlStore, atomic_write_text, read_store
from much_dataset import schema
from much_metric.fileio import Output, check_outputs

__all__ = ["add_arguments", "run", "collect_rows", "split_of", "export_folder", "check_loadable", "ALL_SPLITS",
           "TRASH_REASON"]

ALL_SPLITS = ("train", "test", "trash")
#: The field of a ``rows/trash.jsonl`` row that says why it was trashed (filter.jsonl's reason, or export's rule).
TRASH_REASON = "trash_reason"
#: Per-row fields of ``generate --engine vllm|openai`` that the hub columns drop: kept per config in
#: ``rows/configs.jsonl`` (``engines``: one entry per distinct engine, version and sampling of the published rows).
_ENGINE_FIELDS = ("engine", "engine_version", "sampling", "dtype")
_PUBLISHED = ("train", "test")
#: The files of a published folder (``much_dataset.card.write_parquet_folder``): the only ones an export replaces.
_PUBLISHED_FILE = re.compile(rf"README\.md|data/(?:{'|'.join(schema.LANGUAGES)})/(?:{'|'.join(_PUBLISHED)})"
                             r"-00000-of-00001\.parquet")


def published_folder_output(folder: Path) -> Output:
    """The published folder as an output: replaced as a whole, so it may hold only an earlier export's files."""
    return Output("--folder", Path(folder), folder=True, replaces=True,
                  owns=lambda name: _PUBLISHED_FILE.fullmatch(name.as_posix()) is not None)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge", default=None,
                        help="judge whose labels fill `labels` (default: gpt-4o when its labels are present, else "
                             "the first judge `filter` compared (filter.report.json), else the only judge)")
    parser.add_argument("--split", choices=("auto", "train", "test"), default="auto",
                        help="auto: filter.jsonl or the rule of docs/reference-behaviour.md#hub-columns; train/test: "
                             "every kept row in that split")
    parser.add_argument("--folder", default=None, help="published folder (default <out>/much)")
    parser.add_argument("--no-check", action="store_true", help="skip the datasets.load_dataset check (not advised)")
    parser.add_argument("--withhold-labels", action="store_true",
                        help="a hidden test split: publish the rows without any label and write the labels to "
                             "--private-labels, for the leaderboard server only (docs/leaderboard.md#hidden-split)")
    parser.add_argument("--private-labels", default=None,
                        help="with --withhold-labels: the label file (default <out>/private/labels.json, plus its "
                             ".sha256), outside the published folder")


def _by_id(path: Path) -> dict[str, dict[str, Any]]:
    return {str(r[schema.GENERATION_ID]): r for r in read_store(path)}


def _judges(out: Path, rows: Collection[str]) -> dict[str, dict[str, dict[str, Any]]]:
    from builder.filter_labels import label_files, read_label_records

    return {key: read_label_records(path, rows=rows, required=True) for key, path in label_files(out).items()}


def _humans(out: Path, rows: Collection[str]) -> dict[str, dict[str, dict[str, Any]]]:
    from builder.filter_labels import label_files, read_label_records

    return {key: read_label_records(path, rows=rows) for key, path in label_files(out, prefix="human").items()}


def _cannot_be_in_much(generation: Mapping[str, Any], eos_ids: set[int] | None) -> str | None:
    widths = {len(row) for row in generation[schema.LOGITS_TOKEN_IDS]}
    if widths != {schema.TOP_K}:
        return "a token has more than 24 candidates (sampled token ranked below 24)"
    unfinished = generation.get("finished") is False  # recorded by `generate`
    if unfinished or (eos_ids is not None and generation[schema.OUTPUT_TOKENS][-1] not in eos_ids):
        return "no final EOS token (cut at max_new_tokens)"
    return None


def split_of(gid: str, generation: Mapping[str, Any], judge_labels: Mapping[str, list[int]], human_keys: set[str],
             *, eos_ids: set[int] | None = None) -> tuple[str, str]:
    """Split and reason by the rule of docs/reference-behaviour.md#hub-columns, #filters (used when there is no
    ``filter.jsonl``)."""
    reason = _cannot_be_in_much(generation, eos_ids)
    if reason:
        return "trash", reason
    lists = [tuple(v) for v in judge_labels.values()]
    if len(set(lists)) > 1:
        return "trash", f"judges disagree ({', '.join(sorted(judge_labels))})"
    if "an1" in human_keys:
        return "test", "human-annotated by an1"
    return "train", "judges agree, no an1 label"


def _pick_judge(judges: Mapping[str, Any], judge: str | None, filtered_by: list[str] | None = None) -> str:
    """``--judge``, else gpt-4o, else the first judge ``filter`` used (its kept rows' judges all agree), else the only
    one; a :class:`BuilderError` naming the label files present and ``--judge`` otherwise."""
    files = ", ".join(f"labels.{key}.jsonl" for key in sorted(judges))
    if judge is not None:
        if judge not in judges:
            raise BuilderError(f"--judge {judge}: no labels.{judge}.jsonl (label files present: {files})")
        return judge
    if "gpt-4o" in judges:
        return "gpt-4o"
    if filtered_by and all(key in judges for key in filtered_by):
        return filtered_by[0]
    if len(judges) == 1:
        return next(iter(judges))
    raise BuilderError(f"several label files ({files}), none named gpt-4o and no filter.report.json naming the judges: "
                       "pass --judge KEY (the judge whose labels fill `labels`), or run `python -m builder filter` "
                       "first")


def _filter_judges(out: Path) -> list[str] | None:
    """The judges ``filter`` compared (``filter.report.json``), or None."""
    path = out / "filter.report.json"
    if not path.is_file():
        return None
    judges = json.loads(path.read_text(encoding="utf-8")).get("judges")
    return [str(j) for j in judges] if isinstance(judges, list) else None


def collect_rows(out: Path, *, judge: str | None = None, split: str = "auto") -> tuple[dict[str, list], dict]:
    """Rows per split (``train``/``test``/``trash``) and a report of what was skipped and why."""
    generations = list(read_store(require_input(out / "generations.jsonl", made_by="generate")))
    segments = _by_id(out / "segments.jsonl")
    judges = _judges(out, segments)
    if not judges:
        raise BuilderError(f"no labels.<judge>.jsonl in {out}; run `python -m builder annotate` first")
    label_judge = _pick_judge(judges, judge, _filter_judges(out) if (out / "filter.jsonl").exists() else None)
    humans = _humans(out, segments)
    filters = _by_id(out / "filter.jsonl") if (out / "filter.jsonl").exists() else None
    rows: dict[str, list] = {name: [] for name in ALL_SPLITS}
    skipped: dict[str, str] = {}
    reasons: dict[str, int] = {}
    engines: dict[str, list[dict[str, Any]]] = {}
    for generation in generations:
        gid = str(generation[schema.GENERATION_ID])
        if gid not in segments:
            skipped[gid] = "not segmented"
            continue
        judge_labels = {name: labels[gid][schema.LABELS] for name, labels in judges.items() if gid in labels}
        human_keys = {name for name, found in humans.items() if gid in found}
        if split != "auto":
            reason = _cannot_be_in_much(generation, None)
            target, reason = ("trash", reason) if reason else (split, f"--split {split}")
        elif filters is not None:
            if gid not in filters:
                skipped[gid] = "not in filter.jsonl"
                continue
            target, reason = filters[gid]["split"], filters[gid].get("reason") or "kept by filter.jsonl"
            if target not in ALL_SPLITS:
                raise ValueError(f"filter.jsonl: generation_id={gid!r}: field 'split' is {target!r}")
            widths = _cannot_be_in_much(generation, None)
            if widths and target != "trash":
                target, reason = "trash", widths
        else:
            target, reason = split_of(gid, generation, judge_labels, human_keys)
        if label_judge not in judge_labels and target != "trash":  # no labels to publish: trashed, never dropped
            target, reason = "trash", "missing_labels"
        reasons[f"{target}: {reason}"] = reasons.get(f"{target}: {reason}", 0) + 1
        segment = segments[gid]
        row = {column: generation[column] for column in schema.HUB_COLUMNS[:9]}
        row[schema.TOKEN_CHUNKS] = segment[schema.TOKEN_CHUNKS]
        if target == "trash":
            row.update({name: list(labels) for name, labels in judge_labels.items()})
            row[TRASH_REASON] = reason
        else:
            row[schema.LABELS] = list(judge_labels[label_judge])
        for column, annotator in ((schema.HUMAN_LABELS_0, "an0"), (schema.HUMAN_LABELS_1, "an1")):
            found = humans.get(annotator, {}).get(gid)
            row[column] = list(found[schema.LABELS]) if found else list(schema.NO_HUMAN_LABEL)
        row[schema.STOPWORD_MASK] = [bool(x) for x in segment[schema.STOPWORD_MASK]]
        rows[target].append(row)
        if target != "trash" and generation.get("engine") is not None:
            engine = {name: generation.get(name) for name in _ENGINE_FIELDS}
            found = engines.setdefault(str(generation[schema.GENERATION_CONFIG]), [])
            if engine not in found:
                found.append(engine)
    rules = {r.get("rule") for r in judges[label_judge].values()} - {None}
    label_rule = rules.pop() if len(rules) == 1 else None
    return rows, {"label_judge": label_judge, "label_rule": label_rule, "skipped": skipped, "reasons": reasons,
                  "engines": engines}


def check_loadable(folder: Path, sizes: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Load ``folder`` with plain ``datasets.load_dataset`` (config ``all``) and check the row counts per split."""
    import datasets

    loaded = datasets.load_dataset(str(folder))
    counts = {split: len(loaded[split]) for split in loaded}
    for split in _PUBLISHED:
        expected = sum(int(per.get(split, 0)) for per in sizes.values())
        if counts.get(split, 0) != expected:
            raise RuntimeError(f"export check: {folder} loads {counts.get(split, 0)} {split} rows, expected {expected}")
    return counts


def export_folder(rows: Mapping[str, list], folder: Path, *, card_body: str, check: bool = True,
                  license: str | None = None, pretty_name: str | None = None) -> dict:  # noqa: A002
    """Write the published folder atomically (temporary sibling folder, checked, then renamed into place)."""
    from much_dataset.card import card_metadata, write_parquet_folder

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    # One export at a time per folder; its temporary folder is locked while written, so a later run can tell a
    # leftover of a killed export (removed by clean_stale) from one in progress.
    with locked(folder):
        check_outputs([published_folder_output(folder)])  # again under the lock: nothing foreign is replaced
        old = folder.with_name(f".{folder.name}.old")
        if old.exists():  # a killed export moved the old folder aside: put it back if nothing replaced it
            if folder.exists():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.rename(folder)
        # Every '.much.XXXXXXXX' folder is created under this lock: the ones left are dead exports' (any age).
        clean_owned(folder.parent, re.compile(rf"\.{re.escape(folder.name)}\.{TEMP_SUFFIX}"))
        clean_stale(folder.parent)
        with locked_tempdir(folder.parent, f".{folder.name}.") as tmp:
            # Only non-empty splits are declared: a card whose data_files glob matches nothing breaks the hub viewer.
            published = {split: rows[split] for split in _PUBLISHED if rows[split]}
            if not published:
                raise ValueError("export: no train or test row to publish")
            langs = {r[schema.LANG] for split_rows in published.values() for r in split_rows}
            metadata = card_metadata(languages=[lang for lang in schema.LANGUAGES if lang in langs], license=license,
                                     n_rows=sum(len(split_rows) for split_rows in published.values()),
                                     **({"pretty_name": pretty_name} if pretty_name else {}))
            sizes = write_parquet_folder(published, tmp, card_body=card_body, metadata=metadata)
            if check:
                check_loadable(tmp, sizes)
            if folder.exists():
                shutil.rmtree(old, ignore_errors=True)
                folder.rename(old)
                tmp.rename(folder)
                shutil.rmtree(old, ignore_errors=True)
            else:
                tmp.rename(folder)
    return sizes


def _write_rows(out: Path, rows: Mapping[str, list], configs: list[dict]) -> None:
    """Write ``rows/<split>.jsonl`` and ``rows/configs.jsonl`` under the lock of ``rows/`` (one export at a time),
    first removing the temporaries of killed exports (``.<file>.XXXXXXXX.tmp``, created under the same lock)."""
    with locked(out / "rows"):
        names = "|".join(re.escape(f"{name}.jsonl") for name in (*ALL_SPLITS, "configs"))
        clean_owned(out / "rows", re.compile(rf"\.(?:{names})\.{TEMP_SUFFIX}\.tmp"))
        _write_rows_locked(out, rows, configs)


def _write_rows_locked(out: Path, rows: Mapping[str, list], configs: list[dict]) -> None:
    for split in ALL_SPLITS:
        text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows[split])
        atomic_write_text(out / "rows" / f"{split}.jsonl", text)
    atomic_write_text(out / "rows" / "configs.jsonl",
                      "".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) + "\n" for c in configs))


def _private_labels(args: argparse.Namespace, out: Path, folder: Path) -> Path | None:
    """The label file of ``--withhold-labels`` (None without it), its options checked before any work."""
    if args.private_labels is not None and not args.withhold_labels:
        raise BuilderError("--private-labels goes with --withhold-labels (a labelled export writes no label file)")
    if not args.withhold_labels:
        return None
    from builder.withhold import DEFAULT_PRIVATE_LABELS, check_outside

    if args.split == "train":
        raise BuilderError("--withhold-labels publishes a hidden test split: --split train contradicts it (use "
                           "--split auto or test)")
    private = Path(args.private_labels) if args.private_labels else out / DEFAULT_PRIVATE_LABELS
    check_outside(private, folder)
    return private


def run(args: argparse.Namespace) -> int:
    from builder._card import card_body, card_license, card_title

    out = Path(args.out)
    folder = Path(args.folder) if args.folder else out / "much"
    outputs = [published_folder_output(folder), Output("--out", out / "rows", folder=True)]
    private = _private_labels(args, out, folder)
    if private is not None:
        from builder.withhold import private_labels_outputs

        outputs += private_labels_outputs(private)
    # Before any work: the folder replaced as a whole holds no input and nothing this step did not write.
    check_outputs(outputs, inputs=[("--out", out)])
    rows, report = collect_rows(out, judge=args.judge, split=args.split)
    if private is not None:  # a hidden split is a test split, whatever filter's train/test rule said of a row
        rows = {**rows, "train": [], "test": [*rows["train"], *rows["test"]]}
    used = {r[schema.GENERATION_CONFIG] for split in _PUBLISHED for r in rows[split]}
    configs = [c for c in JsonlStore(out / "configs.jsonl", key=schema.GENERATION_CONFIG).records()
               if c[schema.GENERATION_CONFIG] in used]
    for config in configs:
        if config[schema.GENERATION_CONFIG] in report["engines"]:
            config["engines"] = report["engines"][config[schema.GENERATION_CONFIG]]
    _write_rows(out, rows, configs)
    published = rows
    if private is not None:
        from builder.withhold import withheld_card_body, withhold_labels, write_private_labels

        public, labels = withhold_labels(rows, _PUBLISHED)
        published = {**public, "trash": rows["trash"]}
        digest = write_private_labels(private, public, labels, label_judge=report["label_judge"])
    body = card_body(published, configs, label_judge=report["label_judge"], label_rule=report["label_rule"])
    if private is not None:
        body = withheld_card_body(body)
    sizes = export_folder(published, folder, card_body=body, check=not args.no_check,
                          license=card_license(configs, label_judge=report["label_judge"]),
                          pretty_name=card_title(configs, label_judge=report["label_judge"]))
    print(f"export: train={len(rows['train'])} test={len(rows['test'])} trash={len(rows['trash'])} "
          f"(labels from {report['label_judge']}); {len(report['skipped'])} generations skipped")
    for reason, count in sorted(report["reasons"].items()):
        print(f"  {count:6d}  {reason}")
    print(f"export: wrote {out / 'rows'} and {folder} ({sum(sum(v.values()) for v in sizes.values())} rows checked)")
    if private is not None:
        print(f"export: labels withheld: {folder} has none; they are in {private} (sha256 {digest}), for the "
              "leaderboard server only (much-leaderboard serve --private-data FOLDER --private-labels FILE)")
    return 0
