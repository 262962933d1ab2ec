"""The one error loop (:mod:`much_metric.commands`) behind the three commands: ``much``, ``python -m builder`` and
``much-leaderboard`` turn the same library error into the same one-line shape and the same exit code."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

import much_dataset
from much_metric import commands
from much_metric.commands import error_message, run_command

#: A library error as the contract asks for: a ValueError naming the sample, the field and the file, on two lines.
LIBRARY_ERROR = "sample 'g7': field 'labels' in data/test.jsonl:\n    expected a list, got 'yes'"
ONE_LINE = "sample 'g7': field 'labels' in data/test.jsonl: expected a list, got 'yes'"

#: The shape every command's error line has.
SHAPE = re.compile(r"^(much [a-z-]+|builder [a-z-]+|much-leaderboard): error: [^\n]+\n$")


def _raise(error: BaseException):
    def raising(*args, **kwargs):
        raise error

    return raising


def _much(monkeypatch, error):
    """``much run`` whose dataset load (library code) raises ``error``."""
    from much_metric.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(much_dataset, "load", _raise(error))
    return "much run", lambda extra=(): main([*extra, "run", "--source", "sample", "--signals", "token_likelihood",
                                              "--bootstrap", "0"])


def _builder(monkeypatch, error, tmp_path):
    """``python -m builder segment`` whose artifact reader (library code) raises ``error``."""
    import builder.segment
    from builder.cli import main

    monkeypatch.setattr(builder.segment, "run", _raise(error))
    return "builder segment", lambda extra=(): main([*extra, "segment", "--out", str(tmp_path)])


def _leaderboard(monkeypatch, error, tmp_path):
    """``much-leaderboard serve --check`` whose start (library code) raises ``error``."""
    import much_leaderboard._app
    from much_leaderboard import main

    monkeypatch.setattr(much_leaderboard._app, "start", _raise(error))
    return "much-leaderboard", lambda extra=(): main([*extra, "serve", "--check", "--store", str(tmp_path / "s")])


def _entry(name, monkeypatch, error, tmp_path):
    if name == "much":
        return _much(monkeypatch, error)
    return {"builder": _builder, "much-leaderboard": _leaderboard}[name](monkeypatch, error, tmp_path)


ENTRY_POINTS = ("much", "builder", "much-leaderboard")


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_a_library_value_error_is_one_line_and_exit_2(name, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MUCH_DEBUG", raising=False)
    prog, run = _entry(name, monkeypatch, ValueError(LIBRARY_ERROR), tmp_path)
    assert run() == 2
    err = capsys.readouterr().err
    assert err == f"{prog}: error: {ONE_LINE}\n"
    assert SHAPE.match(err)


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_a_bug_is_one_line_naming_its_type_and_exit_1(name, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MUCH_DEBUG", raising=False)
    prog, run = _entry(name, monkeypatch, AttributeError("'NoneType' object has no attribute 'rows'"), tmp_path)
    assert run() == 1
    err = capsys.readouterr().err
    assert err == (f"{prog}: error: AttributeError: 'NoneType' object has no attribute 'rows' "
                   "(--traceback for details)\n")
    assert SHAPE.match(err)


@pytest.mark.parametrize("name", ENTRY_POINTS)
@pytest.mark.parametrize("error", [KeyError("mlp"), TypeError("unsupported operand type(s) for +: 'int' and 'str'"),
                                   IndexError("list index out of range")], ids=lambda e: type(e).__name__)
def test_an_internal_lookup_or_type_error_is_a_bug_exit_1(name, error, tmp_path, capsys, monkeypatch):
    """Only the toolkit's own errors (ValueError and its subclasses, OSError, ImportError) are expected: a KeyError,
    TypeError or IndexError escaping library code is a bug, named with the traceback hint, never "error: missing key"
    with exit 2."""
    monkeypatch.delenv("MUCH_DEBUG", raising=False)
    prog, run = _entry(name, monkeypatch, error, tmp_path)
    assert run() == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}: error: {type(error).__name__}: ") and err.endswith("(--traceback for details)\n")
    assert SHAPE.match(err)


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_an_invalid_parameter_is_an_expected_error_exit_2(name, tmp_path, capsys, monkeypatch):
    from much_dataset.params import InvalidParameterError

    monkeypatch.delenv("MUCH_DEBUG", raising=False)
    prog, run = _entry(name, monkeypatch, InvalidParameterError("score: aggregator must be one of ('mean',), got 'x'"),
                       tmp_path)
    assert run() == 2
    assert capsys.readouterr().err == f"{prog}: error: score: aggregator must be one of ('mean',), got 'x'\n"


def test_the_expected_errors_are_the_toolkits_own():
    assert set(commands.EXPECTED_ERRORS) == {ValueError, OSError, ImportError}


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_ctrl_c_is_130_and_traceback_re_raises(name, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MUCH_DEBUG", raising=False)
    prog, run = _entry(name, monkeypatch, KeyboardInterrupt(), tmp_path)
    assert run() == 130
    assert capsys.readouterr().err == f"{prog}: interrupted\n"
    _, run = _entry(name, monkeypatch, ValueError(LIBRARY_ERROR), tmp_path)
    with pytest.raises(ValueError, match="expected a list"):
        run(["--traceback"])
    monkeypatch.setenv("MUCH_DEBUG", "1")
    with pytest.raises(ValueError, match="expected a list"):
        run()


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_a_missing_package_names_what_installs_it(name, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MUCH_DEBUG", raising=False)
    prog, run = _entry(name, monkeypatch, ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib"),
                       tmp_path)
    assert run() == 2
    extra = "leaderboard" if name == "much-leaderboard" else "report"  # the leaderboard's extra installs it too
    assert capsys.readouterr().err == (f"{prog}: error: No module named 'matplotlib' "
                                       f"(from the toolkit's checkout: pip install '.[{extra}]')\n")


def test_the_three_entry_points_use_the_one_loop():
    """No entry point keeps a loop of its own: their ``main`` (and ``much``'s ``_run``) call ``run_command`` and
    catch nothing themselves."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for path in ("much_metric/cli/__init__.py", "builder/cli.py", "much_leaderboard/_cli.py"):
        tree = ast.parse((root / path).read_text(encoding="utf-8"))
        functions = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in ("main", "_run")]
        assert functions, path
        calls = [node.func.id for f in functions for node in ast.walk(f)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
        assert "run_command" in calls, path
        assert not [node for f in functions for node in ast.walk(f) if isinstance(node, ast.ExceptHandler)], path


def test_messages_are_one_line_and_name_the_extra():
    assert error_message(KeyError("labels")) == "missing key 'labels'"
    assert error_message(ValueError(LIBRARY_ERROR)) == ONE_LINE
    torch = ModuleNotFoundError("No module named 'torch'", name="torch.nn")
    assert "pip install '.[models]'" in error_message(torch)
    assert "pip install '.[learned]'" in error_message(torch, "train")
    assert error_message(OSError()) == "OSError"


def test_a_broken_pipe_that_is_not_stdout_is_an_ordinary_error(capsys):
    """A socket's EPIPE (a server that went away) is a failure to report, not a reader that left."""
    assert run_command("much run", _raise(BrokenPipeError(32, "Broken pipe"))) == 2
    assert capsys.readouterr().err == "much run: error: [Errno 32] Broken pipe\n"


def test_a_reader_that_leaves_early_gets_exit_141_and_no_noise(tmp_path):
    """``much run | head -1``: the command stops quietly (exit 128 + SIGPIPE), with no error line and no
    "Exception ignored" from the interpreter's last flush."""
    script = textwrap.dedent("""
        import sys
        from much_metric.commands import run_command

        def command():
            for _ in range(200_000):
                print("a row of a long table")
            return 0

        sys.exit(run_command("much run", command))
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.read(10)  # the reader takes one line's worth and leaves
    child.stdout.close()
    _, err = child.communicate(timeout=60)
    assert child.returncode == commands.EXIT_BROKEN_PIPE == 141
    assert err.decode() == ""
