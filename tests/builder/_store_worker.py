"""A JsonlStore writer for the concurrency tests: ``python -m tests.builder._store_worker PATH N_KEYS SEED DIE``.

Appends one record per key it does not see stored, in a random order. With probability DIE per record it instead
dies in the middle of a write, the way a SIGKILL during a long ``write`` leaves a torn line: it takes the file's lock,
writes half the record and kills itself.
"""

from __future__ import annotations

import os
import random
import signal
import sys

from builder._locks import locked
from builder.store import JsonlStore


def main(path: str, n_keys: int, seed: int, die: float) -> None:
    rng = random.Random(seed)
    store = JsonlStore(path, key="id")
    keys = [f"k{i:04d}" for i in range(n_keys)]
    rng.shuffle(keys)
    for key in keys:
        if key in store:
            continue
        record = {"id": key, "writer": os.getpid(), "payload": "x" * rng.randrange(10, 3000)}
        if rng.random() < die:
            import json

            line = json.dumps(record).encode()
            with open(f"{path}.deaths", "a") as deaths:  # lets the test check that torn writes did happen
                deaths.write(f"{key}\n")
            with locked(path), open(path, "ab") as handle:
                handle.write(line[: rng.randrange(1, len(line))])
                handle.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        store.append(record)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
