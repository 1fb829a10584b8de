"""What an agent sent, for a person at a terminal (``--verbose``, for a run that did not pass):
the response's status and each artifact described (type, content type, size) and previewed."""

from __future__ import annotations

import msgspec

from atp.core.artifacts import is_binary
from atp.core.protocol import Artifact, FileArtifact, StructuredArtifact
from atp.core.results import RunResult
from atp.core.text import printable as safe
from atp.core.text import shorten, shown
from atp.reporters.terminal.style import Style
from atp.reporters.terminal.words import PREVIEW_CHARS, plural

PREVIEW_LINES = 5
"""An artifact's content is previewed up to :data:`PREVIEW_CHARS` characters and this many lines."""
MAX_ARTIFACTS_SHOWN = 10
"""Artifacts of one run listed by ``--verbose``; the rest are counted."""


def preview(text: str) -> list[str]:
    """The first lines of an artifact's text, at most :data:`PREVIEW_LINES` lines and about
    :data:`PREVIEW_CHARS` characters, with how much was left out; each line printable."""
    text = text.rstrip("\n")
    cut = shorten(text, PREVIEW_CHARS)
    lines = cut.split("\n")
    if len(lines) > PREVIEW_LINES:
        kept = "\n".join(lines[:PREVIEW_LINES])
        lines = f"{kept}… ({len(text) - len(kept)} more characters)".split("\n")
    return [safe(line) for line in lines]


def response_lines(run: RunResult, prefix: str, style: Style) -> list[str]:
    """The response of a run that did not pass: its status and every artifact, previewed."""
    count = len(run.artifacts)
    listing = plural(count, "artifact") if count else "no artifacts"
    lines = [f"    {prefix}response: status {safe(run.status)}, {listing}{':' if count else ''}"]
    for artifact in run.artifacts[:MAX_ARTIFACTS_SHOWN]:
        label, about, text = describe_artifact(artifact)
        lines.append(f"      {label} ({about})")
        if text is not None:
            lines.extend(f"        | {line}" for line in preview(text))
    if count > MAX_ARTIFACTS_SHOWN:
        lines.append(f"      … and {plural(count - MAX_ARTIFACTS_SHOWN, 'more artifact')}")
    return [style.paint(line, "dim") for line in lines]


def describe_artifact(artifact: Artifact) -> tuple[str, str, str | None]:
    """An artifact's label, what it is (type, content type, size) and its text to preview."""
    if isinstance(artifact, StructuredArtifact):
        data = msgspec.json.encode(artifact.data).decode("utf-8", "replace")
        return shown(artifact.name), f"structured, {plural(len(data), 'char')} of JSON", data
    about = ["file" if isinstance(artifact, FileArtifact) else "reference"]
    if artifact.content_type:
        about.append(shown(artifact.content_type, limit=80))
    content = artifact.content if isinstance(artifact, FileArtifact) else None
    if content is not None and is_binary(artifact.content_type):  # base64: nothing to read
        about.append(f"binary, {plural(len(content), 'char')} of base64")
        return shown(artifact.path), ", ".join(about), None
    if content is not None:
        about.append(plural(len(content), "char"))
    elif artifact.size_bytes is not None:
        about.append(plural(artifact.size_bytes, "byte"))
    if isinstance(artifact, FileArtifact) and content is None:
        about.append("no content sent")
    return shown(artifact.path), ", ".join(about), content
