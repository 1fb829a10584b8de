"""The evaluators ``pytest``, ``lint`` and ``custom_command``: what they share
(:class:`_CodeEvaluator`: the folder, the command, its time limit, the details of how it ran)
and how each turns how its command ran into a check.

**Time.** A command may take ``timeout_seconds`` (at most an hour). ATP gives every evaluator a
time limit of its own over one run (``evaluators.<type>.timeout_seconds``, 60 s by default), and
a check cut short by that limit says nothing about the command; so the command may take at most
:data:`COMMAND_SHARE` of the evaluator's limit (50 s of the default 60 s), which is also its
default. At its limit the command's whole process group (or namespace) is killed with SIGKILL
and the check fails: "killed after N s", with the end of its output.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import sys
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from atp.core.bounds import number_in
from atp.core.errors import ConfigError
from atp.core.evaluator import EvalContext, Evaluator, check, unmet
from atp.core.protocol import Artifact, FileArtifact, ReferenceArtifact
from atp.core.results import Check
from atp.core.secrets import Masker
from atp.core.text import mask, printable, shorten
from atp.evaluators.artifact import produced, produced_names, select
from atp.evaluators.code_exec.command import DRAIN_SECONDS, Outcome, command_env, find_program, run_command
from atp.evaluators.code_exec.config import (
    CommandConfig,
    CustomCommandConfig,
    LintConfig,
    PytestConfig,
    PythonSettings,
)
from atp.evaluators.code_exec.folder import Folder, FolderError, work_folder
from atp.evaluators.code_exec.reports import (
    MAX_JUNIT_BYTES,
    MAX_RUFF_BYTES,
    SHOWN_FAILURES,
    FailedTest,
    JUnitReport,
    ReportError,
    parse_junit,
    parse_ruff,
    read_report,
)
from atp.evaluators.offload import off_loop
from atp.evaluators.paths import norm
from atp.evaluators.patterns import RegexSettings, compile_regex, regex_timeout

OUTPUT_DETAIL_CHARS = 4096
"""A check's details show the last this many characters of the command's output."""
OUTPUT_MESSAGE_CHARS = 300
"""A failed check's message quotes the last this many characters of the command's output."""
NAMED_FAILURES = 3
"""How many of the failed or errored tests a ``pytest`` check's message names (its details list
:data:`~atp.evaluators.code_exec.reports.SHOWN_FAILURES`)."""
NAMED_FINDINGS = 3
"""How many of the findings a ``lint`` check's message quotes (its details list
:data:`~atp.evaluators.code_exec.reports.SHOWN_FINDINGS`)."""
COMMAND_SHARE = 5 / 6
"""The share of the evaluator's own time limit a command may take: the rest is for copying
files in, reading reports and cleaning up."""
INSTALL_HINT = "pip install 'atp-evaluators[code]'"
PYTHON_SUFFIXES = (".py", ".pyi")


def _tail_text(text: str, limit: int, masker: Masker | None = None) -> str:
    """The last ``limit`` characters of ``text`` (``…`` in front when cut), the secrets of
    ``masker`` (the run's) masked first, whether it is cut or not."""
    text = mask(text, masker)
    if len(text) <= limit:
        return text
    return "…" + text[-limit:]


Judge = Callable[[Folder, Outcome, dict[str, Any]], Awaitable[Check]]
"""Turns how a command ran (its folder, its outcome, the details of every check) into the check.
(An evaluator's judge has the run's masker from its context, for what it quotes.)"""


class _CodeEvaluator(Evaluator):
    """What ``pytest``, ``lint`` and ``custom_command`` share: the folder, the command, its
    time limit and the details of how it ran."""

    category = "quality"

    def evaluator_limit(self) -> float:
        """The evaluator's own time limit over one run (``evaluators.<name>.timeout_seconds``)."""
        seconds = number_in(self.settings.get("timeout_seconds", self.default_timeout), 0, low_open=True)
        return self.default_timeout if seconds is None else seconds

    def command_timeout(self, config: CommandConfig) -> tuple[float, str | None]:
        """The command's time limit, and a note when ``timeout_seconds`` was lowered to fit
        within :data:`COMMAND_SHARE` of the evaluator's own limit."""
        limit = self.evaluator_limit()
        most = round(limit * COMMAND_SHARE, 3)
        if config.timeout_seconds is None:
            return most, None
        if config.timeout_seconds <= most:
            return config.timeout_seconds, None
        return most, (
            f"timeout_seconds {config.timeout_seconds:g} is more than the {most:g} s that the evaluator's "
            f"own limit ({limit:g} s, evaluators.{self.settings_name()}.timeout_seconds) leaves the command; it was "
            f"given {most:g} s"
        )

    def python(self, config: CommandConfig) -> str:
        """The interpreter that runs the tool: the assertion's ``python``, the setting
        ``python``, or ATP's own."""
        chosen = getattr(config, "python", None) or self.settings.get("python")
        if not chosen:
            return sys.executable
        if not isinstance(chosen, str):
            raise ConfigError(f"evaluators.{self.settings_name()}.python must be a string, not {chosen!r}")
        return chosen

    async def run(
        self,
        label: str,
        ctx: EvalContext,
        config: CommandConfig,
        artifacts: list[Artifact],
        argv: Callable[[Folder, str], list[str]],
        judge: Judge,
    ) -> list[Check]:
        """Make the folder, run the command ``argv(folder, python)`` gives, and have ``judge``
        turn how it ran into the check. A folder that cannot be made, an interpreter or program
        not found, a command that cannot start and one killed at its time limit are failed
        checks with nothing to judge here (:func:`~atp.core.evaluator.unmet`: ``negate: true``
        leaves them failed)."""
        chosen = self.python(config)
        python: str | None = chosen
        problem = None
        if chosen != sys.executable:  # (ATP's own interpreter is running: no need to look for it)
            python, problem = find_program(chosen, os.environ.get("PATH") or os.defpath, Path.cwd())
        if python is None:
            return [unmet(label, f"the Python interpreter cannot be used: {problem}")]
        timeout, note = self.command_timeout(config)
        try:
            async with work_folder(
                ctx, artifacts, config.files, whole_workspace=config.path is None
            ) as folder:
                env = command_env(folder, python, config.env)
                command = argv(folder, python)
                program, problem = find_program(command[0], env["PATH"], folder.work)
                if program is None:
                    return [unmet(label, f"the command cannot be run: {problem}", command=command)]
                try:
                    outcome = await run_command(
                        [program, *command[1:]],
                        folder,
                        env,
                        timeout,
                        config.network,
                        config,
                        processes=ctx.processes,
                    )
                except OSError as exc:
                    message = f"the command cannot be started: {exc.strerror or exc}"
                    return [unmet(label, message, command=command)]
                details = await self.details(folder, outcome, note, ctx.masker)
                if outcome.timed_out:
                    message = (
                        f"{shorten(shlex.join(command), 200, ctx.masker)} was killed after {timeout:g} s "
                        f"(timeout_seconds); its output ends: {_output_end(details, ctx.masker)}"
                    )
                    return [unmet(label, message, **details)]
                return [await judge(folder, outcome, details)]
        except FolderError as exc:
            return [unmet(label, str(exc))]

    async def details(
        self, folder: Folder, outcome: Outcome, note: str | None, masker: Masker | None = None
    ) -> dict[str, Any]:
        """What every check of a command shows: how it ended, how long it took, how it was
        isolated, the end of its output (the secrets of ``masker``, the run's, masked before
        it is cut), the suite's files that replaced the agent's."""
        details: dict[str, Any] = {
            "exit_code": outcome.exit_code,
            "duration_seconds": round(outcome.seconds, 3),
            "timeout_seconds": outcome.timeout,
            "network": outcome.network,
            "processes": outcome.processes,
            "proc": outcome.proc,
            "output": await off_loop(
                len(outcome.output), _tail_text, outcome.output, OUTPUT_DETAIL_CHARS, masker
            ),
        }
        if outcome.cut:
            details["output_cut_bytes"] = outcome.cut
        if outcome.unfinished_output:
            details["output_note"] = (
                "a process the command started kept its output open; "
                f"ATP stopped reading {DRAIN_SECONDS:g} s after the command ended"
            )
        if note:
            details["timeout_note"] = note
        if folder.replaced:
            details["replaced_by_suite_files"] = folder.replaced
        if folder.skipped:
            details["skipped_special_files"] = folder.skipped
        if folder.duplicates:
            details["duplicate_artifact_paths"] = list(folder.duplicates)
        return details


def _file_artifacts(ctx: EvalContext, config: CommandConfig) -> list[Artifact]:
    return [a for a in select(ctx, config.target) if isinstance(a, (FileArtifact, ReferenceArtifact))]


def _missing_artifact(label: str, ctx: EvalContext, config: CommandConfig) -> Check:
    return unmet(
        label,
        f"expected artifact {config.path!r}; the agent produced {produced(ctx)}",
        expected=config.path,
        produced=produced_names(ctx),
    )


STARTER = (
    "import runpy, sys\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "tool = sys.argv.pop(1)\n"
    "__import__(tool)\n"
    "if tool == 'pytest':\n"
    "    sys.path.insert(0, '')\n"
    "runpy.run_module(tool, run_name='__main__', alter_sys=True)\n"
)
"""How ``pytest`` and ``lint`` run their tool: ``<python> -c STARTER <tool> <arguments>``. It is
``python -m <tool>`` except that the command's folder (where the agent's files are) is not on
``sys.path`` while the tool is imported, so that no file of the agent's (``pytest.py``,
``ruff/``) can stand in for it. For pytest the folder is put back once pytest is imported, as
``python -m pytest`` has it, so that tests import the agent's modules as they would there.
(``python -P`` would do the first part only from Python 3.11 on, and would keep the folder off
``sys.path`` for the tests too.)"""


def tool_argv(python: str, tool: str, *args: str) -> list[str]:
    """The command line that runs ``python -m <tool> <args>`` with :data:`STARTER`."""
    return [python, "-c", STARTER, tool, *args]


def _tool_missing(output: str, module: str) -> bool:
    """Whether ``python -m <module>`` said the module is not installed."""
    return f"No module named {module}" in output or f"No module named '{module}'" in output


def _output_end(details: Mapping[str, Any], masker: Masker | None = None) -> str:
    """The end of the command's output for a check message: cut from the details' (whose
    secrets were masked before it was cut; masked again with ``masker``, the run's), on one
    line."""
    return printable(_tail_text(details["output"].strip(), OUTPUT_MESSAGE_CHARS, masker)) or "(no output)"


# --- pytest -----------------------------------------------------------------------------------


def _reason(failed: FailedTest, masker: Masker | None = None) -> str:
    """Why a test failed, in one line: its message's first line; for a collection error (whose
    message is only "collection failure") the last line of its text, where the exception is
    (the secrets of ``masker``, the run's, masked)."""
    if failed.message.startswith("collection failure"):
        lines = [line for line in failed.text.splitlines() if line.strip()] or [failed.message]
        line = lines[-1]
    else:
        line = failed.message.splitlines()[0] if failed.message else ""
    if line.startswith("E "):  # pytest's mark of an exception line
        line = line[1:]
    return shorten(line.strip(), 120, masker)


def _named(failures: list[FailedTest], total: int, masker: Masker | None = None) -> str:
    """The first :data:`NAMED_FAILURES` failed tests of ``total``, each with why (the secrets of
    ``masker``, the run's, masked), for a check message."""
    named = [(f.test, _reason(f, masker)) for f in failures[:NAMED_FAILURES]]
    shown = "; ".join(f"{test} ({reason})" if reason else test for test, reason in named)
    more = total - len(named)
    return printable(shown) + (f" and {more} more" if more > 0 else "")


_PYTEST_EXITS = {2: "was interrupted", 3: "failed (internal error)", 4: "was used wrongly (usage error)"}


_TEST_FUNCTION = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+test", re.MULTILINE)
"""A test function as pytest finds them by default (``python_functions = test*``)."""


def suite_tests(files: Mapping[str, str]) -> dict[str, int]:
    """The suite's test files (its ``files`` that pytest collects by default: ``test_*.py`` and
    ``*_test.py``), each with how many test functions (``def test…``) it defines."""
    found = {}
    for path, text in files.items():
        name = posixpath.basename(path)
        if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
            found[path] = len(_TEST_FUNCTION.findall(text))
    return found


def _tests(count: int) -> str:
    return "1 test" if count == 1 else f"{count} tests"


class Pytest(_CodeEvaluator):
    """Runs pytest over the agent's files, and the suite's own tests given as ``files``.

    The command is ``<python> -c <STARTER> pytest -q -p no:cacheprovider --junitxml=<report>
    --rootdir=<folder> [args]``, which is ``python -m pytest ...`` except that no file of the
    agent's can stand in for pytest (:data:`STARTER`). ``python`` is the assertion's ``python``,
    else the setting ``evaluators.pytest.python``, else ATP's own interpreter; pytest must be
    importable there (``pip install 'atp-evaluators[code]'``). The outcome is read from the
    JUnit XML report, never from pytest's text: the score is ``passed / (passed + failed +
    errors)``, skipped tests aside, and the check passes when that is at least
    ``min_pass_rate`` and at least one test ran. The details count the tests, and name each
    failed or errored one (at most 50) with its message and the end of its traceback; the
    message names the first three. A collection error is a failed check saying so; no tests
    collected (exit code 5) or none run, no report, a report ATP does not trust (below) and
    pytest not installed are failed checks with nothing to judge (``negate: true`` leaves them
    failed).

    **The code under test runs in pytest's own process** (pytest imports it), so it can change
    what pytest reports: write the report itself, patch pytest, end the process with exit code
    0. Nothing inside that process can be prevented. ATP cross-checks what it can, and fails the
    check when the report and pytest's exit code disagree (exit code 0 needs every test passed,
    1 needs one failed or errored; any other fails), when the suite's ``files`` hold test files
    and the report has a test from another file, and when the report holds fewer than
    ``min_tests`` tests (default: the test functions in the suite's test files). Give the tests
    as the suite's ``files`` and take only the agent's solution with ``path`` (so that no
    ``conftest.py`` or ``pytest.ini`` of the agent's comes along). These make a forged result
    harder, not impossible: for code that may be hostile, run the evaluation where the code can
    do no harm (an agent in a container, a sandbox).
    """

    name = "pytest"
    summary = "pytest, run over the agent's files and the suite's tests, passes (from its JUnit report)"
    Config = PytestConfig
    Settings = PythonSettings

    async def evaluate(self, ctx: EvalContext, config: PytestConfig) -> list[Check]:
        label = "pytest" if config.path is None else f"pytest:{config.path}"
        artifacts = _file_artifacts(ctx, config)
        if config.path is not None and not artifacts:
            return [_missing_artifact(label, ctx, config)]

        def argv(folder: Folder, python: str) -> list[str]:
            return tool_argv(
                python, "pytest", "-q", "-p", "no:cacheprovider",
                f"--junitxml={folder.root / 'junit.xml'}", f"--rootdir={folder.work}", *config.args,
            )  # fmt: skip

        async def judge(folder: Folder, outcome: Outcome, details: dict[str, Any]) -> Check:
            return await self.judge(label, config, folder, outcome, details, ctx.masker)

        return await self.run(label, ctx, config, artifacts, argv, judge)

    async def judge(
        self,
        label: str,
        config: PytestConfig,
        folder: Folder,
        outcome: Outcome,
        details: dict[str, Any],
        masker: Masker | None = None,
    ) -> Check:
        """The check of a pytest run, from its JUnit report: none, one that cannot be read, a run
        that collected or ran nothing, one whose report is not to be trusted, else its pass rate.
        What it quotes of the report and the output has the secrets of ``masker`` (the run's)
        masked."""
        code = outcome.exit_code
        data, problem = await anyio.to_thread.run_sync(
            read_report, folder.root / "junit.xml", MAX_JUNIT_BYTES
        )
        if data is None:
            return unmet(label, self._no_report(config, outcome, problem, details, masker), **details)
        if code == 5:
            return unmet(label, "pytest collected no tests (exit code 5)", **details)
        test_files = suite_tests(config.files)
        try:
            report = await off_loop(len(data), parse_junit, data, tuple(test_files), masker)
        except ReportError as exc:
            return unmet(label, str(exc), **details)
        failed = _not_run(label, report, code, details, masker)
        if failed is None:
            failed = _distrusted(label, report, code, test_files, details, masker)
        if failed is None:
            failed = _too_few(label, config, report, test_files, details)
        return failed if failed is not None else _pass_rate(label, config, report, details, masker)

    def _no_report(
        self,
        config: PytestConfig,
        outcome: Outcome,
        problem: str | None,
        details: dict[str, Any],
        masker: Masker | None = None,
    ) -> str:
        """Why pytest wrote no JUnit report ATP can read, for the check message."""
        if _tool_missing(outcome.output, "pytest"):
            return f"pytest is not installed for {self.python(config)}; install it with: {INSTALL_HINT}"
        if problem is not None:
            return f"pytest's JUnit report {problem}"
        code = outcome.exit_code
        ended = _PYTEST_EXITS.get(code or 0, "ended")
        return f"pytest {ended} (exit code {code}) and wrote no JUnit report; its output ends: {_output_end(details, masker)}"


def _counts(report: JUnitReport) -> dict[str, int]:
    """The tests of a report by outcome, for a check's details."""
    return {
        "passed": report.passed,
        "failed": report.failed,
        "errors": report.errors,
        "skipped": report.skipped,
    }


def _not_run(
    label: str, report: JUnitReport, code: int | None, details: dict[str, Any], masker: Masker | None = None
) -> Check | None:
    """The failed check of a pytest run that could not collect the tests or ended before running
    them (interrupted, an internal error, a usage error); ``None`` for a run that ran them."""
    if report.collection_errors:
        message = (
            f"pytest could not collect the tests: collection error in "
            f"{_named(report.collection_errors, len(report.collection_errors), masker)}"
        )
        failures = [f._asdict() for f in report.collection_errors[:SHOWN_FAILURES]]
        return check(label, False, message, failures=failures, **details)
    if code in _PYTEST_EXITS:
        message = f"pytest {_PYTEST_EXITS[code]} (exit code {code}); its output ends: {_output_end(details, masker)}"
        return unmet(label, message, **details)
    return None


_UNTRUSTED = (
    "; the code under test runs in pytest's process and may have changed one of them, so ATP trusts neither"
)


def _distrusted(
    label: str,
    report: JUnitReport,
    code: int | None,
    test_files: dict[str, int],
    details: dict[str, Any],
    masker: Masker | None = None,
) -> Check | None:
    """The failed check of a run whose report and exit code disagree, or whose report holds tests
    from outside the suite's test files; ``None`` when neither."""
    tests = _counts(report)
    bad = report.failed + report.errors
    if code not in (0, 1):
        how = f"was ended by signal {-code}" if code is not None and code < 0 else f"exited with {code}"
        message = (
            f"pytest {how}, which is not how pytest ends a test run{_UNTRUSTED}; "
            f"its output ends: {_output_end(details, masker)}"
        )
        return unmet(label, message, tests=tests, **details)
    if (code == 0) != (bad == 0):
        said = "every test passed" if code == 0 else "a test failed"
        counted = f"counts {bad} failed or errored" if bad else "counts none failed"
        message = f"pytest's exit code {code} says {said}, but its JUnit report {counted}{_UNTRUSTED}"
        return unmet(label, message, tests=tests, **details)
    if report.foreign:
        shown = printable(shorten(", ".join(report.foreign_tests[:NAMED_FAILURES]), 300, masker))
        message = (
            f"pytest's report holds {_tests(report.foreign)} from outside the suite's test files "
            f"({', '.join(test_files)}): {shown}; only the suite's tests count"
        )
        return unmet(label, message, tests=tests, foreign_tests=report.foreign_tests, **details)
    return None


def _too_few(
    label: str, config: PytestConfig, report: JUnitReport, test_files: dict[str, int], details: dict[str, Any]
) -> Check | None:
    """The failed check of a report that holds fewer tests than ``min_tests`` (default: the test
    functions of the suite's test files); ``None`` when it holds enough."""
    defined = sum(test_files.values())
    least = config.min_tests or max(defined, 1)
    if report.total >= least:
        return None
    message = f"pytest's report holds {_tests(report.total)}, "
    if config.min_tests is None and defined:
        message += (
            f"but the suite's test files define {defined} test functions (min_tests; set it to expect fewer)"
        )
    else:
        message += f"fewer than min_tests {least}"
    return unmet(label, message, tests=_counts(report), min_tests=least, **details)


def _pass_rate(
    label: str,
    config: PytestConfig,
    report: JUnitReport,
    details: dict[str, Any],
    masker: Masker | None = None,
) -> Check:
    """The check of a trusted report: the share of the tests that ran which passed, against
    ``min_pass_rate``, naming the first failed tests (the secrets of ``masker`` masked)."""
    tests = _counts(report)
    skipped = f"; {report.skipped} skipped" if report.skipped else ""
    if report.ran == 0:
        return unmet(label, f"no test ran{skipped}", tests=tests, **details)
    rate = report.passed / report.ran
    message = f"{report.passed} of {report.ran} tests passed ({rate:.0%}"
    message += f"; min_pass_rate {config.min_pass_rate:.0%})" if config.min_pass_rate < 1 else ")"
    listed: dict[str, Any] = {}
    if report.failures:
        message += f"; failed: {_named(report.failures, report.failed + report.errors, masker)}"
        listed["failures"] = [f._asdict() for f in report.failures]
    return check(
        label, rate >= config.min_pass_rate, message + skipped, rate, tests=tests, **listed, **details
    )


# --- lint -------------------------------------------------------------------------------------


def _findings(count: int) -> str:
    return "1 finding" if count == 1 else f"{count} findings"


class Lint(_CodeEvaluator):
    """Runs ruff over the agent's Python files.

    The command is ``<python> -c <STARTER> ruff check --output-format=json
    --output-file=<report> --no-cache --exit-zero --isolated --ignore-noqa [--select ...]
    [--ignore ...] -- <files>`` (``python -m ruff ...``, except that no file of the agent's can
    stand in for ruff: :data:`STARTER`); the files are the agent's artifacts ``path`` selects
    (default: those ending in ``.py`` or ``.pyi``). ``--isolated`` makes ruff ignore every
    configuration file (a ``ruff.toml``, a ``[tool.ruff]`` table) and ``--ignore-noqa`` every
    suppression comment (``# noqa``, ``# ruff: noqa``, ``# flake8: noqa``): the rules are
    ``select`` and ``ignore``, else ruff's defaults (which change with ruff's version: name the
    rules for a stable check). What the agent still chooses is its code, and so which files
    ``path`` (or its default) finds. ruff must be importable by ``python`` (``pip install
    'atp-evaluators[code]'``); ruff runs no code of the agent's.

    The check passes with at most ``max_findings`` findings (default 0). Its score is 1 when it
    passes, else ``(1 + max_findings) / (1 + findings)`` (``1 / (1 + findings)`` with
    ``max_findings: 0``). Every finding is counted; the details list the first 100 as ``{file,
    line, column, code, message}``. Only ruff is built in: another linter can run as a
    ``custom_command`` (its exit code, or a ``regex`` over its output, decides).
    """

    name = "lint"
    summary = "ruff finds at most max_findings problems in the agent's Python files"
    Config = LintConfig
    Settings = PythonSettings

    async def evaluate(self, ctx: EvalContext, config: LintConfig) -> list[Check]:
        label = "lint" if config.path is None else f"lint:{config.path}"
        artifacts = _file_artifacts(ctx, config)
        if config.path is None:
            artifacts = [a for a in artifacts if norm(a.path).endswith(PYTHON_SUFFIXES)]  # type: ignore[union-attr]
        if not artifacts:
            if config.path is not None:
                return [_missing_artifact(label, ctx, config)]
            message = f"expected a Python file to lint (*.py); the agent produced {produced(ctx)}"
            return [unmet(label, message, produced=produced_names(ctx))]

        def argv(folder: Folder, python: str) -> list[str]:
            rules = []
            if config.select is not None:
                rules.append(f"--select={','.join(config.select)}")
            if config.ignore is not None:
                rules.append(f"--ignore={','.join(config.ignore)}")
            return tool_argv(
                python, "ruff", "check", "--output-format=json", f"--output-file={folder.root / 'ruff.json'}",
                "--no-cache", "--exit-zero", "--isolated", "--ignore-noqa", *rules, "--", *folder.placed,
            )  # fmt: skip

        async def judge(folder: Folder, outcome: Outcome, details: dict[str, Any]) -> Check:
            return await self.judge(label, config, folder, outcome, details, ctx.masker)

        return await self.run(label, ctx, config, artifacts, argv, judge)

    async def judge(
        self,
        label: str,
        config: LintConfig,
        folder: Folder,
        outcome: Outcome,
        details: dict[str, Any],
        masker: Masker | None = None,
    ) -> Check:
        """The check of a ruff run, from its JSON report; what it quotes of the report, the
        output and the files has the secrets of ``masker`` (the run's) masked."""
        data, problem = await anyio.to_thread.run_sync(read_report, folder.root / "ruff.json", MAX_RUFF_BYTES)
        if data is None:
            if _tool_missing(outcome.output, "ruff"):
                message = f"ruff is not installed for {self.python(config)}; install it with: {INSTALL_HINT}"
            elif problem is not None:
                message = f"ruff's report {problem}"
            else:
                message = f"ruff wrote no report (exit code {outcome.exit_code}); its output ends: {_output_end(details, masker)}"
            return unmet(label, message, **details)
        try:
            count, findings = await off_loop(len(data), parse_ruff, data, folder.work, masker)
        except ReportError as exc:
            return unmet(label, str(exc), **details)
        linted = printable(shorten(", ".join(folder.placed), 300, masker))
        listed: dict[str, Any] = {"findings": [f._asdict() for f in findings], "findings_total": count}
        if count <= config.max_findings:
            found = (
                "no findings" if count == 0 else f"{_findings(count)} (max_findings {config.max_findings})"
            )
            return check(label, True, f"{found} in {linted}", **listed, **details)
        shown = printable("; ".join(str(f) for f in findings[:NAMED_FINDINGS]))
        more = f" and {count - NAMED_FINDINGS} more" if count > NAMED_FINDINGS else ""
        message = f"{_findings(count)} in {linted} (max_findings {config.max_findings}): {shown}{more}"
        return check(label, False, message, (1 + config.max_findings) / (1 + count), **listed, **details)


# --- custom_command ---------------------------------------------------------------------------


class CustomCommand(_CodeEvaluator):
    """Runs a command of the suite's over the agent's files.

    ``command`` is a list of arguments; a string is split as a shell would split it, but not
    run by one (write ``[sh, -c, "..."]`` for a shell). A program named without a slash is
    looked up on the command's ``PATH``, where ``python`` is ATP's own interpreter; one with a
    slash is relative to the command's folder (a suite file that starts with ``#!`` is made
    executable). The check passes when the command exits with ``expect_exit`` (default 0) and,
    when ``regex`` is given, its output (stdout and stderr together, the last 1 MiB) matches it:
    a search, with the ``regex`` module, that may take ``regex_timeout_seconds`` (the evaluator
    setting; 1 s by default). The score is 1 when it passes, 0.5 when the command exited as
    expected but its output does not match, else 0. The details hold the exit code, the
    duration and the end of the output.
    """

    name = "custom_command"
    summary = "a command run over the agent's files exits as expected (and its output matches a regex)"
    Config = CustomCommandConfig
    Settings = RegexSettings

    async def evaluate(self, ctx: EvalContext, config: CustomCommandConfig) -> list[Check]:
        label = "custom_command" if config.path is None else f"custom_command:{config.path}"
        artifacts = _file_artifacts(ctx, config)
        if config.path is not None and not artifacts:
            return [_missing_artifact(label, ctx, config)]
        command = list(config.command)

        async def judge(folder: Folder, outcome: Outcome, details: dict[str, Any]) -> Check:
            return await self.judge(label, config, command, outcome, details, ctx.masker)

        return await self.run(label, ctx, config, artifacts, lambda folder, python: command, judge)

    async def judge(
        self,
        label: str,
        config: CustomCommandConfig,
        command: list[str],
        outcome: Outcome,
        details: dict[str, Any],
        masker: Masker | None = None,
    ) -> Check:
        """The check of a command: its exit code, and its output against ``regex``; the output
        quoted with the secrets of ``masker`` (the run's) masked."""
        shown = shorten(shlex.join(command), 200)
        code = outcome.exit_code
        ended = (
            f"exited with {code}" if code is not None and code >= 0 else f"was ended by signal {-(code or 0)}"
        )
        if code != config.expect_exit:
            message = f"expected {shown} to exit with {config.expect_exit}; it {ended}; its output ends: {_output_end(details, masker)}"
            return check(label, False, message, **details)
        if config.regex is None:
            return check(label, True, f"{shown} exited with {code} as expected", **details)
        seconds = regex_timeout(self.settings, self.settings_name())
        compiled = compile_regex(config.regex, False, key="regex", feature="the custom_command evaluator")
        try:
            found = await off_loop(
                -1, partial(compiled.search, outcome.output, timeout=seconds, concurrent=True)
            )
        except TimeoutError:
            message = (
                f"the regex {config.regex!r} took longer than {seconds:g} s on the output of {shown}; "
                "ATP stopped it (evaluators.custom_command.regex_timeout_seconds)"
            )
            return unmet(label, message, **details)
        if found is None:
            message = (
                f"{shown} {ended} as expected, but its output does not match {config.regex!r}; "
                f"it ends: {_output_end(details, masker)}"
            )
            return check(label, False, message, 0.5, **details)
        return check(
            label, True, f"{shown} exited with {code} and its output matches {config.regex!r}", **details
        )
