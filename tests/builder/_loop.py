"""The maintainer's loop after ``generate``, as the docs run it, with real local parts: shared by the main stage (rows
of ``--engine hf``: tests/builder/test_maintainer_loop.py) and the vLLM stage (rows of ``--engine vllm``:
tests/builder/test_vllm_engine.py).

segment -> wiki (a local MediaWiki stand-in) -> context (``--embeddings local``) -> annotate (two judges the
maintainer names, ``--judge MODEL=KEY``, against a local OpenAI-compatible server on 127.0.0.1; one of them fails one
sample) -> filter (no ``--judges``: it finds them) -> export (no ``--judge``) -> ``much_dataset.load`` -> verify (the
generated rows and the published ones, in the dtype they record) -> ``much run`` on the export, asserting the row
counts at every step.
"""

from __future__ import annotations

import json
import urllib.parse
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from builder.cli import main
from builder.store import read_store
from much_dataset import schema
from tests.builder.fake_servers import DEFAULT_PAGES, FakeMediaWiki, FakeOpenAI

#: The two judges, named by the maintainer: model served by the judge server -> label key.
JUDGES = {"local-judge-a": "alpha", "local-judge-b": "beta"}


def _title(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.hostname.split(".")[0], urllib.parse.unquote(parts.path.rsplit("/", 1)[1]).replace("_", " ")


def pages_for(urls: set[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """A page for every URL: the fake server's own when it has one, else a short made-up article."""
    pages = {}
    for url in urls:
        key = _title(url)
        pages[key] = DEFAULT_PAGES.get(key) or {
            "extract": f"{key[1]} is the subject of this article. It is known for several things.\n\n== History ==\n"
                       f"The history of {key[1]} spans many years.\n\n== Facts ==\nMany facts are known about it.",
            "wikitext": f"{{{{Infobox thing\n| name = {key[1]}\n}}}}"}
    return pages


def _truth(model: str, segments: list[str]) -> list[int]:
    """Both judges' labels: a fixed pseudo-random -1 for about a third of the claims (both classes), the same for
    both judges."""
    return [-1 if zlib.crc32(text.encode("utf-8")) % 3 == 0 else 1 for text in segments]


def _disagreeing(segments: list[str]) -> list[int]:
    """Beta's answer to its second request: the truth with the first claim flipped (one judge disagreement)."""
    labels = _truth("local-judge-b", segments)
    return [-labels[0], *labels[1:]]


def _strict_json(path: Path) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"{path.name} holds {constant}: not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def run_loop(out: Path, *, tokenizer: str, model: str, verify: list[str], tmp: Path) -> dict[str, int]:
    """The loop from ``out/generations.jsonl`` (with ``questions.jsonl`` holding at least one question that was not
    generated, and ``configs.jsonl``) to ``much run``; returns the counts."""
    from much_dataset import load
    from much_metric.cli import main as much

    generations = list(read_store(out / "generations.jsonl"))
    n = len(generations)
    assert {g["dtype"] for g in generations} == {"float32"}  # the CPU default, recorded per row ...
    assert {c["dtype"] for c in read_store(out / "configs.jsonl")} == {"float32"}  # ... and per config
    generated_urls = {g[schema.WIKI_URL] for g in generations}
    other_urls = {q[schema.WIKI_URL] for q in read_store(out / "questions.jsonl")} - generated_urls
    assert other_urls, "the loop needs a question that was not generated"

    assert main(["segment", "--out", str(out), "--tokenizer", tokenizer]) == 0
    assert len(list(read_store(out / "segments.jsonl"))) == n

    with FakeMediaWiki(pages=pages_for(generated_urls | other_urls), redirects={}) as wiki_server:
        assert main(["wiki", "--out", str(out), "--api", wiki_server.api_template, "--min-interval", "0"]) == 0
        asked = {(r["path"].split("/")[1], (r["query"].get("titles") or r["query"].get("page") or "").replace("_", " "))
                 for r in wiki_server.requests}
    assert {r[schema.WIKI_URL] for r in read_store(out / "wiki.jsonl")} == generated_urls
    assert not {_title(url) for url in other_urls} & asked  # only the generated questions' pages were fetched

    assert main(["context", "--out", str(out), "--embeddings", "local"]) == 0
    contexts = list(read_store(out / "context.jsonl"))
    assert len(contexts) == n and all(c["chunks"] for c in contexts)

    finished = [g for g in generations if g["finished"]]
    # beta (one worker: requests in generation_id order): its first call is refused (missing labels), its second
    # answer disagrees with alpha on one claim, the rest agree
    with FakeOpenAI(script={"local-judge-b": ["bad_request", _disagreeing]}, truth=_truth) as judge_server:
        argv = ["annotate", "--out", str(out), "--base-url", judge_server.base_url, "--backoff", "0",
                "--workers", "1", "--tokenizer", tokenizer]
        for served, key in JUDGES.items():
            argv += ["--judge", f"{served}={key}"]
        assert main(argv) == 1  # beta's refused call is a recorded failure
    labels = {key: {r[schema.GENERATION_ID]: r["labels"] for r in read_store(out / f"labels.{key}.jsonl")}
              for key in JUDGES.values()}
    assert len(labels["alpha"]) == len(finished) and len(labels["beta"]) == len(finished) - 1  # unfinished: not sent
    assert len(list(read_store(out / "labels.beta.failures.jsonl"))) == 1

    assert main(["filter", "--out", str(out)]) == 0  # no --judges: the label files annotate wrote
    report = _strict_json(out / "filter.report.json")
    disagree = sum(1 for g in finished if g[schema.GENERATION_ID] in labels["beta"]
                   and labels["alpha"][g[schema.GENERATION_ID]] != labels["beta"][g[schema.GENERATION_ID]])
    assert disagree == 1
    trash = {"no_eos": n - len(finished), "outside_top_k": 0, "missing_labels": 1, "judge_disagreement": 1}
    assert report["judges"] == ["alpha", "beta"] and report["trash"] == trash
    kept = n - sum(trash.values())
    assert report["kept"] == kept > 0 and report["samples"] == n
    reasons = {r[schema.GENERATION_ID]: r["reason"] for r in read_store(out / "filter.jsonl")}

    assert main(["export", "--out", str(out)]) == 0  # no --judge: filter's first judge
    rows = {split: list(read_store(out / "rows" / f"{split}.jsonl")) for split in ("train", "test", "trash")}
    assert len(rows["train"]) + len(rows["test"]) == kept and len(rows["trash"]) == n - kept
    assert {r[schema.GENERATION_ID]: r["trash_reason"] for r in rows["trash"]} == {
        gid: reason for gid, reason in reasons.items() if reason}  # every trashed row, with its reason
    assert Counter(r["trash_reason"] for r in rows["trash"]) == +Counter(trash)
    (config,) = read_store(out / "rows" / "configs.jsonl")
    assert config["dtype"] == "float32" and {e["dtype"] for e in config["engines"]} == {"float32"}

    dataset = load(str(out / "much"))
    assert sum(dataset[split].num_rows for split in dataset) == kept

    assert main(["verify", "--out", str(tmp / "verify-generated"), "--source", str(out / "generations.jsonl"),
                 "--model", model, "--rows", str(n), *verify]) == 0
    generated_report = json.loads((tmp / "verify-generated" / "verify.json").read_text())
    assert generated_report["rows"] == n and generated_report["dtype"] == "float32"
    published = "train" if rows["train"] else "test"
    assert main(["verify", "--out", str(tmp / "verify-published"), "--source", str(out / "rows" / f"{published}.jsonl"),
                 "--model", model, "--rows", str(kept), *verify]) == 0  # dtype from rows/configs.jsonl
    published_report = json.loads((tmp / "verify-published" / "verify.json").read_text())
    assert published_report["rows"] == len(rows[published]) and published_report["dtype"] == "float32"

    table_path = tmp / "much-run.json"
    assert much(["run", "--source", str(out / "much"), "--signals", "max_likelihood", "--bootstrap", "0", "--no-nli",
                 "--tokenizer", tokenizer, "--json", str(table_path), "--no-progress"]) == 0
    table = json.loads(table_path.read_text())
    assert table["n_samples"] == kept
    (result,) = table["results"]
    assert result["signal_name"] == "max_likelihood" and result["n_samples"] == kept
    return {"generated": n, "finished": len(finished), "kept": kept, **trash}
