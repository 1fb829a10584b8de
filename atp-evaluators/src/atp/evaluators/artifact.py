"""Evaluators of what the agent produced: ``artifact_exists``, ``contains``, ``schema``, ``sections``.

An assertion names its artifact by ``path`` (file and reference artifacts; a glob like
``*.md`` matches several) or by ``name`` (structured artifacts, whose ``data`` is what
``contains`` and ``schema`` look at). Naming neither looks at every artifact.

What an agent produced is untrusted, and is handled so that nothing in it can stall ATP:

- a file is read only when it is a regular file (never a FIFO, a device or a directory), only
  where the agent may put it (:func:`resolve`), at most :data:`MAX_READ_BYTES` of it, and on a
  worker thread;
- work whose cost grows with the agent's data (a search, the headings parse, JSON Schema
  validation) runs on a worker thread once the data is larger than :data:`INLINE_CHARS`; a
  regular expression always does, and each match is stopped after ``regex_timeout_seconds``;
- a check message quotes at most a short preview of anything the agent sent.

A failed check shows its evidence, in its message and its ``details``: the artifacts produced,
an excerpt of the text searched (around the closest match, :func:`nearest`), where in the data
a JSON Schema error is and the value it rejected (:func:`preview`), the headings found. An
excerpt is cut from text whose secrets are masked first.

This module holds the four evaluators; the work behind them has modules of its own (their
public names can be imported from here too): :mod:`~atp.evaluators.paths` (artifact paths),
:mod:`~atp.evaluators.reading` (an artifact's content: as the runner checked it, base64
decoded, or the file read), :mod:`~atp.evaluators.offload` (the worker thread),
:mod:`~atp.evaluators.evidence` (previews and excerpts), :mod:`~atp.evaluators.patterns`
(regular expressions with a time limit), :mod:`~atp.evaluators.schema_support` (jsonschema) and
:mod:`~atp.evaluators.markdown` (headings).
"""

import fnmatch
import json
from collections.abc import Callable
from functools import partial
from itertools import islice
from typing import Any

import msgspec

from atp.core.evaluator import EvalContext, Evaluator, check, unmet
from atp.core.plugins import require
from atp.core.protocol import Artifact, FileArtifact, ReferenceArtifact, StructuredArtifact
from atp.core.results import Check
from atp.core.secrets import Masker
from atp.core.text import mask as masked
from atp.core.text import printable, shorten
from atp.evaluators.evidence import (
    EXCERPT_CHARS,
    EXCERPT_CONTEXT,
    NEAR_WORK,
    VALUE_CHARS,
    Near,
    line_of,
    nearest,
    preview,
)
from atp.evaluators.markdown import headings
from atp.evaluators.offload import INLINE_CHARS, off_loop, small_data
from atp.evaluators.paths import norm, resolve
from atp.evaluators.patterns import REGEX_TIMEOUT_SECONDS, RegexSettings, compile_regex, regex_timeout
from atp.evaluators.reading import MAX_READ_BYTES, Content, as_text, content_of
from atp.evaluators.schema_support import (
    MESSAGE_CHARS,
    explained,
    failure,
    json_path,
    time_limit_schema_patterns,
)

__all__ = [
    "EXCERPT_CHARS",
    "EXCERPT_CONTEXT",
    "INLINE_CHARS",
    "MAX_READ_BYTES",
    "MAX_SCHEMA_ERRORS",
    "MESSAGE_CHARS",
    "NEAR_WORK",
    "REGEX_TIMEOUT_SECONDS",
    "SHOWN_NAMES",
    "VALUE_CHARS",
    "ArtifactExists",
    "Contains",
    "ContainsConfig",
    "Content",
    "Near",
    "RegexSettings",
    "Schema",
    "SchemaConfig",
    "Sections",
    "SectionsConfig",
    "Target",
    "compile_regex",
    "data_of",
    "describe",
    "headings",
    "json_path",
    "masked",
    "missing",
    "nearest",
    "off_loop",
    "preview",
    "produced",
    "produced_names",
    "regex_timeout",
    "resolve",
    "select",
    "small_data",
    "text_of",
]

MAX_SCHEMA_ERRORS = 1000
"""Validation stops counting errors after this many."""
SHOWN_NAMES = 20
"""How many artifact names, or headings, a failed check's details list."""


class Target(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    path: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.path is not None and self.name is not None:
            raise ValueError("give 'path' (a file) or 'name' (a structured artifact), not both")

    @property
    def label(self) -> str:
        return self.path or self.name or "any artifact"


def select(ctx: EvalContext, target: Target) -> list[Artifact]:
    """The artifacts an assertion looks at."""
    artifacts = ctx.response.artifacts
    if target.name is not None:
        return [a for a in artifacts if isinstance(a, StructuredArtifact) and a.name == target.name]
    if target.path is not None:
        wanted = norm(target.path)
        glob = any(c in wanted for c in "*?[")
        return [
            a
            for a in artifacts
            if isinstance(a, (FileArtifact, ReferenceArtifact))
            and (fnmatch.fnmatchcase(norm(a.path), wanted) if glob else norm(a.path) == wanted)
        ]
    return list(artifacts)


def describe(artifact: Artifact, masker: Masker | None = None) -> str:
    """An artifact's name for a check message (the agent chose it: a preview at most, the
    secrets of ``masker``, the run's, masked first)."""
    if isinstance(artifact, StructuredArtifact):
        return f"{shorten(artifact.name, masker=masker)} (structured)"
    return shorten(artifact.path, masker=masker)


def _listing(artifacts: list[Artifact], masker: Masker | None = None) -> str:
    return shorten(", ".join(describe(a, masker) for a in artifacts), 1000, masker)


def produced(ctx: EvalContext) -> str:
    artifacts = list(ctx.response.artifacts)
    return _listing(artifacts, ctx.masker) if artifacts else "no artifacts"


def produced_names(ctx: EvalContext) -> list[str]:
    """The artifacts the agent produced, for a check's details (at most :data:`SHOWN_NAMES`)."""
    return [describe(a, ctx.masker) for a in islice(ctx.response.artifacts, SHOWN_NAMES)]


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


async def text_of(artifact: Artifact, ctx: EvalContext) -> Content:
    """An artifact's content as text: structured data as JSON; a file's content as the runner
    found and checked it (inline content, decoded; or the file itself when it is a regular
    file ATP may read, see :func:`resolve`, at most :data:`MAX_READ_BYTES` of it, read on a
    worker thread). A binary artifact (its ``content_type`` says so) is text when its bytes
    are UTF-8; otherwise it has none, and the note says it is binary
    (:func:`atp.evaluators.reading.content_of`, :func:`atp.evaluators.reading.as_text`)."""
    if isinstance(artifact, StructuredArtifact):
        size = 0 if small_data(artifact.data) else -1
        return Content(await off_loop(size, _dumps, artifact.data))
    return as_text(artifact, await content_of(artifact, ctx), ctx)


async def data_of(artifact: Artifact, ctx: EvalContext) -> tuple[Any, str | None]:
    """An artifact's content as JSON data, or why it has none."""
    if isinstance(artifact, StructuredArtifact):
        return artifact.data, None
    text, note = await text_of(artifact, ctx)
    if text is None:
        return None, note or f"{describe(artifact, ctx.masker)} has no content ATP can read"
    if note is not None:
        return None, f"{note}, so its JSON cannot be checked"
    try:
        return await off_loop(len(text), json.loads, text), None
    except RecursionError:
        return None, f"{describe(artifact, ctx.masker)} is JSON nested too deeply for ATP to read"
    except ValueError as exc:
        return None, f"{describe(artifact, ctx.masker)} is not JSON: {shorten(str(exc), masker=ctx.masker)}"


def missing(name: str, ctx: EvalContext, target: Target, *, judged: bool = False) -> Check:
    """The check of an assertion whose artifact was not produced: nothing to judge (``negate:
    true`` leaves it failed), unless its presence is what is ``judged`` (``artifact_exists``)."""
    message = f"expected artifact {target.label!r}; the agent produced {produced(ctx)}"
    evidence: dict[str, Any] = {"expected": target.label, "produced": produced_names(ctx)}
    return check(name, False, message, **evidence) if judged else unmet(name, message, **evidence)


# --- artifact_exists ------------------------------------------------------------------------


class ArtifactExists(Evaluator):
    name = "artifact_exists"
    summary = "an artifact with the given path (file) or name (structured) was produced"
    Config = Target

    async def evaluate(self, ctx: EvalContext, config: Target) -> list[Check]:
        label = f"artifact_exists:{config.label}"
        if config.path is None and config.name is None:
            if ctx.response.artifacts:
                return [check(label, True, f"the agent produced {produced(ctx)}")]
            message = "expected any artifact; the agent produced no artifacts"
            return [check(label, False, message, produced=[])]
        matches = select(ctx, config)
        if not matches:
            return [missing(label, ctx, config, judged=True)]
        return [check(label, True, f"artifact {_listing(matches, ctx.masker)} exists")]


# --- contains -------------------------------------------------------------------------------


class ContainsConfig(Target, kw_only=True):
    pattern: str
    regex: bool = False
    ignore_case: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.pattern:
            raise ValueError("'pattern' is empty; it would be found in any artifact")
        if self.regex:
            compile_regex(self.pattern, self.ignore_case)


def _finder(config: ContainsConfig, timeout: float) -> Callable[[str], int | None]:
    """A function giving the line of the first match in a text, or ``None``. A regex match
    that takes longer than ``timeout`` seconds raises TimeoutError."""
    if config.regex:
        compiled = compile_regex(config.pattern, config.ignore_case)

        def find_regex(text: str) -> int | None:
            found = compiled.search(text, timeout=timeout, concurrent=True)
            return None if found is None else line_of(text, found.start())

        return find_regex
    needle = config.pattern.casefold() if config.ignore_case else config.pattern

    def find_text(text: str) -> int | None:
        haystack = text.casefold() if config.ignore_case else text
        at = haystack.find(needle)
        return None if at < 0 else line_of(haystack, at)

    return find_text


class Contains(Evaluator):
    name = "contains"
    summary = "an artifact's content contains a substring, or matches a regex (regex: true)"
    Config = ContainsConfig
    Settings = RegexSettings

    def regex_timeout(self) -> float:
        """The time limit of one regex match: the setting ``regex_timeout_seconds``."""
        return regex_timeout(self.settings, self.name)

    async def evaluate(self, ctx: EvalContext, config: ContainsConfig) -> list[Check]:
        label = f"contains:{config.label}"
        matches = select(ctx, config)
        if not matches:
            return [missing(label, ctx, config)]
        timeout = self.regex_timeout() if config.regex else 0.0
        find = _finder(config, timeout)
        what = f"{'regex' if config.regex else 'text'} {config.pattern!r}"
        searched = 0
        read_any = False
        notes: list[str] = []
        near: tuple[Near, Artifact] | None = None
        for artifact in matches:
            text, note = await text_of(artifact, ctx)
            if note is not None:
                notes.append(note)
            if text is None:
                continue
            read_any = True
            searched += len(text)
            try:
                # a regex may take long on a short text: it never runs on the event loop
                line = await off_loop(-1 if config.regex else len(text), find, text)
            except TimeoutError:
                return [
                    unmet(
                        label,
                        f"the regex {config.pattern!r} took longer than {timeout:g} s on "
                        f"{describe(artifact, ctx.masker)}; ATP stopped it",
                    )
                ]
            if line is not None:
                return [check(label, True, f"{describe(artifact, ctx.masker)} contains {what} (line {line})")]
            if near is None or near[0].rank < 2:
                found = await off_loop(-1, partial(nearest, masker=ctx.masker), text, config)
                if near is None or (found.rank, found.size) > (near[0].rank, near[0].size):
                    near = (found, artifact)
        expected = f"expected {what} in {_listing(matches, ctx.masker)}"
        noted = shorten("; ".join(notes), 1000, ctx.masker)
        if not read_any and notes:
            return [unmet(label, f"{expected}, but ATP read none of it: {noted}")]
        why = f" ({noted})" if notes else ""
        message = f"{expected}; not found in {searched} characters{why}"
        if near is None:
            return [check(label, False, message, expected=config.pattern, length=searched)]
        closest, artifact = near
        where = describe(artifact, ctx.masker)
        excerpt = printable(closest.excerpt)
        if closest.rank == 2:
            evidence = f"in another case in {where} (line {closest.line}): '{excerpt}'"
        elif closest.rank == 1:
            evidence = (
                f"closest: {printable(shorten(closest.found or '', 80, ctx.masker))!r} in {where} "
                f"(line {closest.line}): '{excerpt}'"
            )
        elif closest.excerpt:
            evidence = f"{where} begins: '{excerpt}'"
        else:
            evidence = f"{where} is empty"
        return [
            check(
                label,
                False,
                f"{message}; {evidence}",
                expected=config.pattern,
                length=searched,
                path=where,
                excerpt=closest.excerpt,
                line=closest.line,
                closest=closest.found,
            )
        ]


# --- schema ---------------------------------------------------------------------------------


class SchemaConfig(Target, kw_only=True):
    schema: dict[str, Any]

    def __post_init__(self) -> None:
        super().__post_init__()
        jsonschema = require("jsonschema", install="atp-evaluators", feature="the schema evaluator")
        try:
            jsonschema.validators.validator_for(self.schema).check_schema(self.schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"'schema' is not a valid JSON Schema: {exc.message}") from None


def _validate(validator: Any, data: Any) -> list[Any]:
    """The first :data:`MAX_SCHEMA_ERRORS` errors and one more (to tell there are more),
    ordered by where they are."""
    errors = list(islice(validator.iter_errors(data), MAX_SCHEMA_ERRORS + 1))
    return sorted(errors, key=lambda e: list(e.absolute_path))


class Schema(Evaluator):
    name = "schema"
    summary = "a structured artifact's data, or a JSON file's content, is valid against a JSON Schema"
    Config = SchemaConfig
    Settings = RegexSettings

    async def evaluate(self, ctx: EvalContext, config: SchemaConfig) -> list[Check]:
        jsonschema = require("jsonschema", install="atp-evaluators", feature="the schema evaluator")
        label = f"schema:{config.label}"
        matches = select(ctx, config)
        if not matches:
            return [missing(label, ctx, config)]
        validator_cls = jsonschema.validators.validator_for(config.schema)
        try:  # checked when the suite loads; this is for a config made some other way
            validator_cls.check_schema(config.schema)
        except jsonschema.SchemaError as exc:
            return [check(label, False, f"the assertion's schema is not a valid JSON Schema: {exc.message}")]
        validator = validator_cls(config.schema)
        # Expressions of the schema are matched with a time limit, but may still take up to it:
        # schemas that have some are never validated on the event loop.
        uses_regex = '"pattern' in json.dumps(config.schema)
        if uses_regex:
            time_limit_schema_patterns(jsonschema, regex_timeout(self.settings, "schema"))
        checks = []
        for artifact in matches:
            data, problem = await data_of(artifact, ctx)
            described = describe(artifact, ctx.masker)
            name = f"schema:{described}" if len(matches) > 1 else label
            if problem is not None:
                checks.append(unmet(name, problem))
                continue
            size = 0 if not uses_regex and small_data(data) else -1
            try:
                errors = await off_loop(size, _validate, validator, data)
            except RecursionError:
                checks.append(unmet(name, f"{described} is nested too deeply for ATP to validate"))
                continue
            except TimeoutError:
                seconds = regex_timeout(self.settings, "schema")
                checks.append(
                    unmet(
                        name,
                        f"a regular expression of the schema took longer than {seconds:g} s on "
                        f"{described}; ATP stopped it (evaluators.schema.regex_timeout_seconds)",
                    )
                )
                continue
            if not errors:
                checks.append(check(name, True, f"{described} is valid against the schema"))
                continue
            failures = [failure(e, ctx.masker) for e in errors[:3]]
            shown = "; ".join(explained(e, f, ctx.masker) for e, f in zip(errors[:3], failures, strict=True))
            count = min(len(errors), MAX_SCHEMA_ERRORS)
            more = ""
            if len(errors) > MAX_SCHEMA_ERRORS:
                more = f" (and more than {MAX_SCHEMA_ERRORS - 3} more; ATP stopped counting)"
            elif len(errors) > 3:
                more = f" (and {len(errors) - 3} more)"
            checks.append(
                check(
                    name,
                    False,
                    f"{described} is not valid against the schema: {printable(shown)}{more}",
                    errors=count,
                    path=failures[0]["path"],
                    expected=failures[0]["expected"],
                    actual=failures[0]["actual"],
                    failures=failures,
                )
            )
        return checks


# --- sections -------------------------------------------------------------------------------


class SectionsConfig(Target, kw_only=True):
    sections: list[str]

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.sections:
            raise ValueError("'sections' names no section")
        if any(not section.strip() for section in self.sections):
            raise ValueError("'sections' has a blank section name")


def _folded_headings(text: str) -> tuple[set[str], list[str], int]:
    """The headings of ``text`` case-folded; the first :data:`SHOWN_NAMES` that are not empty,
    as written; how many are not empty."""
    found = headings(text)
    named = [h for h in found if h]
    return {heading.casefold() for heading in found}, named[:SHOWN_NAMES], len(named)


class Sections(Evaluator):
    name = "sections"
    summary = "a markdown artifact has the required headings"
    Config = SectionsConfig

    async def evaluate(self, ctx: EvalContext, config: SectionsConfig) -> list[Check]:
        label = f"sections:{config.label}"
        matches = select(ctx, config)
        if not matches:
            return [missing(label, ctx, config)]
        found: set[str] = set()
        shown: list[str] = []
        named = 0
        notes: list[str] = []
        read_any = False
        for artifact in matches:
            text, note = await text_of(artifact, ctx)
            if note is not None:
                notes.append(note)
            if text is not None:
                read_any = True
                folded, first, count = await off_loop(len(text), _folded_headings, text)
                found |= folded
                named += count
                shown.extend(
                    shorten(heading, 80, ctx.masker) for heading in first[: SHOWN_NAMES - len(shown)]
                )
        if not read_any:
            noted = shorten("; ".join(notes), 1000, ctx.masker) or "no content ATP can read"
            expected = f"expected sections {config.sections} in {_listing(matches, ctx.masker)}"
            return [unmet(label, f"{expected}, but ATP read none of it: {noted}", expected=config.sections)]
        absent = [s for s in config.sections if s.strip().casefold() not in found]
        score = 1.0 - len(absent) / len(config.sections)
        if absent:
            why = f"; {shorten('; '.join(notes), 1000, ctx.masker)}" if notes else ""
            has = (
                f"the headings are: {printable(shorten(', '.join(shown), 400, ctx.masker))}"
                + (f" (and {named - len(shown)} more)" if named > len(shown) else "")
                if shown
                else "no headings found"
            )
            message = (
                f"expected sections {config.sections}; missing {absent} "
                f"({len(config.sections) - len(absent)}/{len(config.sections)} present; {has}){why}"
            )
            return [
                check(label, False, message, score, expected=config.sections, missing=absent, found=shown)
            ]
        return [check(label, True, f"all {len(config.sections)} sections present", score)]
