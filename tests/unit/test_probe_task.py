"""atp.core.validation.ProbeTask: what `atp validate`'s probe asks, a suite's test as `atp test`
sends it, or the generic greeting."""

from __future__ import annotations

from pathlib import Path

import pytest

from atp.core.errors import ConfigError
from atp.core.plugins import Plugins
from atp.core.suite import Suite, load_suite
from atp.core.validation import PROBE_DESCRIPTION, ProbeTask
from tests.conftest import write

SUITE = """
test_suite: probes
tests:
  - {id: later, skip: true, task: {description: never}}
  - id: main
    task: {description: translate, input_data: {text: bonjour}, workspace_fixture: fixture}
    constraints: {max_steps: 7, timeout_seconds: 120}
  - {id: short, task: {description: quick}, constraints: {timeout_seconds: 5}}
"""


@pytest.fixture
def suite(tmp_path: Path, plugins: Plugins) -> Suite:
    write(tmp_path / "fixture" / "notes.txt", "the fixture's file\n")
    return load_suite(write(tmp_path / "suite.yaml", SUITE), plugins.evaluators)


def test_the_first_test_not_skipped_probes_as_atp_test_sends_it(suite: Suite) -> None:
    probe = ProbeTask.of_suite(suite)
    assert probe.what == "the task of test 'main' of suite 'probes'"
    with probe.workspace() as workspace:
        assert workspace is not None and (workspace / "notes.txt").read_text() == "the fixture's file\n"
        request = probe.request(30.0, workspace)
        assert request.context is not None and request.context.workspace_path == str(workspace)
    assert not workspace.exists()  # removed after the probe
    assert request.task.description == "translate" and request.task.input_data == {"text": "bonjour"}
    assert request.constraints.max_steps == 7
    assert request.constraints.timeout_seconds == 30  # no more than the probe waits
    assert request.metadata is not None and request.metadata["test_id"] == "main"
    assert request.metadata["run_id"] == ProbeTask.RUN_ID


def test_test_picks_another_and_its_own_shorter_limit_stays(suite: Suite) -> None:
    probe = ProbeTask.of_suite(suite, "short")
    with probe.workspace() as workspace:
        assert workspace is None
    assert probe.request(30.0).constraints.timeout_seconds == 5
    with pytest.raises(ConfigError, match="has no test 'nope'.*later, main, short"):
        ProbeTask.of_suite(suite, "nope")


def test_without_a_suite_the_generic_greeting() -> None:
    probe = ProbeTask()
    assert probe.what.startswith("a generic task")
    request = probe.request(2.5)
    assert request.task.description == PROBE_DESCRIPTION and request.constraints.timeout_seconds == 3
