"""Which estimators of LM-Polygraph 0.7.0 and scorers of UQLM 0.6.7 run on MUCH's stored top-24, and which do not.

Read from the peers' own code (each estimator's declared dependencies): an estimator runs here when every statistic
it reads can be filled from a stored row -- ``greedy_log_likelihoods`` (log p of each sampled token),
``greedy_log_probs`` (log p of the stored candidates), ``greedy_tokens``, ``entropy`` (LM-Polygraph's
``EntropyCalculator`` over the stored candidates) -- and the claims. Everything else needs the generating model, sampled
outputs or an auxiliary model the adapter is not given, and is refused by name before any work.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LMPOLYGRAPH", "LMPOLYGRAPH_REFUSED", "UQLM", "UQLM_REFUSED", "PeerEstimator"]


@dataclass(frozen=True)
class PeerEstimator:
    """One runnable estimator: its level (``claim``: the peer scores claims through ``aligned_token_ids``;
    ``sequence``: each claim's tokens are handed over as one generation), the statistics it reads, and how its
    uncertainty maps into [0, 1] (:func:`much_peers._inputs.to_unit`)."""

    level: str
    stats: tuple[str, ...]
    kind: str
    formula: str


_LL = ("greedy_log_likelihoods",)
_LP = ("greedy_log_probs",)

#: LM-Polygraph estimators that run on stored top-24 (class name -> how).
LMPOLYGRAPH: dict[str, PeerEstimator] = {
    "MaximumClaimProbability": PeerEstimator("claim", _LL, "nll", "-sum log p over the claim's tokens"),
    "PerplexityClaim": PeerEstimator("claim", _LL, "nll", "-mean log p over the claim's tokens"),
    "MaxTokenEntropyClaim": PeerEstimator("claim", ("entropy",), "nll",
                                          "max over the claim's tokens of the entropy of the stored candidates"),
    "SelfCertaintyClaim": PeerEstimator("claim", _LP, "real",
                                        "-mean over tokens of (-mean log p_k - log K), K the stored candidates"),
    "BoostedProbClaim": PeerEstimator("claim", (*_LP, "greedy_tokens"), "negprob",
                                      "-mean BoostedProb (dominant-mass probability) over the claim's tokens"),
    "MaximumSequenceProbability": PeerEstimator("sequence", _LL, "nll", "-sum log p (the claim as a sequence)"),
    "Perplexity": PeerEstimator("sequence", _LL, "nll", "-mean log p (the claim as a sequence)"),
    "MeanTokenEntropy": PeerEstimator("sequence", ("entropy",), "nll", "mean entropy of the stored candidates"),
    "SelfCertainty": PeerEstimator("sequence", _LP, "real", "-mean self-certainty (the claim as a sequence)"),
    "RenyiNeg": PeerEstimator("sequence", _LP, "real",
                              "mean Renyi divergence from uniform, softmax over the stored log p (renormalised)"),
    "FisherRao": PeerEstimator("sequence", _LP, "unit",
                               "mean Fisher-Rao distance to uniform, softmax over the stored log p (renormalised)"),
    "BoostedProbSequence": PeerEstimator("sequence", (*_LP, "greedy_tokens"), "negprob",
                                         "-mean BoostedProb (the claim as a sequence)"),
}

_MODEL = "the generating model (a forward pass)"
_SAMPLES = "sampled outputs (several generations per prompt)"
#: LM-Polygraph estimators refused, with what they need that stored top-24 does not hold.
LMPOLYGRAPH_REFUSED: dict[str, str] = {
    "ClaimConditionedProbabilityClaim": "an NLI model over the token alternatives (greedy_tokens_alternatives_nli); "
                                        "MUCH's own CCP is ccp_{delta}_{sigma}",
    "ClaimConditionedProbability": "an NLI model over the token alternatives (greedy_tokens_alternatives_nli)",
    "PTrueClaim": f"{_MODEL} asked whether each claim is true (p_true_claim)",
    "PTrue": f"{_MODEL} asked whether the answer is true",
    "PTrueSampling": f"{_MODEL} and {_SAMPLES}",
    "PTrueEmpirical": "the prompts and greedy texts scored by a judge",
    "PointwiseMutualInformationClaim": f"{_MODEL} without the prompt (greedy_lm_log_likelihoods)",
    "PointwiseMutualInformation": f"{_MODEL} without the prompt (greedy_lm_log_likelihoods)",
    "MeanPointwiseMutualInformation": f"{_MODEL} without the prompt (greedy_lm_log_likelihoods)",
    "ConditionalPointwiseMutualInformation": f"{_MODEL} without the prompt (greedy_lm_log_likelihoods)",
    "MeanConditionalPointwiseMutualInformation": f"{_MODEL} without the prompt (greedy_lm_log_likelihoods)",
    "AttentionScoreClaim": "the model's attention weights (forwardpass_attention_weights)",
    "AttentionScore": "the model's attention weights (forwardpass_attention_weights)",
    "FocusClaim": "the model's attentions (attention_all), its tokenizer and token-frequency statistics",
    "Focus": "the model's attentions (attention_all), its tokenizer and token-frequency statistics",
    "RAUQ": "the model's attention weights and the number of heads/layers",
    "CSL": "the model's attention to an eliciting prompt",
    "TokenSARClaim": "a sentence-similarity model over token removals (token_similarity)",
    "TokenSAR": "a sentence-similarity model over token removals (token_similarity)",
    "FrequencyScoringClaim": f"{_SAMPLES} and an NLI model",
    "RandomBaselineClaim": "nothing, but it draws from the unseeded global numpy generator: not reproducible; the "
                           "table's [floor: random] row is the seeded equivalent",
    "MaximumTokenProbability": "nothing, but it is token-level and drops each generation's last token "
                               "(log_likelihood[:-1]); MUCH's token_likelihood scores every token",
    "TokenEntropy": "nothing, but it is token-level and drops each generation's last token (entropy[:-1]); MUCH's "
                    "token_entropy_{delta} scores every token",
    "SemanticEntropy": f"{_SAMPLES} and an NLI model",
    "SemanticEntropyToken": f"{_SAMPLES} and an NLI model",
    "SAR": f"{_SAMPLES} and a sentence-similarity model",
    "SentenceSAR": f"{_SAMPLES} and a sentence-similarity model",
    "MonteCarloSequenceEntropy": _SAMPLES,
    "MonteCarloNormalizedSequenceEntropy": _SAMPLES,
    "LexicalSimilarity": _SAMPLES,
    "NumSemSets": f"{_SAMPLES} and an NLI model",
    "EigValLaplacian": f"{_SAMPLES} and an NLI model",
    "DegMat": f"{_SAMPLES} and an NLI model",
    "Eccentricity": f"{_SAMPLES} and an NLI model",
    "KernelLanguageEntropy": f"{_SAMPLES} and an NLI model",
    "LUQ": f"{_SAMPLES} and an NLI model",
    "EigenScore": f"{_SAMPLES} and their embeddings",
    "SemanticDensity": f"{_SAMPLES} and an NLI model",
    "CocoaMSP": f"{_SAMPLES} and a sentence-similarity model",
    "CocoaPPL": f"{_SAMPLES} and a sentence-similarity model",
    "CocoaMTE": f"{_SAMPLES} and a sentence-similarity model",
    "MahalanobisDistanceSeq": "the model's hidden states and training embeddings",
    "RelativeMahalanobisDistanceSeq": "the model's hidden states and training embeddings",
    "RDESeq": "the model's hidden states and training embeddings",
    "PPLMDSeq": "the model's hidden states and training embeddings",
    "Verbalized1S": f"{_MODEL} asked for a verbalised confidence",
    "Verbalized2S": f"{_MODEL} asked for a verbalised confidence",
    "Linguistic1S": f"{_MODEL} asked for a linguistic confidence",
    "LabelProb": f"{_SAMPLES} and an NLI model",
}

#: UQLM white-box scorers that run on stored top-24 (scorer -> formula of the confidence, higher = more certain).
UQLM: dict[str, str] = {
    "sequence_probability": "exp(mean log p) over the claim's tokens (length_normalize=True, UQLM's default)",
    "min_probability": "min p over the claim's tokens",
    "mean_token_negentropy": "mean over tokens of 1 - H(renormalised top-K) / log K",
    "min_token_negentropy": "min over tokens of 1 - H(renormalised top-K) / log K",
    "probability_margin": "mean over tokens of p1 - p2",
}

#: UQLM scorers refused, with what they need.
UQLM_REFUSED: dict[str, str] = {
    "p_true": "an LLM asked whether the answer is true",
    "monte_carlo_probability": "sampled responses with their logprobs",
    "consistency_and_confidence": "sampled responses and a sentence-transformer",
    "semantic_negentropy": "sampled responses and an NLI model",
    "semantic_density": "sampled responses and an NLI model",
    "normalized_probability": "nothing: deprecated by UQLM 0.5 in favour of sequence_probability",
}
