"""The suite's masker and the run's process ledger are handed to plugins through the seams
(``Adapter.open``, the sink, ``EvalContext``), not found in context variables."""

from __future__ import annotations

import contextvars
from pathlib import Path
from typing import Any, ClassVar

import anyio

from atp.core import ledger, text
from atp.core.adapter import Adapter
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.evaluator import EvalContext, Evaluator
from atp.core.hookspecs import hookimpl
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, ATPResponse, Metrics
from atp.core.results import Check
from atp.core.runner import Runner
from atp.core.secrets import Masker
from atp.core.suite import load_suite
from atp.core.trace import EventSink
from tests.conftest import write

SECRET = "sk-live-0123456789abcdef"

SUITE = """
test_suite: seams
agents:
  - name: agent
    type: seeing
tests:
  - id: only
    task: {description: "do it"}
    assertions:
      - type: sees
"""


class Seen:
    """What the plugins were handed, and what the context variables held meanwhile."""

    opened: ClassVar[list[tuple[Masker | None, ledger.ProcessLedger | None]]] = []
    sinks: ClassVar[list[Masker | None]] = []
    contexts: ClassVar[list[EvalContext]] = []


class Seeing(Adapter):
    type = "seeing"

    async def start(self) -> None:
        Seen.opened.append((self.masker, self.processes))

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        Seen.sinks.append(sink.masker)
        return ATPResponse(
            version="1.0", task_id=request.task_id, status="completed", artifacts=[], metrics=Metrics()
        )


class Sees(Evaluator):
    name = "sees"

    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        Seen.contexts.append(ctx)
        return [Check(name="sees", passed=True, score=1.0, message="seen")]


class SeamsPlugin:
    @hookimpl
    def atp_register_adapters(self, register: Any) -> None:
        register(Seeing)

    @hookimpl
    def atp_register_evaluators(self, register: Any) -> None:
        register(Sees)


def test_the_masker_and_the_ledger_reach_the_adapter_the_sink_and_the_evaluator(
    tmp_path: Path, plugins: Plugins
) -> None:
    plugins.register(SeamsPlugin(), "seams")
    suite = load_suite(write(tmp_path / "suite.yaml", SUITE), plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    masker = Masker([SECRET])
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs", masker=masker)
    Seen.opened.clear(), Seen.sinks.clear(), Seen.contexts.clear()

    results = anyio.run(runner.run)

    assert results.summary.passed == 1
    [(opened_masker, processes)] = Seen.opened
    assert opened_masker is masker and Seen.sinks == [masker]
    assert isinstance(processes, ledger.ProcessLedger) and runner.store is not None
    assert processes.path == runner.store.directory / ledger.LEDGER_FILE
    [ctx] = Seen.contexts
    assert ctx.masker is masker and ctx.processes is processes


def test_text_helpers_mask_with_the_masker_given_before_they_cut() -> None:
    masker = Masker([SECRET])
    quoted = "x" * 190 + SECRET  # the secret straddles the cut at 200
    assert text.mask(quoted, masker) == "x" * 190 + "***"
    for cut in (text.shorten(quoted, 200, masker), text.shown(quoted, masker, 200)):
        assert "sk-live" not in cut and cut.startswith("x" * 190)
    held = text.piece("k" * 40 + SECRET[:10], masker)  # a line cut where a secret may begin
    assert "sk-live" not in held and held.startswith("k" * 20)


def test_without_a_run_no_masker_is_found() -> None:
    """Outside a run (no context variable set), the helpers mask nothing they were not given."""
    fresh = contextvars.Context()
    assert fresh.run(text.mask, SECRET) == SECRET
    assert fresh.run(ledger.current) is None
