"""MkDocs hook: replaces ``<!-- schema: columns -->`` and ``<!-- schema: configs -->`` by tables read from
:mod:`much_dataset.schema`, the single source of truth for the columns, their types and the 8 generation configs.
"""

from __future__ import annotations

import re

_MARKER = re.compile(r"<!-- schema: (columns|configs|signals) -->")


def _type(feature) -> str:
    import datasets

    if isinstance(feature, datasets.Value):
        return feature.dtype
    if isinstance(feature, datasets.Array2D):
        return f"Array2D{tuple(feature.shape)}, {feature.dtype}"
    if isinstance(feature, (datasets.List, datasets.Sequence)):
        return f"list<{_type(feature.feature)}>"
    return type(feature).__name__


def _columns() -> str:
    from much_dataset import schema

    features = schema.features(with_stopword_mask=True)
    rows = ["| column | type | on the hub | one entry per output token |", "|---|---|---|---|"]
    for name in schema.COLUMNS:
        rows.append(f"| `{name}` | `{_type(features[name])}` | {'yes' if name in schema.HUB_COLUMNS else 'no (ours)'}"
                    f" | {'yes' if name in schema.TOKEN_ALIGNED_COLUMNS else ''} |")
    return "\n".join(rows)


def _signals() -> str:
    from much_dataset import schema

    features = schema.signal_features()
    rows = ["| column | type |", "|---|---|"]
    rows += [f"| `{name}` | `{_type(features[name])}` |" for name in schema.SIGNAL_COLUMNS]
    return "\n".join(rows)


def _configs() -> str:
    from much_dataset import schema

    rows = ["| `generation_config` | model | temperature |", "|---|---|---|"]
    rows += [f"| `{config_id}` | `{model}` | {temperature} |"
             for config_id, (model, temperature) in schema.MUCH_CONFIGS.items()]
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs) -> str:
    tables = {"columns": _columns, "configs": _configs, "signals": _signals}
    return _MARKER.sub(lambda match: tables[match.group(1)](), markdown)
