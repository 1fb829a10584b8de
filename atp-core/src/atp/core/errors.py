"""Errors a user can cause, each saying what happened and what to do.

The CLI prints an :class:`AtpError` as its message alone (exit code 2, or 3 for a
:class:`PluginFailed`); anything else is a bug in ATP (exit code 4, the traceback with
``--debug``).
"""

from __future__ import annotations


class AtpError(Exception):
    """Base of every error ATP reports to a user without a traceback."""


class ConfigError(AtpError):
    """A configuration file, suite file or command-line option is wrong."""


class SuiteError(ConfigError):
    """A suite file is invalid: malformed YAML, a wrong field, a duplicate id, an unknown type.

    ``location`` names where: ``file``, ``path`` (like ``tests[2].assertions[0].type``) and
    ``line`` (1-based), each ``None`` when not known.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        self.reason = message
        self.file = file
        self.path = path
        self.line = line
        where = file or "<suite>"
        if line is not None:
            where += f":{line}"
        if path:
            where += f": at {path}"
        super().__init__(f"{where}: {message}")


class ProtocolError(AtpError):
    """A message does not follow ATP Protocol 1.0: which message, which field, what was expected."""


class PluginError(AtpError):
    """A plugin is missing or a name no plugin registers is used (a usage error, exit 2)."""


class PluginFailed(PluginError):
    """A plugin broke: it raised, returned what it must not, or two plugins claim one name.
    ``atp`` exits with code 3 (not 1, which means a test failed)."""


class MissingDependencyError(PluginError):
    """A plugin needs a third-party library that is not installed; the message names the fix."""


class AdapterError(AtpError):
    """An adapter could not reach or start its agent (not: the agent misbehaved): a fault of
    the infrastructure between ATP and the agent.

    Raised from a run (``Adapter.execute``), it makes the run an error, and the run is tried
    again when retries are on (docs/reliability.md) unless ``retryable`` is false: a fault
    that another try cannot fix (a program that does not exist, a setting that is wrong).
    ``retry_after`` is how long the far side asked ATP to wait (an HTTP ``Retry-After``), in
    seconds.
    """

    def __init__(self, message: str, *, retryable: bool = True, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[object, ...]:
        # kept whole when pickled (an executor's worker raises it, ATP reads it)
        return (_adapter_error, (type(self), str(self), self.retryable, self.retry_after))


def _adapter_error(
    cls: type[AdapterError], message: str, retryable: bool, retry_after: float | None
) -> AdapterError:
    error = cls.__new__(cls)
    AdapterError.__init__(error, message, retryable=retryable, retry_after=retry_after)
    return error


class ExecutorLost(AtpError):
    """An executor can make no more runs (its cluster's scheduler is gone for good): the suite
    stops as on Ctrl-C, with every finished result kept, and ``atp test --resume`` makes the
    rest once the cluster is back. Raised from :meth:`atp.core.executor.Executor.execute`."""


class StorageError(AtpError):
    """The run directory cannot be written (a full disk, no permission): the suite stops, and
    every result written before stays readable."""


class AgentError(Exception):
    """The agent misbehaved during one run: it crashed, printed garbage, broke the protocol, or
    flooded ATP. The run fails with this message as its reason; the other runs go on.

    ``evidence`` is what the agent sent that shows it (a response line, say), uncut: the runner
    masks secrets in it first, then shortens it and escapes control characters for the reason,
    so an adapter never cuts agent text itself (a cut could split a secret and leak half).
    """

    def __init__(self, message: str, *, evidence: str | bytes | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.evidence = evidence


class AgentRefused(AgentError):
    """The agent answered a request with a refusal of its transport instead of an ATP Response
    (an HTTP 4xx, a gRPC ``INVALID_ARGUMENT``): the run fails like any :class:`AgentError`, and
    ``atp validate`` counts it as a graceful answer to a request the agent must refuse.
    ``status`` is the transport's code (``422``, ``"INVALID_ARGUMENT"``)."""

    def __init__(
        self, message: str, *, status: int | str | None = None, evidence: str | bytes | None = None
    ) -> None:
        super().__init__(message, evidence=evidence)
        self.status = status


def single_exception(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one exception, else ``exc``: what
    a task group raised for the one task that failed."""
    inner = getattr(exc, "exceptions", None)  # an ExceptionGroup (a backport's on Python 3.10)
    while isinstance(inner, tuple) and len(inner) == 1 and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc
