"""Run a table of bad inputs over the ``much`` commands and builder steps and count how each one ends.

Usage: ``python scripts/audit_bad_inputs.py [--timeout S] [--only SUBSTRING] [--verbose]``

Each case builds its files in a fresh temporary folder, runs one command in a subprocess (``python -m much_metric``
or ``python -m builder``) with a time limit, then checks what it left. The outcome of a case is one of:

* ``clear``     -- a non-zero exit with one ``error:`` line naming the problem, and the protected files intact;
* ``generic``   -- a non-zero exit, but several lines or no ``error:`` line;
* ``silent``    -- exit 0 (the bad input was accepted), or a protected file was changed or deleted;
* ``hang``      -- still running at the time limit (killed);
* ``traceback`` -- a Python traceback on stderr.

Servers for ``much monitor --base-url`` run in this process on 127.0.0.1 (a dribbling server, HTTP errors, a
malformed stream). Offline: ``HF_HUB_OFFLINE=1``; the cases use the packaged sample and the ``smollm2`` tokenizer.
The counts are printed per surface and in total (the numbers quoted in notes/NOTES_reliability_r3.md).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = ("clear", "generic", "silent", "hang", "traceback")


@dataclass
class Case:
    surface: str
    name: str
    argv: Callable[[Path, dict], list[str]]  # (work folder, servers) -> argv after "python -m"
    setup: Callable[[Path], list[Path]] = field(default=lambda work: [])  # returns the files that must stay intact


# --- servers -----------------------------------------------------------------------------------------------------


def _events(chunks: list[dict], done: bool = True) -> bytes:
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + ("data: [DONE]\n\n" if done else "")).encode()


def _chunk(token: str, logprob: float = math.log(0.9), top: object = "same", finish: str | None = None) -> dict:
    entry = {"token": token, "logprob": logprob,
             "top_logprobs": [{"token": token, "logprob": logprob}] if top == "same" else top}
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "x"},
                                                            "logprobs": {"content": [entry]}, "finish_reason": finish}]}


def _final() -> dict:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


def _stream_answer(body: bytes) -> Callable:
    def write(handler, stop):
        handler.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body)
    return write


def _status(code: int) -> Callable:
    def write(handler, stop):
        handler.wfile.write(f"HTTP/1.0 {code} Error\r\nContent-Type: application/json\r\n\r\n".encode()
                            + b'{"error": {"message": "no"}}')
    return write


def _dribble(handler, stop):
    handler.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    for byte in _events([_chunk("token_id:42")] * 50 + [_final()]):
        if stop.wait(0.5):
            return
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()


def _mid_chunk(handler, stop):
    first = _events([_chunk("token_id:42")], done=False)
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + f"{len(first):x}\r\n".encode() + first + b"\r\n1000\r\ndata: {")
    handler.wfile.flush()
    handler.connection.shutdown(socket.SHUT_RDWR)


SERVERS: dict[str, Callable] = {
    "dribble": _dribble,
    "500": _status(500), "401": _status(401), "404": _status(404),
    "null_top": _stream_answer(_events([_chunk("token_id:42", top=None), _final()])),
    "oov": _stream_answer(_events([_chunk("token_id:999999"), _final()])),
    "nan": _stream_answer(_events([_chunk("token_id:42", logprob=float("nan")), _final()])),
    "above_1": _stream_answer(_events([_chunk("token_id:42", logprob=0.7), _final()])),
    "not_utf8": _stream_answer(_events([_chunk("token_id:42"), _final()]).replace(b'"x"', b'"\xff\xfe"')),
    "mid_chunk": _mid_chunk,
    "not_streamed": lambda h, stop: h.wfile.write(
        b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + json.dumps(
            {"object": "chat.completion", "choices": [{"index": 0, "message": {"content": "Hi"},
                                                       "finish_reason": "stop"}]}).encode()),
    "cut": _stream_answer(_events([_chunk("token_id:42")], done=False)),
}


@contextlib.contextmanager
def _servers():
    stop = threading.Event()
    started = []
    urls = {}
    for name, write in SERVERS.items():
        class Handler(BaseHTTPRequestHandler):
            behaviour = staticmethod(write)

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with contextlib.suppress(OSError):
                    self.behaviour(self, stop)

            def log_message(self, *args) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append(httpd)
        urls[name] = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        urls["refused"] = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    try:
        yield urls
    finally:
        stop.set()
        for httpd in started:
            httpd.shutdown()
            httpd.server_close()


# --- files -------------------------------------------------------------------------------------------------------


def _scores(work: Path) -> list[Path]:
    """A real signal file over the packaged sample (1 - the top candidate probability)."""
    import much_dataset
    from much_metric.signals import write_signals

    test = much_dataset.load("sample")["test"]
    rows = [{"generation_id": gid, "signal_name": "max_likelihood", "values": [1.0 - p[0] for p in probs]}
            for gid, probs in zip(test["generation_id"], test["logits_values"], strict=True)]
    write_signals(work / "scores.jsonl", rows)
    return [work / "scores.jsonl"]


def _segment_input(work: Path) -> list[Path]:
    from much_metric.models import load_tokenizer

    text = "Paris is the capital of France."
    ids = list(load_tokenizer("smollm2").encode(text, add_special_tokens=False))
    (work / "in.jsonl").write_text(json.dumps({"generation_id": "g", "output": text, "output_tokens": ids}) + "\n")
    return [work / "in.jsonl"]


def _corpus(work: Path) -> list[Path]:
    (work / "corpus.txt").write_text("Paris is the capital of France.\nBerlin is the capital of Germany.\n")
    return [work / "corpus.txt"]


def _garbage_block(work: Path) -> list[Path]:
    _corpus(work)
    subprocess.run([sys.executable, "-m", "much_metric", "neighbours", "--tokenizer", "smollm2", "--files",
                    str(work / "corpus.txt"), "--out", str(work / "job"), "--no-progress", "--top", "2"],
                   check=True, capture_output=True, env=_env())
    for block in (work / "job" / "blocks").iterdir():
        block.write_bytes(block.read_bytes()[: block.stat().st_size // 2])  # a truncated archive
    return []


def _artifacts(work: Path) -> list[Path]:
    sys.path.insert(0, str(ROOT))
    from tests.builder.test_export import _artifacts as make

    (work / "out").mkdir()
    make(work / "out")
    return sorted((work / "out").glob("*.jsonl"))


def _foreign_folder(work: Path) -> list[Path]:
    protected = _artifacts(work)
    (work / "mine").mkdir()
    (work / "mine" / "thesis.tex").write_text("years of work")
    return [*protected, work / "mine" / "thesis.tex"]


def _own_replay(work: Path) -> list[Path]:
    (work / "replay.jsonl").write_text("".join(json.dumps({"generation_id": f"g{i}", "output_tokens": [1]}) + "\n"
                                               for i in range(2)))
    return [work / "replay.jsonl"]


def _device(work: Path) -> str:
    """A copy of the full device in ``work`` (root may create one), else the system's ``/dev/full``, which a non-root
    process cannot replace: a command that replaced its output path never damages the machine's real device."""
    import stat

    path = work / "full"
    if not path.exists():
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        except (PermissionError, AttributeError):
            return "/dev/full"
    return str(path)


def _device_link(target: str) -> Callable[[Path], list[Path]]:
    def setup(work: Path) -> list[Path]:
        _scores(work)
        (work / "link.json").symlink_to(target)
        return [work / "scores.jsonl"]
    return setup


# --- the table ---------------------------------------------------------------------------------------------------

M = [sys.executable, "-m", "much_metric"]
B = [sys.executable, "-m", "builder"]
EVAL = [*M, "evaluate", "--data", "sample", "--bootstrap", "0", "--scores"]
MONITOR = [*M, "monitor", "--model", "smollm2", "--prompt", "q", "--method", "max_likelihood", "--timeout", "5",
           "--base-url"]

CASES = [
    Case("outputs", "evaluate --json = --scores", lambda w, s: [*EVAL, f"{w}/scores.jsonl", "--json",
                                                                  f"{w}/scores.jsonl"], _scores),
    Case("outputs", "evaluate --report = --scores", lambda w, s: [*EVAL, f"{w}/scores.jsonl", "--report",
                                                                    f"{w}/scores.jsonl"], _scores),
    Case("outputs", "evaluate --json link to /dev/null", lambda w, s: [*EVAL, f"{w}/scores.jsonl", "--json",
                                                                         f"{w}/link.json"], _device_link("/dev/null")),
    Case("outputs", "evaluate --json link to /proc/self/fd/1",
         lambda w, s: [*EVAL, f"{w}/scores.jsonl", "--json", f"{w}/link.json"], _device_link("/proc/self/fd/1")),
    Case("outputs", "evaluate --json = a copy of the full device",
         lambda w, s: [*EVAL, f"{w}/scores.jsonl", "--json", _device(w)], _scores),
    Case("outputs", "segment --output = --input", lambda w, s: [*M, "segment", "--input", f"{w}/in.jsonl",
                                                                  "--tokenizer", "smollm2", "--output",
                                                                  f"{w}/in.jsonl"], _segment_input),
    Case("outputs", "run --json = a signal file of --out",
         lambda w, s: [*M, "run", "--data", "sample", "--signals", "token_likelihood", "--bootstrap", "0", "--out",
                       f"{w}/sig", "--json", f"{w}/sig/token_likelihood.parquet", "--no-progress"]),
    Case("outputs", "neighbours --output = the corpus",
         lambda w, s: [*M, "neighbours", "--tokenizer", "smollm2", "--files", f"{w}/corpus.txt", "--out", f"{w}/job",
                       "--output", f"{w}/corpus.txt", "--no-progress"], _corpus),
    Case("outputs", "builder export --folder = a folder of other files",
         lambda w, s: [*B, "export", "--out", f"{w}/out", "--folder", f"{w}/mine"], _foreign_folder),
    Case("outputs", "builder export --folder = --out",
         lambda w, s: [*B, "export", "--out", f"{w}/out", "--folder", f"{w}/out"], _artifacts),
    Case("outputs", "builder replay --source = its output",
         lambda w, s: [*B, "replay", "--out", str(w), "--source", f"{w}/replay.jsonl", "--model", "smollm2"],
         _own_replay),
    Case("bounds", "run --bootstrap 100000000",
         lambda w, s: [*M, "run", "--data", "sample", "--signals", "token_likelihood", "--bootstrap", "100000000",
                       "--no-progress"]),
    Case("bounds", "evaluate --bootstrap 100000000",
         lambda w, s: [*M, "evaluate", "--data", "sample", "--scores", f"{w}/scores.jsonl", "--bootstrap",
                       "100000000"], _scores),
    Case("regressions", "neighbours --reduce over a truncated block",
         lambda w, s: [*M, "neighbours", "--tokenizer", "smollm2", "--files", f"{w}/corpus.txt", "--out", f"{w}/job",
                       "--reduce", "--no-progress"], _garbage_block),
    *[Case("monitor server", f"monitor --base-url: {name}", lambda w, s, name=name: [*MONITOR, s[name]])
      for name in [*SERVERS, "refused"]],
]


#: The checkout whose code the commands run (``--code``; default: this one), e.g. another worktree to compare.
CODE = [ROOT]


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(CODE[0]), "TQDM_DISABLE": "1"}


def _digest(paths: list[Path]) -> dict[str, str | None]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None for p in paths}


def run_case(case: Case, servers: dict, timeout: float) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="audit-") as folder:
        work = Path(folder)
        protected = case.setup(work)
        before = _digest(protected)
        argv = case.argv(work, servers)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=work)
        except subprocess.TimeoutExpired:
            return "hang", f"still running after {timeout:g} s"
        err = done.stderr.strip()
        lines = [line for line in err.splitlines() if line.strip()]
        if "Traceback (most recent call last)" in err:
            return "traceback", lines[-1] if lines else ""
        if done.returncode == 0 or _digest(protected) != before:
            return "silent", f"exit {done.returncode}; protected files " + \
                ("changed" if _digest(protected) != before else "intact")
        errors = [line for line in lines if "error:" in line]
        if len(errors) == 1:
            return "clear", errors[0]
        return "generic", (lines[-1] if lines else f"exit {done.returncode}, nothing on stderr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case (default 60)")
    parser.add_argument("--only", default="", help="run the cases whose surface or name contains this")
    parser.add_argument("--verbose", action="store_true", help="print each case's outcome and message")
    parser.add_argument("--code", default=str(ROOT), help="checkout whose code the commands run (default: this one)")
    args = parser.parse_args(argv)
    CODE[0] = Path(args.code).resolve()
    counts: dict[str, Counter] = {}
    with _servers() as servers:
        for case in CASES:
            if args.only and args.only not in case.surface and args.only not in case.name:
                continue
            started = time.monotonic()
            outcome, message = run_case(case, servers, args.timeout)
            counts.setdefault(case.surface, Counter())[outcome] += 1
            if args.verbose or outcome != "clear":
                print(f"{outcome:9s} {time.monotonic() - started:5.1f}s  {case.name}: {message[:160]}", flush=True)
    total = sum(counts.values(), Counter())
    print(f"{'surface':16s} " + " ".join(f"{o:>9s}" for o in OUTCOMES) + "    cases")
    for surface, counter in [*counts.items(), ("total", total)]:
        print(f"{surface:16s} " + " ".join(f"{counter[o]:9d}" for o in OUTCOMES) + f"    {sum(counter.values()):5d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
