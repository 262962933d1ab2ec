"""MUCH metric: claim-level hallucination detection scores from token-level uncertainties (``evaluate`` module).

A thin wrapper around :func:`much_metric.scoring.score`: ``compute`` returns exactly the core's result as a dict
(``ScoreResult.to_dict()``). This is the compatibility route for code written against ``evaluate``; in Python,
``much_metric.score`` is the direct one. ``compute`` keeps flat keywords (``aggregator=``, ``stopword_handling=``,
``drop_last_chunk=``, ``score_type=``), as ``evaluate`` modules do, and maps them to one
:class:`much_metric.scoring.Aggregation`. Load it with ``much_metric.load_metric()``, or ``evaluate.load("much")``
from any directory once ``much install-metric`` (or a first ``much_metric.load_metric()``) has put this script in
evaluate's module cache. The script imports the installed ``much_metric`` package rather than sibling files, so
evaluate's copy in its modules cache needs nothing else.
"""

import datasets
import evaluate

from much_metric.scoring import Aggregation, score, score_claims

_CITATION = """\
@misc{much2025,
  title  = {MUCH: A Multilingual Claim Hallucination Benchmark},
  author = {Anonymous},
  year   = {2025},
  note   = {orailix/MUCH},
}
"""

_DESCRIPTION = """\
MUCH evaluates token-level uncertainty scores as claim-level hallucination detectors. Token scores (one per
generated token, EOS included; higher = more uncertain) are aggregated over each claim (``token_chunks``), the EOS
claim is dropped, and the claim scores are compared with the claim labels (-1 = hallucinated = positive class, +1 =
correct) with ROC-AUC, PR-AUC (trapezoid, as the reference), average precision, TPR at FPR 10%, recall at precision
80% and partial PR-AUC at recall <= 20%.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of list of float): per sample, one uncertainty per output token (EOS included),
        higher = more likely hallucinated. With ``score_type="confidence"``: confidences p in [0, 1], scored as 1 - p.
    references (list of list of int): per sample, one label per chunk (EOS claim included): -1 hallucinated,
        +1 correct.
    token_chunks (list of list of list of int): per sample, the claims as runs of consecutive token indices.
    stopword_mask (list of list of bool, optional): per token, whether it is a stopword.
    aggregator (str): "product" (default, 1 - prod(1 - s)), "mean", "max" or "geometric".
    stopword_handling (str): "null" (default, reference: stopword tokens score 0) or "exclude" (removed from the
        claim).
    drop_last_chunk (bool): drop the EOS claim (default True).
    score_type (str): "uncertainty" (default) or "confidence" (predictions are confidences, scored as 1 - p).
    by (dict of str to list, optional): breakdowns, e.g. {"lang": [...]} -> result["by"]["lang"][value].
    bootstrap (much_metric.scoring.Bootstrap, optional): resampling of the samples for percentile intervals
        (default None = no intervals).
    generation_ids (list of str, optional): named in error messages.
    claim_scores (bool): predictions hold one score per chunk (claim-level methods: P(True), judges), EOS claim
        included; scored with much_metric.scoring.score_claims. ``score_type`` applies (1 - p per claim); the
        token-level options (aggregator, stopword_handling, stopword_mask) are an error in this mode. Default False.
Returns:
    dict: ``much_metric.scoring.score(...).to_dict()``: every metric of much_metric.scoring.METRIC_TABLE
    (roc_auc, pr_auc, average_precision, tpr_at_fpr_10, recall_at_precision_80, partial_pr_auc_recall_20,
    partial_average_precision_recall_20, prr, prr_50), n_samples, n_claims, n_hallucinated, aggregator and
    stopword_handling (token mode) or level="claim" (claim mode), plus intervals and by when asked.
Examples:
    >>> import much_metric
    >>> much = much_metric.load_metric()
    >>> result = much.compute(predictions=[[0.9, 0.1, 0.0], [0.2, 0.8, 0.0]], references=[[-1, 1, 1], [1, -1, 1]],
    ...                       token_chunks=[[[0], [1], [2]], [[0], [1], [2]]])
    >>> result["roc_auc"]
    1.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MuchMetric(evaluate.Metric):
    """MUCH claim-level hallucination detection metric."""

    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("float64")),
                    # float64, not int32: an int feature would cast a label 1.5 to 1 before the core can reject it.
                    "references": datasets.Sequence(datasets.Value("float64")),
                }
            ),
            reference_urls=["https://huggingface.co/datasets/orailix/MUCH"],
        )

    def _compute(
        self,
        predictions,
        references,
        token_chunks=None,
        stopword_mask=None,
        aggregator=None,
        stopword_handling=None,
        drop_last_chunk=True,
        score_type="uncertainty",
        by=None,
        bootstrap=None,
        generation_ids=None,
        claim_scores=False,
    ):
        if token_chunks is None:
            raise ValueError("much_metric needs token_chunks=... (one list of claims per prediction)")
        if claim_scores:
            token_level = {"aggregator": aggregator, "stopword_handling": stopword_handling,
                           "stopword_mask": stopword_mask}
            given = [name for name, value in token_level.items() if value is not None]
            if given:
                raise ValueError(f"much_metric: {', '.join(given)} only apply to token scores; with claim_scores=True "
                                 "the predictions are already one score per claim (nothing is aggregated), so "
                                 "leave them out")
            return score_claims(predictions, token_chunks, references, drop_last_chunk=drop_last_chunk,
                                score_type=score_type, by=by, bootstrap=bootstrap,
                                generation_ids=generation_ids).to_dict()
        aggregation = Aggregation(
            aggregator="product" if aggregator is None else aggregator,
            stopword_handling="null" if stopword_handling is None else stopword_handling,
            drop_last_chunk=drop_last_chunk,
            score_type=score_type,
        )
        return score(
            predictions,
            token_chunks,
            references,
            stopword_mask,
            aggregation=aggregation,
            by=by,
            bootstrap=bootstrap,
            generation_ids=generation_ids,
        ).to_dict()
