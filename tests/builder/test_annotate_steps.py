"""The named steps of ``python -m builder annotate`` (its ``run`` split into pure selection, message preparation,
dispatch and the per-judge ledger), each checked on its own; tests/builder/test_annotate*.py run the whole step."""

from __future__ import annotations

import json
from concurrent.futures import Future

import pytest

from builder.annotate import JudgeFailed, JudgeResult, _Ledger, _select, _send
from builder.errors import AuthenticationError
from builder.store import JsonlStore
from much_dataset.schema import CORRECT

JUDGES = [("gpt-4o-2024-11-20", "gpt-4o"), ("gpt-4.1-2025-04-14", "gpt-4.1")]


def test_select_keeps_pending_judges_and_counts_samples_the_filter_would_trash():
    done = {("g1", "gpt-4o"), ("g2", "gpt-4o"), ("g2", "gpt-4.1")}
    todo, skipped = _select(["g0", "g1", "g2", "g3"], lambda gid, key: (gid, key) in done, JUDGES,
                            worth_sending=lambda gid: gid != "g3")
    assert todo == [("g0", JUDGES), ("g1", [JUDGES[1]])]  # g2 fully labelled: neither sent nor counted
    assert skipped == 1  # g3


def _ready(value=None, error=None) -> Future:
    future: Future = Future()
    future.set_exception(error) if error else future.set_result(value)
    return future


def test_send_records_one_failure_per_judge_when_the_sample_has_no_messages(tmp_path):
    ledgers = {key: _Ledger(key, JsonlStore(tmp_path / f"labels.{key}.jsonl")) for _, key in JUDGES}

    def prepare(gid):
        raise ValueError(f"generation_id={gid!r}: no row in context.jsonl")

    assert _send("g0", JUDGES, prepare, lambda *call: pytest.fail("called the judge"), ledgers) == []
    for _, key in JUDGES:
        assert ledgers[key].failed == 1
        failures = (tmp_path / f"labels.{key}.failures.jsonl").read_text().splitlines()
        assert len(failures) == 1 and "no row in context.jsonl" in failures[0]


def test_send_calls_no_judge_for_a_sample_with_only_the_eos_claim(tmp_path):
    ledgers = {key: _Ledger(key, JsonlStore(tmp_path / f"labels.{key}.jsonl")) for _, key in JUDGES}
    calls = []
    sent = _send("g0", JUDGES, lambda gid: ([{"role": "user", "content": "x"}], 0),
                 lambda *call: calls.append(call), ledgers)
    assert calls == [] and [(gid, key) for gid, _, key, _ in sent] == [("g0", "gpt-4o"), ("g0", "gpt-4.1")]
    assert all(future.result().labels == [] for *_, future in sent)
    sent = _send("g1", JUDGES[:1], lambda gid: (["m"], 3), lambda *call: calls.append(call) or _ready(), ledgers)
    assert calls == [("gpt-4o-2024-11-20", ["m"], 3)] and len(sent) == 1


def test_ledger_appends_labels_with_the_eos_claim_and_sums_usage_and_cost(tmp_path):
    ledger = _Ledger("gpt-4o", JsonlStore(tmp_path / "labels.gpt-4o.jsonl"))
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "calls": 1}
    ledger.settle("g0", "gpt-4o-2024-11-20", _ready(JudgeResult(labels=[1, -1], usage=usage, attempts=1)),
                  price=(2.5, 10.0))
    ledger.settle("g1", "gpt-4o-2024-11-20", _ready(error=JudgeFailed("invalid answer", usage)), price=(2.5, 10.0))
    row = json.loads((tmp_path / "labels.gpt-4o.jsonl").read_text())
    assert row["labels"] == [1, -1, CORRECT] and row["judge"] == "gpt-4o" and row["cost_usd"] == pytest.approx(0.0035)
    assert (ledger.ok, ledger.failed, ledger.prompt_tokens, ledger.completion_tokens) == (1, 1, 1000, 100)
    assert ledger.summary() == ("annotate gpt-4o: 1 labelled, 1 failed, 1000 input + 100 output tokens, "
                                "USD 0.0035 (~3.50 per 1,000)")
    with pytest.raises(AuthenticationError):
        ledger.settle("g2", "gpt-4o-2024-11-20", _ready(error=AuthenticationError("HTTP 401")), price=None)


def test_a_judge_without_a_price_says_price_unknown_not_usd_0(tmp_path):
    """Issue 57: ``annotate`` without ``--price`` for a judge printed "USD 0.0000" and stored null."""
    ledger = _Ledger("mine", JsonlStore(tmp_path / "labels.mine.jsonl"))
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "calls": 1}
    ledger.settle("g0", "my-judge", _ready(JudgeResult(labels=[1], usage=usage, attempts=1)), price=None)
    assert json.loads((tmp_path / "labels.mine.jsonl").read_text())["cost_usd"] is None
    summary = ledger.summary()
    assert "price unknown" in summary and "USD 0" not in summary
    ledger.settle("g1", "gpt-4o-2024-11-20", _ready(JudgeResult(labels=[1], usage=usage, attempts=1)),
                  price=(2.5, 10.0))
    assert "USD 0.0035 for the priced answers, 1 answers' price unknown" in ledger.summary()
