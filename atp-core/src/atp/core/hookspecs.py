"""The hooks an ATP plugin may implement.

A plugin is a module (or object) named by an entry point in the ``atp`` group::

    [project.entry-points.atp]
    my_plugin = "my_package.atp_plugin"

with functions marked ``@hookimpl`` whose names are hooks below. Registration hooks receive a
``register`` callback; lifecycle hooks are notifications and must not block (they run on the runner's event loop);
each plugin's implementation is called on its own, so one that raises is named in a warning,
recorded in the results (``plugin_failures``) and the others are still called.

Lifecycle hooks (``atp_suite_started`` ... ``atp_suite_finished``) are called through pluggy
(``pm.hook.<name>(...)``), so an implementation may be marked as a pytest user would:
``@hookimpl(tryfirst=True)`` or ``trylast=True`` to be called before or after the others, and
``@hookimpl(wrapper=True)`` (the older ``hookwrapper=True`` works too) on a generator that runs
around them::

    @hookimpl(wrapper=True)
    def atp_run_finished(result):
        started = time.perf_counter()       # before the plain implementations
        outcome = yield                     # they run here (inner wrappers too)
        log(time.perf_counter() - started)  # after all of them
        return outcome                      # always: return the yield's result

A wrapper's code before ``yield`` runs first, its code after ``yield`` runs last (wrappers nest
as in pytest). It must return
the yield's result (``None`` for these hooks), or re-raise what the ``yield`` raised; it must not
block the event loop, and treats the hook's arguments as read-only (the runner and the other
plugins share them). Because each implementation is isolated, a wrapper's ``yield`` returns
normally even when a plain implementation raised: it cannot see, catch or stop another plugin's
failure, which is reported as above. What a wrapper raises itself, before or after its
``yield``, is its own plugin's failure, reported the same way; the other implementations still
run. ``atp_event`` is called for every event: keep its implementations, wrappers above all,
cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from atp.core.adapter import Adapter
    from atp.core.evaluator import Evaluator
    from atp.core.executor import Executor
    from atp.core.protocol import ATPRequest, Event
    from atp.core.reporter import Reporter
    from atp.core.results import RunHeader, RunResult, SuiteResults, TestResult
    from atp.core.service import Service
    from atp.core.suite import Test

hookspec = pluggy.HookspecMarker("atp")
"""Marks the hook specifications below (ATP's own; a plugin has no use for it)."""
hookimpl = pluggy.HookimplMarker("atp")
"""Marks a plugin's implementation of a hook: ``@hookimpl``, or ``@hookimpl(tryfirst=True)``,
``trylast=True``, ``wrapper=True`` on a lifecycle hook (see the module)."""

RegisterAdapter = Callable[["type[Adapter]"], None]
"""The ``register`` of :func:`atp_register_adapters`, for annotating a hook implementation."""
RegisterEvaluator = Callable[["type[Evaluator]"], None]
"""The ``register`` of :func:`atp_register_evaluators`."""
RegisterReporter = Callable[["type[Reporter]"], None]
"""The ``register`` of :func:`atp_register_reporters`."""
RegisterService = Callable[["type[Service]"], None]
"""The ``register`` of :func:`atp_register_services`."""
RegisterExecutor = Callable[["type[Executor]"], None]
"""The ``register`` of :func:`atp_register_executors`."""


# --- registration --------------------------------------------------------------------------


@hookspec
def atp_register_adapters(register: RegisterAdapter) -> None:
    """Register adapter classes: ``register(MyAdapter)``; agents name them by ``MyAdapter.type``."""


@hookspec
def atp_register_evaluators(register: RegisterEvaluator) -> None:
    """Register evaluator classes: ``register(MyEvaluator)``; assertions name them by
    ``MyEvaluator.name``."""


@hookspec
def atp_register_reporters(register: RegisterReporter) -> None:
    """Register reporter classes: ``register(MyReporter)``; ``--output`` names them by
    ``MyReporter.name``."""


@hookspec
def atp_register_services(register: RegisterService) -> None:
    """Register service classes (:class:`atp.core.service.Service`): ``register(MyService)``;
    a test, or a suite's ``defaults``, asks for one with its key (``MyService.key: <config>``),
    and ATP runs it next to the agent for that test's runs (docs/tool-mocking.md)."""


@hookspec
def atp_register_executors(register: RegisterExecutor) -> None:
    """Register executor classes (:class:`atp.core.executor.Executor`): ``register(MyExecutor)``;
    ``atp test --executor=NAME`` makes the runs there instead of in the ATP process
    (docs/cluster.md)."""


@hookspec
def atp_register_commands(cli: Any) -> None:
    """Add commands to the ``atp`` command line: ``cli`` is its Click group
    (``cli.add_command(my_command)``)."""


# --- run lifecycle -------------------------------------------------------------------------


@hookspec
def atp_suite_started(header: RunHeader, directory: Path) -> None:
    """A suite is about to run: ``header`` names the suite, the agent and the planned tests;
    ``directory`` is the run directory its results go to. Called before the agent starts.

    A wrapper may set up, before its ``yield``, what the other implementations share for the
    suite (a connection, a trace span, to be closed by its ``atp_suite_finished``); after its
    ``yield``, every implementation has been told. The agent starts only once all have returned."""


@hookspec
def atp_suite_resumed(header: RunHeader, directory: Path, done: int) -> None:
    """``atp test --resume`` goes on with the run in ``directory``, which holds ``done`` runs
    of those ``header`` plans: called right before :func:`atp_suite_started` (which a resumed
    run gets too)."""


@hookspec
def atp_test_started(test: Test) -> None:
    """The first run of a test is about to start.

    A wrapper may set up per-test state before its ``yield``, for the other implementations to
    use (and its ``atp_test_finished`` to close), and act once every implementation has been told."""


@hookspec
def atp_run_started(test: Test, run_number: int, request: ATPRequest) -> None:
    """One run is about to be sent to the agent: ``request`` is what the agent gets (with what
    the test's services added, such as ``context.tools_endpoint``).

    Called once per run (not again when a fault makes ATP try the run again). A wrapper may
    run code around the other implementations (timing them, or a per-run span they work
    under). The request is sent once all have returned: time spent here delays the run, and
    counts within its time limit."""


@hookspec
def atp_event(test: Test, run_number: int, event: Event) -> None:
    """An event of a run's trace arrived: one the agent sent, or one a service recorded (a tool
    call ATP's tool server answered). Called for every event: keep it cheap. With an executor,
    a run's events are replayed from what the worker sent back, once the run is over.

    This is the hot hook: a wrapper here runs its code before and after the others for every
    event of every run, so it costs more than a plain implementation. Use one only when code
    must run around the others (a cheap counter or a context variable they read), never for
    anything that waits."""


@hookspec
def atp_run_finished(result: RunResult) -> None:
    """A run finished and its result is stored.

    A wrapper may act after its ``yield``, once every other implementation has handled the
    result (flushing what they buffered, say)."""


@hookspec
def atp_test_finished(result: TestResult) -> None:
    """Every run of a test finished.

    A wrapper may close, after its ``yield``, per-test state it opened in ``atp_test_started``,
    once every other implementation has seen the test's result."""


@hookspec
def atp_suite_finished(results: SuiteResults) -> None:
    """The suite finished (or was interrupted); ``results`` are what the run directory holds.

    A wrapper's code after its ``yield`` runs once every plain implementation has had the
    results: the place to close what its ``atp_suite_started`` opened. It runs after Ctrl-C
    too, and must be quick."""
