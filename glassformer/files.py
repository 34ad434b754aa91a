"""Files that never lose work: atomic writes, JSON read within limits, paths kept in their folder.

Every file and folder glassformer writes goes through here. A file is written to a temporary file
beside it, synced, then renamed over the target; a folder (a checkpoint, a Hugging Face export, a
folder of PNGs) is built beside the target and swapped in with one atomic rename. At every instant
the target is either the complete old version or the complete new one: a full disk, a read-only
folder or a kill -9 leave the old one intact, and a temporary left by a killed writer is removed by
the next writer of that target. Reading, `read_json` refuses non-UTF-8 text, bad JSON and nesting
deep enough to exhaust Python's recursion with one clear error, and `member` is the one rule for
every file a command opens from a folder: it must resolve inside that folder (a symbolic link to
elsewhere, a subfolder that links out, `..` or an absolute name are refused) and be a file;
`regular` / `open_regular` are the rule for every path a user gives: a regular file, told before
anything opens it (a FIFO, a socket, a device or a folder is refused in one line, never read).

Writing follows no link to a file or folder elsewhere. A target that is itself a symbolic link
(`--html out.html` where out.html links to a user's file, `--out run` a link to a folder) is
refused in one line naming the link, --overwrite or not: neither the link nor what it points to is
changed, and the user gives the path it points to (or removes the link). Temporaries are created
with O_EXCL beside the target (a name already taken, a planted link included, is never opened), the
files of a folder with O_EXCL | O_NOFOLLOW inside its fresh private temporary, and the lock file of
an output folder with O_NOFOLLOW: a link there, or a file with another name (a hard link), is
refused and never truncated. A link among the folders above the target is followed: that is how a
user puts outputs on another disk. A killed writer's temporaries are removed by the next writer
of the same file, as of the same folder. Which outputs may not be written onto a command's inputs
is the CLI's rule (cli/common.py, `apart`).

Deliberately not here: what goes into the files (weights.py, hf_dir.py, the explain layer), and
the policy of when an existing target may be replaced (the CLI asks for --overwrite).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from glassformer import interrupts
from glassformer.errors import GlassformerError


class FileError(GlassformerError):
    """A file that cannot be written, or read as what it should be."""


# -- writing --------------------------------------------------------------------------------------

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# A temporary of NAME: `.NAME.PID.` and what mkstemp / mkdtemp append (no dot; `.old`: _swap_in's
# fallback). `.NAME.2.PID.x` is a temporary of `NAME.2`, never of NAME.
_TEMPORARY = re.compile(r"(\d+)\.[A-Za-z0-9_]+(\.old)?")


def refuse_link(path: str | Path) -> None:
    """One clear FileError when the target `path` is itself a symbolic link (dangling or not):
    nothing is written through a link, and no link is replaced by a file (see the docstring)."""
    p = Path(path)
    if p.is_symlink():
        raise FileError(
            f"{p} is a symbolic link (to {_shown(os.readlink(p))}); glassformer writes no output "
            "through a link: give the path it points to, or remove the link"
        )


def check_writable(path: str | Path) -> None:
    """Make the parent folder of `path` and prove a file can be created there, or raise one
    clear error (read-only disk, no permission, a file where a folder should be)."""
    parent = Path(path).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".glassformer-probe.", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise FileError(
            f"cannot write to {parent} ({e.strerror}); choose a writable output folder"
        ) from None


def write_file(path: str | Path, data: bytes) -> Path:
    """Replace the file `path` by `data` atomically (temporary file, fsync, rename); a killed
    writer's temporaries of `path` are removed first."""
    path = Path(path)
    refuse_link(path)
    check_writable(path)
    if path.is_dir():
        raise FileError(f"{path} is a folder; give a file name")
    _remove_stale_temporaries(path)
    # mkstemp: O_CREAT | O_EXCL | O_NOFOLLOW, so a name taken (a link planted there) is skipped
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), 0o666 & ~_umask())  # as a plain open() would create it
        os.replace(tmp, path)  # a link put at `path` meanwhile is replaced, never written through
    except OSError as e:
        _unlink(tmp)
        raise _write_error(path, e) from None
    except BaseException:
        _unlink(tmp)
        raise
    return path


@contextlib.contextmanager
def building(path: str | Path) -> Iterator[Path]:
    """A temporary folder beside `path` to fill; on leaving the block without error it replaces
    `path` in one atomic swap, on an error it is removed and `path` is untouched."""
    path = Path(path)
    refuse_link(path)
    check_writable(path)
    if path.exists() and not path.is_dir():
        raise FileError(f"{path} exists and is not a directory; choose another output path")
    _remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", dir=path.parent))
    try:
        yield tmp
        umask = _umask()
        for f in tmp.iterdir():  # what was written here: a link among them is refused (ELOOP)
            fd = os.open(f, os.O_RDONLY | _NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fsync(fd)
                os.fchmod(fd, 0o666 & ~umask)
            finally:
                os.close(fd)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private
        _swap_in(tmp, path)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_error(path, e) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_directory(
    path: str | Path,
    files: dict[str, bytes],
    tensors: dict[str, dict] | None = None,
    metadata: dict[str, str] | None = None,
) -> Path:
    """Write a folder of plain files and safetensors files ({file name: {name: array}})
    atomically: it is built beside `path`, synced, then swapped in."""
    from safetensors import SafetensorError
    from safetensors.numpy import save_file

    for name in [*(tensors or {}), *files]:
        if Path(name).name != name or name in (".", ".."):
            raise FileError(f"{name!r} is not a file name inside the folder {path}")
    with building(path) as tmp:
        for name, arrays in (tensors or {}).items():
            try:
                save_file(arrays, str(tmp / name), metadata=metadata or {"format": "glassformer"})
            except SafetensorError as e:  # safetensors reports a full disk as its own error
                raise OSError(errno.EIO, str(e).removeprefix("Error while serializing: ")) from None
        for name, data in files.items():
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(tmp / name, flags, 0o600), "wb") as fh:
                fh.write(data)
    return Path(path)


# Every function here that creates, replaces or removes a file, and how it keeps the rule above.
# tests/test_writers_contained.py plants links at each one's target, lock and temporaries, and
# fails when a function of glassformer/ writes a file without being accounted for.
WRITERS = {
    "check_writable": "a probe beside the target: mkstemp (O_EXCL), removed at once",
    "write_file": "a file: a temporary beside it (mkstemp, O_EXCL), synced, renamed over it",
    "building": "a folder: filled in a private temporary beside it (mkdtemp), swapped in",
    "write_directory": "a folder through building, each file created O_EXCL | O_NOFOLLOW",
    "locked": "the lock file beside an output folder: O_NOFOLLOW, one name, removed on leaving",
    "_remove_stale_temporaries": "a dead writer's .NAME.PID.* temporaries: links removed, "
    "never followed",
}


def _write_error(path: Path, e: OSError) -> FileError:
    return FileError(
        f"cannot write {path} ({e.strerror or e}); nothing was changed there: free some space or "
        "choose another place"
    )


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _unlink(path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _shown(text: str) -> str:
    """A path for a one-line message: as it is, or quoted when it holds a newline or the like."""
    return text if text.isprintable() else repr(text)


def _remove_stale_temporaries(path: Path) -> None:
    """Delete the half-built `.{name}.{pid}.{random}` folders and files that a killed writer of
    `path` left beside it (their pid no longer runs). A link found under such a name is removed
    itself, never followed."""
    prefix = f".{path.name}."
    with os.scandir(path.parent) as entries:
        found = [e for e in entries if e.name.startswith(prefix)]
    for entry in found:
        match = _TEMPORARY.fullmatch(entry.name[len(prefix) :])
        if match is None or _alive(int(match[1])):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)  # rmtree removes links, never follows
        else:
            _unlink(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: no pid is that large
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _swap_in(tmp: Path, path: Path) -> None:
    """Replace `path` by the finished directory `tmp`; at every instant one complete copy exists.

    On Linux the two directories are exchanged in one atomic renameat2(RENAME_EXCHANGE) call, so
    even a kill -9 leaves either the old or the new folder at `path`. Elsewhere the old copy is
    moved aside and restored if moving the new one in fails.
    """
    if not path.exists():
        os.replace(tmp, path)
        return
    if _exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old folder
        return
    old = tmp.with_name(tmp.name + ".old")
    os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with Linux renameat2(RENAME_EXCHANGE); False if unsupported."""
    if sys.platform != "linux":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    rc = renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    return rc == 0


# -- reading --------------------------------------------------------------------------------------
# Every path a user gives (--data, --input, --meta, --vocab-from, --tokenizer, a file to check) is
# refused unless it is a regular file, decided by os.stat before anything opens it: opening a FIFO
# blocks until a writer comes, a device such as /dev/zero never ends, and a socket cannot be
# opened at all. The file is then opened without blocking and checked again through its
# descriptor, so that a FIFO put in its place between the two looks is refused too.

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def kind(mode: int) -> str:
    """What an os.stat mode is, in words ("a regular file", "a FIFO (named pipe)", ...)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def regular(path: str | Path) -> Path:
    """`path` once os.stat (links followed, nothing opened) shows a regular file, else one
    FileError naming the path and what it is: a folder, a FIFO, a socket, a device, or nothing."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the name
        raise FileError(
            f"cannot read {path} ({getattr(e, 'strerror', None) or e}); check the path"
        ) from None
    if not stat.S_ISREG(mode):
        raise FileError(f"{path} is {kind(mode)}, not a regular file; give a file")
    return path


def open_regular(path: str | Path):
    """The regular file `path` opened for reading in binary ("rb"), or one FileError: `regular`
    first, then opened with O_NONBLOCK (a FIFO swapped in after the check opens at once instead
    of waiting for a writer) and checked again through the open descriptor before a byte is read."""
    path = regular(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise FileError(f"cannot read {path} ({e.strerror or e}); check the path") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FileError(f"{path} is {kind(mode)}, not a regular file; give a file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_limited(path: str | Path, limit: int, what: str = "a file") -> bytes:
    """The bytes of the regular file `path` (`open_regular`), refused in one FileError when it
    holds more than `limit` bytes (told by its size before reading, and by what a read gives, for
    a file that grows meanwhile)."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        data = fh.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise FileError(
            f"{path} is larger than {limit / 2**20:,.0f} MB, the most glassformer reads as "
            f"{what}; give the right file"
        )
    return data


def parse_json(text: str, what: str):
    """json.loads with one clear error for bad JSON and for nesting too deep to parse."""
    try:
        return json.loads(text)
    except RecursionError:
        raise FileError(f"{what} is nested too deeply to be a valid file; restore it") from None
    except ValueError as e:
        raise FileError(f"{what} is not valid JSON ({e}); restore it") from None


def read_json(path: str | Path, what: str | None = None):
    """The JSON document of a UTF-8 file, or one clear error naming the file."""
    path = Path(path)
    what = what or str(path)
    try:
        with open_regular(path) as fh:
            raw = fh.read()
    except OSError as e:
        raise FileError(f"cannot read {what} ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FileError(f"{what} is not UTF-8 text; restore it") from None
    return parse_json(text.removeprefix("\ufeff"), what)


def member(folder: str | Path, name: str | Path, *, required: bool = True) -> Path | None:
    """`folder / name` once it passes the one rule for every file a command opens from a folder
    it was given (a checkpoint, a training checkpoint, a Hugging Face folder): `name` is a name
    inside the folder (not absolute, no `..`), and the file it leads to, every link followed
    (the file's own or one of a subfolder), lies inside the folder and is a regular file. Else one
    clear FileError naming the file. With `required=False`, None when nothing is there (not even
    a broken link); every reader of a folder's files opens what this returns, so that a model is
    never built from a file elsewhere."""
    folder = Path(folder)
    relative = Path(name)
    if not relative.parts or relative.is_absolute() or ".." in relative.parts:
        raise FileError(
            f"{folder} names the file {str(name)!r}: files must be named inside the folder "
            "(no absolute path, no '..'); fix the name"
        )
    path = folder / relative
    if not os.path.lexists(path):
        if not required:
            return None
        raise FileError(f"{folder} has no {relative}; restore it")
    target = path.resolve()
    if not target.is_relative_to(folder.resolve()):
        raise FileError(
            f"{path} points outside {folder} (to {target}); a model is read only from its own "
            "folder: copy the file into it (cp -L copies what a link points to)"
        )
    if not target.exists():
        raise FileError(f"{path} is a broken link (to {target}); restore the file")
    if target.is_dir():
        raise FileError(f"{path} is a folder; it should be a file: restore it")
    if not target.is_file():
        what = kind(target.stat().st_mode)
        raise FileError(f"{path} is {what}, not a regular file; it should be a file: restore it")
    return path


# Every kind of file a command reads from a folder it is given, each opened through `member`.
# tests/test_readers_contained.py links each out of a real folder and calls its reader, and fails
# when glassformer/ names a file, or gains a function that reads one, that is not accounted for.
READ_FROM_FOLDERS = {
    "checkpoint": tuple(
        "config.json model.safetensors tokenizer.json labels.json snapshot-step*.safetensors "
        "training_state.pt train_config.json log.csv views.safetensors".split()
    ),
    "hugging face": tuple(  # model-*.safetensors: the shards model.safetensors.index.json names
        "config.json model.safetensors model.safetensors.index.json model-*.safetensors "
        "pytorch_model.bin tokenizer.json vocab.txt vocab.json merges.txt tokenizer_config.json "
        "special_tokens_map.json glassformer-tokenizer.json".split()
    ),
    "nanogpt": ("ckpt.pt", "meta.pkl"),
    # corpus/store.py: a store's index, settings and pieces; each shard's shard.json and arrays
    "activation store": ("index.json", "pieces.json", "shard.json", "{stem}.npy", "record.json"),
    # corpus/saelens.py, training/autoencoder.py: an SAE's folder (SAELens's format) and its run
    "sae": ("cfg.json", "sae_weights.safetensors", "training_state.pt"),
}


# -- the lock of an output folder -----------------------------------------------------------------
# A command that writes a folder (train, init, export, import-hf, export-hf) holds its lock for the
# whole run, so that two writers cannot both find it free and overwrite each other. The lock is a
# file beside the folder, `.NAME.lock` (the folder itself is swapped by `building`, and the
# temporaries that `_remove_stale_temporaries` deletes are `.NAME.PID.*`), held with flock: the
# kernel releases it when its process dies, so a lock left by a killed process is taken over. The
# file names its holder (pid, command, since when) for the refusal.


class FolderInUse(FileError):
    """The output folder is being written by another process (which holds its lock)."""


_HELD: dict[Path, list] = {}  # lock file -> [fd, depth]: this process's locks (re-entrant)


def lock_file(path: str | Path) -> Path:
    """The lock file of output folder `path`: `.NAME.lock` beside it (the folder's parent
    resolved, so that every spelling of the folder, links included, has one lock)."""
    p = Path(os.path.abspath(path))
    return p.parent.resolve() / f".{p.name}.lock"


@contextlib.contextmanager
def locked(path: str | Path, command: str) -> Iterator[dict | None]:
    """Hold the exclusive lock of the output folder `path` for the block (re-entrant within a
    process), or raise FolderInUse naming the process that holds it. Yields the record (pid,
    command, since) of a killed holder whose lock was taken over, else None. The lock file is
    removed on leaving."""
    refuse_link(path)  # before the lock: a folder that is a link is never written
    lock = lock_file(path)
    if lock in _HELD:
        _HELD[lock][1] += 1
        try:
            yield None
        finally:
            _HELD[lock][1] -= 1
        return
    held = False
    try:
        with interrupts.whole():  # a Ctrl-C waits until the lock is ours and its removal is due
            check_writable(lock)
            fd, previous = _acquire(lock, Path(path))
            record = {"pid": os.getpid(), "command": command, "since": _now()}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(record).encode(), 0)
            except OSError as e:  # a full disk
                _unlink(lock)
                os.close(fd)
                raise _write_error(lock, e) from None
            _HELD[lock], held = [fd, 1], True
        yield previous
    finally:
        if held:
            with interrupts.whole():  # removed whole, even by a Ctrl-C on the way out
                del _HELD[lock]
                _unlink(lock)  # before the release: a later writer makes and locks a new file
                os.close(fd)


def _acquire(lock: Path, path: Path) -> tuple[int, dict | None]:
    """Lock `lock` (an open fd on the file at that name), or raise FolderInUse. The file is opened
    without following a link (O_NOFOLLOW; O_NONBLOCK: a FIFO there does not hang), and must be a
    regular file with no other name, else it is refused, never truncated."""
    while True:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | _NOFOLLOW
        try:
            fd = os.open(lock, flags, 0o644)
        except OSError as e:
            if os.path.islink(lock) or e.errno == errno.EISDIR:
                what = "a symbolic link" if os.path.islink(lock) else "a folder"
                raise FileError(_not_a_lock(lock, path, what)) from None
            raise _write_error(lock, e) from None
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_nlink > 1:  # nlink 0: removed, see below
            os.close(fd)
            what = "not a regular file" if found.st_nlink <= 1 else "a hard link to another file"
            raise FileError(_not_a_lock(lock, path, what))
        held = _flock(fd)
        previous = _holder(fd)
        if held is None:  # no flock here (some network file systems): trust a live pid
            held = bool(previous) and previous["pid"] != os.getpid() and _alive(previous["pid"])
        if held:
            for _ in range(20):  # a holder that has just locked it writes its name at once
                if previous is not None:
                    break
                _sleep(0.01)
                previous = _holder(fd)
            os.close(fd)
            raise FolderInUse(_in_use(path, previous))
        try:  # the file locked may be one its last holder removed on leaving: lock the new one
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            return fd, previous
        os.close(fd)


def _flock(fd: int) -> bool | None:
    """Try to take the flock: False when taken, True when another process holds it, None where
    the file system (or the platform) has no flock."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError as e:
        if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
            return None
        raise
    return False


def _holder(fd: int) -> dict | None:
    """The record a lock file holds ({pid, command, since}), or None if it is empty or junk."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    ok = isinstance(record, dict) and type(record.get("pid")) is int and record["pid"] > 0
    return record if ok else None


def _not_a_lock(lock: Path, path: Path, what: str) -> str:
    if os.path.islink(lock):
        what += f" (to {_shown(os.readlink(lock))})"
    return (
        f"{lock}, the lock file of {path}, is {what}: it is never written through; remove it "
        f"(rm {_shown(str(lock))}) if no glassformer command is writing {path}, then run again"
    )


def _in_use(path: Path, holder: dict | None) -> str:
    if holder is None:  # it has locked the file and not (yet) written its name
        who = "another process (not yet named in its lock file)"
        stop = "stop it"
    else:
        pid = holder["pid"]
        command, since = (
            " ".join(str(holder.get(k, "?")).split())[:200] for k in ("command", "since")
        )
        who = f"process {pid} ({command}, since {since})"
        stop = f"stop it (kill {pid})"
    return (
        f"{path} is in use: {who} is writing it; wait for it to finish or {stop}, or choose "
        "another output folder"
    )


def _now() -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S")


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)
