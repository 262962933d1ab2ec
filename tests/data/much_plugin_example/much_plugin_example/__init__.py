"""A complete third-party MUCH baseline: one file, one entry point (see pyproject.toml)."""

import numpy as np

from much_metric.baselines import Baseline


def top2_gap(arrays):
    """1 - (p1 - p2): the smaller the lead of the best candidate, the more uncertain (higher = more uncertain)."""
    top = -np.sort(-arrays.probabilities, axis=1)
    return 1.0 - (top[:, 0] - top[:, 1])


TOP2_GAP = Baseline(name="top2_gap", compute=top2_gap, display="Top-2 gap (plugin)",
                    description="1 - (p1 - p2) over the stored candidates (example plugin)")
