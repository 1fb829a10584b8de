"""The folder a command runs in: where each of the agent's files goes (:func:`plan_placements`),
the checks of its paths (:func:`relative_path`), copying the workspace, the artifacts and the
suite's files in within bounds (:class:`_Copier`), and removing it all afterwards
(:func:`atp.core.tree.remove_tree`). :func:`work_folder` makes it and removes it.

**Where a command runs.** In a fresh temporary folder, removed afterwards whatever happens
(without recursion and without following symbolic links, however deep the command nested
folders in it). What goes in:

- with a workspace and no ``path``, a copy of the whole workspace (so a command cannot change
  what other evaluators read); with ``path``, none of the workspace but the files ``path``
  selects (the agent's other files, a ``conftest.py`` or a ``ruff/`` package of its, stay out);
- the agent's file artifacts ``path`` selects (all without it), at their relative paths (inline
  ``content``, or the file read where :func:`~atp.evaluators.paths.resolve` allows); of
  several artifacts with one path, the last is used (the check's details say so);
- last the suite's ``files``, which win over the agent's files of the same name (the details
  say which).

A path that is absolute (outside the workspace), leads out with ``..`` or has more than
:data:`MAX_PATH_PARTS` parts is refused. At most :data:`MAX_COPY_FILES` files (and artifacts)
and :data:`MAX_COPY_BYTES` are copied; beyond that the check fails saying so. ``HOME`` and
``TMPDIR`` are folders of their own beside it, and pytest's JUnit report and ruff's JSON report
are written beside it too, out of the command's working folder (not out of its reach: the
command runs as ATP's user); so is an empty ``pytest.ini``, which stops pytest from looking
further up for its configuration.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import stat
import tempfile
import threading
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import NamedTuple

import anyio

from atp.core.artifacts import inline_content, is_binary
from atp.core.evaluator import EvalContext
from atp.core.portability import RAW_FLAGS
from atp.core.protocol import Artifact, FileArtifact, ReferenceArtifact
from atp.core.secrets import Masker
from atp.core.text import shorten
from atp.core.tree import remove_tree
from atp.evaluators.artifact import describe
from atp.evaluators.paths import norm, resolve

logger = logging.getLogger(__name__)

MAX_COPY_BYTES = 256 * 1024 * 1024
"""At most this many bytes are copied into a command's folder (workspace, artifacts and the
suite's files together)."""
MAX_COPY_FILES = 10_000
"""At most this many files (and links) are copied into a command's folder; an agent that
produced more file artifacts than this is refused before any of them is looked at."""
MAX_PATH_PARTS = 64
"""A path in the command's folder (an artifact's, a suite file's) has at most this many parts."""
SHOWN_PATHS = 20
"""How many paths (of duplicate artifacts, of tests from outside the suite's files) the
details list."""
CLEANUP_WAIT_SECONDS = 60.0
"""How long cleanup waits for a copy that was cancelled to stop, before removing the folder."""


def relative_path(path: str, what: str, masker: Masker | None = None) -> str:
    """``path`` as a relative POSIX path inside a folder; ValueError saying why when it is
    empty, absolute, leads out of the folder with ``..`` or has more than
    :data:`MAX_PATH_PARTS` parts (the path quoted with the secrets of ``masker`` masked: the
    run's, for an agent's path)."""
    if not path or "\0" in path:
        raise ValueError(f"{what} {path!r} names no file")
    normal = norm(path)
    if posixpath.isabs(normal):
        raise ValueError(
            f"{what} {shorten(path, masker=masker)!r} is an absolute path; it must be relative to the folder"
        )
    if normal == ".." or normal.startswith("../"):
        raise ValueError(f"{what} {shorten(path, masker=masker)!r} leads out of the folder (..)")
    if normal == "." or path.endswith("/"):
        raise ValueError(f"{what} {shorten(path, masker=masker)!r} names no file")
    if normal.count("/") >= MAX_PATH_PARTS:
        raise ValueError(
            f"{what} {shorten(path, masker=masker)!r} has {normal.count('/') + 1} parts; ATP takes at most {MAX_PATH_PARTS}"
        )
    return normal


class FolderError(Exception):
    """The command's folder cannot be made as asked: the check fails with this message."""


class _Stopped(Exception):
    """The evaluation was cancelled while files were being copied (raised in the abandoned
    copying thread, to end it)."""


class Placement(NamedTuple):
    """One of the agent's files, and where it goes in the folder."""

    dest: str
    """The relative path in the folder."""
    content: str | bytes | None = None
    """Inline content to write there (a binary artifact's: its bytes, decoded from base64)."""
    source: Path | None = None
    """A file to copy there. Neither: it is in the workspace copy already (checked)."""
    follow: bool = True
    """Whether a last symbolic link of ``source`` is followed (not for a file of the workspace,
    whose links :func:`~atp.evaluators.paths.resolve` has resolved already)."""


class Folder(NamedTuple):
    """A command's folder, made."""

    root: Path
    """The temporary folder that holds all of it; removed afterwards."""
    work: Path
    """Where the command runs."""
    home: Path
    tmp: Path
    placed: list[str]
    """The agent's files placed (relative paths), in artifact order."""
    replaced: list[str]
    """The suite's files that replaced a file of the agent's (or of its workspace)."""
    skipped: int
    """Special files of the workspace (FIFOs, sockets, devices) not copied."""
    duplicates: tuple[str, ...] = ()
    """Paths that several of the agent's artifacts name (the last of them was used), each with
    how many."""


class _Copier:
    """Copies into a folder within :data:`MAX_COPY_FILES` and :data:`MAX_COPY_BYTES`; stops
    (:class:`_Stopped`) at its next file or chunk once :attr:`stop` is set."""

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0
        self.skipped = 0
        self.stop = threading.Event()
        self.done = threading.Event()

    def count(self, files: int = 0, size: int = 0) -> None:
        """Count what is about to be copied; FolderError past the bounds."""
        if self.stop.is_set():
            raise _Stopped
        self.files += files
        self.bytes += size
        if self.files > MAX_COPY_FILES or self.bytes > MAX_COPY_BYTES:
            raise FolderError(
                f"the command's folder would hold more than "
                f"{f'{MAX_COPY_FILES:,} files' if self.files > MAX_COPY_FILES else '256 MiB'} "
                f"(the workspace, the agent's files and the suite's together); ATP copies at most "
                f"{MAX_COPY_FILES:,} files and 256 MiB"
            )

    def room_for(self, size: int) -> None:
        """FolderError when ``size`` more bytes would be past the bounds (before copying them)."""
        if self.bytes + size > MAX_COPY_BYTES:
            self.count(size=size)

    def copy_file(self, source: Path, dest: Path, *, follow: bool, shown: str) -> None:
        """Copy the regular file ``source`` to the new file ``dest`` (keeping its permission
        bits); it is opened without blocking (never waiting on a FIFO) and, unless ``follow``,
        without following a last symbolic link."""
        flags = os.O_RDONLY | RAW_FLAGS | getattr(os, "O_NOCTTY", 0)
        if not follow:
            flags |= getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(source, flags)
        except OSError as exc:
            raise FolderError(f"{shown} cannot be read: {exc.strerror or exc}") from None
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                raise FolderError(f"{shown} is not a regular file; ATP copies only regular files")
            self.count(files=1)
            self.room_for(status.st_size)
            out = _create(dest, (status.st_mode & 0o777) | 0o600)
            try:
                while chunk := os.read(fd, 1024 * 1024):  # (counted as read: the file may grow)
                    self.count(size=len(chunk))
                    _write_all(out, chunk)
            finally:
                os.close(out)
        except OSError as exc:
            raise FolderError(f"{shown} cannot be copied: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def write(self, dest: Path, text: str | bytes, mode: int = 0o644) -> None:
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        self.count(files=1, size=len(data))
        out = _create(dest, mode)
        try:
            _write_all(out, data)
        finally:
            os.close(out)

    def copy_tree(self, source: Path, dest: Path, names: tuple[Path, ...]) -> None:
        """Copy the folder ``source`` into the existing ``dest``: folders, regular files, and
        symbolic links as links (one pointing into the workspace by an absolute path, one of
        ``names``, is pointed at the copy instead); other files are skipped and counted."""
        pending = [(source, dest)]
        while pending:
            here, there = pending.pop()
            try:
                entries = list(os.scandir(here))
            except OSError as exc:
                raise FolderError(
                    f"the workspace folder {here} cannot be read: {exc.strerror or exc}"
                ) from None
            for entry in entries:
                target = there / entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    self.count(files=1)
                    os.mkdir(target, 0o700)
                    pending.append((Path(entry.path), target))
                elif stat.S_ISLNK(mode):
                    self.count(files=1)
                    os.symlink(_relinked(os.readlink(entry.path), names, dest), target)
                elif stat.S_ISREG(mode):
                    self.copy_file(Path(entry.path), target, follow=False, shown=entry.path)
                else:
                    self.skipped += 1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _create(path: Path, mode: int) -> int:
    return os.open(
        path,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0),
        mode,
    )


def _relinked(link: str, workspace: tuple[Path, ...], copy: Path) -> str:
    if not os.path.isabs(link):
        return link
    normal = Path(os.path.normpath(link))
    for base in workspace:
        if normal.is_relative_to(base):
            return str(copy / normal.relative_to(base))
    return link


def _free_path(work: Path, rel: str) -> Path:
    """Where ``rel`` goes in ``work``, with nothing at that path and every folder above it a
    real folder: a symbolic link the workspace copy has on the way is removed (a write must never
    follow it out of the folder), as is a file or link at the path itself."""
    parts = rel.split("/")
    here = work
    for part in parts[:-1]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            os.mkdir(here, 0o700)
            continue
        if stat.S_ISLNK(mode):
            os.unlink(here)
            os.mkdir(here, 0o700)
        elif not stat.S_ISDIR(mode):
            raise FolderError(f"cannot place {rel}: {here.relative_to(work)} is a file, not a folder")
    path = here / parts[-1]
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    if stat.S_ISDIR(mode):
        raise FolderError(f"cannot place {rel}: a folder of that name is there")
    os.unlink(path)
    return path


def _last_of_each(
    placements: list[Placement], masker: Masker | None = None
) -> tuple[list[Placement], tuple[str, ...]]:
    """One placement per path, the last given for it (in the order the paths first came), and
    the paths given more than once, each with how many times (the first :data:`SHOWN_PATHS`,
    the secrets of ``masker`` masked)."""
    last: dict[str, Placement] = {}
    for placement in placements:
        last[placement.dest] = placement
    counts = Counter(p.dest for p in placements)
    duplicates = tuple(
        f"{shorten(dest, masker=masker)} ({count} artifacts; the last was used)"
        for dest, count in counts.items()
        if count > 1
    )
    return list(last.values()), duplicates[:SHOWN_PATHS]


def _materialise(
    root: Path,
    ctx: EvalContext,
    artifacts: list[Artifact],
    suite_files: Mapping[str, str],
    whole_workspace: bool,
    copier: _Copier,
) -> Folder:
    """Make the command's folder under ``root`` (blocking: runs on a worker thread): where each
    artifact goes is worked out here too (:func:`plan_placements`)."""
    try:
        planned, duplicates = _last_of_each(
            plan_placements(ctx, artifacts, whole_workspace, copier.stop), ctx.masker
        )
        work, home, tmp = root / "work", root / "home", root / "tmp"
        for folder in (work, home, tmp):
            os.mkdir(folder, 0o700)
        # pytest looks for its configuration up from the folder: an empty one here stops it
        (root / "pytest.ini").write_text("")
        workspace = ctx.workspace
        if workspace is not None and whole_workspace:
            names = (Path(os.path.normpath(os.path.abspath(workspace))), Path(os.path.realpath(workspace)))
            if not os.path.isdir(names[1]):
                raise FolderError(f"the workspace {workspace} is not a folder ATP can read")
            copier.copy_tree(names[1], work, names)
        for placement in planned:
            if placement.content is not None:
                copier.write(_free_path(work, placement.dest), placement.content)
            elif placement.source is not None:
                dest = _free_path(work, placement.dest)
                copier.copy_file(
                    placement.source,
                    dest,
                    follow=placement.follow,
                    shown=shorten(placement.dest, masker=ctx.masker),
                )
            elif not os.path.lexists(work / placement.dest):
                raise FolderError(f"{shorten(placement.dest, masker=ctx.masker)} is not in the workspace")
        replaced = []
        for rel, text in suite_files.items():
            if os.path.lexists(work / rel):
                replaced.append(rel)
            mode = 0o755 if text.startswith("#!") else 0o644
            copier.write(_free_path(work, rel), text, mode)
        placed = [p.dest for p in planned]
        return Folder(root, work, home, tmp, placed, replaced, copier.skipped, duplicates)
    except OSError as exc:
        raise FolderError(f"ATP could not make the command's folder: {exc}") from None
    finally:
        copier.done.set()


def _remove(root: Path, copier: _Copier) -> None:
    """Remove ``root`` (blocking), once a copy still running into it has stopped."""
    copier.stop.set()
    copier.done.wait(CLEANUP_WAIT_SECONDS)
    problem = remove_tree(root)
    if problem is not None:
        logger.warning("ATP could not remove the temporary folder %s", problem)


def plan_placements(
    ctx: EvalContext,
    artifacts: list[Artifact],
    whole_workspace: bool = True,
    stop: threading.Event | None = None,
) -> list[Placement]:
    """Where each of the agent's file artifacts goes in the command's folder (blocking: it
    resolves paths; runs on a worker thread). FolderError for more than :data:`MAX_COPY_FILES`
    artifacts (refused before any is looked at) and for one that cannot be placed (an
    absolute path outside the workspace, ``..``, too many parts, a file ATP may not read).

    With a workspace copied whole, an artifact without content is there already; otherwise it
    is copied from where :func:`~atp.evaluators.paths.resolve` says (within the workspace,
    its symbolic links resolved, when there is one). ``stop`` ends the work early
    (:class:`_Stopped`)."""
    files = [a for a in artifacts if isinstance(a, (FileArtifact, ReferenceArtifact))]
    _count_artifacts(len(files))
    found = []
    workspace = ctx.workspace
    for artifact in files:
        if stop is not None and stop.is_set():
            raise _Stopped
        path = artifact.path
        try:
            dest = relative_path(_inside_workspace(path, workspace), "artifact path", ctx.masker)
        except ValueError as exc:
            where = "the workspace" if workspace is not None else "the command's folder"
            raise FolderError(
                f"{exc}; ATP places the agent's files in {where} by their relative paths"
            ) from None
        if isinstance(artifact, FileArtifact) and artifact.content is not None:
            found.append(Placement(dest, content=_inline(artifact, ctx)))
            continue
        source, problem = resolve(path, ctx)
        if source is None:
            raise FolderError(problem or f"{describe(artifact, ctx.masker)} cannot be read")
        if workspace is None:
            found.append(Placement(dest, source=source))
        elif whole_workspace:
            found.append(Placement(dest))  # in the workspace copy
        else:
            found.append(Placement(dest, source=source, follow=False))
    return found


def _inline(artifact: FileArtifact, ctx: EvalContext) -> str | bytes:
    """What a file artifact sent inline holds: its text, or the bytes of a binary one (decoded
    from base64, as :mod:`atp.core.artifacts` says); FolderError when they are not base64."""
    if not is_binary(artifact.content_type):
        return artifact.content or ""
    found = ctx.contents.of(artifact) if ctx.contents is not None else None
    if found is None:
        found = inline_content(artifact, ctx.masker)
    if found.data is None:
        raise FolderError(found.note or f"{describe(artifact, ctx.masker)} has no content ATP can read")
    return found.data


def _count_artifacts(count: int) -> None:
    """FolderError for more file artifacts than :data:`MAX_COPY_FILES`."""
    if count > MAX_COPY_FILES:
        raise FolderError(
            f"the agent produced {count:,} file artifacts; ATP copies at most {MAX_COPY_FILES:,} "
            "files into the command's folder"
        )


def _inside_workspace(path: str, workspace: Path | None) -> str:
    """An absolute ``path`` inside ``workspace`` as a path relative to it; any other as it is."""
    if workspace is None or not os.path.isabs(path):
        return path
    normal = Path(os.path.normpath(path))
    for base in (Path(os.path.normpath(os.path.abspath(workspace))), Path(os.path.realpath(workspace))):
        if normal.is_relative_to(base) and normal != base:
            return normal.relative_to(base).as_posix()
    return path


@contextlib.asynccontextmanager
async def work_folder(
    ctx: EvalContext,
    artifacts: list[Artifact],
    suite_files: Mapping[str, str],
    *,
    whole_workspace: bool = True,
) -> AsyncIterator[Folder]:
    """The folder a command runs in (see the module's docstring), made on a worker thread and
    removed when the block ends, however it ends (cancellation included). With a workspace,
    ``whole_workspace`` copies all of it; else only the artifacts are. FolderError when it
    cannot be made as asked."""
    _count_artifacts(sum(isinstance(a, (FileArtifact, ReferenceArtifact)) for a in artifacts))  # (at once)
    root = Path(tempfile.mkdtemp(prefix="atp-code-"))  # (one mkdir: no await, so nothing leaks)
    copier = _Copier()
    try:
        # abandoned when cancelled: the cleanup below stops the copy before removing the folder
        folder = await anyio.to_thread.run_sync(
            _materialise, root, ctx, artifacts, suite_files, whole_workspace, copier, abandon_on_cancel=True
        )
        yield folder
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_remove, root, copier)
