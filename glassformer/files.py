"""Files that never lose work: atomic writes, JSON read within limits, paths kept in their folder.

Every file and folder glassformer writes goes through here. A file is written to a temporary file
beside it, synced, then renamed over the target; a folder (a checkpoint, a Hugging Face export, a
folder of PNGs) is built beside the target and swapped in with one atomic rename. At every instant
the target is either the complete old version or the complete new one: a full disk, a read-only
folder or a kill -9 leave the old one intact, and a temporary left by a killed writer is removed by
the next writer of that target. Reading, `read_json` refuses non-UTF-8 text, bad JSON and nesting
deep enough to exhaust Python's recursion with one clear error, and `inside` refuses a file of a
model folder that resolves outside it (a symbolic link to elsewhere, `..` in a shard name).

Deliberately not here: what goes into the files (weights.py, hf_dir.py, the explain layer), and
the policy of when an existing target may be replaced (the CLI asks for --overwrite).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from glassformer.errors import GlassformerError


class FileError(GlassformerError):
    """A file that cannot be written, or read as what it should be."""


# -- writing --------------------------------------------------------------------------------------


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
    """Replace the file `path` by `data` atomically (temporary file, fsync, rename)."""
    path = Path(path)
    check_writable(path)
    if path.is_dir():
        raise FileError(f"{path} is a folder; give a file name")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # as a plain open() would create it
        os.replace(tmp, path)
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
    check_writable(path)
    if path.exists() and not path.is_dir():
        raise FileError(f"{path} exists and is not a directory; choose another output path")
    _remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", dir=path.parent))
    try:
        yield tmp
        umask = _umask()
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
            os.chmod(f, 0o666 & ~umask)
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

    with building(path) as tmp:
        for name, arrays in (tensors or {}).items():
            try:
                save_file(arrays, str(tmp / name), metadata=metadata or {"format": "glassformer"})
            except SafetensorError as e:  # safetensors reports a full disk as its own error
                raise OSError(errno.EIO, str(e).removeprefix("Error while serializing: ")) from None
        for name, data in files.items():
            (tmp / name).write_bytes(data)
    return Path(path)


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


def _remove_stale_temporaries(path: Path) -> None:
    """Delete the half-built `.{name}.{pid}.*` folders and files that a killed writer of `path`
    left beside it (their pid no longer runs)."""
    for tmp in path.parent.glob(f".{path.name}.*"):
        pid = tmp.name[len(path.name) + 2 :].split(".")[0]
        if pid.isdecimal() and not _alive(int(pid)):
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                _unlink(tmp)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
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
        raw = path.read_bytes()
    except OSError as e:
        raise FileError(f"cannot read {what} ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FileError(f"{what} is not UTF-8 text; restore it") from None
    return parse_json(text.removeprefix("\ufeff"), what)


def inside(folder: str | Path, path: str | Path) -> Path:
    """`path` if it resolves inside `folder` (links followed), else one clear error: a model
    folder's files are never read from elsewhere."""
    folder, path = Path(folder), Path(path)
    target = path.resolve()
    if not target.is_relative_to(folder.resolve()):
        raise FileError(
            f"{path} points outside {folder} (to {target}); copy the file into the folder"
        )
    return path
