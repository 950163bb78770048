"""Writing outputs safely: files that follow the umask, whole output folders put in place at once, one writer each.

Every command writes through these helpers, so the guarantees of docs/troubleshooting.md ("When
things go wrong") hold in one place: a reader sees the old output or the whole new one,
never part; a second run on the same output refuses while the first holds it; an
existing folder is replaced only when it is recognisably this project's output.
"""

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path

__all__ = ["OutputError", "OutputFolder", "atomic_write", "check_output_file", "check_output_folder", "umask_mode",
           "begin", "on_disk", "path_argument"]

MIN_FREE_BYTES = 1 << 20  # a file system with less free space than this is full before the work starts


class OutputError(ValueError):
    """An output location that cannot be used; the message names it and says why."""


def path_argument(text):
    """An ``argparse`` type for a file or folder: ``Path(text)``, refusing an empty name (``Path("")`` is ``.``)."""
    import argparse

    if not text.strip():
        raise argparse.ArgumentTypeError("an empty name is not a file or folder")
    return Path(text)


# What this run's outputs are on disk, for the message of a signal (docs/troubleshooting.md): the outputs checked or made
# (``check_output_file``, ``OutputFolder``) and those of them put in place whole.
_ledger = {"declared": [], "placed": []}
_staging = []  # the staging folders of this process not yet put in place


def begin():
    """Start a command's ledger of outputs afresh (``dashraker.cli.main``: one command, one ledger)."""
    _ledger["declared"].clear()
    _ledger["placed"].clear()


def on_disk():
    """What this command's outputs are on disk now, in words: those put in place whole, and the others left as they
    were; for the message of a signal that ended it."""
    declared = list(dict.fromkeys(_ledger["declared"]))  # a cache written on the way is no output
    placed = [path for path in dict.fromkeys(_ledger["placed"]) if path in declared]
    others = [path for path in declared if path not in placed]
    if not placed:
        return "outputs left as they were"
    text = f"{', '.join(placed)} written whole before it"
    return text + (f"; {', '.join(others)} left as they were" if others else "")


def _declare(path):
    _ledger["declared"].append(str(path))


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM held while the block runs and delivered after it: an output's swap is never cut in two,
    and the signal's message, read after it, says truthfully whether the new output is in place. Held only in the
    main thread, the one Python runs signal handlers in."""
    numbers = (signal.SIGINT, signal.SIGTERM)
    handlers = {number: signal.getsignal(number) for number in numbers}
    if threading.current_thread() is not threading.main_thread() or None in handlers.values():
        yield
        return
    caught = []
    for number in numbers:
        signal.signal(number, lambda number, frame: caught.append(number))
    try:
        yield
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        if caught:
            signal.raise_signal(caught[0])


def _swap(tmp, path):
    """Put ``tmp`` in place of ``path`` (a file, or a folder, which may exist): one rename, or an exchange where the
    system has one; a folder replaced without it passes through a ``.old`` sibling, removed after."""
    if not os.path.isdir(tmp) or not os.path.exists(path):
        os.replace(tmp, path)
    elif not _exchange(tmp, path):
        old = Path(tempfile.mkdtemp(dir=Path(path).parent, prefix=f".{Path(path).name}.", suffix=".old"))
        try:
            os.replace(path, old / "out")
            try:
                os.rename(tmp, path)
            except OSError:
                os.replace(old / "out", path)  # the old output back in its place
                raise
        finally:
            shutil.rmtree(old, ignore_errors=True)


def _put_in_place(tmp, path):
    """``_swap`` with signals held; the output joins the ledger's placed ones unless it is a part of an output folder
    not yet in place (one of ``_staging``)."""
    with _signals_held():
        _swap(tmp, path)
        if not any(Path(path).is_relative_to(folder) for folder in _staging):
            _ledger["placed"].append(str(path))


def umask_mode(mode=0o666):
    """``mode`` with the process's umask applied, as ``open()`` would create a file."""
    mask = os.umask(0)
    os.umask(mask)
    return mode & ~mask


def atomic_write(path, write):
    """Create ``path`` through ``write(binary_file)``: a reader sees the old file or the whole new one, never part.

    The temporary file is made 0600 by ``mkstemp``; it gets the umask's mode before it is renamed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            with os.fdopen(fd, "wb") as file:
                write(file)
                file.flush()
                os.fchmod(file.fileno(), umask_mode())
                os.fsync(file.fileno())
        except OSError as error:  # a full disk: Python's "[Errno 28]" or NumPy's "N requested and M written"
            if error.filename is not None and error.filename != tmp:
                raise
            reason = error.strerror or f"{error} (a short write: the disk is probably full)"
            raise OSError(error.errno, reason, str(path)) from None
        _put_in_place(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _writable_ancestor(path, what):
    """The nearest existing ancestor of ``path``, checked to be a folder this process can create files in."""
    parent = Path(os.path.abspath(path)).parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{what} {path}: {parent} is a file, not a folder")
    try:  # a probe, not os.access: read-only mounts and root both answer it truthfully
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as error:
        raise OutputError(f"{what} {path}: cannot create files in {parent} ({error.strerror})") from None
    space = os.statvfs(parent)
    free = (space.f_bavail if os.geteuid() else space.f_bfree) * space.f_frsize
    if free < MIN_FREE_BYTES:
        raise OutputError(f"{what} {path}: no space left on the file system of {parent} ({free:,} bytes free)")
    return parent


def check_output_file(path, what="output file"):
    """``Path(path)`` if a file can be written there; ``OutputError`` (a folder, an empty name, read-only) if not."""
    if not str(path).strip():
        raise OutputError(f"{what}: an empty name is not a file")
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} {path}: is a folder; give a file name")
    _writable_ancestor(path, what)
    _declare(path)
    return path


def check_output_folder(path, what="output folder"):
    """``Path(path)`` if files can be created in that folder (made if missing); ``OutputError`` (a file, an empty name,
    read-only) if not. For folders written file by file, such as caches, checked before the long work."""
    if not str(path).strip():
        raise OutputError(f"{what}: an empty name is not a folder")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{what} {path}: is a file, not a folder")
    _writable_ancestor(path / "probe", what) if path.is_dir() else _writable_ancestor(path, what)
    return path


def _exchange(a, b):
    """Swap two paths at once (Linux ``renameat2(RENAME_EXCHANGE)``); False where the system cannot."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    at_fdcwd, rename_exchange = -100, 2
    return renameat2 is not None and renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


class OutputFolder:
    """One output folder of a command: checked when made, locked while in use, written whole through ``staging``.

    ``replaceable(path)`` says whether an existing non-empty folder is this project's output of
    this kind and may be replaced (None: never). ``hint`` ends the refusal (e.g. "use --force").
    The lock is a sibling file ``.<name>.lock`` holding the writer's pid, host and command;
    it is an ``flock``, so a killed writer never holds it; the next writer removes the file and
    the staging folders (``.<name>.XXXXXXXX.new``/``.old``) a killed writer left. A path that is
    a symbolic link stands for the folder it points to: that folder is locked and replaced, the
    link stays.
    """

    def __init__(self, path, what, replaceable=None, hint=""):
        if not str(path).strip():
            raise OutputError(f"{what}: an empty name is not a folder")
        self.path, self.what = Path(path), what
        if self.path.is_symlink():
            self.path = Path(os.path.realpath(self.path))
        if self.path.exists() and not self.path.is_dir():
            raise OutputError(f"{what} {self.path}: is a file, not a folder")
        if self.path.is_dir() and any(self.path.iterdir()) and not (replaceable and replaceable(self.path)):
            kind = "replaceable" if replaceable else "an empty folder"
            raise OutputError(f"{what} {self.path}: exists, is not empty and is not {kind}" + (f"; {hint}" if hint else ""))
        if os.path.ismount(self.path):
            raise OutputError(f"{what} {self.path}: is a mount point, which cannot be replaced whole (renamed); give a "
                              "folder inside it")
        _writable_ancestor(self.path, what)
        _declare(self.path)
        self._lock = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.parent / f".{self.path.name}.lock"
        while True:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, umask_mode())
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 4096).decode(errors="replace").strip() or "another process"
                os.close(fd)
                raise OutputError(f"{self.what} {self.path}: in use by {holder}; wait for it to finish") from None
            if os.path.exists(lock_path) and os.stat(lock_path).st_ino == os.fstat(fd).st_ino:
                break
            os.close(fd)  # the previous holder removed this file while we waited for it: take the new one
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} ({' '.join(sys.argv)})\n".encode())
        except OSError as error:  # a full disk: no lock file left behind
            os.unlink(lock_path)
            os.close(fd)
            raise OutputError(f"{self.what} {self.path}: cannot write its lock {lock_path} ({error.strerror})") from None
        self._lock = (fd, lock_path)
        self._remove_stale_staging()
        return self

    def _remove_stale_staging(self):
        """Staging folders of this output that a killed writer left: only the lock's holder makes them, and we hold it."""
        prefix = f".{self.path.name}."
        for entry in self.path.parent.iterdir():
            name = entry.name
            if (name.startswith(prefix) and name.endswith((".new", ".old")) and len(name) == len(prefix) + 12
                    and entry.is_dir() and not entry.is_symlink()):
                shutil.rmtree(entry, ignore_errors=True)

    def __exit__(self, *exc):
        fd, lock_path = self._lock
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)
        os.close(fd)
        self._lock = None

    @contextlib.contextmanager
    def staging(self):
        """A new temporary sibling folder to write into; when the block ends normally it replaces the folder."""
        tmp = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".new"))
        _staging.append(tmp)
        try:
            os.chmod(tmp, umask_mode(0o777))
            yield tmp
            _staging.remove(tmp)
            _put_in_place(tmp, self.path)
        finally:
            if tmp in _staging:
                _staging.remove(tmp)
            shutil.rmtree(tmp, ignore_errors=True)  # after an exchange it holds the old output
