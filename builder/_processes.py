"""A stopped builder step leaves no process behind.

Some steps start child processes that outlive a plain ``kill PID`` of the step: vLLM's engine core and its workers
(``generate --engine vllm``, ``internals --engine vllm``), multiprocessing helpers. Python's default SIGTERM kills
only the step, so its children became orphans that kept the model (and a GPU) busy. :class:`NoOrphans`, around every
step (:func:`builder.cli.main`):

* turns the first SIGTERM or SIGHUP into an interruption (as Ctrl+C's SIGINT already is), so the step unwinds
  through its ``finally`` blocks and the builder's error loop prints ``interrupted``;
* watches for those signals from a thread too (``signal.set_wakeup_fd``): Python runs a signal handler only when the
  main thread executes Python code, and a step blocked in C (vLLM's start-up waits in one ``zmq`` poll for minutes)
  would not run it. When the main thread has not unwound ``unwind`` seconds after the signal, the watcher stops the
  step's descendants itself and ends the process (``os._exit``: what a step writes is appended whole under a lock,
  so this loses no more than a SIGKILL would);
* marks the step a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``; only from the command line, not when a test
  calls :func:`builder.cli.main`), so a grandchild whose parent died is re-parented to the step and still found;
* when the step was interrupted by a signal or stopped by an error, terminates every descendant it started (those
  that existed before the step are left alone: SIGTERM, then
  SIGKILL after ``grace`` seconds), further SIGTERM/SIGINT being held off meanwhile; the exit code is then
  ``128 + signal`` (130 for SIGINT, 143 for SIGTERM).

A step that ends normally leaves its children to their owners' own shutdown. SIGKILL cannot be caught: kill the
process group (``kill -KILL -- -PGID``) to stop a step and its children that way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from types import FrameType, TracebackType

__all__ = ["NoOrphans", "StepTerminated", "descendants"]

_CAUGHT = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)
_PR_SET_CHILD_SUBREAPER = 36


class StepTerminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM/SIGHUP (a ``KeyboardInterrupt``: the error loop prints ``interrupted``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def _children_map() -> dict[int, list[int]]:
    """parent pid -> child pids of every process this user can see (``/proc``; psutil elsewhere; {} without)."""
    children: dict[int, list[int]] = {}
    if os.path.isdir("/proc"):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:  # gone meanwhile
                continue
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after its last ')'
            fields = stat[stat.rfind(b")") + 2:].split()
            if len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(name))
        return children
    try:
        import psutil
    except ImportError:
        return children
    for process in psutil.process_iter(["pid", "ppid"]):
        children.setdefault(process.info["ppid"], []).append(process.info["pid"])
    return children


def descendants(pid: int | None = None) -> list[int]:
    """Every living descendant of ``pid`` (default: this process), parents before their children."""
    children = _children_map()
    found, queue = [], [os.getpid() if pid is None else pid]
    while queue:
        for child in children.get(queue.pop(0), []):
            if child not in found:
                found.append(child)
                queue.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # reap our own zombie children (subreaper: the orphans' too)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    except OSError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:  # a zombie that is not ours to reap is gone
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return True


def _terminate(pids: list[int], grace: float) -> list[int]:
    """SIGTERM ``pids``, SIGKILL those still alive after ``grace`` seconds; the pids that had to be killed."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    stubborn = [pid for pid in pids if _alive(pid)]
    for pid in stubborn:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in stubborn:  # collect them (ours are zombies until waited for)
        end = time.monotonic() + 2.0
        while _alive(pid) and time.monotonic() < end:
            time.sleep(0.02)
    return stubborn


class NoOrphans:
    """Context manager of one step (module docstring); :meth:`exit_code` maps the step's code after a signal."""

    def __init__(self, *, grace: float = 10.0, subreaper: bool = True, unwind: float = 5.0,
                 prog: str = "builder") -> None:
        self.grace, self.subreaper, self.unwind, self.prog = grace, subreaper, unwind, prog
        self.signum: int | None = None
        self._previous: dict[int, object] = {}
        self._before: set[int] = set()
        self._done = threading.Event()
        self._pipe: tuple[int, int] | None = None
        self._previous_wakeup = -1

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:  # the first one stops the step; later ones wait for the clean-up
            self.signum = signum
            raise StepTerminated(signum) if signum != signal.SIGINT else KeyboardInterrupt()

    def __enter__(self) -> NoOrphans:
        self._before = set(descendants())  # what existed before the step is not the step's to stop
        if self.subreaper and sys.platform.startswith("linux"):
            with contextlib.suppress(Exception):
                import ctypes

                ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if _main_thread():
            for signum in (*_CAUGHT, signal.SIGINT):
                self._previous[signum] = signal.signal(signum, self._handle)
            self._watch()
        return self

    def _watch(self) -> None:
        """Start the watcher thread on a wakeup pipe (the C-level handler writes each signal number to it, from
        whichever thread received the signal)."""
        try:
            read, write = os.pipe()
            os.set_blocking(write, False)
            self._previous_wakeup = signal.set_wakeup_fd(write)
        except (AttributeError, OSError, ValueError):  # no wakeup fd here: the main-thread handler alone
            return
        self._pipe = (read, write)
        threading.Thread(target=self._watcher, args=(read,), name="much-no-orphans", daemon=True).start()

    def _watcher(self, read: int) -> None:
        try:
            self._watch_signals(read)
        finally:
            with contextlib.suppress(OSError):
                os.close(read)

    def _watch_signals(self, read: int) -> None:
        while True:
            try:
                data = os.read(read, 64)
            except OSError:
                return
            if not data or self._done.is_set():
                return
            signum = next((b for b in data if b in (*_CAUGHT, signal.SIGINT)), None)
            if signum is None:
                continue
            if self.signum is None:
                self.signum = signum
            if self._done.wait(self.unwind):
                return  # the main thread ran its handler and cleaned up
            # the main thread is stuck in C code: stop what the step started, then end the process
            with contextlib.suppress(Exception):
                found = [pid for pid in descendants() if pid not in self._before]
                if found:
                    _terminate(found, self.grace)
            with contextlib.suppress(Exception):
                sys.stderr.write(f"{self.prog}: interrupted\n")
                sys.stderr.flush()
            os._exit(128 + self.signum)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.reap(kind is not None)

    def reap(self, failed: bool = False) -> list[int]:
        """Terminate every descendant when the step was stopped (a signal, or ``failed``); restores the signal
        handlers. Returns the descendants found."""
        found: list[int] = []
        self._done.set()  # the main thread has taken over: the watcher stands down
        try:
            if self._pipe is not None:
                with contextlib.suppress(ValueError, OSError):
                    signal.set_wakeup_fd(self._previous_wakeup)
            if self.signum is not None or failed:
                for signum in self._previous:  # held off during the clean-up
                    signal.signal(signum, signal.SIG_IGN)
                found = [pid for pid in descendants() if pid not in self._before]
                if found:
                    _terminate(found, self.grace)
        finally:
            if self._pipe is not None:
                with contextlib.suppress(OSError):
                    os.close(self._pipe[1])  # the watcher's read returns end-of-file; it closes its end
                self._pipe = None
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)  # type: ignore[arg-type]
            self._previous.clear()
        return found

    def exit_code(self, code: int) -> int:
        """``code``, or ``128 + signal`` when a signal stopped the step."""
        return 128 + self.signum if self.signum is not None else code


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
