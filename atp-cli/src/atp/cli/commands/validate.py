"""``atp validate``: check that an agent speaks ATP before anyone writes tests for it.

The checks live in the kernel (:mod:`atp.core.validation` says what each one checks); this
command resolves the agent, runs them with :func:`~atp.core.validation.run_validation` and
renders them: each check as a line as soon as it is decided (or all of them as JSON), then a
summary. Exit code 0 when every check passed, 1 when one failed, 2 for a usage or config error,
130 when interrupted (the agent is stopped first).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from atp.cli.app import BoundedFloat, debug_option, plugins_for, suite_config_option
from atp.core.validation import (
    CHECKS,
    CLOSE_SECONDS,
    LOG_TAIL_LINES,
    MALFORMED_WHAT,
    MAX_DISORDER,
    MAX_WARNINGS,
    PROBE_DESCRIPTION,
    SEEN_CHARS,
    TASK_ID_CHARS,
    Answer,
    CheckResult,
    ProbeSink,
    Validation,
    diagnose,
    error_text,
)

if TYPE_CHECKING:
    from atp.core.validation import ProbeTask, ValidationOutcome

__all__ = [
    "CHECKS",
    "CLOSE_SECONDS",
    "COLORS",
    "DEFAULT_TIMEOUT",
    "LABELS",
    "LOG_TAIL_LINES",
    "MALFORMED_WHAT",
    "MAX_DISORDER",
    "MAX_TIMEOUT",
    "MAX_WARNINGS",
    "OUTCOMES",
    "PROBE_DESCRIPTION",
    "SEEN_CHARS",
    "TASK_ID_CHARS",
    "Answer",
    "CheckResult",
    "ProbeSink",
    "TextReport",
    "Validation",
    "diagnose",
    "error_text",
    "summary_line",
    "validate_command",
]

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 3600.0
OUTCOMES = ("passed", "failed", "skipped")
LABELS = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
COLORS = {"passed": "green", "failed": "red", "skipped": "yellow"}


class TextReport:
    """Each check as a line as soon as it is decided; under a failure what was seen and the fix."""

    WIDTH = max(len(t) for t in CHECKS.values())

    def __init__(self) -> None:
        self.color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")

    def __call__(self, result: CheckResult) -> None:
        label = LABELS[result.outcome]
        if self.color:
            label = click.style(label, fg=COLORS[result.outcome], bold=result.outcome == "failed")
        timing = (
            f" ({result.seconds:.2f} s)" if result.seconds is not None and result.outcome != "skipped" else ""
        )
        click.echo(f"{label}  {result.title.ljust(self.WIDTH)}  {result.summary}{timing}")
        for line in result.seen:
            click.echo(f"      seen: {line}")
        if result.fix:
            click.echo(f"      fix:  {result.fix}")
        for note in result.notes:
            click.echo(f"      note: {note}")


@click.command("validate")
@click.argument(
    "suite_path", metavar="[SUITE]", required=False, type=click.Path(path_type=Path, dir_okay=False)
)
@click.option(
    "--suite",
    "suite_option",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A suite file that defines the agent (same as naming it as SUITE).",
)
@click.option(
    "--agent", "agent_name", help="The agent to check, by name (optional when only one is defined)."
)
@click.option(
    "--test",
    "test_id",
    metavar="ID",
    help="The test of the suite whose task the probe sends (default: its first test not skipped).",
)
@click.option(
    "--timeout",
    type=BoundedFloat(0, MAX_TIMEOUT, low_open=True),
    default=DEFAULT_TIMEOUT,
    metavar="SECONDS",
    help=f"How long each probe may take (default {DEFAULT_TIMEOUT:g}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@suite_config_option("the suite, when given")
@debug_option
def validate_command(
    suite_path: Path | None,
    suite_option: Path | None,
    agent_name: str | None,
    test_id: str | None,
    timeout: float,
    as_json: bool,
    config_path: Path | None,
) -> int:
    """Check that an agent speaks ATP: it is reachable (and healthy, by its own report where it
    gives one), answers a probe with a valid response carrying its task_id, sends valid events
    in order, and refuses a malformed request and one of protocol version 2.0 gracefully. An
    adapter may add checks of its own protocol (an Agent Interface Standard agent's discovery
    endpoints); for an agent that speaks another protocol the two refusal checks are skipped.

    The agent is defined in atp.config.yaml or in the SUITE file. With a SUITE, the probe sends
    the task of one of its tests as atp test sends it (--test, else its first test), so that an
    agent made for one task is probed with it; without one, a generic greeting. Exit code 0
    when every check passed, 1 when one failed, 2 for a usage or config error, 130 when
    interrupted.
    """
    from atp.cli.main import EXIT_FAILED, EXIT_OK, debugging
    from atp.core.config import agent_definitions, choose_agent, load_config, masker_for, resolve_agent
    from atp.core.prepare import suite_of
    from atp.core.text import printable
    from atp.core.validation import ProbeTask, run_validation

    if suite_path is not None and suite_option is not None and suite_path != suite_option:
        raise click.UsageError("name the suite once: as SUITE or with --suite")
    suite_file = suite_path or suite_option
    if test_id is not None and suite_file is None:
        raise click.UsageError("--test picks a test of a suite: name the suite (SUITE or --suite=FILE)")
    config = load_config(config_path, suites=[suite_file] if suite_file is not None else ())
    loaded = plugins_for(config)
    suite = suite_of(config, loaded, suite_file) if suite_file is not None else None
    probe = ProbeTask.of_suite(suite, test_id) if suite is not None else ProbeTask()
    agent = resolve_agent(choose_agent(agent_definitions(config, suite), agent_name, config), loaded.adapters)
    masker = masker_for(config, agent)
    probe.environment = agent.environment
    probe.plugins = loaded
    if not as_json:
        click.echo(printable(f"Agent: {agent.name} ({agent.type}), each probe within {timeout:g} s"))
        click.echo(printable(f"Probe: {probe.what}"))
        if probe.test is not None and probe.test.services:
            names = ", ".join(use.key for use in probe.test.services)
            click.echo(
                printable(
                    f"      note: the test's services ({names}) are started for the probe, as for a run"
                )
            )
    report: Callable[[CheckResult], None] = (lambda result: None) if as_json else TextReport()
    outcome = run_validation(
        agent.create_adapter,
        agent.type,
        timeout=timeout,
        masker=masker,
        report=report,
        say=lambda line: click.echo(line, err=True),
        tracebacks=debugging(),
        probe=probe,
    )
    if as_json:
        click.echo(json_document(outcome, agent.name, agent.type, timeout, probe))
    else:
        click.echo(
            summary_line(outcome.results, agent.name, expected=outcome.expected, foreign=outcome.foreign)
        )
    if outcome.stopped_by is not None:
        click.echo("Interrupted: the checks not run are left out; the agent was stopped.", err=True)
        return 128 + int(outcome.stopped_by)
    return EXIT_OK if outcome.failed == 0 else EXIT_FAILED


def json_document(
    outcome: ValidationOutcome,
    agent_name: str,
    agent_type: str,
    timeout: float,
    probe: ProbeTask | None = None,
) -> str:
    """The checks as ``--json`` prints them; ``probe``: the suite's test that probed (``null``:
    the generic task)."""
    import json

    test = probe.test if probe is not None else None
    document = {
        "agent": agent_name,
        "type": agent_type,
        "ok": outcome.ok,
        "interrupted": outcome.interrupted,
        "timeout_seconds": timeout,
        "probe": {"suite": probe.suite, "test": test.id} if probe is not None and test is not None else None,
        "checks": [r.as_dict() for r in outcome.results],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def summary_line(
    results: Sequence[CheckResult],
    agent_name: str,
    *,
    expected: int = len(CHECKS),
    foreign: str | None = None,
) -> str:
    """The last line: every check passed, or how many passed, failed, were skipped. ``foreign``:
    the protocol the agent speaks when ATP's own refusal checks were skipped for it."""
    from atp.core.text import printable

    counts = {outcome: sum(1 for r in results if r.outcome == outcome) for outcome in OUTCOMES}
    if counts["failed"] == 0 and counts["passed"] == expected:
        return printable(f"All {expected} checks passed: {agent_name} speaks ATP.")
    if foreign and counts["failed"] == 0 and len(results) == expected:
        return printable(
            f"All {counts['passed']} checks that apply passed: {agent_name} speaks {foreign}, which ATP "
            f"drives through its adapter ({counts['skipped']} ATP-only checks skipped)."
        )
    parts = [f"{counts['passed']} passed", f"{counts['failed']} failed"]
    if counts["skipped"]:
        parts.append(f"{counts['skipped']} skipped")
    if len(results) < expected:
        parts.append(f"{expected - len(results)} not run")
    ending = "; fix the failures above and run atp validate again" if counts["failed"] else ""
    return f"Checks: {', '.join(parts)} of {expected}{ending}."
