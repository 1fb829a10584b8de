"""The ``python`` adapter: an agent that is a Python callable, run inside the ATP process.

No process is started and nothing goes over a pipe: ATP imports the agent's module once per
``atp test`` and calls the callable for every run. Settings::

    agents:
      - name: my-agent
        type: python
        callable: my_agent:run    # module:attribute (dotted attributes too: my_agent:agent.run)
        path: [src]               # optional: folders put at the front of sys.path
        timeout: 120              # seconds; the test's timeout_seconds applies too

The module is found on Python's path, with the folder of the file that defines the agent (the
suite or ``atp.config.yaml``) and the ``path`` folders (relative to that folder) put at its
front; so ``callable: my_agent:run`` works for a ``my_agent.py`` next to the suite. The folders
stay on ``sys.path`` for the whole ``atp test`` (the agent may import more later).

The callable is called as ``run(request, emit)`` with the :class:`~atp.core.protocol.ATPRequest`
and an event callback (:class:`Emit`), and returns an :class:`~atp.core.protocol.ATPResponse` or
a dict of one (``version`` and ``task_id`` default to the request's). ``emit(event)`` takes an
ATP event, or a dict of one whose ``version``, ``task_id``, ``timestamp`` (now, UTC) and
``sequence`` (one more than the last event's, from 0) default::

    def run(request, emit):
        emit({"event_type": "progress", "payload": {"message": "half way", "percentage": 50}})
        return {"status": "completed", "artifacts": [], "metrics": {}}

An ``async def`` callable runs on ATP's event loop; a plain ``def`` runs in a worker thread of
its own, so it never holds up the other runs of ``--parallel``. Python cannot stop a thread: a
plain function still running when its run times out (or ATP is interrupted) is abandoned, and
runs on in the background while the run is reported as timed out; from then on its ``emit``
raises :class:`RunEnded`.

What the agent gets wrong fails its run (:class:`~atp.core.errors.AgentError`): an exception
(its traceback goes to the run's log), a return value that is not a valid response, an event
that is not a valid event. What keeps it from being imported at all (no such module, an error
while importing it, no such attribute, not callable) is an
:class:`~atp.core.errors.AdapterError`, before any run: the suite does not start.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import importlib
import inspect
import math
import os
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType, ModuleType, TracebackType
from typing import Any, NoReturn, Protocol, TypeVar, Union

import anyio
import msgspec

from atp.core import isolation
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError, AtpError, ProtocolError
from atp.core.isolation import AgentRaised, await_agent, call_agent
from atp.core.protocol import (
    EVENT_TYPES,
    PROTOCOL_VERSION,
    ATPRequest,
    ATPResponse,
    Event,
    UnknownEvent,
    decode_event,
    decode_request,
    decode_response,
    encode,
)
from atp.core.text import describe
from atp.core.text import guarded_repr as guarded_repr
from atp.core.trace import EventSink

_EVENT_CLASSES: tuple[type[Any], ...] = (*EVENT_TYPES.values(), UnknownEvent)
_ENCODE_ERRORS = (TypeError, ValueError, OverflowError, RecursionError, msgspec.MsgspecError)
"""What encoding what an agent built can raise (an object JSON cannot hold, a cycle)."""
_encoder = msgspec.json.Encoder()
_THIS_FILE = os.path.abspath(__file__)
_T = TypeVar("_T")
MAX_FOLDERS_CHARS = 400
"""How much of the list of folders searched a "module not found" message shows."""


class Emit(Protocol):
    """The event callback an agent callable receives: ``emit(event)``."""

    def __call__(self, event: Union[Event, Mapping[str, Any]], /) -> None: ...


AgentCallable = Callable[[ATPRequest, Emit], Any]


class RunEnded(Exception):
    """Raised by ``emit`` once the run it belongs to is over: a plain function that outlived
    its run's time limit (abandoned in its thread) stops at its next ``emit``."""


class PythonSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    callable: str
    """``module:attribute`` (``my_agent:run``, ``my_pkg.agents:Agent.run``)."""
    path: list[str] = msgspec.field(default_factory=list)
    """Folders put at the front of ``sys.path`` before importing, relative to the folder of the
    file that defines the agent (which is always importable)."""

    def __post_init__(self) -> None:
        problem = callable_problem(self.callable)
        if problem is not None:
            raise ValueError(problem)
        for index, folder in enumerate(self.path):
            if not folder:
                raise ValueError(f"'path[{index}]' is empty")
            if "\0" in folder:
                raise ValueError(f"'path[{index}]' holds a NUL byte (\\0), which no path can")


def callable_problem(value: str, setting: str = "callable") -> str | None:
    """What is wrong with the form of a ``callable`` setting (or of another ``module:attribute``
    setting, named ``setting`` in the message), or ``None``."""
    example = "like my_agent:run, or my_package.agent:Agent.run"
    label = f"'{setting}'"
    if "\0" in value:
        return f"{label} holds a NUL byte (\\0), which no module or attribute name can"
    module, colon, attribute = value.partition(":")
    if not colon:
        hint = ""
        head, dot, tail = value.rpartition(".")
        if dot and head and tail and not value.endswith(".py"):
            hint = f" (did you mean '{head}:{tail}'?)"
        return (
            f"{label} must be 'module:attribute' ({example}), not {value!r}: a ':' separates "
            f"the module from the function{hint}"
        )
    if module.endswith(".py") or "/" in module or "\\" in module:
        stem = os.path.splitext(os.path.basename(module.replace("\\", "/")))[0] or "my_agent"
        return (
            f"{label} names a module, not a file: {module!r} is a path. Write the module's "
            f"name ('{stem}:{attribute or 'run'}') and put its folder in 'path' (relative to "
            f"the file that defines the agent) unless it is that file's folder"
        )
    if not module:
        return f"{label} {value!r} has no module before the ':' ({example})"
    if not attribute:
        return f"{label} {value!r} has no attribute after the ':' ({example})"
    if ":" in attribute:
        return f"{label} {value!r} has more than one ':' ({example})"
    for what, name in (("module", module), ("attribute", attribute)):
        for part in name.split("."):
            if not part.isidentifier():
                return (
                    f"{label} {value!r}: {name!r} is not a valid {what} name "
                    f"(dotted Python identifiers, {example})"
                )
    return None


class PythonAdapter(Adapter):
    type = "python"
    summary = "an agent that is a Python callable run inside ATP: callable: module:function"
    Settings = PythonSettings
    settings: PythonSettings

    def __init__(self, settings: PythonSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        module, _, attribute = settings.callable.partition(":")
        self.module_name = module
        self.attribute = attribute
        self.folders = [Path(os.path.abspath(self.base_dir / folder)) for folder in settings.path]
        """The ``path`` folders, absolute."""
        self.function: AgentCallable | None = None
        """The agent callable, once :meth:`start` imported it."""
        self.is_async = False
        self.cwd = Path.cwd()
        self._limiter: anyio.CapacityLimiter | None = None
        self._runs: set[_Run] = set()
        self._aborted = False

    # --- the adapter --------------------------------------------------------------------------

    async def start(self) -> None:
        """Import the module and find the callable, once, in a worker thread (importing an
        agent framework can take seconds). Raises AdapterError saying what went wrong."""
        self.cwd = Path.cwd()
        self._limiter = anyio.CapacityLimiter(math.inf)  # --parallel is the bound
        try:
            function = await anyio.to_thread.run_sync(call_agent, self._load, abandon_on_cancel=True)
            self.is_async = call_agent(_is_async, function)
        except AgentRaised as raised:  # (the agent's code raised what no check below expected)
            exc = raised.raised
            if isinstance(exc, AtpError):
                raise exc from None
            raise self._error(f"raised {type(exc).__name__}: {exc}{self._where(exc.__traceback__)}") from None
        self.function = function

    def artifact_dir(self, request: ATPRequest) -> Path | None:
        """ATP's working folder when it started: an in-process agent shares it."""
        return self.cwd

    def abort(self) -> None:
        """End every run at once: the agents' ``emit`` raises :class:`RunEnded` from now on,
        and no new run starts. (A thread cannot be stopped; an abandoned one runs on.)"""
        self._aborted = True
        for run in list(self._runs):
            run.closed = True

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if self.function is None or self._limiter is None:
            await self.start()
        function, limiter = self.function, self._limiter
        assert function is not None and limiter is not None
        if self._aborted:
            raise AdapterError(f"agent {self.name!r}: ATP is stopping; no run is started", retryable=False)
        run = _Run(self, request.task_id, sink)
        own = decode_request(encode(request))  # the agent's copy: what it changes, ATP never sees
        self._runs.add(run)
        try:
            try:
                if self.is_async:
                    result = call_agent(function, own, run.emit)
                else:
                    result = await anyio.to_thread.run_sync(
                        run.call, function, own, abandon_on_cancel=True, limiter=limiter
                    )
                if call_agent(inspect.isawaitable, result):
                    result = await await_agent(result)
            except anyio.get_cancelled_exc_class():  # ATP's own (the agent's is AgentRaised)
                if not self.is_async and not run.returned:
                    sink.warn(
                        f"the agent function {self.settings.callable} was still running when its "
                        f"run ended; Python cannot stop a thread, so it runs on in the background "
                        f"(its emit() now raises RunEnded)"
                    )
                raise
            except AgentRaised as raised:  # anything, sys.exit() and KeyboardInterrupt included
                run.check()
                exc = raised.raised
                if isinstance(exc, (AtpError, AgentError)):  # the callable speaks as an adapter would
                    raise exc from None
                raise self._raised(exc, sink) from None
            run.check()
            return self._response(request, result)
        finally:
            run.closed = True
            self._runs.discard(run)

    # --- importing ----------------------------------------------------------------------------

    def _load(self) -> AgentCallable:
        """(In a worker thread.) The agent callable, imported."""
        target = self.import_attribute()
        if not callable(target):
            raise self._error(
                f"it is {describe(target, self.masker)}, not a function or other callable", "cannot call"
            )
        self._check_signature(target)
        return target  # type: ignore[no-any-return]

    def import_attribute(self) -> Any:
        """(Blocking: call it in a worker thread.) What ``callable`` names, imported, whatever
        it is; an AdapterError saying what to do when it cannot be. (For the adapters that run
        other Python objects in ATP's process too: see :func:`attribute_importer`.)"""
        for folder in self.folders:
            if not folder.is_dir():
                what = "is not a folder" if folder.exists() else "does not exist"
                raise AdapterError(
                    f"agent {self.name!r}: its 'path' folder {folder} {what} (entries of 'path' "
                    f"are relative to {self.base_dir})",
                    retryable=False,
                )
        for entry in reversed([*map(str, self.folders), str(self.base_dir)]):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        importlib.invalidate_caches()
        module = self._import()
        target: Any = module
        walked = self.module_name
        for part in self.attribute.split("."):
            try:
                target = call_agent(getattr, target, part)
            except AgentRaised as raised:
                exc = raised.raised
                if isinstance(exc, AttributeError):
                    raise self._error(self._missing(module, target, walked, part)) from None
                where = self._where(exc.__traceback__)
                raise self._error(
                    f"looking up {part!r} on {walked} raised {type(exc).__name__}: {exc}{where}"
                ) from exc
            walked = f"{walked}{'.' if ':' in walked else ':'}{part}"
        return target

    def _import(self) -> ModuleType:
        name = self.module_name
        try:
            return call_agent(importlib.import_module, name)
        except AgentRaised as raised:  # anything the module's code raised, SystemExit included
            exc = raised.raised
            if isinstance(exc, ModuleNotFoundError):
                missing = exc.name or ""
                if missing and (name == missing or name.startswith(missing + ".")):
                    raise self._error(self._not_found(missing)) from None
            raise self._error(self._raised_while_importing(exc)) from exc

    def _error(self, problem: str, verb: str = "cannot import") -> AdapterError:
        return AdapterError(
            f"agent {self.name!r}: {verb} {self.settings.callable!r}: {problem}", retryable=False
        )

    def _not_found(self, missing: str) -> str:
        parent, _, leaf = missing.rpartition(".")
        package = sys.modules.get(parent) if parent else None
        if package is not None:
            folders = [str(folder) for folder in getattr(package, "__path__", [])]
            return f"package {parent!r} has no module {leaf!r} (looked in {self._folder_list(folders)})"
        return (
            f"no module named {missing!r} in the folders Python looks in "
            f"({self._folder_list(sys.path)}); put the folder that holds it in the agent's 'path' "
            f"setting (relative to {self.base_dir})"
        )

    def _folder_list(self, folders: list[str]) -> str:
        """The folders, named for a message: the agent's own marked, at most
        :data:`MAX_FOLDERS_CHARS` characters and how many more there are."""
        added = set(map(str, self.folders))
        shown: list[str] = []
        size = 0
        for index, folder in enumerate(folders):
            if folder == "":
                text = "'' (the working folder)"
            elif folder == str(self.base_dir):
                text = f"{folder} (the agent's folder)"
            elif folder in added:
                text = f"{folder} (from 'path')"
            else:
                text = folder
            size += len(text) + 2
            if shown and size > MAX_FOLDERS_CHARS:
                shown.append(f"and {len(folders) - index} more")
                break
            shown.append(text)
        return ", ".join(shown) if shown else "none"

    def _raised_while_importing(self, exc: BaseException) -> str:
        what = f"importing module {self.module_name!r}"
        if isinstance(exc, SystemExit):
            return (
                f"{what} called sys.exit({exc.code!r}){self._where(exc.__traceback__)}; is the "
                f"script's own code under 'if __name__ == \"__main__\":'?"
            )
        if isinstance(exc, SyntaxError) and exc.filename:
            where = f" (at {self._show(exc.filename)}:{exc.lineno})" if exc.lineno else ""
            return f"{what} raised {type(exc).__name__}: {exc.msg}{where}"
        said = f": {exc}" if str(exc) else ""
        return f"{what} raised {type(exc).__name__}{said}{self._where(exc.__traceback__)}"

    def _missing(self, module: ModuleType, owner: Any, walked: str, part: str) -> str:
        try:
            names = [name for name in dir(owner) if not name.startswith("_")]
        except Exception:
            names = []
        import difflib

        close = difflib.get_close_matches(part, names, n=1)
        if close:
            hint = f"; did you mean {close[0]!r}?"
        elif owner is module:
            defined = [name for name in names if _defined_in(module, name)]
            more = ", ..." if len(defined) > 10 else ""
            hint = f" (it defines {', '.join(defined[:10])}{more})" if defined else ""
        else:
            hint = ""
        if owner is module:
            where = getattr(module, "__file__", None)
            source = f" ({self._show(where)})" if where else ""
            own = self.base_dir / (self.module_name.replace(".", os.sep) + ".py")
            if where and own.is_file() and Path(os.path.abspath(where)) != own:
                hint += f"; it is not {own}, which this module name does not reach: rename that file"
            return f"module {self.module_name!r}{source} has no attribute {part!r}{hint}"
        return f"{walked} has no attribute {part!r}{hint}"

    def _check_signature(self, target: Any) -> None:
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            return  # (some builtins have none: the call will tell)
        try:
            signature.bind(None, None)
        except TypeError as exc:
            hint = ""
            if next(iter(signature.parameters), None) == "self":
                hint = "; a method needs an instance: name one (module:agent.run), or make it a function"
            raise self._error(
                f"it is called as {self.attribute.rsplit('.', 1)[-1]}(request, emit), but its "
                f"parameters are {signature} ({exc}){hint}",
                "cannot call",
            ) from None

    # --- what the agent did -------------------------------------------------------------------

    def _raised(self, exc: BaseException, sink: EventSink) -> AgentError:
        """The callable raised ``exc``: its traceback to the run's log, the run's failure."""
        tb = _user_traceback(exc.__traceback__)
        for line in traceback.format_exception(type(exc), exc, tb):
            for part in line.rstrip("\n").split("\n"):
                sink.log(part)
        if isinstance(exc, SystemExit):
            what = f"called sys.exit({exc.code!r})"
        else:
            what = f"raised {type(exc).__name__}: {exc}" if str(exc) else f"raised {type(exc).__name__}"
        where = self._where(exc.__traceback__)
        return AgentError(f"the agent function {self.settings.callable} {what}{where}")

    def _response(self, request: ATPRequest, result: Any) -> ATPResponse:
        """What the callable returned as a response, decoded as strictly as one from a wire (a
        copy: the agent cannot change it afterwards)."""
        name = self.settings.callable
        data: Any
        if isinstance(result, ATPResponse):
            data, what = result, "a response"
        elif isinstance(result, Mapping):
            data, what = dict(result), "a dict"
            data.setdefault("version", PROTOCOL_VERSION)
            data.setdefault("task_id", request.task_id)
        else:
            raise AgentError(
                f"the agent function {name} returned {describe(result, self.masker)}, not an ATPResponse or a dict of one",
                evidence=guarded_repr(result),
            )
        try:
            raw = _encoder.encode(data)
        except _ENCODE_ERRORS as exc:
            raise AgentError(
                f"the agent function {name} returned {what} that cannot be written as JSON "
                f"({type(exc).__name__}: {exc})",
                evidence=guarded_repr(result),
            ) from None
        try:
            return decode_response(raw)
        except ProtocolError as exc:
            raise AgentError(
                f"the agent function {name} returned {what} that is not a valid ATP response ({exc})",
                evidence=raw,
            ) from None

    def where(self, tb: TracebackType | None) -> str:
        """`` (at file:line)`` where the traceback ``tb`` ends, as the python adapter names the
        place an agent raised (public for the adapters of :func:`attribute_importer`)."""
        return self._where(tb)

    def _where(self, tb: TracebackType | None) -> str:
        """`` (at file:line)`` where ``tb`` ends (and the agent's own last line when that is in
        a library), or ``""``."""
        frames = [
            frame
            for frame in traceback.extract_tb(tb)
            if not frame.filename.startswith("<") and os.path.abspath(frame.filename) not in _OWN_FILES
        ]
        if not frames:
            return ""
        last = frames[-1]
        text = f"{self._show(last.filename)}:{last.lineno}"
        if not self._is_own(last.filename):
            own = [frame for frame in frames if self._is_own(frame.filename)]
            if own:
                text += f", called from {self._show(own[-1].filename)}:{own[-1].lineno}"
        return f" (at {text})"

    def _is_own(self, filename: str) -> bool:
        path = Path(os.path.abspath(filename))
        return any(path.is_relative_to(folder) for folder in (self.base_dir, *self.folders))

    def _show(self, filename: str) -> str:
        """A file for a message: relative to the agent's folder when it is inside it."""
        path = Path(os.path.abspath(filename))
        if path.is_relative_to(self.base_dir):
            return str(path.relative_to(self.base_dir))
        return str(path)


def attribute_importer(spec: str, *, agent: str, base_dir: Path, path: Sequence[str] = ()) -> PythonAdapter:
    """The python adapter's import machinery, for the adapters that run other Python objects in
    ATP's process (langgraph, crewai): a python adapter of agent ``agent`` set up to import
    ``spec`` (``module:attribute``; check its form with :func:`callable_problem` first), with
    the ``path`` folders relative to ``base_dir`` (the folder of the file defining the agent).
    Its :meth:`PythonAdapter.import_attribute` (blocking: call it in a worker thread) returns
    the object, or raises AdapterError saying what to do; its :meth:`PythonAdapter.where` names
    where in the agent's code an exception was raised."""
    return PythonAdapter(PythonSettings(callable=spec, path=list(path)), name=agent, base_dir=base_dir)


def call_in_loop(
    loop: asyncio.AbstractEventLoop, deliver: Callable[[], _T], *, context: contextvars.Context | None = None
) -> _T:
    """(From a thread other than ``loop``'s.) Call ``deliver`` (ATP's) on the event loop's thread and
    wait for it: what it returns, or what it raised, raised here. The waiting is back-pressure: a
    thread emitting events in a tight loop goes at the pace the event loop delivers them, and the
    loop stays free for its timeouts and signals. RunEnded once the event loop is closed (ATP has
    finished). For the adapters that run an agent in ATP's process (python, langgraph)."""
    future: concurrent.futures.Future[_T] = concurrent.futures.Future()

    def call() -> None:
        try:
            result = deliver()
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)

    try:
        loop.call_soon_threadsafe(call, context=context)
    except RuntimeError:  # the event loop is closed: ATP has finished
        raise RunEnded("the run is over: ATP has finished") from None
    while not concurrent.futures.wait([future], timeout=1.0).done:
        if loop.is_closed():  # (closed before it called the function: it never will)
            raise RunEnded("the run is over: ATP has finished")
    return future.result()


class _Run:
    """One run: its ``emit``, the sequence numbers, and the failure ``emit`` met."""

    def __init__(self, adapter: PythonAdapter, task_id: str, sink: EventSink) -> None:
        self.adapter = adapter
        self.task_id = task_id
        self.sink = sink
        self.next_sequence = 0
        self.failure: BaseException | None = None
        """The first failure delivering an event (a bad event, a flood): the run's, even when
        the agent caught it."""
        self.closed = False
        self.returned = False
        """Whether the callable returned (or raised), for a plain function in its thread."""
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.context = contextvars.copy_context()

    def call(self, function: AgentCallable, request: ATPRequest) -> Any:
        """(In a worker thread.) The plain function's call."""
        try:
            return call_agent(function, request, self.emit)
        finally:
            self.returned = True

    def check(self) -> None:
        """Raise the failure ``emit`` met, if any."""
        if self.failure is not None:
            raise self.failure

    def emit(self, event: Union[Event, Mapping[str, Any]], /) -> None:
        """Deliver ``event`` to the run's sink, on the event loop's thread (waiting for it when
        called from another thread)."""
        caller = sys._getframe(1)
        timestamp = None
        if isinstance(event, Mapping) and "timestamp" not in event:
            timestamp = datetime.now(timezone.utc)
        if threading.get_ident() == self.loop_thread:
            self._deliver(event, timestamp, caller)
            return
        call_in_loop(self.loop, lambda: self._deliver(event, timestamp, caller), context=self.context)

    def _deliver(self, event: Any, timestamp: datetime | None, caller: FrameType) -> None:
        """(On the event loop's thread.) Check ``event``, fill in its defaults, hand it to the sink."""
        if self.failure is not None:
            raise self.failure
        if self.closed:
            raise RunEnded("the run is over (it timed out or ATP was stopped); the event was dropped")
        data: Any
        if isinstance(event, Mapping):
            data = dict(event)
            data.setdefault("version", PROTOCOL_VERSION)
            data.setdefault("task_id", self.task_id)
            if timestamp is not None:
                data.setdefault("timestamp", timestamp)
            data.setdefault("sequence", self.next_sequence)
        elif isinstance(event, _EVENT_CLASSES):
            data = event
        else:
            self._fail(
                f"called emit() with {describe(event, self.sink.masker)}",
                caller,
                guarded_repr(event),
                "emit() takes an ATP event, as atp.core.protocol.make_event builds one, or a dict of one",
            )
        try:
            raw = _encoder.encode(data)
        except _ENCODE_ERRORS as exc:
            self._fail(
                "emitted an event that cannot be written as JSON",
                caller,
                guarded_repr(event),
                f"{type(exc).__name__}: {exc}",
            )
        try:
            decoded = decode_event(raw)
        except ProtocolError as exc:
            self._fail("emitted an event that is not a valid ATP event", caller, raw, str(exc))
        if decoded.sequence >= self.next_sequence:
            self.next_sequence = decoded.sequence + 1
        try:
            self.sink.event(decoded, raw)
        except Exception as exc:  # a flood (AgentError), the run directory (StorageError)
            self.failure = exc
            raise

    def _fail(self, what: str, caller: FrameType, evidence: str | bytes, detail: str = "") -> NoReturn:
        """Fail the run: ``what`` the agent did at ``caller``, with ``detail``."""
        where = f"{self.adapter._show(caller.f_code.co_filename)}:{caller.f_lineno}"
        message = f"the agent {what} at {where}" + (f" ({detail})" if detail else "")
        failure = self.failure = AgentError(message, evidence=evidence)
        raise failure


def _is_async(function: Any) -> bool:
    if inspect.iscoroutinefunction(function):
        return True
    if inspect.isfunction(function) or inspect.ismethod(function):
        return False
    return inspect.iscoroutinefunction(getattr(function, "__call__", None))  # noqa: B004


def _defined_in(module: ModuleType, name: str) -> bool:
    """Whether the module's attribute ``name`` is a callable the module defines (not imports)."""
    try:
        value = getattr(module, name)
        return callable(value) and getattr(value, "__module__", None) == module.__name__
    except Exception:
        return False


_OWN_FILES = frozenset({_THIS_FILE, os.path.abspath(isolation.__file__)})
"""ATP's frames between ATP and the agent's code (this module's, and the isolation helper's)."""
_SKIPPED = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (anyio.__file__, asyncio.__file__, concurrent.futures.__file__)
    if path
)


def _user_traceback(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from the agent's own first frame: ATP's and anyio's frames left out."""
    while tb is not None:
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if filename not in _OWN_FILES and not filename.startswith(_SKIPPED):
            return tb
        tb = tb.tb_next
    return tb
