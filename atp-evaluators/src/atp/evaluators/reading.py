"""The content of an artifact for evaluators: what the runner found and checked
(:attr:`~atp.core.evaluator.EvalContext.contents`), else found the same way here
(:mod:`atp.core.artifacts`): inline content decoded (base64 for a binary ``content_type``), a
file read only when it is a regular file (never a FIFO, a device or a directory), only where
the agent may put it (:func:`~atp.evaluators.paths.resolve`), at most :data:`MAX_READ_BYTES`
of it, on a worker thread."""

from typing import NamedTuple

from atp.core.artifacts import MAX_READ_BYTES, ArtifactContent, inline_content, is_binary, read_artifact
from atp.core.evaluator import EvalContext
from atp.core.protocol import FileArtifact, ReferenceArtifact
from atp.core.text import shorten
from atp.evaluators.offload import off_loop
from atp.evaluators.paths import where

__all__ = ["MAX_READ_BYTES", "Content", "as_text", "content_of", "read_content", "read_file"]


class Content(NamedTuple):
    """What :func:`~atp.evaluators.artifact.text_of` found."""

    text: str | None
    """The artifact's content as text; ``None`` when ATP has none to look at."""
    note: str | None = None
    """Why there is no text; or, with text, that only the first part of a larger file was read."""


def read_file(path: str, ctx: EvalContext) -> Content:
    """A file artifact's content as text, read from the file (blocking: runs on a worker
    thread; see :func:`atp.core.artifacts.read_artifact`)."""
    found = read_artifact(path, None, where(ctx), ctx.masker)
    return Content(found.text, found.note)


def read_content(artifact: FileArtifact | ReferenceArtifact, ctx: EvalContext) -> ArtifactContent:
    """The content of the file ``artifact`` names (blocking: runs on a worker thread)."""
    return read_artifact(artifact.path, artifact.content_type, where(ctx), ctx.masker)


async def content_of(artifact: FileArtifact | ReferenceArtifact, ctx: EvalContext) -> ArtifactContent:
    """The content of a file or reference artifact: what the runner found and checked, else
    its inline content decoded, else the file it names, read on a worker thread."""
    known = ctx.contents.of(artifact) if ctx.contents is not None else None
    if known is not None:
        return known
    if isinstance(artifact, FileArtifact) and artifact.content is not None:
        size = len(artifact.content) if is_binary(artifact.content_type) else 0  # (text: nothing to do)
        return await off_loop(size, inline_content, artifact, ctx.masker)
    return await off_loop(-1, read_content, artifact, ctx)


def as_text(artifact: FileArtifact | ReferenceArtifact, found: ArtifactContent, ctx: EvalContext) -> Content:
    """What evaluators that look at text see of ``found``: its text (a binary artifact's bytes
    when they are UTF-8); the bytes of a binary artifact that are not UTF-8 are no text, and
    the note says so."""
    if found.text is not None or found.data is None:
        return Content(found.text, found.note)
    size = f", {found.size:,} bytes" if found.size is not None else ""
    return Content(
        None,
        f"{shorten(artifact.path, masker=ctx.masker)} is binary (content_type "
        f"{shorten(str(artifact.content_type), 80, ctx.masker)}{size}, not UTF-8 text); ATP reads no text in it",
    )
