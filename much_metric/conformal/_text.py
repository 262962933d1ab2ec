"""Plain-text table of "claims kept at alpha" (``much evaluate --claims-kept``)."""

from __future__ import annotations

from much_metric.conformal._calibration import GUARANTEES
from much_metric.conformal._splits import ClaimsKept

__all__ = ["format_claims_kept"]


def format_claims_kept(kept: ClaimsKept) -> str:
    """One row per detector: per alpha, the mean fraction of test claims kept and of correct test claims kept, with
    the central 95 % range over the splits; then, per alpha, each detector against the one keeping most (paired:
    same splits)."""
    names = list(kept.kept)
    header = ["Method"] + [f"kept@{a:g} [range]  correct kept" for a in kept.alphas]
    rows = [header]
    for name in names:
        cells = [name]
        for alpha in kept.alphas:
            s = kept.summary(name, alpha)
            low, high = s["kept_interval"]
            cells.append(f"{s['kept']:.3f} [{low:.3f}, {high:.3f}]  {s['correct_kept']:.3f}")
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"claims kept by the {kept.guarantee}-level conformal filter ({GUARANTEES[kept.guarantee]}), "
                 f"calibrated on a seeded half of the answers and applied to the other half, mean over {kept.n_splits} "
                 "splits [2.5 %, 97.5 % of the splits]; correct kept = the fraction of the correct claims kept.")
    if len(names) > 1:
        for alpha in kept.alphas:
            best = max(names, key=lambda n: kept.summary(n, alpha)["kept"])
            pairs = []
            for name in names:
                if name == best:
                    continue
                p = kept.paired(best, name, alpha)
                pairs.append(f"{p['difference']:+.3f} [{p['interval'][0]:+.3f}, {p['interval'][1]:+.3f}] over {name} "
                             f"(more in {p['wins']:.0%} of the splits)")
            lines.append(f"alpha {alpha:g}, paired: {best} keeps " + "; ".join(pairs))
    return "\n".join(lines)
