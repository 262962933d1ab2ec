"""Shared builders for the leaderboard tests: valid submissions on the embedded sample, and zips made by hand."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


def sample_signal(seed: int | None = None) -> dict[str, dict[str, np.ndarray]]:
    """``{"max_likelihood": {generation_id: values}}`` computed on the embedded sample (noise added with ``seed``)."""
    import much_dataset
    from much_metric.baselines import compute_signals

    dataset = much_dataset.load("sample", split="test")
    runs = compute_signals(dataset, ["max_likelihood"], progress=False)
    values = runs["max_likelihood"].values
    rng = None if seed is None else np.random.default_rng(seed)
    out = {}
    for gid in dataset["generation_id"]:
        v = values[gid]
        v = np.asarray(v, dtype=np.float64)
        out[gid] = v if rng is None else np.clip(v + rng.uniform(-0.1, 0.1, size=v.shape), 0, 1)
    return {"max_likelihood": out}


def jsonl_bytes(signals: dict[str, dict[str, np.ndarray]], name: str | None = None) -> bytes:
    lines = []
    for signal, per_sample in signals.items():
        for gid, values in per_sample.items():
            lines.append(json.dumps({"generation_id": gid, "signal_name": name or signal,
                                     "values": [float(x) for x in values]}))
    return ("\n".join(lines) + "\n").encode()


def make_zip(entries: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in entries.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data, compress_type=compression)
    return buffer.getvalue()


def valid_archive(signals, *, name: str = "my_method", timings: float | None = 1.5) -> bytes:
    entries = {f"{name}.jsonl": jsonl_bytes(signals, name)}
    if timings is not None:
        entries["timings.json"] = json.dumps({name: {"seconds": timings}}).encode()
    entries["hardware.json"] = b'{"device": "2 CPU cores"}'
    return make_zip(entries)


def store_is_empty(folder: Path) -> bool:
    from much_leaderboard import Store

    store = Store(folder)
    return not store.submissions() and not any((folder / "archives").iterdir()) and not any(
        (folder / "scores").iterdir())


@contextlib.contextmanager
def serving(board: Any) -> Iterator[str]:
    """Serve ``board``'s web app with uvicorn on a free loopback port in a thread; yields ``http://127.0.0.1:PORT``
    (no trailing slash) once the server has started, and stops it on exit."""
    import uvicorn

    from much_leaderboard import create_server

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_server(board), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
