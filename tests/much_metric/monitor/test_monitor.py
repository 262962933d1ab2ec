"""ClaimMonitor on Hugging Face generate with SmolLM2 on CPU: parity with the offline segmenter, the builder's
capture and the offline baselines; calibration against scikit-learn; the ``much monitor`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.much_metric._monitor_helpers import chat_ids, monitored_runs


@pytest.fixture(scope="module")
def runs():
    return monitored_runs()


def _rows(monitor):
    ids, probs = monitor.candidates()
    return [{"generation_id": "g", "output_tokens": monitor.token_ids, "logits_token_ids": ids,
             "logits_values": probs}]


def test_final_claims_equal_segment_of_the_finished_output(runs):
    from much_metric import segment

    llm, results = runs
    for _, monitor, claims, _, _ in results:
        tokens = monitor.token_ids
        text = llm.tokenizer.decode(tokens)
        assert [c.token_indices for c in claims] == segment(text, llm.tokenizer, tokens)
        assert "".join(c.text for c in claims) == text
        assert [c.index for c in claims] == list(range(len(claims)))
        assert [t for c in claims for t in c.token_ids] == tokens


def test_capture_equals_the_builder_capture_of_the_same_generate_call(runs):
    import torch

    from much_metric.capture import top_candidates

    _, results = runs
    for sampling, monitor, _, output, prompt_length in results:
        tokens = output.sequences[0, prompt_length:]
        assert tokens.tolist() == monitor.token_ids
        temperature = sampling.get("temperature", 1.0)
        ids, probs, _, _ = top_candidates(torch.stack(output.logits, dim=1)[0], tokens, temperature=temperature)
        assert monitor.candidates() == (ids, probs)  # bit for bit, as the builder stores them


def test_scores_equal_the_offline_baseline_for_every_probability_only_method(runs):
    from much_dataset.stopwords import stopword_mask
    from much_metric import Aggregation, aggregate_claims
    from much_metric.baselines import available, resolve, token_arrays
    from much_metric.monitor import ClaimMonitor

    llm, results = runs
    methods = [name for b in available().values() if not b.needs for name in b.defaults]
    assert {"token_likelihood", "max_likelihood", "token_entropy_24"} <= set(methods)
    for _, monitor, claims, _, _ in results:
        rows = _rows(monitor)
        ids, probs = monitor.candidates()
        mask = stopword_mask(monitor.token_ids, llm.tokenizer)
        chunks = [c.token_indices for c in claims]
        for method in methods:
            replay = ClaimMonitor(llm.tokenizer, method, aggregation="geometric", threshold=0.3)
            online = [c for i, t in enumerate(monitor.token_ids) for c in replay.push(t, ids[i], probs[i])]
            online += replay.finish()
            offline = resolve(method).compute(token_arrays(rows), {}, {})
            # exact: the same probabilities through the same numpy code in this process (no torch on either side)
            np.testing.assert_array_equal(np.concatenate([c.token_scores for c in online]), offline)
            expected = aggregate_claims([offline], [chunks], [mask],
                                        aggregation=Aggregation(aggregator="geometric", drop_last_chunk=False))[0]
            np.testing.assert_array_equal([c.score for c in online], expected)
            flags = [s >= 0.3 and not c.eos for s, c in zip(expected, online, strict=True)]
            assert [c.flagged for c in online] == flags
        # the generate run itself (token_entropy_24, product)
        offline = resolve("token_entropy_24").compute(token_arrays(rows), {}, {})
        expected = aggregate_claims([offline], [chunks], [mask],
                                    aggregation=Aggregation(aggregator="product", drop_last_chunk=False))[0]
        np.testing.assert_array_equal([c.score for c in claims], expected)
        assert claims[-1].eos and not claims[-1].flagged and claims[-1].token_ids == [llm.tokenizer.eos_token_id]


def test_ktc_online_equals_offline_ktc_with_the_same_statistics(runs):
    from much_metric.baselines import token_arrays
    from much_metric.baselines.methods.ktc import KTC_DEFAULT, SAMPLE_NEIGHBOURS, ktc, load_neighbours
    from much_metric.monitor import ClaimMonitor

    llm, results = runs
    stats = load_neighbours(SAMPLE_NEIGHBOURS)
    for _, monitor, claims, _, _ in results:
        ids, probs = monitor.candidates()
        replay = ClaimMonitor(llm.tokenizer, "ktc", threshold=0.5, neighbours=SAMPLE_NEIGHBOURS)
        online = [c for i, t in enumerate(monitor.token_ids) for c in replay.push(t, ids[i], probs[i])]
        online += replay.finish()
        assert [c.token_indices for c in online] == [c.token_indices for c in claims]
        (offline,) = ktc(token_arrays(_rows(monitor)), KTC_DEFAULT, neighbours=stats)
        np.testing.assert_array_equal(np.concatenate([c.token_scores for c in online]), offline)
    with pytest.raises(ValueError, match="needs neighbours: pass neighbours="):
        ClaimMonitor(llm.tokenizer, "ktc")
    small = load_neighbours(SAMPLE_NEIGHBOURS)
    small = type(small)(small.neighbours[:100], small.counts[:100], small.vocabulary[:100], small.position,
                        small.tokenizer, small.corpus, small.n_tokens)
    with pytest.raises(ValueError, match="cover 100 ids, this tokenizer has 49152"):
        ClaimMonitor(llm.tokenizer, "ktc", neighbours=small)


def test_claims_arrive_while_generating(runs):
    import torch

    from much_metric.monitor import ClaimMonitor

    llm, _ = runs
    monitor = ClaimMonitor(llm.tokenizer, "max_likelihood")
    seen = []
    processor, streamer = monitor.hooks(lambda claim: seen.append((claim, len(monitor.token_ids))))
    ids = chat_ids(llm.tokenizer, "Who wrote Les Misérables?")
    out = llm.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=25,
                             logits_processor=processor, streamer=streamer, pad_token_id=llm.tokenizer.eos_token_id)
    total = out.shape[1] - ids.shape[1]
    assert len(seen) >= 3
    # Each claim is handed over a bounded number of tokens after its end (0.3.0: one claim late), long before the end.
    assert seen[0][1] < total and seen[1][1] < total
    assert all(count > claim.token_indices[-1] for claim, count in seen)


def test_rejects_methods_that_cannot_run_online_and_batches(runs):
    import torch

    from much_metric.monitor import ClaimMonitor

    llm, _ = runs
    with pytest.raises(ValueError, match="needs"):
        ClaimMonitor(llm.tokenizer, "ccp_10_8")
    with pytest.raises(ValueError, match="unknown signal"):
        ClaimMonitor(llm.tokenizer, "no_such_method")
    with pytest.raises(ValueError, match="20 candidates"):
        ClaimMonitor(llm.tokenizer, "token_entropy_24", top_k=20)
    monitor = ClaimMonitor(llm.tokenizer, "max_likelihood")
    ids = chat_ids(llm.tokenizer, "Hi")
    with pytest.raises(ValueError, match="shape"):
        list(monitor.generate(llm.model, torch.cat([ids, ids]), max_new_tokens=2))
    with pytest.raises(ValueError, match="finish"):
        monitor.finish()


# -- calibration ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sample_monitor(runs):
    import much_dataset
    from much_metric.monitor import ClaimMonitor

    llm, _ = runs
    return ClaimMonitor(llm.tokenizer, "token_entropy_24"), much_dataset.load("sample", split="test")


def _claims_of(data, method, aggregator="product"):
    from much_metric import aggregate_claims
    from much_metric.baselines import resolve, token_arrays

    arrays = token_arrays(data)
    scores = arrays.split(resolve(method).compute(arrays, {}, {}))
    claim_scores = aggregate_claims(scores, data["token_chunks"], data["stopword_mask"], aggregation=aggregator)
    labels = [np.asarray(row[: len(s)]) for row, s in zip(data["labels"], claim_scores, strict=True)]
    return np.concatenate(claim_scores), np.concatenate(labels) == -1


@pytest.mark.parametrize("target", [0.05, 0.10, 0.3])
def test_calibrate_fpr_matches_sklearn_roc_curve(sample_monitor, target):
    from sklearn.metrics import roc_curve

    monitor, data = sample_monitor
    result = monitor.calibrate(data, target_fpr=target)
    scores, positive = _claims_of(data, "token_entropy_24")
    fpr, tpr, thresholds = roc_curve(positive, scores, drop_intermediate=False)
    best = np.flatnonzero(fpr <= target)[-1]
    assert result.threshold == pytest.approx(thresholds[best])
    assert result.tpr == pytest.approx(tpr[best]) and result.fpr == pytest.approx(fpr[best]) and result.fpr <= target
    flagged = scores >= result.threshold
    assert result.n_flagged == flagged.sum() and result.precision == pytest.approx(positive[flagged].mean())
    assert monitor.threshold == result.threshold
    # The next lower distinct score would break the target: the threshold is the most sensitive one allowed.
    lower = scores[scores < result.threshold].max()
    assert ((scores >= lower) & ~positive).sum() / (~positive).sum() > target


def test_calibrate_precision_matches_sklearn_pr_curve(sample_monitor):
    from sklearn.metrics import precision_recall_curve

    monitor, data = sample_monitor
    scores, positive = _claims_of(data, "token_entropy_24")
    precision, recall, thresholds = precision_recall_curve(positive, scores, drop_intermediate=False)
    target = 0.6
    ok = np.flatnonzero(precision[:-1] >= target)
    best = ok[np.argmax(recall[ok])]
    result = monitor.calibrate(data, target_precision=target)
    assert result.threshold == pytest.approx(thresholds[best]) and result.tpr == pytest.approx(recall[best])
    assert result.precision == pytest.approx(precision[best]) and result.precision >= target
    with pytest.raises(ValueError, match="not both"):
        monitor.calibrate(data, target_fpr=0.1, target_precision=0.5)
    with pytest.raises(ValueError, match="target_fpr"):
        monitor.calibrate(data, target_fpr=1.5)
    with pytest.raises(ValueError, match="lacks"):
        monitor.calibrate(data.remove_columns(["labels"]))


# -- CLI --------------------------------------------------------------------------------------------------------------

@pytest.fixture()
def cli(runs, monkeypatch, capsys):
    from much_metric import models
    from much_metric.cli import main

    llm, _ = runs
    monkeypatch.setattr(models, "load_causal_lm", lambda name, device=None: (llm.model, llm.tokenizer))

    def call(*argv):
        code = main(["monitor", "--model", "smollm2", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_cli_json_streams_one_claim_per_line_covering_the_tokens(cli):
    code, out, _ = cli("--prompt", "Who wrote Les Misérables?", "--json", "--max-new-tokens", "40")
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    _, results = monitored_runs()[0], monitored_runs()[1]
    greedy = results[0][2]
    assert [r["token_indices"] for r in records] == [c.token_indices for c in greedy]
    assert [r["claim"] for r in records] == list(range(len(records)))
    assert all(0 <= r["score"] <= 1 and r["flagged"] == (r["score"] >= 0.5 and not r["eos"]) for r in records)


def test_cli_text_marks_flagged_claims_and_errors_exit_2(cli):
    code, out, err = cli("--prompt", "Who wrote Les Misérables?", "--max-new-tokens", "40", "--threshold", "0.5")
    greedy = monitored_runs()[1][0][2]
    assert code == 0
    assert out.rstrip("\n") == "".join(f"[[{c.text}]]" if c.flagged else c.text for c in greedy)
    assert "claims flagged" in err
    code, _, err = cli("--prompt", "x", "--method", "ccp_10_8")
    assert code == 2 and err.startswith("much monitor: error: method 'ccp_10_8' needs")
    code, out, err = cli("--prompt", "Who wrote Les Misérables?", "--max-new-tokens", "40", "--method", "ktc",
                         "--json")
    assert code == 0 and "KTC neighbour statistics (shipped, SmolLM2 tokenizer)" in err
    assert [json.loads(line)["token_indices"] for line in out.splitlines()] == [c.token_indices for c in greedy]
    code, _, err = cli("--prompt", "x", "--max-new-tokens", "0")
    assert code == 2 and "much monitor: error: --max-new-tokens" in err
