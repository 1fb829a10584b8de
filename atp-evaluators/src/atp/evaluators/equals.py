"""The ``equals`` evaluator: an artifact's content, or one value in it, is exactly a given value.

::

    - type: equals
      config: {path: answer.md, value: "42"}                  # the file's text (trimmed)
    - type: equals
      config: {path: report.json, json_path: $.total, value: 42}
    - type: equals
      config: {name: result, json_path: items[0].id, value: "a-1"}   # a structured artifact
    - type: equals
      config: {path: report.json, value: {status: ok, items: []}}    # the whole JSON document

What is compared:

- a **string** ``value`` with a file (``path``, no ``json_path``): the file's text. Unless
  ``exact: true``, line endings are made ``\\n`` and whitespace at the start and the end of
  both is ignored (a file ending in a newline equals ``"42"``); inside, every character counts.
- any other ``value``, or a ``json_path``, or a structured artifact (``name``): JSON values. A
  file is read as JSON; the value ``json_path`` names (the whole document without one) equals
  ``value`` as JSON values are equal (:mod:`atp.evaluators.json_values`: ``true`` is not ``1``,
  ``1`` is ``1.0``, an array's order counts, an object's does not).

A glob ``path`` gives a check per matching artifact. A failed check says where the values
differ, with previews of both (the agent's masked and cut). A missing artifact, content that is
not JSON, or a ``json_path`` that names nothing, is nothing to compare: ``negate: true`` does not
make those pass.
"""

from typing import Any

from atp.core.evaluator import EvalContext, Evaluator, check, unmet
from atp.core.protocol import Artifact, StructuredArtifact
from atp.core.results import Check
from atp.core.text import mask, printable, shorten
from atp.evaluators.artifact import Target, data_of, describe, missing, select, text_of
from atp.evaluators.evidence import preview
from atp.evaluators.json_values import difference, lookup, not_json, parse_path, show_path
from atp.evaluators.offload import off_loop, small_data

__all__ = ["Equals", "EqualsConfig", "text_difference"]

TEXT_CONTEXT = 40
"""A failed text comparison quotes this many characters of each text around the first difference."""


class EqualsConfig(Target, kw_only=True):
    """An artifact's content (``path``: a file; ``name``: a structured artifact), or the value
    ``json_path`` names in it, equals ``value``. A string ``value`` is compared with a file's
    text, trimmed unless ``exact: true``; any other value, or a ``json_path``, as JSON."""

    value: Any
    json_path: str | None = None
    exact: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.path is None and self.name is None:
            raise ValueError(
                "give 'path' (a file) or 'name' (a structured artifact): the artifact to compare"
            )
        if self.json_path is not None:
            parse_path(self.json_path)
        found = not_json(self.value)
        if found is not None:
            steps, what = found
            where = f"'value' at {show_path(steps)}" if steps else "'value'"
            raise ValueError(
                f"{where} {what}, not a JSON value, so it can never equal what the agent produced: "
                "write it as JSON (a string quoted, an object's keys strings)"
            )
        if self.exact and not self.as_text:
            raise ValueError(
                "'exact' applies to a file's text compared with a string 'value' (no 'json_path', no 'name')"
            )

    @property
    def as_text(self) -> bool:
        """Whether the file's text is compared (else JSON values)."""
        return isinstance(self.value, str) and self.json_path is None and self.path is not None


def _normal(text: str, exact: bool) -> str:
    return text if exact else text.replace("\r\n", "\n").replace("\r", "\n").strip()


def text_difference(expected: str, actual: str) -> tuple[int, int, int] | None:
    """Where two texts first differ: the offset, and its line and column (from 1); ``None``
    when they are equal."""
    if expected == actual:
        return None
    at = next((i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b), None)
    if at is None:
        at = min(len(expected), len(actual))
    line = actual.count("\n", 0, at) + 1
    column = at - (actual.rfind("\n", 0, at) + 1) + 1
    return at, line, column


class Equals(Evaluator):
    name = "equals"
    summary = "an artifact's text, its JSON, or the value at a json_path in it, equals 'value'"
    Config = EqualsConfig

    async def evaluate(self, ctx: EvalContext, config: EqualsConfig) -> list[Check]:
        label = f"equals:{config.label}" + (f":{config.json_path}" if config.json_path else "")
        matches = select(ctx, config)
        if not matches:
            return [missing(label, ctx, config)]
        checks = []
        for artifact in matches:
            name = f"{label}:{describe(artifact, ctx.masker)}" if len(matches) > 1 else label
            if config.as_text and not isinstance(artifact, StructuredArtifact):
                checks.append(await self._text(name, artifact, ctx, config))
            else:
                checks.append(await self._json(name, artifact, ctx, config))
        return checks

    async def _text(self, name: str, artifact: Artifact, ctx: EvalContext, config: EqualsConfig) -> Check:
        text, note = await text_of(artifact, ctx)
        described = describe(artifact, ctx.masker)
        if text is None or note is not None:
            why = note or f"{described} has no content ATP can read"
            return unmet(name, f"{described} cannot be compared as text: {why}")
        expected = _normal(config.value, config.exact)
        actual = await off_loop(len(text), _normal, text, config.exact)
        found = await off_loop(len(actual), text_difference, expected, actual)
        how = "exactly" if config.exact else "trimmed"
        if found is None:
            return check(name, True, f"{described} is the expected text ({len(actual)} characters, {how})")
        # the excerpts are cut from the texts with their secrets masked (a cut never shows a part of one)
        shown_expected = await off_loop(len(expected), mask, expected, ctx.masker)
        shown_actual = await off_loop(len(actual), mask, actual, ctx.masker)
        masked: tuple[int, int, int] | None = await off_loop(
            len(shown_actual), text_difference, shown_expected, shown_actual
        )
        at, line, column = masked or found
        start = max(0, at - TEXT_CONTEXT // 2)
        want = printable(shown_expected[start : start + TEXT_CONTEXT])
        got = printable(shown_actual[start : start + TEXT_CONTEXT])
        sizes = f"{len(expected)} characters expected, {len(actual)} found"
        return check(
            name,
            False,
            f"{described} is not the expected text ({how}): they differ at line {line}, column {column} "
            f"({sizes}); expected '{want}', got '{got}'",
            line=line,
            column=column,
            expected=want,
            actual=got,
        )

    async def _json(self, name: str, artifact: Artifact, ctx: EvalContext, config: EqualsConfig) -> Check:
        data, problem = await data_of(artifact, ctx)
        described = describe(artifact, ctx.masker)
        if problem is not None:
            return unmet(name, f"expected JSON to compare in {described}, but {problem}")
        steps = parse_path(config.json_path) if config.json_path is not None else ()
        value, absent = lookup(data, steps)
        if absent is not None:
            where = shorten(absent, 400, ctx.masker)
            return unmet(
                name,
                f"{described} has no value at {show_path(steps)}: {printable(where)}",
                path=show_path(steps),
            )
        size = 0 if small_data(config.value) and small_data(value) else -1
        found = await off_loop(size, difference, config.value, value)
        at = show_path(steps)
        if found is None:
            return check(name, True, f"{described} at {at} equals {preview(config.value, 80)}")
        inside, said = found
        how = printable(shorten(said, 200, ctx.masker))
        place = show_path([*steps, *inside])
        want, _ = lookup(config.value, tuple(inside))
        got, _ = lookup(value, tuple(inside))
        shown_want, shown_got = preview(want), preview(got, masker=ctx.masker)
        return check(
            name,
            False,
            f"{described} at {at} does not equal {preview(config.value, 80)}: at {printable(shorten(place, 200, ctx.masker))}, "
            f"{how}: expected {printable(shown_want)}, got {printable(shown_got)}",
            path=place,
            expected=shown_want,
            actual=shown_got,
        )
