"""``latency``, ``cost`` and ``python``: limits per run on its duration and spending, and a
check written in Python (an expression, or a module:function beside the suite)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from atp.core.evaluator import UNMET, CannotEvaluate, EvalContext
from atp.core.protocol import LLMRequestPayload, Metrics, ToolCallPayload, make_event
from atp.core.results import Check
from atp.core.testing import make_test, response, run_evaluator
from atp.core.trace import Trace
from atp.evaluators.inline import PythonCheck, PythonConfig
from atp.evaluators.limits import Cost, CostConfig, Latency, LatencyConfig
from tests.conftest import write
from tests.facts import says

TID = "00000000-0000-0000-0000-000000000000"


def run_with(
    evaluator: Any,
    config: dict[str, Any],
    resp: Any,
    events: Sequence[Any] = (),
    **ctx_fields: Any,
) -> list[Check]:
    ctx = EvalContext(test=make_test(), request=None, response=resp, trace=Trace.of(events))  # type: ignore[arg-type]
    for key, value in ctx_fields.items():
        setattr(ctx, key, value)
    instance = evaluator() if isinstance(evaluator, type) else evaluator
    return anyio.run(instance.evaluate, ctx, msgspec.convert(config, instance.Config))


# --- latency --------------------------------------------------------------------------------


def test_latency_holds_atps_measure_against_the_limit() -> None:
    (fast,) = run_with(Latency, {"max_seconds": 2}, response(), duration=1.25)
    assert fast.passed and fast.name == "latency"
    says(fast.message, "1.25 s", "2 s", "ATP")
    (slow,) = run_with(
        Latency, {"max_seconds": 1}, response(metrics=Metrics(wall_time_seconds=0.1)), duration=3.5
    )
    assert not slow.passed and slow.details == {"expected": 1, "actual": 3.5}
    says(slow.message, "at most 1 s", "3.5 s", "duration_seconds")  # ATP's measure, not the agent's 0.1


def test_latency_outside_atp_test_reads_the_agents_figure_or_skips() -> None:
    (reported,) = run_evaluator(Latency, {"max_seconds": 1}, response(metrics=Metrics(wall_time_seconds=2.0)))
    assert not reported.passed
    says(reported.message, "wall_time_seconds")
    (nothing,) = run_evaluator(Latency, {"max_seconds": 1}, response())
    assert nothing.skipped is not None


@pytest.mark.parametrize(
    "config", [{"max_seconds": 0}, {"max_seconds": -1}, {"max_seconds": float("nan")}, {}]
)
def test_latency_config_is_checked(config: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(config, LatencyConfig)


# --- cost -----------------------------------------------------------------------------------

LLM = [make_event(TID, 0, LLMRequestPayload(model="m", input_tokens=300, output_tokens=200, cost_usd=0.03))]


def test_cost_takes_the_larger_of_the_metrics_and_the_trace() -> None:
    resp = response(metrics=Metrics(total_tokens=100, cost_usd=0.01))  # reports less than its events show
    usd, tokens = run_evaluator(Cost, {"max_usd": 0.02, "max_tokens": 400}, resp, LLM)
    assert (usd.name, usd.passed, tokens.name, tokens.passed) == ("cost:usd", False, "cost:tokens", False)
    says(usd.message, "$0.02", "$0.03", "metrics.cost_usd: $0.01", "llm_request events: $0.03")
    says(tokens.message, "400 tokens", "500 tokens")
    assert usd.details is not None and usd.details["actual"] == 0.03
    ok = run_evaluator(Cost, {"max_usd": 0.05, "max_tokens": 500}, resp, LLM)
    assert all(c.passed for c in ok)


def test_cost_from_metrics_alone_and_input_plus_output() -> None:
    resp = response(metrics=Metrics(input_tokens=700, output_tokens=400, cost_usd=0.5))
    usd, tokens = run_evaluator(Cost, {"max_usd": 1, "max_tokens": 1000}, resp)
    assert usd.passed and not tokens.passed
    says(tokens.message, "1,100 tokens")


def test_cost_without_any_figure_is_skipped() -> None:
    tool_only = [make_event(TID, 0, ToolCallPayload(tool="t"))]
    usd, tokens = run_evaluator(Cost, {"max_usd": 1, "max_tokens": 1}, response(), tool_only)
    assert usd.skipped is not None and tokens.skipped is not None
    says(usd.skipped, "cost_usd")


@pytest.mark.parametrize("config", [{}, {"max_usd": -1}, {"max_tokens": 1.5}, {"max_usd": 1, "budget": 2}])
def test_cost_config_is_checked(config: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(config, CostConfig)


# --- python ---------------------------------------------------------------------------------

RESP = response(
    files={"answer.md": "42\n", "notes.md": "some notes"},
    structured={"items": [1, 2, 3]},
    metrics=Metrics(total_steps=4, cost_usd=0.2),
)


def python(config: dict[str, Any], resp: Any = RESP, **ctx_fields: Any) -> Check:
    (made,) = run_with(PythonCheck, config, resp, **ctx_fields)
    return made


def test_an_expression_sees_the_runs_names() -> None:
    assert python({"expression": "output.strip() == '42'"}).passed  # the first artifact's text
    assert python({"expression": "files['notes.md'] == 'some notes' and len(files) == 2"}).passed
    assert python({"expression": "data['result']['items'] == [1, 2, 3]"}).passed
    assert python({"expression": "status == 'completed' and metrics.total_steps == 4"}).passed
    assert python({"expression": "response.metrics.cost_usd < 0.5 and trace.events == 0"}).passed
    assert python({"expression": "duration < 2 and test_id == 'test'"}, duration=1.0).passed
    assert python(
        {"expression": "json.loads(files['answer.md']) == 42 and bool(re.match(r'\\d+', output))"}
    ).passed


def test_a_false_expression_shows_the_names_it_used() -> None:
    made = python({"expression": "len(output) > 3"})
    assert not made.passed and made.name == "python"
    says(made.message, "len(output) > 3", "false", 'output = "42\\n"')


def test_the_verdicts_a_check_may_return() -> None:
    said = python({"expression": "(False, 'only ' + str(len(output)) + ' characters')"})
    assert not said.passed and said.message == "only 3 characters"
    scored = python({"expression": "0.75"})
    assert scored.passed and scored.score == 0.75
    assert not python({"expression": "0.75", "threshold": 0.8}).passed
    full = python({"expression": "{'passed': False, 'score': 0.4, 'message': 'half', 'details': {'n': 1}}"})
    assert (full.passed, full.score, full.message, full.details) == (False, 0.4, "half", {"n": 1})


@pytest.mark.parametrize(
    ("expression", "fact"),
    [
        ("None", "None"),
        ("'yes'", "str"),
        ("1.5", "not from 0 to 1"),
        ("{'ok': True}", "'ok'"),
        ("{'passed': 1}", "'passed'"),
        ("(True, 3)", "tuple"),
    ],
)
def test_a_verdict_of_another_shape_is_an_error(expression: str, fact: str) -> None:
    with pytest.raises(CannotEvaluate) as raised:
        python({"expression": expression})
    says(str(raised.value), fact)


@pytest.mark.parametrize(
    "expression", ["1/0", "files['gone.md']", "exit(3)", "(_ for _ in ()).throw(KeyboardInterrupt)"]
)
def test_what_a_check_raises_is_a_failed_check_with_its_traceback(expression: str) -> None:
    made = python({"expression": expression})
    assert not made.passed and made.details is not None
    assert made.details[UNMET] is True and "Traceback" in made.details["traceback"]
    says(made.message, "raised")


def test_a_function_beside_the_suite(tmp_path: Path) -> None:
    write(
        tmp_path / "suite_checks_a.py",
        """
        def has_three(run):
            count = len(run.data["result"]["items"])
            return count == 3, f"{count} items"

        class Namespace:
            @staticmethod
            def score(run):
                return 0.25
        """,
    )
    made = python({"function": "suite_checks_a:has_three"}, suite_dir=tmp_path)
    assert made.passed and made.message == "3 items" and made.name == "python:suite_checks_a:has_three"
    scored = python({"function": "suite_checks_a:Namespace.score"}, suite_dir=tmp_path)
    assert not scored.passed and scored.score == 0.25


def test_a_suite_folder_shadows_no_module_of_atps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A suite folder's ``statistics.py`` is not the standard library's ``statistics`` for
    ATP once a check of that folder ran: the folder is never on Python's path."""
    write(tmp_path / "statistics.py", "raise RuntimeError('the suite folder shadowed statistics')\n")
    write(tmp_path / "checks.py", "def ok(run):\n    return True\n")
    monkeypatch.delitem(sys.modules, "statistics")  # as if ATP imported it later
    path = list(sys.path)
    assert python({"function": "checks:ok"}, suite_dir=tmp_path).passed
    assert sys.path == path
    import statistics

    assert statistics.mean([1, 2, 3]) == 2 and Path(statistics.__file__).parent != tmp_path


def test_each_suite_folder_has_its_own_checks_module(tmp_path: Path) -> None:
    for name in ("one", "two"):
        write(
            tmp_path / name / "checks.py",
            "from . import helpers\n\ndef which(run):\n    return True, helpers.NAME\n",
        )
        write(tmp_path / name / "helpers.py", f"NAME = {name!r}\n")
    check = PythonCheck()
    made = [
        run_with(check, {"function": "checks:which"}, RESP, suite_dir=tmp_path / n)[0] for n in ("one", "two")
    ]
    assert [m.message for m in made] == ["one", "two"]
    assert "checks" not in sys.modules and "helpers" not in sys.modules


def test_a_function_that_cannot_be_imported_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "suite_checks_b.py", "import sys\nsys.exit(2)\n")
    write(tmp_path / "suite_checks_c.py", "value = 3\n")
    for spec, facts in (
        ("suite_checks_none:f", ["no module named 'suite_checks_none'", str(tmp_path.resolve())]),
        ("suite_checks_b:f", ["SystemExit"]),
        ("suite_checks_c:missing", ["has no 'missing'"]),
        ("suite_checks_c:value", ["not a function"]),
    ):
        with pytest.raises(CannotEvaluate) as raised:
            python({"function": spec}, suite_dir=tmp_path)
        says(str(raised.value), *facts)


@pytest.mark.parametrize(
    ("config", "fact"),
    [
        ({}, "'expression'"),
        ({"expression": "1", "function": "a:b"}, "one of them"),
        ({"expression": "len(output) >"}, "not a Python expression"),
        ({"expression": "  "}, "empty"),
        ({"function": "checks.py"}, "module:function"),
        ({"function": "my-checks:f"}, "dotted Python name"),
        ({"expression": "1", "threshold": 2}, "threshold"),
    ],
)
def test_python_config_is_checked(config: dict[str, Any], fact: str) -> None:
    with pytest.raises(msgspec.ValidationError) as raised:
        msgspec.convert(config, PythonConfig)
    says(str(raised.value), fact)


def test_the_names_are_documented() -> None:
    from atp.evaluators.inline import NAMES

    docs = (Path(__file__).parents[2] / "docs" / "suites.md").read_text()
    for name in NAMES:
        assert f"`{name}`" in docs, name
