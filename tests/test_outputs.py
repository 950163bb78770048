"""The shared output helpers: files follow the umask, folders are replaced whole, a second writer is refused."""

import os
import stat

import pytest

from dashraker.outputs import OutputError, OutputFolder, atomic_write, check_output_file


@pytest.fixture
def umask_022():
    before = os.umask(0o022)
    yield
    os.umask(before)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_files_and_folders_follow_the_umask(tmp_path, umask_022):
    atomic_write(tmp_path / "a.txt", lambda file: file.write(b"x"))
    assert _mode(tmp_path / "a.txt") == 0o644  # mkstemp alone gives 0600
    with OutputFolder(tmp_path / "out", "test output") as out, out.staging() as staging:
        atomic_write(staging / "b.txt", lambda file: file.write(b"y"))
    assert _mode(tmp_path / "out") == 0o755 and _mode(tmp_path / "out" / "b.txt") == 0o644


def test_a_failed_staging_leaves_the_old_folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("old")
    replaceable = lambda path: True  # noqa: E731
    with pytest.raises(RuntimeError), OutputFolder(tmp_path / "out", "test output", replaceable) as out:
        with out.staging() as staging:
            (staging / "new.txt").write_text("new")
            raise RuntimeError("disk full")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary sibling, no lock file
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["old.txt"]
    with OutputFolder(tmp_path / "out", "test output", replaceable) as out, out.staging() as staging:
        (staging / "new.txt").write_text("new")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["new.txt"]  # replaced whole, nothing merged


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    with OutputFolder(tmp_path / "out", "test output"):
        with pytest.raises(OutputError, match=rf"in use by pid {os.getpid()} on "):
            OutputFolder(tmp_path / "out", "test output").__enter__()
    with OutputFolder(tmp_path / "out", "test output"):  # free again once the first is done
        pass


@pytest.mark.parametrize("where, message", [
    ("", "an empty name is not a folder"),
    ("file", "is a file, not a folder"),
    ("foreign", "exists, is not empty and is not an empty folder"),
    ("/proc/dashraker-out", "cannot create files in /proc"),
])  # fmt: skip
def test_unusable_output_folders(tmp_path, where, message):
    (tmp_path / "file").write_text("x")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "keep.txt").write_text("x")
    with pytest.raises(OutputError, match=message):
        OutputFolder(tmp_path / where if where in ("file", "foreign") else where, "test output")


@pytest.mark.parametrize("where, message", [
    ("", "an empty name is not a file"), ("folder", "is a folder; give a file name"),
    ("/proc/dashraker.v", "cannot create files in /proc"),
])  # fmt: skip
def test_unusable_output_files(tmp_path, where, message):
    with pytest.raises(OutputError, match=message):
        check_output_file(tmp_path if where == "folder" else where, "test file")


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), OSError("786432 requested and 256992 written")])
def test_a_full_disk_names_the_file(tmp_path, error):
    """Python's ENOSPC has no file name, NumPy's short write not even an errno: both are raised naming the file."""

    def write(file):
        file.write(b"part")
        raise error

    with pytest.raises(OSError) as raised:
        atomic_write(tmp_path / "map.csv", write)
    assert raised.value.filename == str(tmp_path / "map.csv") and list(tmp_path.iterdir()) == []
    assert ("No space left" if error.errno else "disk is probably full") in raised.value.strerror


def test_a_later_run_removes_what_a_killed_one_left(tmp_path):
    """``kill -9`` during a run leaves its staging folder and the lock file: the next writer of that output removes
    them, and nothing of another output's."""
    (tmp_path / ".out.abcd1234.new").mkdir()
    (tmp_path / ".out.abcd1234.new" / "manifest.json").write_text("{}")
    (tmp_path / ".out.efgh5678.old").mkdir()
    (tmp_path / ".out.lock").write_text("pid 1 on host (killed)\n")
    (tmp_path / ".other.abcd1234.new").mkdir()
    folder = OutputFolder(tmp_path / "out", "trace folder")
    with folder, folder.staging() as staging:
        (staging / "manifest.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.abcd1234.new", "out"]


def test_a_symbolic_link_stands_for_its_folder(tmp_path):
    """The lock is the real folder's and the link survives the run, pointing at the new output."""
    real = tmp_path / "disk" / "out"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    folder = OutputFolder(tmp_path / "link", "--out")
    with folder:
        assert (real.parent / ".out.lock").exists()
        with folder.staging() as staging:
            (staging / "map.csv").write_text("new\n")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "link" / "map.csv").read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "link"]


def test_a_signal_at_the_swap_is_held_until_the_new_folder_is_in_place(tmp_path, signal_at_swap):
    import signal

    from dashraker import outputs

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("old")
    outputs.begin()
    signal_at_swap(signal.SIGINT, tmp_path / "out")
    with pytest.raises(KeyboardInterrupt):
        with OutputFolder(tmp_path / "out", "test output", lambda path: True) as out, out.staging() as staging:
            atomic_write(staging / "new.txt", lambda file: file.write(b"new"))
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["new.txt"]  # whole, not cut in two
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no .new/.old sibling, no lock
    assert outputs.on_disk() == f"{tmp_path / 'out'} written whole before it"


def test_the_message_names_what_was_written_and_what_was_not(tmp_path, signal_at_swap):
    import signal

    from dashraker import outputs
    from dashraker.cli import Terminated

    outputs.begin()
    first, second = check_output_file(tmp_path / "a.json"), check_output_file(tmp_path / "b.yaml")
    assert outputs.on_disk() == "outputs left as they were"
    signal_at_swap(signal.SIGTERM, first)
    with pytest.raises(Terminated):
        atomic_write(first, lambda file: file.write(b"{}"))
    assert first.read_bytes() == b"{}" and not second.exists()
    assert outputs.on_disk() == f"{first} written whole before it; {second} left as they were"
    atomic_write(tmp_path / "cache.json", lambda file: file.write(b"{}"))  # not an output of the command: unnamed
    assert outputs.on_disk() == f"{first} written whole before it; {second} left as they were"


def test_a_mount_point_is_refused_before_any_work(tmp_path, monkeypatch):
    (tmp_path / "mnt").mkdir()
    mounted = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda path: str(path) == str(tmp_path / "mnt") or mounted(path))
    with pytest.raises(OutputError, match="mnt: is a mount point, which cannot be replaced whole"):
        OutputFolder(tmp_path / "mnt", "--out")


def test_a_full_disk_is_refused_before_any_work_and_leaves_no_lock(tmp_path, monkeypatch):
    statvfs = os.statvfs

    def full(path):
        real = statvfs(path)
        return os.statvfs_result((*real[:3], 0, 0, *real[5:]))  # no block free

    monkeypatch.setattr(os, "statvfs", full)
    with pytest.raises(OutputError, match=rf"--out {tmp_path / 'out'}: no space left on the file system of {tmp_path}"):
        OutputFolder(tmp_path / "out", "--out")
    with pytest.raises(OutputError, match="--json .*a.json: no space left"):
        check_output_file(tmp_path / "a.json", "--json")
    monkeypatch.undo()
    folder = OutputFolder(tmp_path / "out", "--out")
    write = os.write

    def no_space(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", no_space)  # the disk fills between the check and the lock
    with pytest.raises(OutputError, match=r"--out .*out: cannot write its lock .*\.out\.lock \(No space left on device\)"):
        folder.__enter__()
    monkeypatch.setattr(os, "write", write)
    assert list(tmp_path.iterdir()) == []  # no lock file left
