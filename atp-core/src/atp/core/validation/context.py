"""What every check of ``atp validate`` shares: the agent's type and time limit, the masker of
what the agent sent, and where warnings and an adapter's tracebacks go."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from atp.core.text import shown
from atp.core.validation.sink import SEEN_CHARS

if TYPE_CHECKING:
    from atp.core.secrets import Masker
    from atp.core.validation.probe import Answer

__all__ = ["CheckContext"]

TRACEBACK_CHARS = 100_000


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr)


class CheckContext:
    """The settings of one validation that the checks word their results with."""

    def __init__(
        self,
        agent_type: str,
        *,
        timeout: float,
        masker: Masker,
        say: Callable[[str], None] | None = None,
        tracebacks: bool = False,
    ) -> None:
        self.agent_type = agent_type
        self.timeout = timeout
        """How long each probe (and the start, and the health check) may take, in seconds."""
        self.masker = masker
        self.say = say or _to_stderr
        """Where a warning line goes (standard error by default)."""
        self.tracebacks = tracebacks
        """Whether an adapter's bug is shown with its traceback (``--debug``)."""

    def shown(self, text: str, limit: int = SEEN_CHARS) -> str:
        """Agent text as it may be shown: secrets masked, then shortened and escaped."""
        return shown(text, self.masker, limit)

    def log_lines(self, answer: Answer, besides: str = "") -> list[str]:
        """The last lines of the agent's log, but for those ``besides`` (an adapter's message)
        quotes already."""
        return [f"log: {self.shown(line)}" for line in answer.sink.log_tail if line not in besides]

    def debug(self, exc: BaseException) -> None:
        """With :attr:`tracebacks`, the traceback of an exception that is neither the agent's
        fault nor a user's error (a bug in an adapter)."""
        from atp.core.errors import AgentError, AtpError

        if self.tracebacks and not isinstance(exc, (AgentError, AtpError)):
            import traceback

            self.say(self.shown("".join(traceback.format_exception(exc)), TRACEBACK_CHARS))
