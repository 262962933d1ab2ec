"""The output rules of :mod:`much_metric.fileio` (issue #31) and its atomic writes (#32 (b): no umask switch)."""

from __future__ import annotations

import errno
import os
import stat
import threading

import pytest

from much_metric import fileio
from much_metric.fileio import Output, UnsafeOutputError, atomic_write_bytes, check_outputs


def test_an_output_equal_to_an_input_is_refused(tmp_path):
    source = tmp_path / "scores.jsonl"
    source.write_text("x\n")
    link = tmp_path / "alias.jsonl"
    link.symlink_to(source)
    for path in (source, tmp_path / "." / "scores.jsonl"):
        with pytest.raises(UnsafeOutputError, match="is the input --scores"):
            check_outputs([Output("--json", path)], inputs=[("--scores", str(source))])
    with pytest.raises(UnsafeOutputError):  # a link to the input: refused as a link, and it is the input
        check_outputs([Output("--json", link)], inputs=[("--scores", str(source))])
    assert source.read_text() == "x\n"


def test_a_file_of_an_input_folder_is_refused_a_new_one_is_not(tmp_path):
    folder = tmp_path / "signals"
    folder.mkdir()
    (folder / "a.parquet").write_bytes(b"1")
    with pytest.raises(UnsafeOutputError, match="file of the input --scores"):
        check_outputs([Output("--json", folder / "a.parquet")], inputs=[("--scores", str(folder))])
    check_outputs([Output("--json", folder / "table.json")], inputs=[("--scores", str(folder))])


@pytest.mark.parametrize("target", ["/dev/null", "/dev/full", "/proc/self/fd/1"])
def test_a_link_to_a_device_or_the_standard_output_is_refused(tmp_path, target):
    link = tmp_path / "out.json"
    link.symlink_to(target)
    with pytest.raises(UnsafeOutputError, match="symbolic link"):
        check_outputs([Output("--json", link)])
    with pytest.raises(UnsafeOutputError, match="symbolic link"):
        atomic_write_bytes(link, b"{}")
    assert link.is_symlink() and os.readlink(link) == target


def device_copy(folder, name: str = "full", numbers: tuple[int, int] = (1, 7)):
    """A copy of the full device in ``folder`` (root may create one), else the system's own ``/dev/full`` (which a
    non-root process cannot replace): a regression then never replaces the machine's real device."""
    path = folder / name
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(*numbers))
    except (PermissionError, AttributeError):
        return fileio.Path("/dev/full")
    return path


def test_a_device_node_is_refused_and_kept(tmp_path):
    device = device_copy(tmp_path)
    with pytest.raises(UnsafeOutputError, match="is a device"):
        check_outputs([Output("--output", device)])
    with pytest.raises(UnsafeOutputError, match="is a device"):
        atomic_write_bytes(device, b"{}")
    assert stat.S_ISCHR(os.stat(device).st_mode)


def test_a_named_pipe_is_refused(tmp_path):
    pipe = tmp_path / "fifo"
    os.mkfifo(pipe)
    with pytest.raises(UnsafeOutputError, match="named pipe"):
        atomic_write_bytes(pipe, b"{}")


def test_a_replaced_folder_with_foreign_files_is_refused_and_nothing_is_deleted(tmp_path):
    folder = tmp_path / "much"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "mine.parquet").write_bytes(b"1")
    (folder / "notes.txt").write_text("mine")
    output = Output("--folder", folder, folder=True, replaces=True, owns=lambda name: name.suffix == ".parquet")
    with pytest.raises(UnsafeOutputError, match=r"holds 1 file\(s\) this command did not write \(notes.txt\)"):
        check_outputs([output])
    assert (folder / "notes.txt").read_text() == "mine"
    (folder / "notes.txt").unlink()
    check_outputs([output])  # only its own files left: allowed


def test_a_replaced_folder_holding_an_input_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    output = Output("--folder", out, folder=True, replaces=True, owns=lambda name: True)
    with pytest.raises(UnsafeOutputError, match="holds the input --out"):
        check_outputs([output], inputs=[("--out", str(out))])
    with pytest.raises(UnsafeOutputError, match="holds the input --out"):
        check_outputs([Output("--folder", tmp_path, folder=True, replaces=True, owns=lambda name: True)],
                      inputs=[("--out", str(out))])


def test_outputs_do_not_collide(tmp_path):
    with pytest.raises(UnsafeOutputError, match="is also --json"):
        check_outputs([Output("--json", tmp_path / "a"), Output("--report", tmp_path / "a")])
    signals = Output("--out", tmp_path / "signals", folder=True, owns=lambda name: name.suffix == ".parquet")
    with pytest.raises(UnsafeOutputError, match="is a file that --out"):
        check_outputs([signals, Output("--json", tmp_path / "signals" / "nll.parquet")])
    check_outputs([signals, Output("--json", tmp_path / "signals" / "table.json")])


def test_inputs_that_are_not_local_paths_are_ignored(tmp_path):
    check_outputs([Output("--json", tmp_path / "a.json")], inputs=[("--source", "orailix/MUCH"), ("--source", "sample"),
                                                                    ("--input", "-"), ("--x", None)])


def test_a_failed_write_raises_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "table.json"
    target.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fileio.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_bytes(target, b"new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["table.json"]


# --- #32 (b): the process umask is never switched -----------------------------------------------------------------


def test_atomic_writes_and_the_builder_temp_folder_never_switch_the_umask(tmp_path, monkeypatch):
    from builder import _locks

    calls = []
    monkeypatch.setattr(os, "umask", lambda *a: calls.append(a) or 0o022)
    atomic_write_bytes(tmp_path / "a", b"x")
    with _locks.locked_tempdir(tmp_path, ".much."):
        pass
    assert calls == []


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_modes_follow_the_umask(tmp_path, umask):
    from builder import _locks

    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "a", b"x")
        with _locks.locked_tempdir(tmp_path, ".much.") as folder:
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o777 & ~umask


def test_files_other_threads_create_meanwhile_keep_the_umask(tmp_path):
    """The reproduction of #32 (b): writers and plain file creators in parallel; no created file is group- or
    world-writable under umask 022 (a writer that switched the umask to 0 made some 0666)."""
    from builder import _locks

    old = os.umask(0o022)
    stop = threading.Event()
    bad, created = [], []

    def writer(index):
        while not stop.is_set():
            atomic_write_bytes(tmp_path / f"w{index}", b"x")
            with _locks.locked_tempdir(tmp_path, f".d{index}."):
                pass

    def creator(index):
        for n in range(4000):
            path = tmp_path / f"c{index}-{n}"
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o666))
            created.append(path)
            if stat.S_IMODE(os.stat(path).st_mode) & 0o022:
                bad.append(path)
            path.unlink()

    writers = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    creators = [threading.Thread(target=creator, args=(i,)) for i in range(3)]
    try:
        for thread in writers + creators:
            thread.start()
        for thread in creators:
            thread.join()
    finally:
        stop.set()
        for thread in writers:
            thread.join()
        os.umask(old)
    assert len(created) == 12000 and bad == []


def test_an_input_that_an_output_folder_writes_is_refused(tmp_path):
    """Issue #44: an input (or a file of an input folder) inside an output folder, under a name the command writes
    there, is refused; other names, and an input folder around the output, are not."""
    from pathlib import Path

    out = tmp_path / "out"
    (out / "shards").mkdir(parents=True)
    (out / "manifest.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    writes = fileio.Output("--out", out, folder=True, owns=lambda name: name == Path("manifest.json")
                           or name.parts[0] == "shards")
    with pytest.raises(fileio.UnsafeOutputError, match="writes manifest.json there, which is the input --source"):
        fileio.check_outputs([writes], inputs=[("--source", out / "manifest.json")])
    with pytest.raises(fileio.UnsafeOutputError, match="a file of the input --pack"):
        fileio.check_outputs([writes], inputs=[("--pack", out)])
    fileio.check_outputs([writes], inputs=[("--source", out / "notes.txt"), ("--data", tmp_path)])
