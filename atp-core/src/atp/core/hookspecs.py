"""The hooks an ATP plugin may implement.

A plugin is a module (or object) named by an entry point in the ``atp`` group::

    [project.entry-points.atp]
    my_plugin = "my_package.atp_plugin"

with functions marked ``@hookimpl`` whose names are hooks below. Registration hooks receive a
``register`` callback; lifecycle hooks are notifications and must not block (they run on the runner's event loop);
each plugin's implementation is called on its own, so one that raises is named in a warning,
recorded in the results (``plugin_failures``) and the others are still called.
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
hookimpl = pluggy.HookimplMarker("atp")

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
    ``directory`` is the run directory its results go to. Called before the agent starts."""


@hookspec
def atp_test_started(test: Test) -> None:
    """The first run of a test is about to start."""


@hookspec
def atp_run_started(test: Test, run_number: int, request: ATPRequest) -> None:
    """One run is about to be sent to the agent: ``request`` is what the agent gets (with what
    the test's services added, such as ``context.tools_endpoint``)."""


@hookspec
def atp_event(test: Test, run_number: int, event: Event) -> None:
    """An event of a run's trace arrived: one the agent sent, or one a service recorded (a tool
    call ATP's tool server answered). Called for every event: keep it cheap."""


@hookspec
def atp_run_finished(result: RunResult) -> None:
    """A run finished and its result is stored."""


@hookspec
def atp_test_finished(result: TestResult) -> None:
    """Every run of a test finished."""


@hookspec
def atp_suite_finished(results: SuiteResults) -> None:
    """The suite finished (or was interrupted); ``results`` are what the run directory holds."""
