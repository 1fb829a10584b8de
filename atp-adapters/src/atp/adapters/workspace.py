"""The files an agent wrote into its workspace, as artifacts of its response.

An agent in a container writes into a host folder mounted at the request's workspace path: the
files are on ATP's machine whether or not the response lists them. :func:`with_workspace_files`
completes the response: a listed file artifact without content gets its size and SHA-256 from
the file (read in pieces: a large file is never loaded whole), and every regular file written
during the run that the response does not list is added as an artifact with its path, size and
hash (the files of the test's workspace fixture, untouched, are not). Evaluators then
read a file's content from the workspace as for any file artifact (atp.evaluators.artifact).

A listed path that leads out of the workspace (``..``, an absolute path elsewhere, a symbolic
link out) is refused with a warning saying so, and nothing of it is read; symbolic links are
never followed when the workspace is walked.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import msgspec

from atp.core.protocol import ATPResponse, FileArtifact

MAX_FILES = 1000
"""The most files of a workspace added as artifacts; the rest are counted in a warning."""
_PIECE = 1024 * 1024


def _inside(root: Path, path: str) -> Path | None:
    """The real path of ``path`` (relative to ``root``, or absolute) when it is inside ``root``."""
    real = Path(os.path.realpath(root / path))
    return real if real.is_relative_to(root) else None


def _digest(path: Path, since: int = 0) -> tuple[int, str] | None:
    """The size and ``sha256:<hex>`` of a regular file (not through a link) changed at or
    after ``since`` (nanoseconds), or ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_mtime_ns < since:
            return None
        digest, size = hashlib.sha256(), 0
        while piece := os.read(fd, _PIECE):
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
    artifacts = []
    listed: set[Path] = set()
    for artifact in response.artifacts:
        if isinstance(artifact, FileArtifact) and artifact.content is None:
            real = _inside(root, artifact.path)
            if real is None:
                warn(f"the artifact {artifact.path!r} leads out of the workspace {workspace}; ATP does not read it")
            else:
                listed.add(real)
                found = _digest(real) if artifact.size_bytes is None or artifact.content_hash is None else None
                if found is not None:
                    artifact = msgspec.structs.replace(artifact, size_bytes=found[0], content_hash=found[1])
        artifacts.append(artifact)
    added = left = 0
    for folder, folders, files in os.walk(root):  # links to folders are not entered
        folders.sort()
        for name in sorted(files):
            path = Path(folder) / name
            if path in listed:
                continue
            if added >= MAX_FILES:
                left += 1
                continue
            found = _digest(path, since)
            if found is None:  # a link, a FIFO, a device, a file of the fixture: not the agent's
                continue
            artifacts.append(
                FileArtifact(path=str(path.relative_to(root)), size_bytes=found[0], content_hash=found[1])
            )
            added += 1
    if left:
        warn(f"the workspace holds {left} more files than the {MAX_FILES} ATP lists as artifacts")
    return msgspec.structs.replace(response, artifacts=artifacts), warnings
