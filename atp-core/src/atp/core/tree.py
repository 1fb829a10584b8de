"""Folder trees walked, copied and removed without recursion and within bounds.

Anything below a folder an agent could write to is hostile: it may nest folders thousands deep
(Python 3.11's ``os.walk``, ``shutil.copytree`` and ``shutil.rmtree`` recurse, and raise
RecursionError), link out of the tree, take permissions away from its folders, or hold more
files and bytes than anyone needs. Every walk, copy and removal of such a tree goes through
this module: an explicit stack of folders instead of recursion, links never followed, and
bounds on depth, files and bytes. Blocking: call these on a worker thread from async code.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["MAX_DEPTH", "TOO_DEEP", "UNREADABLE", "TreeTooLarge", "copy_tree", "remove_tree", "walk_files"]

MAX_DEPTH = 100
"""The most levels of folders below a tree's root that are walked or copied."""
MAX_COPY_FILES = 100_000
"""The most entries :func:`copy_tree` copies by default."""
MAX_COPY_BYTES = 8 * 1024 * 1024 * 1024
"""The most bytes :func:`copy_tree` copies by default."""
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)

TOO_DEEP = Path("<too deep>")
UNREADABLE = Path("<unreadable>")


def walk_files(root: Path, max_depth: int = MAX_DEPTH) -> Iterator[Path]:
    """The paths of the entries below ``root`` that are not folders (links included: the caller
    does not follow them), folder by folder in the order of their names, as ``os.walk`` gives
    them top-down, without recursion and without entering links to folders. A folder
    ``max_depth`` levels down is not entered (:data:`TOO_DEEP` is yielded for it), one
    that cannot be listed neither (:data:`UNREADABLE`)."""
    for path, is_folder in walk_entries(root, max_depth):
        if not is_folder:
            yield path


def walk_entries(
    root: Path, max_depth: int = MAX_DEPTH, enter: Callable[[str], bool] | None = None
) -> Iterator[tuple[Path, bool]]:
    """Every entry below ``root`` with whether it is a folder (a link never is), as
    :func:`walk_files` walks them: without recursion, top-down, in name order, a folder's
    entries after its files. A folder whose name ``enter`` refuses is yielded but not entered;
    :data:`TOO_DEEP` and :data:`UNREADABLE` (not folders) stand for what could not be entered."""
    stack: list[tuple[str, int]] = [(str(root), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as entries:
                listed = sorted(entries, key=lambda entry: entry.name)
        except OSError:
            yield UNREADABLE, False
            continue
        folders: list[str] = []
        for entry in listed:
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_folder = False
            if is_folder:
                folders.append(entry.path)
            else:
                yield Path(entry.path), False
        for path in folders:
            yield Path(path), True
        for path in reversed(folders):
            if enter is not None and not enter(os.path.basename(path)):
                continue
            if depth + 1 > max_depth:
                yield TOO_DEEP, False
            else:
                stack.append((path, depth + 1))


def remove_tree(root: Path) -> str | None:
    """Remove the folder ``root`` and everything in it, without recursion and without following
    links (a link is removed, not what it points to), also when it nests folders thousands deep
    or has folders without permissions (they are opened up first). Never raises: returns what
    could not be removed, in words, or ``None``. (Blocking: call it on a worker thread.)

    Each folder found is moved up to ``root`` itself before it is emptied, so that no path ever
    grows longer than two names below ``root``, and only two folders are open at a time. Where
    folders cannot be opened (Windows) it goes by path instead (:func:`_remove_by_paths`)."""
    if os.open not in os.supports_dir_fd:
        return _failures(root, _remove_by_paths(root))
    try:
        top = os.open(root, _DIRECTORY_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{root}: {exc.strerror or exc}"
    failed: list[str] = []
    try:
        _writable(top)
        pending = _names(top, failed)
        while pending:
            name = pending.pop()
            _empty(top, name, pending, failed)
            try:
                os.rmdir(name, dir_fd=top)
            except FileNotFoundError:
                pass
            except OSError as exc:
                failed.append(f"{exc.strerror or exc}")
    except Exception as exc:  # (whatever happens, the caller's response stands)
        failed.append(f"{type(exc).__name__}: {exc}")
    finally:
        os.close(top)
    try:
        os.rmdir(root)
    except FileNotFoundError:
        pass
    except OSError as exc:
        failed.append(f"{exc.strerror or exc}")
    return _failures(root, failed)


def _failures(root: Path, failed: list[str]) -> str | None:
    if not failed:
        return None
    shown = "; ".join(dict.fromkeys(failed[:5]))
    return (
        f"{root}: {len(failed)} thing{'' if len(failed) == 1 else 's'} in it could not be removed ({shown})"
    )


def _remove_by_paths(root: Path) -> list[str]:
    """:func:`remove_tree` where folders cannot be opened: folder by folder from an explicit
    stack, each entry by its path, the folders last, deepest first. A link, and on Windows any
    reparse point (a junction too), is removed, never entered; a read-only file is made writable
    first. What could not be removed, in words."""
    failed: list[str] = []
    folders: list[str] = []
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed.append(f"{exc.strerror or exc}")
            continue
        folders.append(folder)
        for entry in listed:
            if _is_folder(entry) and not _is_reparse_point(entry):
                stack.append(entry.path)
            else:
                _remove_path(entry.path, False, failed)  # (a link to a folder too: unlink removes it)
    for folder in reversed(folders):
        _remove_path(folder, True, failed)
    return failed


def _is_reparse_point(entry: os.DirEntry[str]) -> bool:
    """Whether ``entry`` is a link of any kind: a symbolic link, or on Windows a reparse point
    (a junction is one, and is not a symbolic link to Python)."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return True
    attributes = getattr(info, "st_file_attributes", 0)
    return stat.S_ISLNK(info.st_mode) or bool(attributes & getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0))


def _remove_path(path: str, folder: bool, failed: list[str]) -> None:
    remove = os.rmdir if folder else os.unlink
    try:
        try:
            remove(path)
        except PermissionError:  # (Windows: a read-only file or folder is not removed)
            os.chmod(
                path, stat.S_IWRITE | stat.S_IREAD | (stat.S_IEXEC if folder else 0), follow_symlinks=False
            )
            remove(path)
    except FileNotFoundError:
        pass
    except (OSError, NotImplementedError) as exc:
        failed.append(f"{getattr(exc, 'strerror', None) or exc}")


def _names(top: int, failed: list[str]) -> list[str]:
    """The folders right in ``top`` (the other entries are removed at once)."""
    found: list[str] = []
    with os.scandir(top) as entries:
        for entry in list(entries):
            if _is_folder(entry):
                found.append(entry.name)
            else:
                _unlink(entry.name, top, failed)
    return found


def _empty(top: int, name: str, pending: list[str], failed: list[str]) -> None:
    """Empty the folder ``name`` of ``top``: its files and links removed, its folders moved up
    into ``top`` (under fresh names, added to ``pending``)."""
    try:
        fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=top)
    except PermissionError:
        try:
            os.chmod(name, 0o700, dir_fd=top)  # (a folder, not a link: it was found as one)
            fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=top)
        except OSError as exc:
            failed.append(f"{exc.strerror or exc}")
            return
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            failed.append(f"{exc.strerror or exc}")
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # (replaced by a file or a link meanwhile)
            _unlink(name, top, failed)
        return
    try:
        _writable(fd)
        with os.scandir(fd) as entries:
            listed = list(entries)
        for entry in listed:
            if _is_folder(entry):
                moved = f".atp-rm-{uuid.uuid4().hex}"
                try:
                    os.rename(entry.name, moved, src_dir_fd=fd, dst_dir_fd=top)
                except OSError as exc:
                    failed.append(f"{exc.strerror or exc}")
                    continue
                pending.append(moved)
            else:
                _unlink(entry.name, fd, failed)
    except OSError as exc:
        failed.append(f"{exc.strerror or exc}")
    finally:
        os.close(fd)


def _writable(fd: int) -> None:
    """Let the owner list and change the folder ``fd`` (an agent may have taken that away)."""
    try:
        if os.fstat(fd).st_mode & 0o700 != 0o700:
            os.fchmod(fd, 0o700)
    except OSError:
        pass


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _unlink(name: str, folder: int, failed: list[str]) -> None:
    try:
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        pass
    except OSError as exc:
        failed.append(f"{exc.strerror or exc}")


class TreeTooLarge(OSError):
    """A tree :func:`copy_tree` would not copy whole: deeper, or with more files or bytes, than
    its bounds."""


def copy_tree(
    source: Path,
    dest: Path,
    *,
    max_depth: int = MAX_DEPTH,
    max_files: int = MAX_COPY_FILES,
    max_bytes: int = MAX_COPY_BYTES,
) -> None:
    """Copy the folder ``source`` to ``dest`` (which must not exist) without recursion: links
    are copied as links (nothing outside ``source`` is read), files with their permission bits,
    other entries (FIFOs, devices, sockets) left out. Raises :class:`OSError` when it cannot,
    :class:`TreeTooLarge` past ``max_depth`` levels, ``max_files`` entries or ``max_bytes``;
    what was copied so far stays (the caller removes ``dest``)."""
    files = size = 0
    os.mkdir(dest)
    shutil.copymode(source, dest)
    stack: list[tuple[Path, Path, int]] = [(source, dest, 0)]
    while stack:
        folder, target, depth = stack.pop()
        with os.scandir(folder) as entries:
            listed = sorted(entries, key=lambda entry: entry.name)
        for entry in listed:
            files += 1
            if files > max_files:
                raise TreeTooLarge(errno.EFBIG, f"more than {max_files} entries", str(source))
            to = target / entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                os.symlink(os.readlink(entry.path), to)
            elif stat.S_ISDIR(mode):
                if depth + 1 > max_depth:
                    raise TreeTooLarge(errno.EFBIG, f"folders more than {max_depth} levels deep", str(source))
                os.mkdir(to)
                shutil.copymode(entry.path, to)
                stack.append((Path(entry.path), to, depth + 1))
            elif stat.S_ISREG(mode):
                size += entry.stat(follow_symlinks=False).st_size
                if size > max_bytes:
                    raise TreeTooLarge(errno.EFBIG, f"more than {max_bytes} bytes", str(source))
                shutil.copy2(entry.path, to, follow_symlinks=False)
