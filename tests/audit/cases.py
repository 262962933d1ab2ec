"""The helpers of the audit table (``tests/audit/table.py``, run by ``tests/audit/audit_bad_inputs.py``): fixtures,
per-case setups and the :class:`Case` record, one per bad input.

``era="new"``: the surfaces issue #31 audits (output-path safety, server data, deadlines, learned folders,
replay/verify, monitor against a server, regressions); ``era="old"``: older-surface bad inputs kept as a control.
A case's ``argv`` starts with ``much``, ``builder`` or ``leaderboard`` and may use ``{url}`` (the case's server),
``{closed}`` (a port nothing listens on), ``{gguf}`` (SmolLM2), ``{llama3}`` (a tokenizer.json) and ``{sample}``
(the embedded sample's English parquet); paths are relative to the case's own temporary folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.audit.processes import command_prefix, run_process
from tests.audit.servers import MisbehavingServer, closed_port

SAMPLE_EN = Path("much_dataset") / "sample" / "data" / "en" / "test-00000-of-00001.parquet"
LLAMA3_VOCAB = 128_256
SMOLLM2_VOCAB = 49_152


class SetupSkipped(RuntimeError):
    """The case cannot be prepared here (e.g. no permission to create a device node)."""


@dataclass(frozen=True)
class Case:
    id: str
    surface: str
    argv: tuple[str, ...]
    setup: Callable[[CaseContext], None] | None = None
    expect: str = "clear"            # what a correct toolkit gives: clear (bad input) / ok (good input)
    names: tuple[str, ...] = ()      # every entry must appear in the message ("a|b": either)
    keep: tuple[str, ...] = ()       # paths that must be unchanged after the run (inputs, device nodes, links)
    foreign: tuple[str, ...] = ()    # files the command did not write that must still exist
    server: str | None = None        # a MisbehavingServer mode
    timeout: float = 0.0             # the command's own --timeout: deadline = max(60, 3 x timeout)
    deadline: float = 120.0          # otherwise
    check: Callable[[CaseContext], str | None] | None = None   # a reason when data was lost / bad data stored
    exit0_ok: Callable[[CaseContext, str, str], bool] | None = None  # an exit 0 that is a proper refusal
    clear_codes: tuple[int, ...] = (2,)
    message_files: tuple[str, ...] = ()  # files (per-row failure logs) read with the output for ``names``
    memory_gb: float = 0.0           # > 0: cap the command's address space (cases that allocate without bound)
    era: str = "new"
    reported: str = ""               # what issue #31 reported for it on main

    @property
    def bad(self) -> bool:
        return self.expect != "ok"


# ------------------------------------------------------------------------------------------------ snapshots

class Snapshot(dict):
    def diff(self, before: Snapshot) -> list[str]:
        return [f"{path} {what}" for path, state in before.items() if self.get(path) != state
                for what in [_describe(state, self.get(path))]]


def _describe(before: Any, after: Any) -> str:
    if after == ("missing",):
        return "was removed"
    if before[0] != after[0]:
        return f"was replaced ({before[0]} -> {after[0]})"
    return "was modified"


def _state(path: Path) -> tuple:
    if path.is_symlink():
        return ("link", os.readlink(path))
    if not path.exists():
        return ("missing",)
    mode = path.stat().st_mode
    if stat.S_ISCHR(mode):
        return ("device", path.stat().st_rdev)
    if path.is_dir():
        return ("folder", tuple((str(p.relative_to(path)), _state(p)) for p in sorted(path.rglob("*"))
                                if p.is_file() and not p.is_symlink()))
    return ("file", hashlib.sha256(path.read_bytes()).hexdigest())


def snapshot(root: Path, paths: tuple[str, ...]) -> Snapshot:
    return Snapshot({path: _state(root / path) for path in paths})


# ------------------------------------------------------------------------------------------------ fixtures

class Fixtures:
    """Shared inputs, each built once (lazily, under a lock) in ``folder`` and copied into the cases' folders."""

    def __init__(self, repo: Path, folder: Path, env: dict[str, str], *, scale: float = 1.0) -> None:
        self.repo, self.folder, self.env, self.scale = repo, folder, env, scale
        folder.mkdir(parents=True, exist_ok=True)
        self._locks: dict[str, threading.Lock] = {}
        self._done: dict[str, Path | Exception] = {}
        self._guard = threading.Lock()

    def close(self) -> None:
        """Remove the fixtures' folder (only what this object made: never its parent)."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def _once(self, name: str, build: Callable[[Path], None]) -> Path:
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._done:
                target = self.folder / name
                try:
                    build(target)
                    self._done[name] = target
                except Exception as error:  # remembered: every case needing it fails its setup, quickly
                    self._done[name] = error
            done = self._done[name]
        if isinstance(done, Exception):
            raise RuntimeError(f"fixture {name} failed: {done}") from done
        return done

    def _run(self, argv: list[str], cwd: Path, deadline: float = 900.0) -> None:
        cwd.mkdir(parents=True, exist_ok=True)
        rc, stdout, stderr, _ = run_process([*command_prefix(self.repo, argv[0]), *argv[1:]], cwd=cwd,
                                            env=self.env, deadline=deadline * self.scale)
        if rc != 0:
            raise RuntimeError(f"`{' '.join(argv)}` exited {rc}: {(stderr or stdout).strip()[-300:]}")

    @property
    def sample_parquet(self) -> Path:
        return self.repo / SAMPLE_EN

    def signals(self) -> Path:
        """A ``much run --out`` folder with ``max_likelihood.parquet`` for the embedded sample."""
        return self._once("run", lambda t: self._run(["much", "run", "--source", "sample", "--no-nli", "--signals",
                                                      "max_likelihood", "--bootstrap", "0", "--out", "run",
                                                      "--no-progress"], t)) / "run"

    def detector(self, kind: str) -> Path:
        """A ``much train`` detector folder (fold en, one epoch)."""
        def build(target: Path) -> None:
            self._run(["much", "train", "--source", "sample", "--detector", kind, "--fold", "en", "--max-epochs",
                       "1", "--out", "det", "--no-progress"], target)
        found = sorted((self._once(f"det-{kind}", build) / "det").rglob("config.json"))
        if not found:
            raise RuntimeError(f"much train --detector {kind} wrote no config.json")
        return found[0].parent

    def sample_rows(self) -> list[dict[str, Any]]:
        import pyarrow.parquet as pq

        return pq.read_table(self.sample_parquet).to_pylist()

    def random_pack(self) -> Path:
        """An internals pack of random attention for every English sample row (the tests' own writer)."""
        def build(target: Path) -> None:
            import much_dataset
            from tests.much_metric.baselines._packs import write_random_pack

            target.mkdir(parents=True)
            write_random_pack(target, much_dataset.load("sample", config="en", split="test"))
        return self._once("random-pack", build)

    def smollm_pack(self) -> Path:
        """``builder internals`` of three English sample rows with SmolLM2, one row per shard."""
        def build(target: Path) -> None:
            from tests import assets

            gguf = assets.smollm2_gguf_path()
            if gguf is None:
                raise RuntimeError("no SmolLM2 .gguf test asset")
            self._run(["builder", "internals", "--out", "p", "--source", str(self.sample_parquet), "--model",
                       str(gguf), "--prompt-style", "user", "--limit", "3", "--rows-per-shard", "1"], target)
        return self._once("smollm-pack", build) / "p"

    def neighbours(self) -> Path:
        def build(target: Path) -> None:
            target.mkdir(parents=True)
            (target / "corpus.txt").write_text(CORPUS)
            self._run(["much", "neighbours", "--tokenizer", "smollm2", "--files", "corpus.txt", "--out", "nw",
                       "--block-size", "2", "--no-progress"], target)
        return self._once("neighbours", build) / "nw"


CORPUS = "the cat sat on the mat\nthe dog ate the bone\nwho wrote the book\nthe capital of France is Paris\n"


class CaseContext:
    def __init__(self, tmp: Path, fixtures: Fixtures, repo: Path) -> None:
        self.tmp, self.fixtures, self.repo = tmp, fixtures, repo
        self.url = "http://127.0.0.1:9/v1"

    def fields(self) -> dict[str, str]:
        from tests import assets

        gguf = assets.smollm2_gguf_path()
        return {"url": self.url, "closed": str(closed_port()), "gguf": str(gguf) if gguf else "smollm2.gguf",
                "llama3": str(assets.llama3_tokenizer_json() or "tokenizer.json"),
                "sample": str(self.fixtures.sample_parquet)}

    @contextlib.contextmanager
    def server(self, mode: str | None) -> Iterator[None]:
        if mode is None:
            yield
            return
        with MisbehavingServer(mode) as server:
            self.url = server.base_url
            yield

    def path(self, rel: str) -> Path:
        return self.tmp / rel

    def write(self, rel: str, data: str | bytes) -> Path:
        path = self.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        return path

    def copy(self, source: Path, rel: str) -> Path:
        target = self.path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copyfile(source, target)
        return target

    def device(self, rel: str, minor: int) -> None:
        """A copy of /dev/null (minor 3) or /dev/full (minor 7) at ``rel``."""
        try:
            os.mknod(self.path(rel), 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        except PermissionError as error:
            raise SetupSkipped(f"cannot create a device node here: {error}") from error


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


# ------------------------------------------------------------------------------------------------ setups

def signals_file(rel: str = "s.parquet") -> Callable[[CaseContext], None]:
    return lambda ctx: ctx.copy(ctx.fixtures.signals() / "max_likelihood.parquet", rel)


def run_folder(ctx: CaseContext) -> None:
    ctx.copy(ctx.fixtures.signals(), "run")


def segment_input(ctx: CaseContext, rel: str = "in.jsonl") -> None:
    rows = ctx.fixtures.sample_rows()[:3]
    ctx.write(rel, _jsonl([{"generation_id": r["generation_id"], "output": r["output"],
                            "output_tokens": list(r["output_tokens"])} for r in rows]))


def replay_rows(ctx: CaseContext, rel: str = "rows.jsonl", n: int = 2, spoil: Callable | None = None) -> None:
    rows = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()}
            for r in ctx.fixtures.sample_rows()[:n]]
    if spoil:
        spoil(rows)
    ctx.write(rel, "".join(json.dumps(r, default=str) + "\n" for r in rows))


def builder_out(ctx: CaseContext, rel: str = "b") -> None:
    from tests.builder.test_export import _artifacts

    (ctx.path(rel)).mkdir(parents=True, exist_ok=True)
    _artifacts(ctx.path(rel), n=8)


def questions(ctx: CaseContext, rel: str = "g", n: int = 2) -> None:
    ctx.write(f"{rel}/questions.jsonl", _jsonl([{"question_id": f"q{i}", "lang": "en", "prompt": f"Question {i}?",
                                                 "wiki_url": f"https://en.wikipedia.org/wiki/Q{i}"}
                                                for i in range(n)]))


def hub_layout(ctx: CaseContext) -> None:
    """``hub/data/test-<lang>-00000-of-00001.parquet`` without ``stopword_mask`` (a layout issue #31 lists)."""
    import pyarrow.parquet as pq

    for lang in ("en", "fr", "es", "de"):
        table = pq.read_table(ctx.repo / "much_dataset" / "sample" / "data" / lang / "test-00000-of-00001.parquet")
        table = table.drop_columns([c for c in table.column_names if c == "stopword_mask"])
        target = ctx.path(f"hub/data/test-{lang}-00000-of-00001.parquet")
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, target)


def detector(kind: str, edit: Callable[[Path], None] | None = None) -> Callable[[CaseContext], None]:
    def setup(ctx: CaseContext) -> None:
        folder = ctx.copy(ctx.fixtures.detector(kind), "det")
        if edit:
            edit(folder)
    return setup


def _edit_config(**changes: Any) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        config.update(changes)
        if isinstance(config.get("hyperparameters"), dict):
            config["hyperparameters"].update({k: v for k, v in changes.items() if k in config["hyperparameters"]})
        (folder / "config.json").write_text(json.dumps(config, indent=2))
    return edit


def _edit_weights(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        from safetensors.numpy import load_file, save_file

        tensors = load_file(folder / "weights.safetensors")
        change(tensors)
        save_file(tensors, folder / "weights.safetensors")
    return edit


def _wrong_gru_shape(tensors: dict) -> None:
    name = next(k for k in sorted(tensors) if k.startswith("gru.weight"))
    tensors[name] = tensors[name][:, :-3].copy()


def _infinite_bias(tensors: dict) -> None:
    import numpy as np

    name = next(k for k in sorted(tensors) if k.endswith("bias"))
    tensors[name] = np.full_like(tensors[name], np.inf)


def _weights_to_dev_zero(folder: Path) -> None:
    (folder / "weights.safetensors").unlink()
    (folder / "weights.safetensors").symlink_to("/dev/zero")


def _truncated_checkpoint(folder: Path) -> None:
    state = json.loads((folder / "checkpoint" / "state.json").read_text())
    state["finished"] = False
    (folder / "checkpoint" / "state.json").write_text(json.dumps(state))
    data = (folder / "checkpoint" / "state.safetensors").read_bytes()
    (folder / "checkpoint" / "state.safetensors").write_bytes(data[: len(data) // 2])
    for name in ("weights.safetensors", "config.json", "card.md", "training_rows.json"):
        (folder / name).unlink(missing_ok=True)


def truncated_checkpoint(ctx: CaseContext) -> None:
    folder = ctx.fixtures.detector("linear")
    top = folder
    while top.parent.name != "det-linear":  # the whole `--out det` folder, wherever the fold landed in it
        top = top.parent
    run = ctx.copy(top, "det")
    _truncated_checkpoint(run / folder.relative_to(top))


def neighbours_garbage(zip_magic: bool) -> Callable[[CaseContext], None]:
    """The work folder of a finished run, its blocks overwritten with garbage (starting like a zip or not)."""
    def setup(ctx: CaseContext) -> None:
        work = ctx.copy(ctx.fixtures.neighbours(), "nw")
        for block in sorted(work.rglob("*.npz")):
            if block.name == "neighbours.npz":
                block.unlink()
            else:
                block.write_bytes((b"PK\x03\x04" if zip_magic else b"") + b"not a zip file at all\x00" * 10)
    return setup


def both(*setups: Callable[[CaseContext], None]) -> Callable[[CaseContext], None]:
    def setup(ctx: CaseContext) -> None:
        for one in setups:
            one(ctx)
    return setup


# ------------------------------------------------------------------------------------------------ checks

def stored_row_problem(rows_file: str, *, vocab: int, max_tokens: int) -> Callable[[CaseContext], str | None]:
    """A stored row failing the shared per-token contract (TEAM.md) is data stored unchecked."""
    def check(ctx: CaseContext) -> str | None:
        path = ctx.path(rows_file)
        if not path.exists():
            return None
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            try:
                row = json.loads(line)
            except ValueError:
                return f"{rows_file} line {number} is not JSON"
            problem = _row_problem(row, vocab=vocab, max_tokens=max_tokens)
            if problem:
                return f"{rows_file} line {number} stored unchecked: {problem}"
        return None
    return check


def _row_problem(row: dict[str, Any], *, vocab: int, max_tokens: int) -> str | None:
    tokens = row.get("output_tokens") or []
    if len(tokens) > max_tokens:
        return f"{len(tokens)} tokens > max_new_tokens {max_tokens}"
    for position, (ids, probs) in enumerate(zip(row.get("logits_token_ids") or [], row.get("logits_values") or [],
                                                strict=False)):
        if any(p is None or not math.isfinite(p) or not 0 <= p <= 1 for p in probs):
            return f"position {position}: probability not finite or outside [0, 1]"
        if sum(probs) > 1 + 1e-4:
            return f"position {position}: candidates sum to {sum(probs):.3f} > 1"
        if any(not 0 <= i < vocab for i in ids):
            return f"position {position}: token id outside the vocabulary"
        if len(set(ids)) != len(ids):
            return f"position {position}: duplicate candidate ids"
    return None


def failures_file(rows_file: str) -> str:
    return rows_file.removesuffix(".jsonl") + ".failures.jsonl"


def failures_recorded(rows_file: str) -> Callable[[CaseContext, str, str], bool]:
    def accepted(ctx: CaseContext, stdout: str, stderr: str) -> bool:
        failures = ctx.path(failures_file(rows_file))
        return failures.exists() and failures.stat().st_size > 0
    return accepted


def warned(*words: str) -> Callable[[CaseContext, str, str], bool]:
    return lambda ctx, stdout, stderr: all(w.lower() in (stdout + stderr).lower() for w in words)


def always(ctx: CaseContext, stdout: str, stderr: str) -> bool:
    return True


__all__ = ["Case", "CaseContext", "Fixtures", "SetupSkipped", "snapshot"]
