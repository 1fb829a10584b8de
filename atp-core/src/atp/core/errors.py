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

    def each(self) -> list[SuiteError]:
        """The mistakes this error reports: itself (several, for :class:`SuiteErrors`)."""
        return [self]

    def __reduce__(self) -> tuple[object, ...]:
        # kept whole when pickled: its location too
        return (_suite_error, (type(self), self.reason, self.file, self.path, self.line))


def _suite_error(
    cls: type[SuiteError], reason: str, file: str | None, path: str | None, line: int | None
) -> SuiteError:
    return cls(reason, file=file, path=path, line=line)


class SuiteErrors(SuiteError):
    """Several mistakes found at once (:mod:`atp.core.mistakes`), each a located
    :class:`SuiteError` in :attr:`errors`, in the order of the file; this error's own
    ``reason`` and location are the first one's. Its text is a heading line, then one line per
    mistake."""

    def __init__(self, errors: list[SuiteError], *, more: bool = False) -> None:
        first = errors[0]
        super().__init__(first.reason, file=first.file, path=first.path, line=first.line)
        self.errors = errors
        self.more = more
        """Some were left out (a bound was reached): fix these and run again to see them."""
        where = {error.file for error in errors}
        of = f" in {next(iter(where))}" if len(where) == 1 and first.file else ""
        self.heading = f"{len(errors)} mistakes{of}" + (
            " (the first ones: fix them and run again to see the others)" if more else ""
        )
        self.args = ("\n".join([f"{self.heading}:", *(f"  {error}" for error in errors)]),)

    @classmethod
    def of(cls, errors: list[SuiteError], *, more: bool = False) -> SuiteError:
        """One error for ``errors`` (not empty): the only one, or all of them, as an instance
        of the first one's class too (a config file's mistakes are still a ``ConfigFileError``)."""
        if len(errors) == 1 and not more:
            return errors[0]
        kind = type(errors[0])
        if kind is SuiteError or issubclass(kind, SuiteErrors):
            return SuiteErrors(errors, more=more)
        return _several(kind)(errors, more=more)

    def each(self) -> list[SuiteError]:
        return list(self.errors)

    def __reduce__(self) -> tuple[object, ...]:
        return (_suite_errors, (self.errors, self.more))


def _suite_errors(errors: list[SuiteError], more: bool) -> SuiteError:
    return SuiteErrors.of(errors, more=more)


_SEVERAL: dict[type[SuiteError], type[SuiteErrors]] = {}


def _several(kind: type[SuiteError]) -> type[SuiteErrors]:
    """:class:`SuiteErrors` that is a ``kind`` too (one class per kind)."""
    found = _SEVERAL.get(kind)
    if found is None:
        found = _SEVERAL[kind] = type(
            f"{kind.__name__}s", (SuiteErrors, kind), {"__module__": kind.__module__}
        )
    return found


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
    ``hint`` is ATP's own advice on what may have gone wrong, said after the evidence.
    """

    def __init__(self, message: str, *, evidence: str | bytes | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.evidence = evidence
        self.hint = hint


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
