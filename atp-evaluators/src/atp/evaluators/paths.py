"""Artifact paths: how ATP compares them (:func:`norm`) and where it reads the file one names
(:func:`resolve`, the kernel's :func:`atp.core.artifacts.resolve_path`), never outside the
workspace nor from ATP's own working directory."""

import posixpath
from pathlib import Path

from atp.core.artifacts import Where, resolve_path
from atp.core.evaluator import EvalContext


def norm(path: str) -> str:
    """An artifact's path as ATP compares it: POSIX separators (a backslash is one), normalised
    (``./a``, ``x/../a`` and ``a`` are one path)."""
    return posixpath.normpath(path.replace("\\", "/"))


def where(ctx: EvalContext) -> Where:
    """Where a run's relative artifact paths are: its workspace, else the agent's folder."""
    return Where(ctx.workspace, ctx.agent_dir)


def resolve(path: str, ctx: EvalContext) -> tuple[Path | None, str | None]:
    """Where ATP reads the file an artifact's ``path`` names, or why it reads none (see
    :func:`atp.core.artifacts.resolve_path`): relative to the request's workspace when it has
    one (a path leading out of it, by ``..`` or a symbolic link, is refused), else to the
    agent's working folder; never to ATP's own working directory."""
    return resolve_path(path, where(ctx), ctx.masker)
