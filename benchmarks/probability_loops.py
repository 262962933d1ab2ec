"""Straightforward per-token implementations of the probability baselines, written from their formulas: the obvious
alternative ``bench_probability_baselines.py`` times against the toolkit's vectorised code (and checks equal to it).

Each takes one token: the sampled id, the candidate ids and their probabilities (the stored top-24), and returns the
token's score (higher = more uncertain). The one copy of these oracles: the test suite checks the toolkit against
them too (tests/much_metric/baselines/test_baselines_probability_more.py imports this file; a benchmark imports no test
module, so they live here).
"""

from __future__ import annotations

import math

from scipy.stats import entropy

from much_metric.baselines.methods.nll import NLL_FLOOR


def token_likelihood(token, ids, probs):
    return 1 - probs[list(ids).index(token)]


def max_likelihood(token, ids, probs):
    return 1 - max(probs)


def token_entropy(token, ids, probs, *, delta):
    return entropy(sorted(probs, reverse=True)[:delta]) / math.log(delta)


def nll(token, ids, probs):
    ids = list(ids)
    p = probs[ids.index(token)] if token in ids else min(probs)
    return -math.log(max(p, NLL_FLOOR))


def margin(token, ids, probs):
    first, second = sorted(probs, reverse=True)[:2]
    return 1 - (first - second)


def _renormalised_top(probs, delta):
    top = sorted(probs, reverse=True)[:delta]
    return [x / sum(top) for x in top]


def renyi(token, ids, probs, *, alpha, delta):
    q = _renormalised_top(probs, delta)
    if alpha == 0:
        h = math.log(sum(1 for x in q if x > 0))
    elif alpha == 1:
        h = entropy(q)
    elif math.isinf(alpha):
        h = -math.log(max(q))
    else:
        h = math.log(sum(x**alpha for x in q)) / (1 - alpha)
    return h / math.log(delta)


def tail_entropy(token, ids, probs, *, delta):
    top = sorted(probs, reverse=True)[:delta]
    outcomes = [*top, max(0.0, 1 - sum(top))]
    return -sum(x * math.log(x) for x in outcomes if x > 0) / math.log(delta + 1)


def self_certainty(token, ids, probs, *, delta):
    q = _renormalised_top(probs, delta)
    if min(q) == 0:
        return 0.0
    kl = -sum(math.log(x) for x in q) / delta - math.log(delta)  # KL(uniform || q)
    return math.exp(-kl)


def boosted(token, ids, probs, p_jump=0.3, epsilon=0.005):
    order = sorted(range(len(probs)), key=lambda k: -probs[k])
    p = [probs[k] for k in order]
    last = None
    for j in range(len(p) - 1):
        gap = p[j] - p[j + 1]
        if gap > p_jump * p[j] and gap > epsilon:
            last = j
    dominant = [] if last is None else [ids[k] for k in order[: last + 1]]
    sampled = probs[list(ids).index(token)]
    return 1 - (sum(p[: last + 1]) if token in dominant else sampled)


def ccp_no_nli(token, ids, probs, *, delta):
    order = sorted(range(len(probs)), key=lambda k: -probs[k])[:delta]
    mass = sum(probs[k] for k in order)
    sampled = probs[list(ids).index(token)]
    if token not in [ids[k] for k in order]:
        mass += sampled
    return 1 - sampled / mass
