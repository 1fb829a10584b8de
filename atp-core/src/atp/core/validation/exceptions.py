"""Exceptions as ``atp validate`` and ``atp list-agents --check`` word them: the one inside an
exception group, and what an error says (with the agent's evidence where it has some)."""

from __future__ import annotations

from atp.core.errors import single_exception as single_exception

__all__ = ["described", "error_text", "single_exception"]


def error_text(error: BaseException) -> str:
    """An adapter's error as text, with its evidence (what the agent sent)."""
    from atp.core.errors import AgentError
    from atp.core.text import as_text

    message = str(error)
    if isinstance(error, AgentError) and error.evidence is not None:
        message += f": '{as_text(error.evidence)}'"
    if isinstance(error, AgentError) and error.hint:
        message += f"; {error.hint}"
    return message


def described(exc: BaseException) -> str:
    """An exception for a line of a report: ATP's and an agent's errors by their message (with
    the evidence), any other by its type and message (a bug, not the user's doing)."""
    from atp.core.errors import AgentError, AtpError

    if isinstance(exc, (AgentError, AtpError)):
        return error_text(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
