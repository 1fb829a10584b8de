"""The files an agent wrote into its workspace, as artifacts of its response.

An agent in a container writes into a host folder mounted at the request's workspace path: the
files are on ATP's machine whether or not the response lists them. :func:`with_workspace_files`
completes the response: a listed file artifact without content gets its size and SHA-256 from
the file where the agent gave none (read in pieces: a large file is never loaded whole; what the
agent declared is kept, and checked by the runner, :mod:`atp.core.artifacts`), and every regular file written
during the run that the response does not list is added as an artifact with its path, size and
hash (the files of the test's workspace fixture, untouched, are not). Hashing is bounded: a
file over :data:`MAX_HASH_BYTES`, or past :data:`HASH_BUDGET_BYTES` hashed in the run, gets its
size only (an agent writing a huge or sparse file costs ATP no more than that). A file whose
name is not UTF-8 cannot be an artifact (a path is text): it is left out with a warning. Evaluators then
read a file's content from the workspace as for any file artifact (atp.evaluators.artifact).

A listed path that leads out of the workspace (``..``, an absolute path elsewhere, a symbolic
link out) is refused with a warning saying so, and nothing of it is read; symbolic links are
never followed when the workspace is walked.

The workspace is walked without recursion (an explicit stack of folders: Python 3.11's
``os.walk`` and ``shutil.rmtree`` recurse, and an agent that nests folders a thousand deep would
make them raise RecursionError), to at most :data:`MAX_DEPTH` levels of folders; deeper files
are not listed, with a warning. :func:`remove_tree` removes a folder an adapter made for a run
(a term-sdk agent's temporary folder) the same way, without following links, and reports what
it could not remove instead of raising.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import msgspec

from atp.core.portability import RAW_FLAGS
from atp.core.protocol import ATPResponse, FileArtifact
from atp.core.tree import MAX_DEPTH as MAX_DEPTH
from atp.core.tree import TOO_DEEP, UNREADABLE, walk_files
from atp.core.tree import remove_tree as remove_tree

MAX_FILES = 1000
"""The most files of a workspace added as artifacts; the rest are counted in a warning."""
MAX_HASH_BYTES = 256 * 1024 * 1024
"""A file larger than this gets its size and no hash."""
HASH_BUDGET_BYTES = 1024 * 1024 * 1024
"""The most bytes hashed for one run; the files after get their sizes only."""
_PIECE = 1024 * 1024


def _inside(root: Path, path: str) -> Path | None:
    """The real path of ``path`` (relative to ``root``, or absolute) when it is inside ``root``
    (``None`` too when it cannot be resolved: a chain of links too long, a name too long)."""
    try:
        real = Path(os.path.realpath(root / path))
    except (OSError, ValueError, RecursionError):
        return None
    return real if real.is_relative_to(root) else None


class _Hasher:
    """Sizes and hashes of a run's files, within the run's budget."""

    def __init__(self) -> None:
        self.budget = HASH_BUDGET_BYTES

    def digest(self, path: Path, since: int = 0) -> tuple[int, str | None] | None:
        """The size and ``sha256:<hex>`` (``None`` past the bounds) of a regular file (not
        through a link) changed at or after ``since`` (nanoseconds), or ``None``."""
        try:
            fd = os.open(path, os.O_RDONLY | RAW_FLAGS | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_mtime_ns < since:
                return None
            if info.st_size > min(MAX_HASH_BYTES, self.budget):
                return info.st_size, None
            self.budget -= info.st_size
            digest, size = hashlib.sha256(), 0
            while size <= info.st_size and (piece := os.read(fd, _PIECE)):  # (it may grow)
                digest.update(piece)
                size += len(piece)
            return size, f"sha256:{digest.hexdigest()}"
        except OSError:
            return None
        finally:
            os.close(fd)


def with_workspace_files(response: ATPResponse, workspace: Path, since: int) -> tuple[ATPResponse, list[str]]:
    """``response`` with its file artifacts completed from ``workspace`` and the other files
    written there since ``since`` (``time.time_ns()`` when the run started) added, and the
    warnings to give (blocking: call it on a worker thread)."""
    root = Path(os.path.realpath(workspace))
    warnings: list[str] = []
    warn = warnings.append
    hasher = _Hasher()
    artifacts = []
    listed: set[Path] = set()
    for artifact in response.artifacts:
        if isinstance(artifact, FileArtifact) and artifact.content is None:
            real = _inside(root, artifact.path)
            if real is None:
                warn(
                    f"the artifact {artifact.path!r} leads out of the workspace {workspace}; ATP does not read it"
                )
            else:
                found = None
                if real not in listed and (artifact.size_bytes is None or artifact.content_hash is None):
                    found = hasher.digest(real)
                listed.add(real)
                if found is not None:  # (only what the agent left out: what it declared is checked)
                    artifact = msgspec.structs.replace(
                        artifact,
                        size_bytes=found[0] if artifact.size_bytes is None else artifact.size_bytes,
                        content_hash=artifact.content_hash or found[1],
                    )
        artifacts.append(artifact)
    added = left = 0
    unnamed: list[str] = []
    too_deep = unreadable = 0
    for path in walk_files(root):
        if path is TOO_DEEP:
            too_deep += 1
            continue
        if path is UNREADABLE:
            unreadable += 1
            continue
        if path in listed:
            continue
        relative = str(path.relative_to(root))
        try:
            relative.encode("utf-8")
        except UnicodeEncodeError:  # (undecodable bytes kept as surrogates)
            unnamed.append(repr(os.fsencode(relative))[2:-1])
            continue
        if added >= MAX_FILES:
            left += 1
            continue
        found = hasher.digest(path, since)
        if found is None:  # a link, a FIFO, a device, a file of the fixture: not the agent's
            continue
        artifacts.append(FileArtifact(path=relative, size_bytes=found[0], content_hash=found[1]))
        added += 1
    if unnamed:
        shown = ", ".join(unnamed[:5]) + (f" and {len(unnamed) - 5} more" if len(unnamed) > 5 else "")
        warn(f"files in the workspace whose names are not UTF-8 are not artifacts: {shown}")
    if left:
        warn(f"the workspace holds {left} more files than the {MAX_FILES} ATP lists as artifacts")
    if too_deep:
        warn(
            f"the workspace has folders more than {MAX_DEPTH} levels deep ({too_deep} of them); the files in "
            "them are not listed as artifacts"
        )
    if unreadable:
        warn(
            f"{unreadable} folder{'' if unreadable == 1 else 's'} of the workspace could not be read; their files are not listed"
        )
    return msgspec.structs.replace(response, artifacts=artifacts), warnings
