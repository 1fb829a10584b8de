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
"""

import difflib
import fnmatch
import importlib
import json
import math
import os
import posixpath
import stat
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypeVar

import anyio
import msgspec

from atp.core import text as _text
from atp.core.errors import ConfigError
from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.plugins import require
from atp.core.protocol import Artifact, FileArtifact, ReferenceArtifact, StructuredArtifact
from atp.core.results import Check
from atp.core.text import piece, printable, shorten

MAX_READ_BYTES = 16 * 1024 * 1024
"""A file artifact is read up to this many bytes; the rest of a larger file is not looked at."""
INLINE_CHARS = 64 * 1024
"""Work on agent data up to about this many characters runs on the event loop (a thread hop
would cost more than the work); larger data goes to a worker thread."""
REGEX_TIMEOUT_SECONDS = 1.0
"""How long one regex match of ``contains`` may take, unless the evaluator setting
``regex_timeout_seconds`` says otherwise."""
MAX_SCHEMA_ERRORS = 1000
"""Validation stops counting errors after this many."""
VALUE_CHARS = 120
"""A value quoted as evidence (the one a schema rejected) is shown up to this many characters."""
EXCERPT_CONTEXT = 60
"""An excerpt around the closest match shows this many characters on either side of it."""
EXCERPT_CHARS = 160
"""An excerpt of the start of a text is this many characters long."""
NEAR_WORK = 4_000_000
"""How much work looking for the longest piece of a pattern in a text may do (characters of
text times characters of pattern): it looks in the first ``NEAR_WORK // len(pattern)``
characters of the text, and not at all for a pattern so long that this is under 1024."""
SHOWN_NAMES = 20
"""How many artifact names, or headings, a failed check's details list."""

_T = TypeVar("_T")


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
    """An artifact's name for a check message (the agent chose it: a preview at most)."""
    if isinstance(artifact, StructuredArtifact):
        return f"{shorten(artifact.name)} (structured)"
    return shorten(artifact.path)


def _listing(artifacts: list[Artifact]) -> str:
    return shorten(", ".join(describe(a) for a in artifacts), 1000)


def produced(ctx: EvalContext) -> str:
    artifacts = list(ctx.response.artifacts)
    return _listing(artifacts) if artifacts else "no artifacts"


def produced_names(ctx: EvalContext) -> list[str]:
    """The artifacts the agent produced, for a check's details (at most :data:`SHOWN_NAMES`)."""
    return [describe(a) for a in islice(ctx.response.artifacts, SHOWN_NAMES)]


def masked(text: str) -> str:
    """``text`` with the secrets of the run masked: before an excerpt is cut out of its middle
    (a cut must never leave part of a secret)."""
    return _text.mask(text)


def preview(value: Any, limit: int = VALUE_CHARS) -> str:
    """JSON-like ``value`` as compact JSON, at most ``limit`` characters (and ``…``), the
    secrets of the run masked. Only what is shown is built, however large the value; a cut
    leaves no part of a secret."""
    parts: list[str] = []
    size = 0
    stack: list[tuple[Iterator[Any], bool]] = []  # (the items left, a mapping?)
    current = value
    while True:
        if isinstance(current, dict):
            text = "{"
            stack.append((iter(current.items()), True))
        elif isinstance(current, (list, tuple)):
            text = "["
            stack.append((iter(current), False))
        elif isinstance(current, str):
            text = json.dumps(current[: limit + 1], ensure_ascii=False)
        else:
            try:
                text = json.dumps(current)
            except (TypeError, ValueError):
                text = shorten(repr(current), limit + 1)
        parts.append(text)
        size += len(text)
        following = False
        while stack and size <= limit:
            items, mapping = stack[-1]
            item = next(items, _END)
            if item is _END:
                stack.pop()
                parts.append("}" if mapping else "]")
                size += 1
                continue
            opened = parts[-1] in ("{", "[")
            if mapping:
                key, current = item
                text = ("" if opened else ", ") + json.dumps(str(key)[: limit + 1], ensure_ascii=False) + ": "
            else:
                current, text = item, "" if opened else ", "
            parts.append(text)
            size += len(text)
            following = True
            break
        if size > limit:
            return piece("".join(parts))[:limit] + "…"
        if not following:
            return masked("".join(parts))


_END = object()


async def off_loop(size: int, work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)``, on a worker thread when ``size`` (of the agent data it works on) is
    over :data:`INLINE_CHARS`, on the event loop otherwise (``size=-1``: always a thread)."""
    if 0 <= size <= INLINE_CHARS:
        return work(*args)
    return await anyio.to_thread.run_sync(work, *args, abandon_on_cancel=True)


def small_data(data: Any, limit: int = INLINE_CHARS) -> bool:
    """Whether JSON-like ``data`` is about ``limit`` characters of JSON or less. Stops looking
    as soon as it is larger, so the answer costs little even for very large data."""
    budget = limit
    stack = [data]
    while stack:
        item = stack.pop()
        budget -= 8
        if isinstance(item, str):
            budget -= len(item)
        elif isinstance(item, dict):
            for key, value in item.items():
                budget -= 8 + (len(key) if isinstance(key, str) else 0)
                stack.append(value)
                if budget < 0:
                    return False
        elif isinstance(item, (list, tuple)):
            for value in item:
                budget -= 1
                stack.append(value)
                if budget < 0:
                    return False
        if budget < 0:
            return False
    return True


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def resolve(path: str, ctx: EvalContext) -> tuple[Path | None, str | None]:
    """Where ATP reads the file an artifact's ``path`` names, or why it reads none.

    A relative path is relative to the request's workspace when it has one, else to the
    agent's working folder; never to ATP's own working directory (a relative path of an agent
    whose working folder ATP does not know is not read at all). With a workspace, a path
    that leads out of it, by ``..`` or by a symbolic link, is refused; the path returned then
    has its symbolic links resolved. Without a workspace an absolute path is read as it is.
    """
    shown = shorten(path)
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


class Content(NamedTuple):
    """What :func:`text_of` found."""

    text: str | None
    """The artifact's content as text; ``None`` when ATP has none to look at."""
    note: str | None = None
    """Why there is no text; or, with text, that only the first part of a larger file was read."""


_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def _not_regular(shown: str, mode: int) -> Content:
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return Content(None, f"{shown} is {kind}, not a regular file; ATP reads only regular files")


def _read_file(path: str, ctx: EvalContext) -> Content:
    """A file artifact's content, read from the file (blocking: runs on a worker thread).

    Only a regular file is read. Its type is checked before opening (a device is never
    opened) and again on the open descriptor (the path may have changed in between); the
    open does not wait for a FIFO's writer (``O_NONBLOCK``) nor follow a last symbolic link
    put in place of a checked path inside a workspace.
    """
    shown = shorten(path)
    where, problem = resolve(path, ctx)
    if where is None:
        return Content(None, problem)
    follow = ctx.workspace is None
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        before = os.stat(where, follow_symlinks=follow)
        if not stat.S_ISREG(before.st_mode):
            return _not_regular(shown, before.st_mode)
        fd = os.open(where, flags)
    except OSError as exc:
        return Content(None, f"{shown} cannot be read: {exc.strerror or exc}")
    chunks: list[bytes] = []
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            return _not_regular(shown, opened.st_mode)
        left = MAX_READ_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        return Content(None, f"{shown} cannot be read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    data = b"".join(chunks)
    note = None
    if len(data) > MAX_READ_BYTES:
        data = data[:MAX_READ_BYTES]
        cap = _mib(MAX_READ_BYTES)
        note = f"{shown} is larger than {cap}; ATP read only its first {cap}"
    return Content(data.decode("utf-8", "replace"), note)


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


async def text_of(artifact: Artifact, ctx: EvalContext) -> Content:
    """An artifact's content as text: inline content, structured data as JSON, or the file
    itself when it is a regular file ATP may read (see :func:`resolve`); the file is read
    on a worker thread, at most :data:`MAX_READ_BYTES` of it."""
    if isinstance(artifact, StructuredArtifact):
        size = 0 if small_data(artifact.data) else -1
        return Content(await off_loop(size, _dumps, artifact.data))
    if isinstance(artifact, FileArtifact) and artifact.content is not None:
        return Content(artifact.content)
    return await off_loop(-1, _read_file, artifact.path, ctx)


async def data_of(artifact: Artifact, ctx: EvalContext) -> tuple[Any, str | None]:
    """An artifact's content as JSON data, or why it has none."""
    if isinstance(artifact, StructuredArtifact):
        return artifact.data, None
    text, note = await text_of(artifact, ctx)
    if text is None:
        return None, note or f"{describe(artifact)} has no content ATP can read"
    if note is not None:
        return None, f"{note}, so its JSON cannot be checked"
    try:
        return await off_loop(len(text), json.loads, text), None
    except RecursionError:
        return None, f"{describe(artifact)} is JSON nested too deeply for ATP to read"
    except ValueError as exc:
        return None, f"{describe(artifact)} is not JSON: {shorten(str(exc))}"


def _missing(name: str, ctx: EvalContext, target: Target) -> Check:
    return check(
        name,
        False,
        f"expected artifact {target.label!r}; the agent produced {produced(ctx)}",
        expected=target.label,
        produced=produced_names(ctx),
    )


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
            return [_missing(label, ctx, config)]
        return [check(label, True, f"artifact {_listing(matches)} exists")]


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


def compile_regex(
    pattern: str,
    ignore_case: bool,
    key: str = "pattern",
    feature: str = "the contains evaluator with regex: true",
) -> Any:
    """``pattern`` compiled by the ``regex`` module (the syntax of Python's ``re``), whose
    matches can be given a time limit (``search(text, timeout=..., concurrent=True)`` raises
    TimeoutError past it); ValueError naming the config ``key`` when it is not a valid
    expression. ``feature`` is what needs the module, should it be missing."""
    rx = require("regex", install="atp-evaluators", feature=feature)
    try:
        return rx.compile(pattern, rx.V0 | (rx.IGNORECASE if ignore_case else 0))
    except rx.error as exc:
        raise ValueError(f"'{key}' is not a valid regular expression: {exc}") from None


class RegexSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The settings of evaluators that match regular expressions (``contains``, ``schema``,
    ``tool_called_with``)."""

    regex_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = REGEX_TIMEOUT_SECONDS
    """How long one match may take."""


def regex_timeout(settings: Any, evaluator: str) -> float:
    """The time limit of one regex match: the evaluator setting ``regex_timeout_seconds``."""
    value = settings.get("regex_timeout_seconds", REGEX_TIMEOUT_SECONDS)
    try:
        seconds = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (0 < seconds <= 3600):
        raise ConfigError(
            f"evaluators.{evaluator}.regex_timeout_seconds must be a positive number of seconds, "
            f"not {value!r}"
        )
    return seconds


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _finder(config: ContainsConfig, timeout: float) -> Callable[[str], int | None]:
    """A function giving the line of the first match in a text, or ``None``. A regex match
    that takes longer than ``timeout`` seconds raises TimeoutError."""
    if config.regex:
        compiled = compile_regex(config.pattern, config.ignore_case)

        def find_regex(text: str) -> int | None:
            found = compiled.search(text, timeout=timeout, concurrent=True)
            return None if found is None else _line_of(text, found.start())

        return find_regex
    needle = config.pattern.casefold() if config.ignore_case else config.pattern

    def find_text(text: str) -> int | None:
        haystack = text.casefold() if config.ignore_case else text
        at = haystack.find(needle)
        return None if at < 0 else _line_of(haystack, at)

    return find_text


class Near(NamedTuple):
    """Where a text comes closest to a pattern it does not contain, for a failed check."""

    rank: int
    """How close: 2 (the pattern in another case), 1 (a piece of the pattern), 0 (neither:
    the excerpt is the start of the text)."""
    size: int
    """The length of what was found."""
    found: str | None
    """What was found (``None``: nothing)."""
    line: int | None
    excerpt: str
    """The text around it (or the start of the text), secrets masked, bounded."""


def _same_length_fold(text: str) -> str | None:
    """``text`` case-folded with every character where it was (``None`` when folding would
    move them: ``ß`` folds to ``ss``)."""
    for fold in (str.casefold, str.lower):
        folded = fold(text)
        if len(folded) == len(text):
            return folded
    return None


def _excerpt(text: str, at: int, size: int) -> str:
    start = max(0, at - EXCERPT_CONTEXT)
    end = min(len(text), at + min(size, EXCERPT_CHARS) + EXCERPT_CONTEXT)
    return f"{'…' if start else ''}{text[start:end]}{'…' if end < len(text) else ''}"


def nearest(text: str, config: ContainsConfig) -> Near:
    """Where ``text``, which does not contain the pattern, comes closest to it: the pattern in
    another case; else the longest piece of it (``difflib``, in the first ``NEAR_WORK //
    len(pattern)`` characters of the text, see :data:`NEAR_WORK`), when that is at least a
    third of the pattern and 4 characters long; else nothing, and the excerpt is the start of
    the text. A regex is not looked for in pieces: its excerpt is the start of the text.
    Secrets are masked first."""
    text = masked(text)
    start = Near(0, 0, None, None, text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else ""))
    if config.regex or not text:
        return start
    pattern = config.pattern
    folded = _same_length_fold(text)
    if not config.ignore_case and folded is not None:
        needle = pattern.casefold()
        at = folded.find(needle)
        if at >= 0:
            size = len(needle)
            return Near(2, size, text[at : at + size], _line_of(text, at), _excerpt(text, at, size))
    haystack, needle = text, pattern
    if config.ignore_case and folded is not None:
        haystack, needle = folded, pattern.casefold()
    window = NEAR_WORK // max(1, len(needle))
    if window < 1024:  # a pattern of thousands of characters: not looked for in pieces
        return start
    matcher = difflib.SequenceMatcher(None, haystack[:window], needle, autojunk=False)
    match = matcher.find_longest_match(0, min(window, len(haystack)), 0, len(needle))
    if match.size >= 4 and match.size * 3 >= len(needle):
        at, size = match.a, match.size
        return Near(1, size, text[at : at + size], _line_of(text, at), _excerpt(text, at, size))
    return start


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
            return [_missing(label, ctx, config)]
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
                    check(
                        label,
                        False,
                        f"the regex {config.pattern!r} took longer than {timeout:g} s on "
                        f"{describe(artifact)}; ATP stopped it",
                    )
                ]
            if line is not None:
                return [check(label, True, f"{describe(artifact)} contains {what} (line {line})")]
            if near is None or near[0].rank < 2:
                found = await off_loop(-1, nearest, text, config)
                if near is None or (found.rank, found.size) > (near[0].rank, near[0].size):
                    near = (found, artifact)
        expected = f"expected {what} in {_listing(matches)}"
        noted = shorten("; ".join(notes), 1000)
        if not read_any and notes:
            return [check(label, False, f"{expected}, but ATP read none of it: {noted}")]
        why = f" ({noted})" if notes else ""
        message = f"{expected}; not found in {searched} characters{why}"
        if near is None:
            return [check(label, False, message, expected=config.pattern, length=searched)]
        closest, artifact = near
        where = describe(artifact)
        excerpt = printable(closest.excerpt)
        if closest.rank == 2:
            evidence = f"in another case in {where} (line {closest.line}): '{excerpt}'"
        elif closest.rank == 1:
            evidence = (
                f"closest: {printable(shorten(closest.found or '', 80))!r} in {where} "
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


class _TimedRe:
    """What jsonschema uses of Python's ``re`` (``search``, ``compile``, ``match``), from the
    ``regex`` module with a time limit per match: ``pattern``, ``patternProperties`` and
    ``additionalProperties`` apply a schema's expressions to an agent's strings, and one
    expression can take longer than the universe's age on a string of 40 characters. A match
    past the limit raises TimeoutError."""

    def __init__(self, rx: Any, original: Any, timeout: float) -> None:
        self._rx = rx
        self._original = original
        self.timeout = timeout

    def search(self, pattern: Any, string: str, flags: int = 0) -> Any:
        return self._rx.search(pattern, string, flags | self._rx.V0, timeout=self.timeout, concurrent=True)

    def match(self, pattern: Any, string: str, flags: int = 0) -> Any:
        return self._rx.match(pattern, string, flags | self._rx.V0, timeout=self.timeout, concurrent=True)

    def __getattr__(self, name: str) -> Any:  # compile, flags, error: as re has them
        return getattr(self._original, name)


_timed_re: _TimedRe | None = None


def _time_limit_schema_patterns(jsonschema: Any, timeout: float) -> None:
    """Make jsonschema match the expressions of schemas with a time limit (once per process;
    ``timeout`` is the latest one asked for)."""
    global _timed_re
    if _timed_re is None:
        import re

        rx = require("regex", install="atp-evaluators", feature="the schema evaluator")
        _timed_re = _TimedRe(rx, re, timeout)
        for module in ("_keywords", "_utils"):
            found = getattr(jsonschema, module, None)
            if found is None:
                found = importlib.import_module(f"jsonschema.{module}")
            if getattr(found, "re", None) is re:
                found.re = _timed_re
    _timed_re.timeout = timeout


def _validate(validator: Any, data: Any) -> list[Any]:
    """The first :data:`MAX_SCHEMA_ERRORS` errors and one more (to tell there are more),
    ordered by where they are."""
    errors = list(islice(validator.iter_errors(data), MAX_SCHEMA_ERRORS + 1))
    return sorted(errors, key=lambda e: list(e.absolute_path))


def json_path(parts: Any) -> str:
    """Where a value is in a JSON document: ``$.competitors[0].share``, ``$["a b"]``; keys (the
    agent's) shortened."""
    steps = []
    for part in parts:
        if isinstance(part, int):
            steps.append(f"[{part}]")
        else:
            key = shorten(str(part), 80)
            steps.append(f".{key}" if key.isidentifier() else f"[{json.dumps(key, ensure_ascii=False)}]")
    return shorten("$" + "".join(steps), 400)


MESSAGE_CHARS = 160
"""A JSON Schema error message longer than this (it quotes a large value) is replaced by what
the schema expected and a preview of the value."""
_VALUE_NOT_QUOTED = frozenset(
    {
        "required",
        "dependentRequired",
        "dependencies",
        "dependentSchemas",
        "additionalProperties",
        "unevaluatedProperties",
        "additionalItems",
        "unevaluatedItems",
        "propertyNames",
    }
)
"""The keywords whose error messages do not quote the value they rejected."""


def _failure(error: Any) -> dict[str, Any]:
    """What one JSON Schema error says: where, what the schema expected, the value it rejected."""
    return {
        "path": json_path(error.absolute_path),
        "expected": f"{error.validator}: {preview(error.validator_value, 80)}",
        "actual": preview(error.instance),
        "message": shorten(error.message, MESSAGE_CHARS),
    }


def _explained(error: Any, failure: dict[str, Any]) -> str:
    """One error for a check message: jsonschema's words when short, with the value they leave
    out; else what was expected and the value."""
    if len(error.message) > MESSAGE_CHARS:
        return f"at {failure['path']}: expected {failure['expected']}; got {failure['actual']}"
    got = f" (got {failure['actual']})" if error.validator in _VALUE_NOT_QUOTED else ""
    return f"at {failure['path']}: {error.message}{got}"


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
            return [_missing(label, ctx, config)]
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
            _time_limit_schema_patterns(jsonschema, regex_timeout(self.settings, "schema"))
        checks = []
        for artifact in matches:
            data, problem = await data_of(artifact, ctx)
            name = f"schema:{describe(artifact)}" if len(matches) > 1 else label
            if problem is not None:
                checks.append(check(name, False, problem))
                continue
            size = 0 if not uses_regex and small_data(data) else -1
            try:
                errors = await off_loop(size, _validate, validator, data)
            except RecursionError:
                checks.append(
                    check(name, False, f"{describe(artifact)} is nested too deeply for ATP to validate")
                )
                continue
            except TimeoutError:
                seconds = regex_timeout(self.settings, "schema")
                checks.append(
                    check(
                        name,
                        False,
                        f"a regular expression of the schema took longer than {seconds:g} s on "
                        f"{describe(artifact)}; ATP stopped it (evaluators.schema.regex_timeout_seconds)",
                    )
                )
                continue
            if not errors:
                checks.append(check(name, True, f"{describe(artifact)} is valid against the schema"))
                continue
            failures = [_failure(e) for e in errors[:3]]
            shown = "; ".join(_explained(e, f) for e, f in zip(errors[:3], failures, strict=True))
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
                    f"{describe(artifact)} is not valid against the schema: {printable(shown)}{more}",
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


def headings(text: str) -> list[str]:
    """The ATX headings of markdown ``text``, CommonMark-like: up to 3 spaces of indentation,
    1 to 6 ``#``, then a space, a tab or the end of the line; a closing run of ``#`` after a
    space or tab is not part of the heading. Linear in the length of the text (a few
    ``str`` scans per line), however the agent wrote its lines."""
    found = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        body = line.lstrip(" ")
        if len(line) - len(body) > 3 or not body.startswith("#"):
            continue
        rest = body.lstrip("#")
        if len(body) - len(rest) > 6 or (rest and rest[0] not in " \t"):
            continue
        content = rest.strip(" \t")
        unclosed = content.rstrip("#")
        if not unclosed:
            content = ""
        elif unclosed != content and unclosed[-1] in " \t":
            content = unclosed
        found.append(content.strip())
    return found


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
            return [_missing(label, ctx, config)]
        found: set[str] = set()
        shown: list[str] = []
        named = 0
        notes: list[str] = []
        for artifact in matches:
            text, note = await text_of(artifact, ctx)
            if note is not None:
                notes.append(note)
            if text is not None:
                folded, first, count = await off_loop(len(text), _folded_headings, text)
                found |= folded
                named += count
                shown.extend(shorten(heading, 80) for heading in first[: SHOWN_NAMES - len(shown)])
        missing = [s for s in config.sections if s.strip().casefold() not in found]
        score = 1.0 - len(missing) / len(config.sections)
        if missing:
            why = f"; {shorten('; '.join(notes), 1000)}" if notes else ""
            has = (
                f"the headings are: {printable(shorten(', '.join(shown), 400))}"
                + (f" (and {named - len(shown)} more)" if named > len(shown) else "")
                if shown
                else "no headings found"
            )
            message = (
                f"expected sections {config.sections}; missing {missing} "
                f"({len(config.sections) - len(missing)}/{len(config.sections)} present; {has}){why}"
            )
            return [
                check(label, False, message, score, expected=config.sections, missing=missing, found=shown)
            ]
        return [check(label, True, f"all {len(config.sections)} sections present", score)]
