"""``negate: true`` on an assertion, as the kernel applies it where checks come back
(atp.core.evaluation.negated): on every built-in type, a config that passes fails negated and
one that fails passes; skipped checks, checks with nothing to judge and evaluators that could
not check the run are left as they are."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from atp.core.evaluation import NEGATED_FAIL, NEGATED_PASS, NOT_NEGATED, Evaluation, negated
from atp.core.evaluator import EvalContext, Evaluator, check, skipped, unmet
from atp.core.plugins import Plugins
from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, FileArtifact, Metrics, decode_event
from atp.core.results import Check
from atp.core.suite import Assertion, load_suite
from atp.core.testing import make_test, response
from atp.core.trace import Trace
from tests.assertion_cases import (
    ALWAYS_JUDGED,
    BINARY,
    CASES,
    EVENTS,
    FILES,
    METRICS,
    NOTHING_TO_JUDGE,
    RESULT,
)
from tests.conftest import builtin_plugins, write
from tests.facts import says

TASK = "00000000-0000-0000-0000-000000000000"


def context(tmp_path: Path) -> EvalContext:
    events = [
        decode_event(
            json.dumps(
                {
                    "version": "1.0",
                    "task_id": TASK,
                    "timestamp": "2026-01-01T00:00:00Z",
                    "sequence": number,
                    "event_type": kind,
                    "payload": payload,
                }
            )
        )
        for number, (kind, payload) in enumerate(EVENTS)
    ]
    resp = response(
        artifacts=[msgspec.convert(BINARY, FileArtifact)],
        files=FILES,
        structured=RESULT,
        metrics=Metrics(**METRICS),
    )
    test = make_test()
    request = ATPRequest(version=PROTOCOL_VERSION, task_id=TASK, task=test.task, constraints=test.constraints)
    ctx = EvalContext(test=test, request=request, response=resp, trace=Trace.of(events), agent_dir=tmp_path)
    ctx.duration = 0.5
    return ctx


@pytest.fixture(scope="module")
def judge() -> Iterator[str]:
    pytest.importorskip("anthropic")
    from tests.judge_server import JudgeServer

    with JudgeServer() as server:  # scores every artifact 0.9
        yield server.url


def evaluation(plugins: Plugins, tmp_path: Path, judge_url: str | None) -> Evaluation:
    settings: dict[str, dict[str, Any]] = {}
    if judge_url is not None:
        settings["llm_judge"] = {
            "base_url": judge_url,
            "api_key": "sk-test",
            "cache_dir": str(tmp_path / "c"),
        }
    return Evaluation(plugins, lambda name: settings.get(name, {}), {}, lambda *args: None)


def checks_of(
    plugins: Plugins,
    tmp_path: Path,
    kind: str,
    config: dict[str, Any],
    negate: bool,
    judge_url: str | None = None,
) -> tuple[list[Check], bool]:
    evaluator = plugins.evaluator(kind)
    assertion = Assertion(type=kind, config=msgspec.convert(config, evaluator.Config), negate=negate)
    return anyio.run(evaluation(plugins, tmp_path, judge_url).evaluate, assertion, context(tmp_path))


def test_every_built_in_type_has_a_case() -> None:
    plugins = builtin_plugins(test_helpers=False)
    assert set(CASES) == set(plugins.evaluators)


SLOW = {"pytest", "lint", "custom_command", "llm_eval"}
"""Types that start processes or call a judge: seconds each, so marked slow."""


@pytest.mark.parametrize(
    "kind", [pytest.param(kind, marks=[pytest.mark.slow] if kind in SLOW else []) for kind in sorted(CASES)]
)
def test_negate_reverses_each_built_in_type(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    plugins = builtin_plugins(test_helpers=False)
    judge_url = request.getfixturevalue("judge") if kind == "llm_eval" else None
    passing, failing = CASES[kind]
    for config, passes in ((passing, True), (failing, False)):
        plain, done = checks_of(plugins, tmp_path, kind, config, False, judge_url)
        assert done and plain, (kind, plain)
        assert all(c.passed is passes and c.skipped is None for c in plain), (kind, config, plain)
        flipped, done = checks_of(plugins, tmp_path, kind, config, True, judge_url)
        assert done and len(flipped) == len(plain)
        for before, after in zip(plain, flipped, strict=True):
            assert after.passed is not passes, (kind, config, after)
            assert after.name == before.name
            assert after.score == pytest.approx(1.0 - before.score)
            assert after.message == (NEGATED_FAIL if passes else NEGATED_PASS) + before.message
            assert (after.details or {})["negated"] is True


def test_a_skipped_check_stays_skipped(tmp_path: Path) -> None:
    plugins = builtin_plugins(test_helpers=False)
    (judged,), done = checks_of(plugins, tmp_path, "llm_eval", CASES["llm_eval"][0], True)  # no API key
    assert done and judged.skipped is not None and not judged.passed
    assert not judged.message.startswith(NEGATED_PASS)


def test_every_built_in_type_has_a_nothing_to_judge_case_or_always_judges() -> None:
    assert set(NOTHING_TO_JUDGE) | ALWAYS_JUDGED == set(CASES)
    assert not set(NOTHING_TO_JUDGE) & ALWAYS_JUDGED


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param(kind, marks=[pytest.mark.slow] if kind in SLOW else [])
        for kind in sorted(NOTHING_TO_JUDGE)
    ],
)
def test_a_check_with_nothing_to_judge_stays_failed(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    plugins = builtin_plugins(test_helpers=False)
    judge_url = request.getfixturevalue("judge") if kind == "llm_eval" else None
    for config in NOTHING_TO_JUDGE[kind]:
        plain, done = checks_of(plugins, tmp_path, kind, config, False, judge_url)
        assert done and plain and all(not c.passed and c.skipped is None for c in plain), (config, plain)
        flipped, done = checks_of(plugins, tmp_path, kind, config, True, judge_url)
        assert done and len(flipped) == len(plain)
        for before, after in zip(plain, flipped, strict=True):
            assert not after.passed and after.score == 0.0, (config, after)
            assert after.message.startswith(NOT_NEGATED), (config, after.message)
            assert after.message[len(NOT_NEGATED) : len(NOT_NEGATED) + 20] == before.message[:20]


def test_an_artifact_missing_is_judged_by_artifact_exists(tmp_path: Path) -> None:
    plugins = builtin_plugins(test_helpers=False)
    (exists,), _ = checks_of(plugins, tmp_path, "artifact_exists", {"path": "gone.md"}, True)
    assert exists.passed  # its artifact's absence is what artifact_exists judges


class Raises(Evaluator):
    name = "raises"

    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        raise RuntimeError("broken")


def test_an_evaluator_that_could_not_check_stays_an_error(tmp_path: Path) -> None:
    plugins = builtin_plugins(test_helpers=False)

    class Plugin:
        from atp.core.hookspecs import hookimpl

        @hookimpl
        def atp_register_evaluators(self, register: Any) -> None:
            register(Raises)

    plugins.register(Plugin(), name="raising")
    assertion = Assertion(type="raises", config=None, negate=True)
    (made,), done = anyio.run(evaluation(plugins, tmp_path, None).evaluate, assertion, context(tmp_path))
    assert not done and not made.passed
    says(made.message, "could not check", "RuntimeError")
    assert not made.message.startswith(NEGATED_PASS)


def test_negated_in_place() -> None:
    items = [
        check("a", True, "found", 0.75),
        check("b", False, "not found"),
        skipped("c", "no key"),
        unmet("d", "no file"),
    ]
    negated(items)
    assert [(c.passed, c.score) for c in items] == [(False, 0.25), (True, 1.0), (False, 0.0), (False, 0.0)]
    assert items[0].message == NEGATED_FAIL + "found" and items[1].message == NEGATED_PASS + "not found"
    assert items[2].message == "no key" and items[2].details is None
    assert items[3].message == NOT_NEGATED + "no file"


def test_negate_loads_from_a_suite_and_changes_the_fingerprint(tmp_path: Path) -> None:
    from atp.core.suite import test_fingerprint

    plugins = builtin_plugins(test_helpers=False)
    body = "test_suite: s\ntests:\n  - id: t\n    task: {description: d}\n    assertions:\n"
    assertion = "      - {type: contains, config: {path: a.md, pattern: x}%s}\n"
    plain = load_suite(write(tmp_path / "a.yaml", body + assertion % ""), plugins.evaluators)
    negative = load_suite(write(tmp_path / "b.yaml", body + assertion % ", negate: true"), plugins.evaluators)
    assert not plain.tests[0].assertions[0].negate and negative.tests[0].assertions[0].negate
    assert test_fingerprint(plain.tests[0]) != test_fingerprint(negative.tests[0])
    test = plain.tests[0]  # without negate, the fingerprint is what it was before negate existed
    old = [
        test.task,
        test.constraints,
        [(a.type, a.config, a.name, a.critical) for a in test.assertions],
        test.scoring,
    ]
    assert test_fingerprint(test) == hashlib.sha256(msgspec.json.encode(old)).hexdigest()[:16]
