"""Evaluators of what the agent produced: ``artifact_exists``, ``contains``, ``schema``, ``sections``.

An assertion names its artifact by ``path`` (file and reference artifacts; a glob like
``*.md`` matches several) or by ``name`` (structured artifacts, whose ``data`` is what
``contains`` and ``schema`` look at). Naming neither looks at every artifact.
"""

import fnmatch
import json
import posixpath
import re
from pathlib import Path
from typing import Any

import msgspec

from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.plugins import require
from atp.core.protocol import Artifact, FileArtifact, ReferenceArtifact, StructuredArtifact
from atp.core.results import Check

MAX_READ_BYTES = 16 * 1024 * 1024


class Target(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    path: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.path is not None and self.name is not None:
            raise ValueError("give 'path' (a file) or 'name' (a structured artifact), not both")

    @property
    def label(self) -> str:
        return self.path or self.name or "any artifact"


def _norm(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/"))


def select(ctx: EvalContext, target: Target) -> list[Artifact]:
    """The artifacts an assertion looks at."""
    artifacts = ctx.response.artifacts
    if target.name is not None:
        return [a for a in artifacts if isinstance(a, StructuredArtifact) and a.name == target.name]
    if target.path is not None:
        wanted = _norm(target.path)
        glob = any(c in wanted for c in "*?[")
        return [
            a
            for a in artifacts
            if isinstance(a, (FileArtifact, ReferenceArtifact))
            and (fnmatch.fnmatchcase(_norm(a.path), wanted) if glob else _norm(a.path) == wanted)
        ]
    return list(artifacts)


def describe(artifact: Artifact) -> str:
    if isinstance(artifact, StructuredArtifact):
        return f"{artifact.name} (structured)"
    return artifact.path


def produced(ctx: EvalContext) -> str:
    names = [describe(a) for a in ctx.response.artifacts]
    return ", ".join(names) if names else "no artifacts"


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_READ_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


def text_of(artifact: Artifact, ctx: EvalContext) -> str | None:
    """An artifact's content as text: inline content, structured data as JSON, or the file
    itself when it is readable here (relative paths are looked up in the workspace)."""
    if isinstance(artifact, StructuredArtifact):
        return json.dumps(artifact.data, ensure_ascii=False)
    if isinstance(artifact, FileArtifact) and artifact.content is not None:
        return artifact.content
    path = Path(artifact.path)
    if not path.is_absolute() and ctx.workspace is not None:
        path = ctx.workspace / path
    return _read(path)


def data_of(artifact: Artifact, ctx: EvalContext) -> tuple[Any, str | None]:
    """An artifact's content as JSON data, or why it has none."""
    if isinstance(artifact, StructuredArtifact):
        return artifact.data, None
    text = text_of(artifact, ctx)
    if text is None:
        return None, f"{describe(artifact)} has no content ATP can read"
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, f"{describe(artifact)} is not JSON: {exc}"


def _missing(name: str, ctx: EvalContext, target: Target) -> Check:
    return check(name, False, f"expected artifact {target.label!r}; the agent produced {produced(ctx)}")


# --- artifact_exists ------------------------------------------------------------------------


class ArtifactExists(Evaluator):
    name = "artifact_exists"
    summary = "an artifact with the given path (file) or name (structured) was produced"
    Config = Target

    async def evaluate(self, ctx: EvalContext, config: Target) -> list[Check]:
        label = f"artifact_exists:{config.label}"
        if config.path is None and config.name is None:
            found = bool(ctx.response.artifacts)
            message = f"expected any artifact; the agent produced {produced(ctx)}"
            return [check(label, found, message)]
        matches = select(ctx, config)
        if not matches:
            return [_missing(label, ctx, config)]
        return [check(label, True, f"artifact {', '.join(describe(a) for a in matches)} exists")]


# --- contains -------------------------------------------------------------------------------


class ContainsConfig(Target, kw_only=True):
    pattern: str
    regex: bool = False
    ignore_case: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.regex:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"'pattern' is not a valid regular expression: {exc}") from None


class Contains(Evaluator):
    name = "contains"
    summary = "an artifact's content contains a substring, or matches a regex (regex: true)"
    Config = ContainsConfig

    async def evaluate(self, ctx: EvalContext, config: ContainsConfig) -> list[Check]:
        label = f"contains:{config.label}"
        matches = select(ctx, config)
        if not matches:
            return [_missing(label, ctx, config)]
        flags = re.IGNORECASE if config.ignore_case else 0
        needle = re.compile(config.pattern if config.regex else re.escape(config.pattern), flags)
        what = f"{'regex' if config.regex else 'text'} {config.pattern!r}"
        searched = 0
        for artifact in matches:
            text = text_of(artifact, ctx)
            if text is None:
                continue
            searched += len(text)
            found = needle.search(text)
            if found:
                at = text.count("\n", 0, found.start()) + 1
                return [check(label, True, f"{describe(artifact)} contains {what} (line {at})")]
        where = ", ".join(describe(a) for a in matches)
        return [
            check(label, False, f"expected {what} in {where}; not found in {searched} characters")
        ]


# --- schema ---------------------------------------------------------------------------------


class SchemaConfig(Target, kw_only=True):
    schema: dict[str, Any]


class Schema(Evaluator):
    name = "schema"
    summary = "a structured artifact's data, or a JSON file's content, is valid against a JSON Schema"
    Config = SchemaConfig

    async def evaluate(self, ctx: EvalContext, config: SchemaConfig) -> list[Check]:
        jsonschema = require("jsonschema", install="atp-evaluators", feature="the schema evaluator")
        label = f"schema:{config.label}"
        matches = select(ctx, config)
        if not matches:
            return [_missing(label, ctx, config)]
        validator_cls = jsonschema.validators.validator_for(config.schema)
        try:
            validator_cls.check_schema(config.schema)
        except jsonschema.SchemaError as exc:
            return [check(label, False, f"the assertion's schema is not a valid JSON Schema: {exc.message}")]
        validator = validator_cls(config.schema)
        checks = []
        for artifact in matches:
            data, problem = data_of(artifact, ctx)
            name = f"schema:{describe(artifact)}" if len(matches) > 1 else label
            if problem is not None:
                checks.append(check(name, False, problem))
                continue
            errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
            if not errors:
                checks.append(check(name, True, f"{describe(artifact)} is valid against the schema"))
                continue
            shown = "; ".join(
                f"at ${''.join(f'[{p!r}]' for p in e.absolute_path)}: {e.message}" for e in errors[:3]
            )
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            checks.append(
                check(
                    name,
                    False,
                    f"{describe(artifact)} is not valid against the schema: {shown}{more}",
                    errors=len(errors),
                )
            )
        return checks


# --- sections -------------------------------------------------------------------------------

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)


class SectionsConfig(Target, kw_only=True):
    sections: list[str]

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.sections:
            raise ValueError("'sections' names no section")


def headings(text: str) -> list[str]:
    return [m.group(2).strip() for m in _HEADING.finditer(text)]


class Sections(Evaluator):
    name = "sections"
    summary = "a markdown artifact has the required headings"
    Config = SectionsConfig

    async def evaluate(self, ctx: EvalContext, config: SectionsConfig) -> list[Check]:
        label = f"sections:{config.label}"
        matches = select(ctx, config)
        if not matches:
            return [_missing(label, ctx, config)]
        found: set[str] = set()
        for artifact in matches:
            text = text_of(artifact, ctx)
            if text is not None:
                found.update(h.casefold() for h in headings(text))
        missing = [s for s in config.sections if s.strip().casefold() not in found]
        score = 1.0 - len(missing) / len(config.sections)
        if missing:
            message = (
                f"expected sections {config.sections}; missing {missing} "
                f"({len(config.sections) - len(missing)}/{len(config.sections)} present)"
            )
            return [check(label, False, message, score)]
        return [check(label, True, f"all {len(config.sections)} sections present", score)]

