"""The ``junit`` reporter: JUnit XML, the test report GitHub Actions, GitLab CI and Jenkins read.

``atp test --output=junit:report.xml`` (or ``--output=junit --output-file=report.xml``) writes
it; without a file it goes to stdout. The document is valid against the Apache Ant JUnit schema
(tests/fixtures/JUnit.xsd), the strictest of the dialects those tools accept:

- ``<testsuites>`` holds one ``<testsuite>`` for the run's suite and agent;
- a ``<testcase>`` per test: ``classname`` is ``<suite>.<agent>`` and ``name`` the test's id,
  so a CI system tracks the same test across runs; ``time`` is the test's duration;
- a test that failed on its checks has a ``<failure>`` whose message names the failed checks
  and whose text holds each failed run's checks with their details and the tail of the agent's
  log; a test with a run the agent broke (it crashed, timed out, broke the protocol or answered
  with an error) has an ``<error>`` of type ``timeout`` or ``agent-error``, and one whose checks
  could not be made (ATP's ``error`` status) of type ``evaluation-error``; a skipped test has
  ``<skipped>`` with the reason (a test an interrupted run did not reach is one, and so is a
  test whose runs passed but were fewer than planned: a CI system must not show it as passed);
- a test the suite quarantines that failed or errored has ``<skipped>`` with the message
  ``quarantined: <what failed>`` (as pytest writes an expected failure), so that a CI system
  does not fail on it; what failed is in the suite's ``<system-out>`` (the Ant schema has no
  ``type`` on ``<skipped>``: the message's prefix says why);
- the schema allows properties and logs only on the suite, so ``<properties>`` holds the run's
  own (``atp.run_id``, ``atp.suite``, ``atp.agent``...) and each test's figures as
  ``<test id>.score``, ``.runs``, ``.passed_runs``, ``.pass_rate``, ``.stability``,
  ``.ci_95``, ``.baseline`` and ``.skipped_checks`` (checks not made, such as an LLM judge's
  without an API key: their count, the first one and its reason), ``.flaky`` (``true``: its
  runs disagree), ``.quarantined`` (``true``) and ``.retries`` (attempts made again after
  faults of the infrastructure); the run's budget as ``atp.budget.*`` (limits, what was spent,
  what was exceeded) and its shard as ``atp.shard`` (``2/3``) and ``atp.shard.basis``;
  ``<system-err>`` holds every run's agent log (masked as stored), each under a header naming
  the test and run; ``<system-out>`` the run's summary, the failures of quarantined tests and
  every retry (the test, run, attempt, reason and wait).

Agent text is untrusted: the XML writer escapes markup, and characters XML cannot carry
(control characters, lone surrogates) are written as visible escapes.
"""

from __future__ import annotations

import re
import socket
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from atp.core.bounds import number_in
from atp.core.reporter import Reporter
from atp.core.stats import stability_word
from atp.core.text import printable

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

    from atp.core.results import Check, RunResult, RunStore, SuiteResults, TestResult

LOG_LIMIT = 64 * 1024
"""The most of one run's agent log put in ``<system-err>`` (its end: where a crash shows)."""
DETAIL_LIMIT = 4 * 1024
"""The most of one check's details put in a failure's text."""
LOG_TAIL_LINES = 20
"""The lines of a failed run's log tail put in its failure's text."""

_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` with what XML 1.0 cannot hold (control characters, lone surrogates, U+FFFE/F)
    written as visible escapes; newlines and tabs kept."""
    text = printable(text, newlines=True)
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _seconds(value: float) -> str:
    number = number_in(value, 0.0, low_open=True)
    return f"{number:.3f}" if number is not None else "0.000"


def _timestamp(value: datetime) -> str:
    """UTC, to the second, without a zone: the schema's pattern."""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S")


def _figure(value: float) -> str:
    number = number_in(value)
    return f"{number:.4g}" if number is not None else str(value)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"[{len(text) - limit} characters before cut]\n" + text[-limit:]


def _check_lines(check: Check) -> list[str]:
    import msgspec

    lines = [f"  - {check.name} (score {_figure(check.score)}): {check.message}"]
    if check.details:
        try:
            details = msgspec.json.format(msgspec.json.encode(check.details), indent=2).decode()
        except (TypeError, ValueError):
            details = repr(check.details)
        if len(details) > DETAIL_LIMIT:
            details = details[:DETAIL_LIMIT] + f"\n[{len(details) - DETAIL_LIMIT} characters cut]"
        lines.extend("      " + line for line in details.splitlines())
    return lines


def _log_tail(run: RunResult) -> list[str]:
    tail = run.log_tail[-LOG_TAIL_LINES:]
    if not tail:
        return []
    return ["  agent log (last lines):", *("    " + line for line in tail)]


def _run_head(test: TestResult, run: RunResult) -> str:
    where = f"run {run.run_number}" if test.planned_runs > 1 or len(test.runs) > 1 else "the run"
    code = f", error_code {run.error_code}" if run.error_code else ""
    return f"{where}: {run.outcome}, status {run.status}{code}, score {_figure(run.score)}"


def failure_text(test: TestResult) -> tuple[str, str]:
    """The message and the text of a failed test's ``<failure>``."""
    failed = test.failed_checks
    if failed:
        first = failed[0]
        message = f"{first.name}: {first.message}"
        others = len({c.name for c in failed}) - 1
        if others > 0:
            message += f" (and {others} more failed check{'s' if others > 1 else ''})"
    else:
        message = f"score {_figure(test.score)}"
    failed_runs = [r for r in test.runs if r.outcome != "passed"]
    if len(test.runs) > 1:
        message = (
            f"{len(failed_runs)} of {len(test.runs)} runs failed "
            f"(the test passes when {test.pass_rule.describe()}): {message}"
        )
    lines: list[str] = []
    for run in failed_runs or test.runs:
        lines.append(_run_head(test, run))
        for check in run.failed_checks:
            lines.extend(_check_lines(check))
        lines.extend(_log_tail(run))
    return message, "\n".join(lines)


def retry_lines(test: TestResult) -> list[str]:
    """Each retry of a test's runs: ``<id> run 2: attempt 1 on <where>: <reason> (waited 0.5 s)``."""
    lines = []
    for run in test.runs:
        for retry in run.retries:
            where = f" on {retry.where}" if retry.where else ""
            lines.append(
                f"{test.id} run {run.run_number}: attempt {retry.attempt}{where}: {retry.reason} "
                f"(waited {_figure(retry.waited_seconds)} s)"
            )
    return lines


def quarantined_failure(test: TestResult) -> bool:
    """A test the suite quarantines that failed or errored: reported, but not failing the run."""
    return test.quarantined and test.status in ("failed", "error")


def incomplete(test: TestResult) -> bool:
    """A test that ran fewer runs than planned (the run was stopped), its adaptive plan
    undecided: whatever its runs did, it did not pass as planned."""
    if test.skip_reason is not None or len(test.runs) >= test.planned_runs:
        return False
    return test.adaptive is None or test.stop is None


def agent_errors(test: TestResult) -> list[RunResult]:
    """The runs of a test that did not pass because of the agent rather than a check: it
    crashed, timed out, broke the protocol or answered with an error (``RunResult.error``),
    or a check could not be made (the run's outcome is ``error``)."""
    return [r for r in test.runs if r.outcome == "error" or (r.outcome == "failed" and r.error)]


def error_text(test: TestResult, errored: list[RunResult]) -> tuple[str, str, str]:
    """The type, message and text of an ``<error>``: ``timeout`` when a run timed out,
    ``evaluation-error`` when a check could not be made, ``agent-error`` otherwise."""
    if any(r.status == "timeout" for r in errored):
        kind = "timeout"
        first = next(r for r in errored if r.status == "timeout")
    elif test.status == "error":
        kind = "evaluation-error"
        first = next((r for r in errored if r.outcome == "error"), errored[0])
    else:
        kind, first = "agent-error", errored[0]
    unmade = first.failed_checks  # a check that could not be made says why
    message = first.error or (
        f"{unmade[0].name}: {unmade[0].message}" if unmade else f"the run ended with status {first.status}"
    )
    if first.error_code:
        message = f"{first.error_code}: {message}"
    if len(test.runs) > 1:
        message = f"{len(errored)} of {len(test.runs)} runs errored: {message}"
    lines: list[str] = []
    for run in errored:
        lines.append(_run_head(test, run))
        if run.error:
            lines.extend("  " + line for line in run.error.splitlines())
        for check in run.failed_checks:
            lines.extend(_check_lines(check))
        if run.traceback:
            lines.extend("  " + line for line in run.traceback.splitlines())
        lines.extend(_log_tail(run))
    return kind, message, "\n".join(lines)


def test_properties(test: TestResult) -> list[tuple[str, str]]:
    """A test's figures as ``(name, value)`` properties, each name prefixed by the test's id."""
    found = [(f"{test.id}.status", test.status), (f"{test.id}.runs", str(len(test.runs)))]
    if test.runs:
        found.append((f"{test.id}.score", _figure(test.score)))
    stats = test.statistics
    if stats is not None:
        found.append((f"{test.id}.passed_runs", str(stats.passed_runs)))
        found.append((f"{test.id}.pass_rate", _figure(stats.pass_rate)))
        if stats.score.stability is not None:
            found.append((f"{test.id}.stability", stability_word(stats.score.stability)))
        if stats.score.ci_95 is not None:
            low, high = stats.score.ci_95
            found.append((f"{test.id}.ci_95", f"{_figure(low)}..{_figure(high)}"))
        if stats.error_codes:
            counted = ", ".join(f"{code} {count}" for code, count in stats.error_codes.items())
            found.append((f"{test.id}.error_codes", counted))
    if test.baseline is not None:
        verdict = test.baseline.verdict_holm or test.baseline.verdict
        found.append((f"{test.id}.baseline", verdict))
    unmade = test.skipped_checks
    if unmade:  # a check not made is never shown as passed: it is named with its reason
        found.append((f"{test.id}.skipped_checks", f"{len(unmade)}: {unmade[0].name}: {unmade[0].skipped}"))
    if test.flaky:
        found.append((f"{test.id}.flaky", "true"))
    if test.quarantined:
        found.append((f"{test.id}.quarantined", "true"))
    if test.retries:
        found.append((f"{test.id}.retries", str(test.retries)))
    return found


test_properties.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def suite_properties(results: SuiteResults) -> list[tuple[str, str]]:
    found = [
        ("atp.run_id", results.run_id),
        ("atp.suite", results.suite),
        ("atp.agent", results.agent),
        ("atp.agent_type", results.agent_type),
        ("atp.results_format", f"{results.format} {results.format_version}"),
    ]
    if results.interrupted:
        found.append(("atp.interrupted", results.stopped_by or "true"))
    stats = results.statistics
    if stats is not None and stats.score is not None:
        found.append(("atp.score", _figure(stats.score.mean)))
    if results.baseline is not None:
        found.append(("atp.baseline", results.baseline.file or "yes"))
    for code, count in results.summary.error_codes.items():
        found.append((f"atp.error_codes.{code}", str(count)))
    budget = results.budget
    if budget is not None:
        if budget.max_cost_usd is not None:
            found.append(("atp.budget.max_cost_usd", _figure(budget.max_cost_usd)))
        if budget.max_tokens is not None:
            found.append(("atp.budget.max_tokens", str(budget.max_tokens)))
        found.append(("atp.budget.spent_cost_usd", _figure(budget.spent_cost_usd)))
        found.append(("atp.budget.spent_tokens", str(budget.spent_tokens)))
        if budget.exceeded:
            found.append(("atp.budget.exceeded", budget.exceeded))
    if results.shard is not None:
        found.append(("atp.shard", f"{results.shard.index}/{results.shard.count}"))
        if results.shard.basis:
            found.append(("atp.shard.basis", results.shard.basis))
    return found


def summary_text(results: SuiteResults) -> str:
    s = results.summary
    lines = [
        f"ATP run {results.run_id}: suite {results.suite}, agent {results.agent} ({results.agent_type})",
        f"{s.total} tests: {s.passed} passed, {s.failed} failed, {s.errors} errors, {s.skipped} skipped"
        + (
            f" ({s.quarantined} of them quarantined: written as skipped, not failing the run)"
            if s.quarantined
            else ""
        ),
    ]
    if results.interrupted:
        lines.append(
            f"the run was interrupted ({results.stopped_by or 'stopped'}); tests not run are skipped"
        )
    if results.stopped_by == "budget":
        exceeded = (
            results.budget.exceeded if results.budget is not None and results.budget.exceeded else "spent"
        )
        lines.append(f"BUDGET_EXCEEDED: {exceeded}; no run started after, tests not run are skipped")
    if results.shard is not None:
        shard = results.shard
        how = f"balanced by the durations of run {shard.basis}" if shard.basis else "shared by count"
        lines.append(f"shard {shard.index} of {shard.count} ({how})")
    flaky = [t.id for t in results.tests if t.flaky]
    if flaky:
        lines.append(f"flaky (runs disagree): {', '.join(flaky)}")
    held = [t for t in results.tests if quarantined_failure(t)]
    if held:
        lines.append(f"quarantined, not failing the run (shown as skipped): {', '.join(t.id for t in held)}")
    if s.skipped_checks:
        lines.append(
            f"{s.skipped_checks} checks were skipped (not made, not passed): see the .skipped_checks properties"
        )
    for key, used in results.evaluation_usage.items():
        cost = f", ${used.cost_usd:.4f}" if used.cost_usd is not None else ""
        lines.append(
            f"evaluation {key}: {used.calls} calls, {used.cached} from the cache, "
            f"{used.input_tokens + used.output_tokens} tokens{cost}"
        )
    lines.extend(f"problem: {p}" for p in results.problems)
    lines.extend(f"plugin failure: {f.plugin} in {f.where}: {f.message}" for f in results.plugin_failures)
    for test in held:
        kind, message, text = verdict(test)
        lines.append(f"===== {test.id}: quarantined {kind}: {message} =====")
        lines.extend(text.splitlines())
    if s.retries:
        runs = sum(1 for t in results.tests for r in t.runs if r.retries)
        lines.append(
            f"retries: {s.retries} over {runs} run{'s' if runs != 1 else ''} (faults of the infrastructure)"
        )
        lines.extend("  " + line for t in results.tests for line in retry_lines(t))
    return "\n".join(lines) + "\n"


def logs_text(results: SuiteResults, store: RunStore) -> str:
    """Every run's stored agent log, each under a header; a long log keeps its end."""
    parts: list[str] = []
    for test in results.tests:
        for run in test.runs:
            log = store.log(run)
            if not log:
                continue
            parts.append(f"===== {test.id} run {run.run_number} (agent stderr) =====\n")
            parts.append(_cut(log, LOG_LIMIT))
            if not log.endswith("\n"):
                parts.append("\n")
    return "".join(parts)


def verdict(test: TestResult) -> tuple[str, str, str]:
    """Why a failed or errored test did not pass: ``failure`` or the ``<error>``'s type, its
    message and its text."""
    errored = agent_errors(test)
    if errored or test.status == "error":
        return error_text(test, errored or test.runs)
    message, text = failure_text(test)
    return "failure", message, text


def _testcase(parent: Element, results: SuiteResults, test: TestResult) -> str:
    """Add the ``<testcase>`` of ``test``; returns what it is: ``passed``, ``skipped``,
    ``failure`` or ``error``."""
    from xml.etree.ElementTree import SubElement

    case = SubElement(
        parent,
        "testcase",
        name=xml_text(test.id),
        classname=xml_text(f"{results.suite}.{results.agent}"),
        time=_seconds(test.duration_seconds),
    )
    if test.status == "skipped":
        SubElement(case, "skipped", message=xml_text(test.skip_reason or "skipped"))
        return "skipped"
    if test.status == "passed" and incomplete(test):  # not green: it did not run as planned
        ran = f"{len(test.runs)} of {test.planned_runs} planned runs ran"
        why = f" ({results.stopped_by})" if results.stopped_by else ""
        SubElement(
            case, "skipped", message=xml_text(f"not finished: {ran} before the run stopped{why}; they passed")
        )
        return "skipped"
    if test.status == "passed":
        return "passed"
    kind, message, text = verdict(test)
    if test.quarantined:  # reported, not failing CI: its failure is in the suite's system-out
        SubElement(case, "skipped", message=xml_text(f"quarantined: {message}"))
        return "skipped"
    if kind != "failure":
        node = SubElement(case, "error", message=xml_text(message), type=kind)
        node.text = xml_text(text)
        return "error"
    node = SubElement(case, "failure", message=xml_text(message), type="assertion")
    node.text = xml_text(text)
    return "failure"


def document(results: SuiteResults, store: RunStore) -> bytes:
    """The JUnit XML of ``results``, as UTF-8 with its declaration."""
    from xml.etree.ElementTree import Element, SubElement, tostring

    root = Element("testsuites")
    suite = SubElement(
        root,
        "testsuite",
        name=xml_text(results.suite) or "suite",
        package=xml_text(f"{results.suite}.{results.agent}"),
        id="0",
        timestamp=_timestamp(results.started_at),
        hostname=xml_text(socket.gethostname()) or "localhost",
        time=_seconds(results.duration_seconds),
    )
    properties = SubElement(suite, "properties")
    for name, value in suite_properties(results) + [p for t in results.tests for p in test_properties(t)]:
        SubElement(properties, "property", name=xml_text(name), value=xml_text(value))
    kinds = [_testcase(suite, results, test) for test in results.tests]
    suite.set("tests", str(len(kinds)))
    suite.set("failures", str(kinds.count("failure")))
    suite.set("errors", str(kinds.count("error")))
    suite.set("skipped", str(kinds.count("skipped")))
    SubElement(suite, "system-out").text = xml_text(summary_text(results))
    SubElement(suite, "system-err").text = xml_text(logs_text(results, store))
    body: bytes = tostring(root, encoding="utf-8", xml_declaration=False)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + body + b"\n"


class JunitReporter(Reporter):
    name = "junit"
    summary = "JUnit XML for CI systems (GitHub Actions, GitLab CI, Jenkins)"
    file_extension = ".xml"

    def report(self, results: SuiteResults, store: RunStore) -> None:
        self.write_output(document(results, store))
