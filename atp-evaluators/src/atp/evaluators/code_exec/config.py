"""What the code-running assertions accept: their config Structs (checked as a suite is
loaded: paths, environment, arguments, rule codes, the regex) and the settings of ``pytest`` and
``lint``."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Annotated

import msgspec

from atp.core.text import shorten
from atp.evaluators.artifact import Target, compile_regex
from atp.evaluators.code_exec.folder import relative_path

MAX_MEMORY_MB = 4096
"""The default ``max_memory_mb``: the command's address space (``RLIMIT_AS``), in MiB."""
MAX_FILE_MB = 1024
"""The default ``max_file_mb``: the largest file the command may write (``RLIMIT_FSIZE``), in
MiB."""

Seconds = Annotated[float, msgspec.Meta(gt=0, le=3600)]


def _check_env(env: Mapping[str, str]) -> None:
    for key, value in env.items():
        if not key or "=" in key or "\0" in key:
            raise ValueError(f"'env' has an invalid variable name {key!r}")
        if "\0" in value:
            raise ValueError(f"'env.{key}' contains a NUL character")


def _check_argv(argv: list[str], key: str) -> None:
    if any("\0" in arg for arg in argv):
        raise ValueError(f"'{key}' has an argument with a NUL character")


def _suite_files(files: Mapping[str, str]) -> dict[str, str]:
    """The suite's ``files`` by their normal relative paths; ValueError for a bad path or two
    keys that name the same file (``a``, ``./a``, ``b/../a``)."""
    found: dict[str, str] = {}
    keys: dict[str, str] = {}
    for name, text in files.items():
        normal = relative_path(name, "'files' key")
        if normal in found:
            raise ValueError(
                f"'files' has {shorten(keys[normal])!r} and {shorten(name)!r}, which name the same file {shorten(normal)!r}"
            )
        found[normal], keys[normal] = text, name
    return found


class CommandConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What every code-running assertion accepts."""

    path: str | None = None
    """Which of the agent's file artifacts go into the folder (a glob like ``*.py``; default:
    all of them). With a workspace, only these are copied from it; without ``path``, all of
    it."""
    files: dict[str, str] = {}
    """The suite's own files: relative path -> text. They win over the agent's files."""
    timeout_seconds: Seconds | None = None
    """How long the command may take; default and most: 5/6 of the evaluator's own limit."""
    network: bool = False
    """Let the command use the network (no network namespace)."""
    env: dict[str, str] = {}
    """Environment variables for the command, on top of the minimal environment."""
    max_memory_mb: Annotated[int, msgspec.Meta(ge=0)] = MAX_MEMORY_MB
    """The most address space the command's processes may each take (``RLIMIT_AS``), in MiB;
    0: no limit."""
    max_file_mb: Annotated[int, msgspec.Meta(ge=0)] = MAX_FILE_MB
    """The largest file the command may write (``RLIMIT_FSIZE``), in MiB; 0: no limit."""

    def __post_init__(self) -> None:
        if self.path is not None and not self.path.strip():
            raise ValueError("'path' is empty")
        self.files = _suite_files(self.files)
        _check_env(self.env)

    @property
    def target(self) -> Target:
        return Target(path=self.path)


class PythonConfig(CommandConfig, kw_only=True):
    python: str | None = None
    """The Python interpreter that runs the tool (default: the setting ``python``, else ATP's
    own, ``sys.executable``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.python is not None and (not self.python.strip() or "\0" in self.python):
            raise ValueError("'python' names no interpreter")


_PYTEST_OWN = ("--junitxml", "--junit-xml", "--junit-prefix", "--rootdir")
"""pytest options ATP sets, or that would change the report it reads: refused in ``args``."""
_PYTEST_SHORT_VALUES = frozenset("kmcrWn")
"""pytest's short options that take a value (what follows them in the same argument is it)."""


def _check_pytest_args(args: list[str], key: str = "args") -> None:
    """ValueError for pytest arguments that would move, switch off or reshape the JUnit report
    ATP reads (``--junitxml``, ``-p no:junitxml``, ``-o junit_*``, ``-o addopts``, ...)."""

    def ini(value: str, arg: str) -> None:
        name = value.lstrip("=").split("=", 1)[0].strip()
        if name.startswith("junit") or name == "addopts":
            raise ValueError(
                f"'{key}' may not override the ini option {name!r} ({shorten(arg)!r}): ATP reads pytest's JUnit report as it writes it"
            )

    def plugin(value: str, arg: str) -> None:
        value = value.lstrip("=").strip()
        if value.startswith("no:") and "junitxml" in value:
            raise ValueError(
                f"'{key}' may not switch off the junitxml plugin ({shorten(arg)!r}): ATP reads pytest's JUnit report"
            )

    for i, arg in enumerate(args):
        following = args[i + 1] if i + 1 < len(args) else ""
        if arg == "--":
            break
        if arg.startswith("--"):
            name, equals, value = arg.partition("=")
            if name in _PYTEST_OWN:
                raise ValueError(
                    f"'{key}' may not set {name} ({shorten(arg)!r}): ATP sets it, and reads the JUnit report where it put it"
                )
            if name == "--override-ini":
                ini(value if equals else following, arg)
            continue
        if arg.startswith("-") and len(arg) > 1:
            for at, letter in enumerate(arg[1:], start=2):
                if letter in "op":
                    value = arg[at:] or following
                    (ini if letter == "o" else plugin)(value, arg)
                    break
                if letter in _PYTEST_SHORT_VALUES:
                    break


class PytestConfig(PythonConfig, kw_only=True):
    args: list[str] = []
    """More arguments for pytest (test files, ``-k`` expressions, ``-x``); not ones that move or
    reshape the JUnit report (``--junitxml``, ``-p no:junitxml``, ``-o junit_*``)."""
    min_pass_rate: Annotated[float, msgspec.Meta(ge=0, le=1)] = 1.0
    """The share of the tests that ran (skipped ones aside) that must pass."""
    min_tests: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """The fewest tests pytest's report must hold (skipped ones included); default: the number
    of test functions (``def test…``) in the suite's test files (``test_*.py``, ``*_test.py``
    among ``files``), else 1."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_argv(self.args, "args")
        _check_pytest_args(self.args)
        addopts = self.env.get("PYTEST_ADDOPTS")
        if addopts:
            try:
                split = shlex.split(addopts)
            except ValueError as exc:
                raise ValueError(f"'env.PYTEST_ADDOPTS' cannot be split into arguments: {exc}") from None
            _check_pytest_args(split, "env.PYTEST_ADDOPTS")


def _check_codes(codes: list[str] | None, key: str) -> None:
    if codes is None:
        return
    if not codes:
        raise ValueError(f"'{key}' names no rule")
    for code in codes:
        if not code or any(c in code for c in ", \t\n\0") or code.startswith("-"):
            raise ValueError(f"'{key}' has an invalid rule code {code!r} (one code or prefix per item)")


class LintConfig(PythonConfig, kw_only=True):
    select: list[str] | None = None
    """The ruff rules (codes or prefixes) to check; default: ruff's own default rules."""
    ignore: list[str] | None = None
    """Rules not to check."""
    max_findings: Annotated[int, msgspec.Meta(ge=0)] = 0
    """The most findings with which the check passes."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_codes(self.select, "select")
        _check_codes(self.ignore, "ignore")


class CustomCommandConfig(CommandConfig, kw_only=True):
    command: list[str] | str
    """The command: a list of arguments, or a string split as a shell would (``shlex``), not run
    by a shell."""
    expect_exit: Annotated[int, msgspec.Meta(ge=0, le=255)] = 0
    """The exit code that passes."""
    regex: str | None = None
    """A regular expression the output (stdout and stderr) must match (a search)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.command, str):
            try:
                self.command = shlex.split(self.command)
            except ValueError as exc:
                raise ValueError(f"'command' cannot be split into arguments: {exc}") from None
        if not self.command or not self.command[0].strip():
            raise ValueError("'command' names no program")
        _check_argv(self.command, "command")
        if self.regex is not None:
            if not self.regex:
                raise ValueError("'regex' is empty; it would match any output")
            compile_regex(self.regex, False, key="regex", feature="the custom_command evaluator")


class PythonSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The settings of ``pytest`` and ``lint`` (``evaluators.pytest`` in ``atp.config.yaml``)."""

    python: str | None = None
    """The Python interpreter that runs pytest or ruff, unless an assertion names one."""
