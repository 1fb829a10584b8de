"""The evaluator interface: one assertion ``type`` in a suite, checked against one run.

An evaluator declares the ``config`` it accepts as a msgspec Struct (:attr:`Evaluator.Config`);
suites are checked against it when they load, so a typo fails before anything runs. For each
run, :meth:`Evaluator.evaluate` gets the :class:`EvalContext` (the test, the request, the
response, the trace) and the assertion's config, and returns its checks.
"""

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import msgspec

from atp.core.protocol import ATPRequest, ATPResponse
from atp.core.results import Check
from atp.core.trace import Trace

if TYPE_CHECKING:
    from atp.core.suite import Test


class EmptyConfig(msgspec.Struct, forbid_unknown_fields=True):
    """For evaluators that take no config."""


class EvalContext:
    """Everything an evaluator may look at for one run."""

    __slots__ = ("agent_dir", "request", "response", "test", "trace", "workspace")

    def __init__(
        self,
        *,
        test: "Test",
        request: ATPRequest,
        response: ATPResponse,
        trace: Trace,
        workspace: Path | None = None,
        agent_dir: Path | None = None,
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


class Evaluator(ABC):
    name: ClassVar[str]
    """The assertion ``type`` this evaluator checks."""
    summary: ClassVar[str] = ""
    """One line for ``atp list-evaluators``."""
    category: ClassVar[Literal["quality", "behavior"]] = "quality"
    """``quality`` checks look at what the agent produced and feed the quality score;
    ``behavior`` checks look at how it worked."""
    Config: ClassVar[type[msgspec.Struct]] = EmptyConfig
    """The ``config`` an assertion of this type accepts."""
    Settings: ClassVar[type[msgspec.Struct] | None] = None
    """The settings (``evaluators.<name>`` in ``atp.config.yaml``) this evaluator accepts,
    checked before any run (unknown keys are errors when the Struct forbids them);
    ``timeout_seconds``, ATP's own, is not part of them. ``None`` accepts any mapping. The
    evaluator receives the settings as a mapping either way."""

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        """``settings`` come from the ``evaluators:`` section of ``atp.config.yaml``."""
        self.settings: Mapping[str, Any] = settings or {}

    @abstractmethod
    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        """Check one run; ``config`` is an instance of :attr:`Config`."""


def check(name: str, passed: bool, message: str, score: float | None = None, **details: Any) -> Check:
    """A :class:`Check`, scored 1.0 or 0.0 unless a score is given."""
    return Check(
        name=name,
        passed=passed,
        score=(1.0 if passed else 0.0) if score is None else max(0.0, min(1.0, score)),
        message=message,
        details=details or None,
    )
