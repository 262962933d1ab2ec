"""Bad-input audit harness (issue #31): run every case of ``tests/audit/table.py`` and classify its outcome.

Each case runs one command (``much ...``, ``python -m builder ...``, ``python -m much_leaderboard ...``) of the
checkout given with ``--repo`` in its own temporary folder, in its own process group, under a deadline. Outcome:

* ``clear``     -- exit 2 (or a code the case allows) with a message naming the thing (the case's ``names``);
* ``generic``   -- a non-zero exit whose message does not name it;
* ``silent``    -- exit 0 on a bad input, or data lost (an input or a foreign file changed/removed, a device node
  replaced, a bad row stored), whatever the exit code;
* ``hang``      -- still running at the deadline (3x the command's own ``--timeout``, at least 60 s): killed;
* ``traceback`` -- "Traceback" in its output, or killed by a signal (a crash);
* for good inputs (controls): ``ok`` (exit 0, nothing lost) or ``refused``;
* ``setup-failed`` / ``skipped`` -- the case could not be prepared (not counted).

Usage::

    python -m tests.audit.audit_bad_inputs [--repo PATH] [--only SURFACE] [--jobs N] [--json OUT]

Prints one line per case (id, expected, got, seconds) and a summary table per surface. Run it from the root of this
checkout; the commands run the code of ``--repo`` (another checkout, e.g. an older commit, is audited with this
checkout's cases and fixtures). ``tests/audit/test_audit_harness.py`` runs the classifier on stub commands and one
real case.
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.audit.cases import CaseContext, Fixtures, SetupSkipped, snapshot
from tests.audit.processes import command_prefix, run_process, subprocess_env
from tests.audit.table import CASES

CLASSES = ("clear", "generic", "silent", "hang", "traceback")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    id: str
    surface: str
    era: str
    bad: bool
    expected: str
    got: str
    seconds: float
    rc: int | None
    note: str = ""
    reported: str = ""
    message: str = ""
    argv: list[str] = field(default_factory=list)


def message_of(stdout: str, stderr: str) -> str:
    """The last non-empty line of stderr (else stdout): what a user reads as the error."""
    for text in (stderr, stdout):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1][:300]
    return ""


def classify(case, rc: int | None, stdout: str, stderr: str, lost: list[str], exit0_accepted: bool,
             extra: str = "") -> tuple[str, str]:
    """(outcome, note) of one finished run; see the module docstring."""
    if rc is None:
        return "hang", "killed at the deadline"
    if "Traceback (most recent call last)" in stderr or "Traceback (most recent call last)" in stdout:
        return "traceback", ""
    if rc < 0:  # killed by a signal: a crash
        return "traceback", f"killed by signal {-rc}"
    if lost:
        return "silent", "data lost: " + "; ".join(lost)
    if not case.bad:
        return ("ok", "") if rc == 0 else ("refused", f"exit {rc}")
    if rc == 0:
        return ("clear", "exit 0, refused in place (per-row failure / warning)") if exit0_accepted else \
            ("silent", "exit 0")
    tail = "\n".join([line for line in stderr.splitlines() if line.strip()][-5:]
                     + [line for line in stdout.splitlines() if line.strip()][-2:] + [extra]).lower()
    named = all(any(alt.lower() in tail for alt in name.split("|")) for name in case.names)
    if rc in case.clear_codes and named:
        return "clear", ""
    return "generic", f"exit {rc}" + ("" if named else f", does not name {list(case.names)}")


def run_case(case, ctx_factory, repo: Path, env: dict[str, str], scale: float) -> Result:
    start = time.monotonic()
    base = Result(case.id, case.surface, case.era, case.bad, case.expect, "setup-failed", 0.0, None,
                  reported=case.reported)
    with tempfile.TemporaryDirectory(prefix=f"audit-{case.id}-") as folder:
        ctx: CaseContext = ctx_factory(Path(folder))
        try:
            with ctx.server(case.server):
                if case.setup is not None:
                    case.setup(ctx)
                argv = [part.format(**ctx.fields()) for part in case.argv]
                full = [*command_prefix(repo, argv[0]), *argv[1:]]
                before = snapshot(ctx.tmp, case.keep)
                absent = [path for path, state in before.items() if state == ("missing",)]
                if absent:
                    raise RuntimeError(f"the setup did not create {absent}")
                deadline = scale * max(60.0, 3.0 * case.timeout) if case.timeout else scale * case.deadline
                rc, stdout, stderr, seconds = run_process(full, cwd=ctx.tmp, env=env, deadline=deadline,
                                                          memory_gb=case.memory_gb)
                lost = snapshot(ctx.tmp, case.keep).diff(before)
                lost += [f"{path} is gone" for path in case.foreign if path not in case.keep
                         and not (ctx.tmp / path).exists() and not (ctx.tmp / path).is_symlink()]
                if case.check is not None:
                    problem = case.check(ctx)
                    if problem:
                        lost.append(problem)
                accepted = bool(case.exit0_ok and case.exit0_ok(ctx, stdout, stderr))
                extra = "\n".join(ctx.path(rel).read_text(errors="replace")[-2000:] for rel in case.message_files
                                  if ctx.path(rel).is_file())
        except SetupSkipped as skip:
            base.got, base.note, base.seconds = "skipped", str(skip), time.monotonic() - start
            return base
        except Exception as error:  # a broken fixture is the harness's fault, reported as such
            base.note, base.seconds = f"{type(error).__name__}: {error}"[:300], time.monotonic() - start
            return base
    got, note = classify(case, rc, stdout, stderr, lost, accepted, extra)
    return Result(case.id, case.surface, case.era, case.bad, case.expect, got, round(seconds, 1), rc, note,
                  case.reported, message_of(stdout, stderr), [argv[0], *argv[1:]])


def summary(results: list[Result]) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for result in results:
        if not result.bad or result.got in ("skipped", "setup-failed"):
            continue
        for key in ((result.era, result.surface), (result.era, "(all)")):
            row = rows.setdefault(key, {"era": key[0], "surface": key[1], "cases": 0, **dict.fromkeys(CLASSES, 0)})
            row["cases"] += 1
            row[result.got] += 1
    return [rows[key] for key in sorted(rows, key=lambda k: (k[0] != "new", k[1] == "(all)", k[1]))]


def print_summary(results: list[Result]) -> None:
    print()
    print(f"{'era':4} {'surface':24} {'cases':>5} " + " ".join(f"{c:>9}" for c in CLASSES))
    for row in summary(results):
        print(f"{row['era']:4} {row['surface']:24} {row['cases']:>5} " + " ".join(f"{row[c]:>9}" for c in CLASSES))
    good = [r for r in results if not r.bad]
    if good:
        print(f"good-input controls: {sum(r.got == 'ok' for r in good)} ok / {len(good)}"
              + "".join(f"; {r.id}: {r.got}" for r in good if r.got != "ok"))
    other = [r for r in results if r.got in ("skipped", "setup-failed")]
    if other:
        print(f"not run: {len(other)} (" + ", ".join(f"{r.id}: {r.got}" for r in other) + ")")
    unexpected = [r for r in results if r.got not in ("skipped", "setup-failed") and r.got != r.expected]
    print(f"cases whose outcome differs from the expected one: {len(unexpected)} / {len(results)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout to audit (default: this one)")
    parser.add_argument("--only", action="append", default=[],
                        help="only cases whose surface (or id) starts with this (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once (default 1)")
    parser.add_argument("--json", type=Path, default=None, help="write every result and the summary here")
    parser.add_argument("--deadline-scale", type=float, default=1.0,
                        help="multiply every per-case deadline (a loaded machine: 2)")
    parser.add_argument("--total-timeout", type=float, default=3600.0,
                        help="seconds for the whole audit; cases not started by then are skipped (default 3600)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.deadline_scale <= 0 or args.total_timeout <= 0:
        parser.error("--jobs, --deadline-scale and --total-timeout must be positive")
    repo = args.repo.resolve()
    if not (repo / "much_metric").is_dir() or not (repo / "builder").is_dir():
        parser.error(f"--repo {repo}: not a MUCH checkout (no much_metric/ and builder/)")
    cases = [c for c in CASES
             if not args.only or any(c.surface.startswith(o) or c.id.startswith(o) for o in args.only)]
    if args.list:
        for case in cases:
            print(f"{case.id:40} {case.era:3} {case.surface:22} expect={case.expect:6} {' '.join(case.argv)}")
        return 0
    env = subprocess_env(repo)
    work = Path(tempfile.mkdtemp(prefix="much-audit-"))
    fixtures = Fixtures(repo, work / "fixtures", env, scale=args.deadline_scale)
    ctx_factory = lambda tmp: CaseContext(tmp, fixtures, repo)  # noqa: E731
    stop_at = time.monotonic() + args.total_timeout
    results: list[Result] = []

    def one(case) -> Result:
        if time.monotonic() > stop_at:
            return Result(case.id, case.surface, case.era, case.bad, case.expect, "skipped", 0.0, None,
                          "--total-timeout reached", case.reported)
        return run_case(case, ctx_factory, repo, env, args.deadline_scale)

    print(f"auditing {repo} ({len(cases)} cases, {args.jobs} at a time)", flush=True)
    try:
        with futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for result in pool.map(one, cases):
                results.append(result)
                mark = "" if result.got == result.expected else \
                    "  <-- " + " | ".join(filter(None, (result.note, result.message)))[:220]
                print(f"{result.id:40} expected={result.expected:7} got={result.got:12} {result.seconds:6.1f}s"
                      f"{mark}", flush=True)
    finally:
        fixtures.close()
        shutil.rmtree(work, ignore_errors=True)
    print_summary(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"repo": str(repo), "results": [asdict(r) for r in results],
                                         "summary": summary(results)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
