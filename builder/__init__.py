"""The maintainers' pipeline that regenerates MUCH: ``python -m builder <step> --out <dir> ...``.

Steps, in order: questions -> generate -> segment -> wiki -> context -> annotate -> filter -> human/agreement
-> export -> push; ``import-mushroom`` builds the Mu-SHROOM benchmark and the embedded sample. Every per-item step
appends to JSONL under ``--out`` through :class:`builder.store.JsonlStore` (resumable, idempotent, atomic).
"""
