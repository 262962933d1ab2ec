"""tests/audit/audit_bad_inputs.py: the classifier on stub commands (clear / generic / silent / hang / traceback) and
one real case of the table against this checkout."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.audit import audit_bad_inputs as audit
from tests.audit import cases as audit_cases
from tests.audit.table import CASES

ROOT = Path(__file__).resolve().parents[2]

STUB = textwrap.dedent("""
    import sys, time
    args = sys.argv[1:]
    if "--clear" in args:
        sys.exit(print("much run: error: --bootstrap must be 0 or at least 40, got 5", file=sys.stderr) or 2)
    if "--generic" in args:
        sys.exit(print("much run: error: something went wrong", file=sys.stderr) or 2)
    if "--overwrite" in args:
        open(args[args.index("--overwrite") + 1], "w").write("replaced")
        print("wrote it")
        sys.exit(0)
    if "--sleep" in args:
        time.sleep(60)
    if "--crash" in args:
        raise ValueError("boom")
    print("fine")
""")


@pytest.fixture(scope="module")
def stub_repo(tmp_path_factory) -> Path:
    """A fake checkout whose ``python -m much_metric`` is the stub above."""
    repo = tmp_path_factory.mktemp("stub-repo")
    for package in ("much_metric", "builder"):
        (repo / package).mkdir()
        (repo / package / "__init__.py").write_text("")
    (repo / "much_metric" / "__main__.py").write_text(STUB)
    return repo


def _run(case: audit_cases.Case, repo: Path, scratch: Path) -> audit.Result:
    """``case`` run against ``repo``; its fixtures are made under ``scratch`` (never beside a real checkout)."""
    fixtures = audit_cases.Fixtures(repo, scratch / f"fixtures-{case.id}", audit.subprocess_env(repo))
    return audit.run_case(case, lambda tmp: audit_cases.CaseContext(tmp, fixtures, repo), repo,
                          audit.subprocess_env(repo), 1.0)


def _input(ctx) -> None:
    ctx.write("in.jsonl", '{"generation_id": "a"}\n')


@pytest.mark.parametrize("flag, expected", [("--clear", "clear"), ("--generic", "generic"), ("--crash", "traceback"),
                                            ("--nothing", "silent")])
def test_stub_outcomes(stub_repo, flag, expected, tmp_path):
    case = audit_cases.Case(f"stub{flag}", "stub", ("much", "run", flag), names=("--bootstrap",), deadline=30)
    result = _run(case, stub_repo, tmp_path)
    assert result.got == expected, result
    assert result.rc == (0 if expected == "silent" else 1 if expected == "traceback" else 2)


def test_overwritten_input_is_silent_data_loss_and_a_good_input_is_ok(stub_repo, tmp_path):
    lost = audit_cases.Case("stub-overwrite", "stub", ("much", "run", "--overwrite", "in.jsonl"), _input,
                             names=("in.jsonl",), keep=("in.jsonl",), deadline=30)
    result = _run(lost, stub_repo, tmp_path)
    assert (result.got, result.rc) == ("silent", 0)
    assert "in.jsonl was modified" in result.note
    good = audit_cases.Case("stub-good", "stub", ("much", "run", "--overwrite", "out.jsonl"), _input,
                             expect="ok", keep=("in.jsonl",), deadline=30)
    assert _run(good, stub_repo, tmp_path).got == "ok"


def test_a_command_past_its_deadline_is_a_hang_and_is_killed(stub_repo, tmp_path):
    case = audit_cases.Case("stub-sleep", "stub", ("much", "run", "--sleep"), deadline=2)
    result = _run(case, stub_repo, tmp_path)
    # the stub sleeps 60 s: under 50 s means it was killed at its 2 s deadline (a bound for hangs, not speed)
    assert result.got == "hang" and result.rc is None and result.seconds < 50


def test_a_real_control_case_is_a_clear_error(tmp_path):
    """One case of the table, run on this checkout: an unknown --signals name is refused with exit 2, named."""
    case = next(c for c in CASES if c.id == "run-signals-unknown")
    result = _run(case, ROOT, tmp_path)
    assert (result.got, result.rc) == ("clear", 2), result
    assert "nope" in result.message


def test_the_table_covers_issue_31():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    new = {c.surface for c in CASES if c.era == "new" and c.bad}
    assert {"builder export", "much evaluate", "much segment", "much run", "much neighbours", "builder replay",
            "builder generate", "much monitor", "builder verify", "learned", "much train", "regressions"} <= new
    assert sum(c.era == "old" and c.bad for c in CASES) >= 30


def test_the_table_covers_issue_44_and_a_case_runs_clear(tmp_path):
    """Issue #44's surfaces are in the table; one of its cases (a bogus --device, refused before any model loads)
    runs clear on this checkout."""
    surfaces = {c.surface for c in CASES if c.bad}
    assert {"issue44 outputs", "issue44 packs", "issue44 exits", "issue44 quiet", "issue44 learned",
            "issue44 server rows"} <= surfaces
    case = next(c for c in CASES if c.id == "internals-device-bogus")
    result = _run(case, ROOT, tmp_path)
    assert (result.got, result.rc) == ("clear", 2), result
    assert "--device 'bogus'" in result.message
