"""The ``python`` evaluator: a check written in Python in the suite, for what no built-in covers.

::

    - type: python
      config: {expression: "len(output) > 3 and 'error' not in output"}
    - type: python
      config: {function: "checks:has_three_items"}     # checks.py beside the suite

An ``expression`` is evaluated with the run's names (:data:`NAMES`); a ``function``
(``module:function``: a module of the suite's folder, imported once under a name of its own
without touching Python's path, :func:`suite_package`; else an installed one) is called with
one argument that has the same names as attributes. Either returns a verdict:

- ``True`` / ``False``;
- ``(passed, "message")``;
- a mapping like a check: ``{"passed": bool, "score": 0-1, "message": str, "details": {...}}``
  (``passed`` required);
- a score from 0 to 1, which passes from ``threshold`` (default 0.5).

The suite's author is trusted as a plugin's is: the code runs in ATP's process, in a worker
thread, within the evaluator's time limit (``evaluators.python.timeout_seconds``, default 60 s;
Python cannot stop a thread, so one past it is abandoned). What it raises, ``SystemExit`` and
``KeyboardInterrupt`` included, is a failed check with the traceback in its details (the
agent's output may be what made it raise), never the end of ATP; a function that cannot be
imported, or a verdict of another shape, makes the run an error (the suite is wrong, not the
agent). The names are the run's own objects: read them, do not change them.
"""

import builtins
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import anyio
import msgspec

from atp.core.evaluator import CannotEvaluate, EvalContext, Evaluator, check, unmet
from atp.core.isolation import AgentRaised, call_agent
from atp.core.plugins import format_exception
from atp.core.protocol import StructuredArtifact
from atp.core.results import Check
from atp.core.secrets import Masker
from atp.core.text import describe, printable, shorten, shown
from atp.evaluators.artifact import text_of
from atp.evaluators.evidence import preview

__all__ = ["NAMES", "PythonCheck", "PythonConfig", "function_problem", "run_names", "verdict"]

NAMES = ("output", "files", "data", "response", "status", "metrics", "trace", "duration", "test_id")
"""What a python check sees of a run (docs/suites.md, "Python checks")."""
TRACEBACK_CHARS = 8000
MESSAGE_CHARS = 500
SHOWN_NAMES = 5
"""A false expression's message shows this many of the names it uses, with their values."""
VERDICT_KEYS = frozenset({"passed", "score", "message", "details"})


def function_problem(value: str) -> str | None:
    """What is wrong with the form of ``function`` (``module:function``), or ``None``."""
    module, colon, attribute = value.partition(":")
    example = "like checks:has_title, a checks.py beside the suite"
    if not colon or not module or not attribute:
        hint = ""
        if value.endswith(".py") and not colon:
            hint = f"; name the module, not its file: '{shorten(value[:-3], 80)}:function'"
        return f"'function' must be 'module:function' ({example}), not {shorten(value, 80)!r}{hint}"
    for name in (module, attribute):
        if not all(part.isidentifier() for part in name.split(".")):
            return f"'function' {shorten(value, 80)!r}: {shorten(name, 80)!r} is not a dotted Python name ({example})"
    return None


@functools.lru_cache(maxsize=256)
def _compiled(expression: str) -> Any:
    return compile(expression, "<python assertion>", "eval")


class PythonConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A check in Python: an ``expression`` evaluated with the run's names, or a ``function``
    (``module:function``, imported from the suite's folder) called with them; it returns a bool,
    (bool, message), a dict like a check, or a score from 0 to 1 that passes from ``threshold``."""

    expression: str | None = None
    function: str | None = None
    threshold: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.5

    def __post_init__(self) -> None:
        if (self.expression is None) == (self.function is None):
            raise ValueError(
                "give 'expression' (Python evaluated with the run's names) or 'function', one of them"
            )
        if self.expression is not None:
            if not self.expression.strip():
                raise ValueError("'expression' is empty")
            try:
                _compiled(self.expression)
            except SyntaxError as exc:
                where = f" (at character {exc.offset})" if exc.offset else ""
                raise ValueError(f"'expression' is not a Python expression: {exc.msg}{where}") from None
            except ValueError as exc:  # a NUL byte
                raise ValueError(f"'expression' cannot be compiled: {exc}") from None
        if self.function is not None:
            problem = function_problem(self.function)
            if problem is not None:
                raise ValueError(problem)


async def run_names(ctx: EvalContext) -> dict[str, Any]:
    """The names a python check sees (:data:`NAMES`): the artifacts' texts (``files``, by path;
    ``None`` for one ATP cannot read as text) and data (``data``, the structured ones by name),
    ``output`` (the first artifact's text, ``""`` without one), and the run's response, status,
    metrics, trace summary, duration and test id."""
    files: dict[str, str | None] = {}
    data: dict[str, Any] = {}
    output: str | None = None
    for artifact in ctx.response.artifacts:
        if isinstance(artifact, StructuredArtifact):
            data.setdefault(artifact.name, artifact.data)
            if output is None:
                output = (await text_of(artifact, ctx)).text or ""
            continue
        text = (await text_of(artifact, ctx)).text
        files.setdefault(artifact.path, text)
        if output is None:
            output = text or ""
    response = ctx.response
    return {
        "output": output or "",
        "files": files,
        "data": data,
        "response": response,
        "status": response.status,
        "metrics": response.metrics,
        "trace": ctx.trace.summary,
        "duration": ctx.duration,
        "test_id": ctx.test.id,
    }


def verdict(name: str, returned: Any, threshold: float, what: str, masker: Masker | None) -> Check:
    """The check a python check's return value says; :class:`CannotEvaluate` for a value of
    another shape."""
    if isinstance(returned, bool):
        return check(name, returned, f"{what} is {'true' if returned else 'false'}")
    if isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[0], bool):
        passed, message = returned
        if isinstance(message, str):
            return check(name, passed, shown(message, masker, MESSAGE_CHARS))
    if isinstance(returned, dict):
        return _from_mapping(name, returned, what, masker)
    if isinstance(returned, (int, float)) and not isinstance(returned, bool):
        if 0.0 <= returned <= 1.0:
            score = float(returned)
            passed = score >= threshold
            return check(name, passed, f"{what} scored {score:.3g} (passing from {threshold:g})", score)
        raise CannotEvaluate(f"{what} returned the score {returned!r}, which is not from 0 to 1")
    raise CannotEvaluate(
        f"{what} returned {describe(returned, masker)}; a python check returns True/False, "
        "(passed, message), a dict {passed, score, message, details} or a score from 0 to 1"
    )


def _from_mapping(name: str, returned: dict[Any, Any], what: str, masker: Masker | None) -> Check:
    unknown = [key for key in returned if key not in VERDICT_KEYS]
    if unknown:
        raise CannotEvaluate(
            f"{what} returned a dict with the key {shorten(repr(unknown[0]), 80, masker)}; it takes "
            f"{', '.join(sorted(VERDICT_KEYS))}"
        )
    passed = returned.get("passed")
    score = returned.get("score")
    message = returned.get("message")
    details = returned.get("details")
    if not isinstance(passed, bool):
        raise CannotEvaluate(
            f"{what} returned a dict whose 'passed' is {describe(passed, masker)}, not a bool"
        )
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1
    ):
        raise CannotEvaluate(
            f"{what} returned a dict whose 'score' is {describe(score, masker)}, not from 0 to 1"
        )
    if message is not None and not isinstance(message, str):
        raise CannotEvaluate(
            f"{what} returned a dict whose 'message' is {describe(message, masker)}, not a string"
        )
    if details is not None and not isinstance(details, dict):
        raise CannotEvaluate(
            f"{what} returned a dict whose 'details' is {describe(details, masker)}, not a dict"
        )
    said = (
        shown(message, masker, MESSAGE_CHARS)
        if message
        else f"{what} says {'passed' if passed else 'failed'}"
    )
    made = check(name, passed, said, None if score is None else float(score))
    made.details = dict(details) if details else None
    return made


def _evidence(code: Any, names: dict[str, Any], masker: Masker | None) -> str:
    """``name = value`` for the run's names an expression uses, for a false one's message."""
    used = [name for name in code.co_names if name in names][:SHOWN_NAMES]
    return "; ".join(f"{name} = {printable(_shown_value(names[name], masker))}" for name in used)


def _shown_value(value: Any, masker: Masker | None) -> str:
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        return preview(value, masker=masker)
    return shorten(repr(value), 120, masker)


class PythonCheck(Evaluator):
    name = "python"
    summary = "a Python expression, or a module:function beside the suite, judges the run"
    Config = PythonConfig

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(settings)
        self._functions: dict[tuple[Path | None, str], Any] = {}

    async def evaluate(self, ctx: EvalContext, config: PythonConfig) -> list[Check]:
        names = await run_names(ctx)
        code = None
        if config.expression is not None:
            code = _compiled(config.expression)
            what = f"the expression {shorten(config.expression, 120)!r}"
            label = self.name
            scope = {"__builtins__": builtins, "json": json, "re": re, **names}
            work: Any = functools.partial(eval, code, scope)
        else:
            function = config.function or ""
            target = await anyio.to_thread.run_sync(
                self._function, function, ctx.suite_dir, abandon_on_cancel=True
            )
            what = f"{function}()"
            label = f"{self.name}:{function}"
            work = functools.partial(target, SimpleNamespace(**names))
        try:
            returned = await anyio.to_thread.run_sync(call_agent, work, abandon_on_cancel=True)
        except AgentRaised as raised:
            exc = raised.raised
            return [
                unmet(
                    label,
                    f"{what} raised {shown(f'{type(exc).__name__}: {exc}', ctx.masker, MESSAGE_CHARS)}",
                    traceback=shorten(format_exception(exc), TRACEBACK_CHARS, ctx.masker),
                )
            ]
        made = verdict(label, returned, config.threshold, what, ctx.masker)
        if code is not None and returned is False:  # (a message of the check's own is left as it is)
            evidence = _evidence(code, names, ctx.masker)
            if evidence:
                made.message = f"{made.message} ({evidence})"
        return [made]

    def _function(self, spec: str, folder: Path | None) -> Any:
        """(In a worker thread.) The function ``spec`` names, imported once per suite folder."""
        key = (folder, spec)
        found = self._functions.get(key)
        if found is None:
            found = self._functions[key] = import_function(spec, folder)
        return found


SUITE_MODULES = "atp_suite_"
"""The prefix of the package a suite folder's check modules are imported under
(:func:`suite_package`)."""


def suite_package(folder: Path) -> str:
    """The name of a package standing for the suite folder ``folder`` (``atp_suite_<hash>``, the
    hash of its absolute path): a namespace package whose one location is the folder, made on
    first use. A check module ``checks`` of the folder is ``<package>.checks``: two suites' own
    ``checks.py`` are two modules, and neither stands in for a module ATP or another suite
    imports by its plain name (the folder is never put on ``sys.path``)."""
    resolved = str(folder.resolve())
    name = SUITE_MODULES + hashlib.sha256(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    if name not in sys.modules:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [resolved]
        sys.modules.setdefault(name, importlib.util.module_from_spec(spec))
    return name


def _in_folder(module_name: str, folder: Path) -> bool:
    """Whether the top of dotted ``module_name`` is a module or package of ``folder``."""
    top = module_name.partition(".")[0]
    return (folder / f"{top}.py").is_file() or (folder / top).is_dir()


def import_function(spec: str, folder: Path | None) -> Any:
    """(Blocking.) The callable ``module:function`` names: a module of the suite's ``folder``
    imported under its :func:`suite_package` (``from . import helpers`` in it imports the
    folder's ``helpers.py``), else a module on Python's path (an installed one);
    :class:`CannotEvaluate` saying why not."""
    module_name, _, attribute = spec.partition(":")
    where = ""
    full = module_name
    if folder is not None:
        where = f" (looked in the suite's folder {folder.resolve()} and on Python's path)"
        if _in_folder(module_name, folder):
            importlib.invalidate_caches()
            full = f"{suite_package(folder)}.{module_name}"
    try:
        target: Any = call_agent(importlib.import_module, full)
    except AgentRaised as raised:
        exc = raised.raised
        if isinstance(exc, ModuleNotFoundError) and exc.name and full.startswith(exc.name):
            missing = exc.name.partition(".")[2] if full != module_name else exc.name
            raise CannotEvaluate(f"function {spec!r}: no module named {missing!r}{where}") from None
        raise CannotEvaluate(
            f"function {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {shorten(str(exc), 300)}",
            traceback=shorten(format_exception(exc), TRACEBACK_CHARS),
        ) from None
    walked = module_name
    for part in attribute.split("."):
        try:
            target = call_agent(getattr, target, part)
        except AgentRaised as raised:
            exc = raised.raised
            file = getattr(sys.modules.get(full), "__file__", None) or module_name
            raise CannotEvaluate(f"function {spec!r}: {walked} ({file}) has no {part!r}: {exc}") from None
        walked = f"{walked}{'.' if ':' in walked else ':'}{part}"
    if not callable(target):
        raise CannotEvaluate(f"function {spec!r} is {describe(target)}, not a function")
    return target
