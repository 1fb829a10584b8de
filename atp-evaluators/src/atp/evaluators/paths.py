"""Artifact paths: how ATP compares them (:func:`norm`) and where it reads the file one names
(:func:`resolve`), never outside the workspace nor from ATP's own working directory."""

import os
import posixpath
from pathlib import Path

from atp.core.evaluator import EvalContext
from atp.core.text import shorten


def norm(path: str) -> str:
    """An artifact's path as ATP compares it: POSIX separators (a backslash is one), normalised
    (``./a``, ``x/../a`` and ``a`` are one path)."""
    return posixpath.normpath(path.replace("\\", "/"))


def resolve(path: str, ctx: EvalContext) -> tuple[Path | None, str | None]:
    """Where ATP reads the file an artifact's ``path`` names, or why it reads none.

    A relative path is relative to the request's workspace when it has one, else to the
    agent's working folder; never to ATP's own working directory (a relative path of an agent
    whose working folder ATP does not know is not read at all). With a workspace, a path
    that leads out of it, by ``..`` or by a symbolic link, is refused; the path returned then
    has its symbolic links resolved. Without a workspace an absolute path is read as it is.
    """
    shown = shorten(path, masker=ctx.masker)
    if "\0" in path:
        return None, f"{shown!r} contains a NUL character; it names no file"
    given = Path(path)
    if ctx.workspace is not None:
        root = Path(os.path.realpath(ctx.workspace))
        real = Path(os.path.realpath(root / given))
        if not real.is_relative_to(root):
            return None, (
                f"{shown} is outside the workspace {ctx.workspace}; ATP reads only files inside the workspace"
            )
        return real, None
    if given.is_absolute():
        return given, None
    if ctx.agent_dir is not None:
        return ctx.agent_dir / given, None
    return None, (
        f"{shown} is a relative path and the agent has no working folder ATP knows; ATP does not read it"
    )
