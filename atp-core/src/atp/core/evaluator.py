"""The evaluator interface: one assertion ``type`` in a suite, checked against one run.

An evaluator declares the ``config`` it accepts as a msgspec Struct (:attr:`Evaluator.Config`);
suites are checked against it when they load, so a typo fails before anything runs. For each
run, :meth:`Evaluator.evaluate` gets the :class:`EvalContext` (the test, the request, the
response, the trace) and the assertion's config, and returns its checks.

What ``evaluate`` returns is checked where the kernel receives it (:func:`checked_result`): a
list of :class:`Check` with a bool ``passed`` and a finite score within 0-1. Anything else makes
the run an error naming the evaluator and what it returned.
"""

import inspect
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Generator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import msgspec

from atp.core.bounds import MAX_COUNT, number_in, shown_number
from atp.core.errors import AtpError
from atp.core.protocol import ATPRequest, ATPResponse
from atp.core.results import Check, Usage
from atp.core.text import describe, shorten
from atp.core.trace import Trace

if TYPE_CHECKING:
    from atp.core.artifacts import ArtifactContents
    from atp.core.ledger import ProcessLedger
    from atp.core.secrets import Masker
    from atp.core.suite import Test


DEFAULT_EVALUATOR_TIMEOUT = 60.0
"""Seconds one evaluator may take over one run (``evaluators.<name>.timeout_seconds``)."""


class EmptyConfig(msgspec.Struct, forbid_unknown_fields=True):
    """For evaluators that take no config."""


class EvalContext:
    """Everything an evaluator may look at for one run."""

    __slots__ = (
        "agent_dir",
        "contents",
        "duration",
        "masker",
        "processes",
        "request",
        "response",
        "suite_dir",
        "test",
        "trace",
        "usage",
        "workspace",
    )

    def __init__(
        self,
        *,
        test: "Test",
        request: ATPRequest,
        response: ATPResponse,
        trace: Trace,
        workspace: Path | None = None,
        agent_dir: Path | None = None,
        masker: "Masker | None" = None,
        processes: "ProcessLedger | None" = None,
    ) -> None:
        self.test = test
        self.request = request
        self.response = response
        self.trace = trace
        self.workspace = workspace
        """The request's workspace folder: relative artifact paths are resolved inside it, and
        a path that leaves it is not read."""
        self.agent_dir = agent_dir
        """The agent's working folder (when the request has no workspace): relative artifact
        paths are resolved against it, never against ATP's own working directory."""
        self.masker = masker
        """The run's secrets (``None``: none): agent text an evaluator quotes in a message is
        masked with it before it is cut (:func:`atp.core.text.shorten` and
        :func:`~atp.core.text.piece` take it)."""
        self.processes = processes
        """The run's process ledger (``None`` outside ``atp test``): an evaluator that starts
        processes records each in it (see :mod:`atp.core.ledger`)."""
        self.contents: ArtifactContents | None = None
        """The content of the response's file artifacts as the runner found and checked it
        (:func:`atp.core.artifacts.verify_artifacts`: inline base64 content decoded, the files
        it hashed kept); set by the runner, ``None`` outside ``atp test``. An artifact it holds
        nothing for is read as :mod:`atp.core.artifacts` says
        (``atp.evaluators.reading.content_of`` does both)."""
        self.duration: float | None = None
        """How long the agent took over the run, in seconds, as ATP measured it (the run's
        ``duration_seconds``); set by the runner, ``None`` outside ``atp test``."""
        self.suite_dir: Path | None = None
        """The folder of the suite file, where the suite's own files are (a ``python``
        assertion's module is imported from it); set by the runner, ``None`` when unknown."""
        self.usage: dict[str, Usage] = {}
        """What evaluators spent on this run (:meth:`add_usage`); it goes into the run's
        result as ``evaluation_usage``, apart from the agent's metrics."""

    def add_usage(
        self,
        key: str,
        *,
        calls: int = 0,
        cached: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = None,
    ) -> None:
        """Count what an evaluator spent checking this run under ``key`` (an LLM judge uses
        ``llm_eval/<model>``): requests made, answers taken from a cache, tokens and cost.

        Each is checked against its bounds (a count: an integer from 0 to 10^15; the cost: a
        number from 0 to 10^15, or ``None``): one out of them (a judge's service reporting
        negative tokens, which would cancel what the agent spent in a budget) counts as 10^15,
        so that a budget is exceeded, and :class:`CannotEvaluate` names it: the run is an error."""
        counts = {
            "calls": calls,
            "cached": cached,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
        }
        problems: list[str] = []
        kept: dict[str, int] = {}
        for name, value in counts.items():
            if number_in(value, 0, MAX_COUNT, integer=True) is None:
                problems.append(f"{name} = {shown_number(value)}")
                value = MAX_COUNT
            kept[name] = value
        cost = cost_usd
        if cost is not None and number_in(cost, 0, MAX_COUNT) is None:
            problems.append(f"cost_usd = {shown_number(cost)}")
            cost = float(MAX_COUNT)
        self.usage.setdefault(key, Usage()).add(Usage(**kept, cost_usd=cost))
        if problems:
            raise CannotEvaluate(
                f"{key} reported usage out of bounds: {', '.join(problems)} (each from 0 to 1e15, "
                f"counts integers); it counts as 1e15",
                usage=key,
            )


class Evaluator(ABC):
    """Checks assertions of one ``type``: subclass it, set :attr:`name` (and :attr:`Config`),
    implement :meth:`evaluate`, and register the class through ``atp_register_evaluators``.

    ATP makes one instance per assertion type for a whole suite, when a run first needs it,
    and shares it between concurrent runs. ``evaluate`` may be ``async def`` (run on the event
    loop: it must not block it; a step that holds the loop long is warned about) or a plain
    ``def`` (run in a worker thread). It has :attr:`default_timeout` seconds per run (unless
    the settings' ``timeout_seconds`` says otherwise). What it raises (:class:`CannotEvaluate`
    with evidence, or anything else), or returns that is not a list of :class:`Check`, makes
    the run an error naming the evaluator, not a failure of the agent."""

    name: ClassVar[str]
    """The assertion ``type`` this evaluator checks."""
    summary: ClassVar[str] = ""
    """One line for ``atp list-evaluators``."""
    category: ClassVar[Literal["quality", "behavior"]] = "quality"
    """``quality`` checks look at what the agent produced and feed the quality score;
    ``behavior`` checks look at how it worked."""
    replaces: ClassVar[str | None] = None
    """The name of a plugin whose registration of the same assertion type this class replaces on
    purpose. Without it, two plugins registering one assertion type is an error naming both."""
    Config: ClassVar[type[msgspec.Struct]] = EmptyConfig
    """The ``config`` an assertion of this type accepts."""
    Settings: ClassVar[type[msgspec.Struct] | None] = None
    """The settings (``evaluators.<settings_key>`` in ``atp.config.yaml``) this evaluator
    accepts, checked before any run (unknown keys are errors when the Struct forbids them);
    ``timeout_seconds``, ATP's own, is not part of them. ``None`` accepts any mapping. The
    evaluator receives the settings as a mapping either way."""
    settings_key: ClassVar[str | None] = None
    """Where in the config's ``evaluators:`` this evaluator's settings are: by default under
    its :attr:`name`; ``llm_eval`` reads ``evaluators.llm_judge``, say."""
    default_timeout: ClassVar[float] = DEFAULT_EVALUATOR_TIMEOUT
    """Seconds one evaluation of one run may take unless the settings' ``timeout_seconds``
    says otherwise; an evaluator that calls a slow service raises it."""

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        """``settings`` come from the ``evaluators:`` section of ``atp.config.yaml``."""
        self.settings: Mapping[str, Any] = settings or {}
        self.secrets: Mapping[str, str] = {}
        """The config's ``secrets:`` (given by ATP after the evaluator is made), for an
        evaluator that needs a key to a paid service; every value is masked in ATP's output."""

    @classmethod
    def secret_values(cls, settings: Mapping[str, Any]) -> list[str]:
        """Values ATP must mask in everything it writes because this evaluator uses them (a
        judge's API key read from the environment, say); the config's ``secrets:`` and
        secret-looking ``${VAR}`` values in the settings are masked anyway."""
        return []

    @classmethod
    def settings_name(cls) -> str:
        """The key of this evaluator's settings under ``evaluators:``."""
        return cls.settings_key or cls.name

    @abstractmethod
    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        """Check one run; ``config`` is an instance of :attr:`Config`."""

    async def aclose(self) -> None:  # noqa: B027 - most evaluators hold nothing
        """Release what the evaluator holds across runs (a client's connections): called once
        when the suite's runs are over, on the event loop they ran on."""


def check(name: str, passed: bool, message: str, score: float | None = None, **details: Any) -> Check:
    """A :class:`Check`, scored 1.0 or 0.0 unless a score is given."""
    return Check(
        name=name,
        passed=passed,
        score=(1.0 if passed else 0.0) if score is None else max(0.0, min(1.0, score)),
        message=message,
        details=details or None,
    )


def skipped(name: str, reason: str, **details: Any) -> Check:
    """A check that was not made, and why: neither passed nor failed, left out of the score."""
    return Check(name=name, passed=False, score=0.0, message=reason, details=details or None, skipped=reason)


UNMET = "unmet"
"""The key in a failed check's ``details`` (its value ``True``) that says the check found
nothing to judge: the artifact it looks at was not produced, or could not be read. Such a
check is no verdict either way, so ``negate: true`` leaves it failed (:func:`unmet`)."""


def unmet(name: str, message: str, **details: Any) -> Check:
    """A failed check that found nothing to judge (the artifact it looks at is missing, or is
    not what it can read): ``negate: true`` on its assertion does not make it pass."""
    return Check(name=name, passed=False, score=0.0, message=message, details={**details, UNMET: True})


class CannotEvaluate(AtpError):
    """An evaluator could not check the run (a judge that would not answer, say): the run is
    an error, not the agent's failure, and the check shows ``details`` as evidence."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


class EvaluatorResultError(AtpError):
    """An evaluator returned something that is not a list of :class:`Check`."""


def checked_result(who: str, value: object) -> list[Check]:
    """``value`` if it is what ``evaluate`` must return: a list of :class:`Check`, each with a
    string name and message, a bool ``passed`` and a finite score within 0-1 (an int score is
    taken as a float). Otherwise :class:`EvaluatorResultError` says what was returned;
    ``who`` names the evaluator in it (``evaluator 'contains' of plugin ...``)."""
    if not isinstance(value, list):
        hint = ""
        if isinstance(value, Check):
            hint = " (a single Check: return [check])"
        elif inspect.isawaitable(value):
            hint = " (an awaitable: was 'await' forgotten?)"
        raise EvaluatorResultError(f"{who} returned {describe(value)}{hint}, not a list of Check")
    for index, item in enumerate(value):
        if not isinstance(item, Check):
            raise EvaluatorResultError(
                f"{who} returned a list whose item {index} is {describe(item)}, not a Check"
            )
        problem = _check_problem(item)
        if problem is not None:
            raise EvaluatorResultError(
                f"{who} returned a Check (item {index}, {shorten(repr(item.name), 80)}) whose {problem}"
            )
        if type(item.score) is int:
            item.score = float(item.score)
    return value


def _check_problem(item: Check) -> str | None:
    if not isinstance(item.passed, bool):
        return f"'passed' is {describe(item.passed)}, not a bool"
    score = item.score
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return f"'score' is {describe(score)}, not a number"
    if not (math.isfinite(score) and 0.0 <= score <= 1.0):
        return f"'score' is {score!r}, not within 0-1"
    if not isinstance(item.name, str):
        return f"'name' is {describe(item.name)}, not a string"
    if not isinstance(item.message, str):
        return f"'message' is {describe(item.message)}, not a string"
    if item.details is not None and not isinstance(item.details, dict):
        return f"'details' is {describe(item.details)}, not a dict"
    if item.skipped is not None and not (
        isinstance(item.skipped, str) and item.skipped.strip() and not item.passed and item.score == 0.0
    ):
        return (
            f"'skipped' is {describe(item.skipped)}: a skipped check needs a reason, "
            "passed=False and score 0 (atp.core.evaluator.skipped makes one)"
        )
    return None


def is_async(evaluator: "Evaluator") -> bool:
    """Whether the evaluator's ``evaluate`` is a coroutine function (a plain ``def evaluate``
    is run in a worker thread instead)."""
    return inspect.iscoroutinefunction(evaluator.evaluate)


class StepTimer:
    """Times each step of a coroutine: the stretch it runs between two suspension points,
    which is how long it holds the event loop. An ``async def evaluate`` that makes a blocking
    call shows up as one long step."""

    __slots__ = ("_awaitable", "longest")

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self._awaitable = awaitable
        self.longest = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._awaitable.__await__()
        clock = time.perf_counter
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = clock()
            try:
                yielded = steps.send(sent) if thrown is None else steps.throw(thrown)
            except StopIteration as stop:
                self.longest = max(self.longest, clock() - started)
                return stop.value
            finally:
                thrown = None
            self.longest = max(self.longest, clock() - started)
            try:
                sent = yield yielded
            except GeneratorExit:
                close = getattr(steps, "close", None)
                if close is not None:
                    close()
                raise
            except BaseException as exc:  # cancellation and the like go on into the coroutine
                sent, thrown = None, exc
