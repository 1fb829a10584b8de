"""Evaluators that run code: ``pytest``, ``lint`` and ``custom_command``.

Each runs one command over what the agent produced and checks what it reports::

    - type: pytest
      config:
        path: solution.py                      # the agent's files to take (a glob; default: all)
        files: {test_solution.py: "from solution import add\\n..."}   # the suite's own files
        min_pass_rate: 1.0
    - type: lint
      config: {path: "*.py", select: [E, F], max_findings: 0}
    - type: custom_command
      config: {command: [python, -m, solution, --selftest], expect_exit: 0, regex: "^ok$"}

**Where a command runs.** In a fresh temporary folder, removed afterwards whatever happens
(without recursion and without following symbolic links, however deep the command nested
folders in it). What goes in:

- with a workspace and no ``path``, a copy of the whole workspace (so a command cannot change
  what other evaluators read); with ``path``, none of the workspace but the files ``path``
  selects (the agent's other files, a ``conftest.py`` or a ``ruff/`` package of its, stay out);
- the agent's file artifacts ``path`` selects (all without it), at their relative paths (inline
  ``content``, or the file read where :func:`~atp.evaluators.artifact.resolve` allows); of
  several artifacts with one path, the last is used (the check's details say so);
- last the suite's ``files``, which win over the agent's files of the same name (the details
  say which).

A path that is absolute (outside the workspace), leads out with ``..`` or has more than
:data:`MAX_PATH_PARTS` parts is refused. At most :data:`MAX_COPY_FILES` files (and artifacts)
and :data:`MAX_COPY_BYTES` are copied; beyond that the check fails saying so. ``HOME`` and
``TMPDIR`` are folders of their own beside it, and pytest's JUnit report and ruff's JSON report
are written beside it too, out of the command's working folder (not out of its reach: the
command runs as ATP's user); so is an empty ``pytest.ini``, which stops pytest from looking
further up for its configuration.

**How it runs.** In a new session (its own process group), stdin from ``/dev/null``, stdout and
stderr captured together (the last :data:`MAX_OUTPUT_BYTES` kept), with a minimal environment:
``PATH`` (ATP's, with the folder of the Python interpreter in use in front), ``HOME``,
``TMPDIR``, ``LANG``, ``PYTHONDONTWRITEBYTECODE=1``, ``ATP_AGENT_TOKEN`` (see below) and the
assertion's ``env``; no other variable of ATP's environment is passed on. A small trampoline run
by ATP's interpreter sets the command's resource limits (``RLIMIT_AS`` ``max_memory_mb``,
``RLIMIT_FSIZE`` ``max_file_mb``, ``RLIMIT_CORE`` 0, ``RLIMIT_NOFILE``
:data:`MAX_OPEN_FILES`; no ``RLIMIT_NPROC``, which counts every process of the user) and, on
Linux, asks for SIGKILL when ATP dies (``PR_SET_PDEATHSIG``), then runs the command. The process
is recorded in the run's process ledger (:mod:`atp.core.ledger`) while it runs, so that after a
``kill -9`` of ATP the next ``atp test`` or ``atp clean`` stops what is left of it.

**Isolation.** On Linux, when ``unshare`` works (probed per process until it gives a definite
answer), the command runs inside ``unshare --net --pid --fork --kill-child --mount --mount-proc
--map-current-user`` (``--map-root-user`` with a util-linux too old for ``--map-current-user``;
no user namespace for root where user namespaces are not allowed): it has no network (only a
loopback interface that is down), killing it kills every process it started, however they
detached (PID namespace), and ``/proc`` shows only its own processes, so the environment of
ATP's processes cannot be read there. That last holds only while the command is not root in its
namespaces: when ATP runs as root (or ``--map-root-user`` was needed) the command can unmount
that ``/proc`` and see the system's again. ``network: true`` leaves out ``--net``. Elsewhere the
command runs in its process group only: the check's details say ``network: "not isolated
(<why>)"``, a process that leaves the group (``setsid``) survives it, and ``/proc`` is the
system's, where the command can read the environment of ATP's own process (and of any other
process of ATP's user): a secret in ATP's environment is readable then. In every mode the
command runs as ATP's user and reads every file ATP's user may read (configuration, ``.env``
files, keys): this is isolation from the network and for cleanup, not a sandbox.

**Time.** A command may take ``timeout_seconds`` (at most an hour). ATP gives every evaluator a
time limit of its own over one run (``evaluators.<type>.timeout_seconds``, 60 s by default), and
a check cut short by that limit says nothing about the command; so the command may take at most
:data:`COMMAND_SHARE` of the evaluator's limit (50 s of the default 60 s), which is also its
default. At its limit the command's whole process group (or namespace) is killed with SIGKILL
and the check fails: "killed after N s", with the end of its output.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import posixpath
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from functools import partial
from pathlib import Path
from select import POLLIN, poll
from typing import Annotated, Any, NamedTuple, cast

import anyio
import msgspec

from atp.core import ledger
from atp.core.errors import ConfigError
from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.protocol import Artifact, FileArtifact, ReferenceArtifact
from atp.core.results import Check
from atp.core.text import printable, shorten
from atp.evaluators.artifact import (
    RegexSettings,
    Target,
    _norm,
    compile_regex,
    describe,
    masked,
    off_loop,
    produced,
    produced_names,
    regex_timeout,
    resolve,
    select,
)

logger = logging.getLogger(__name__)

MAX_COPY_BYTES = 256 * 1024 * 1024
"""At most this many bytes are copied into a command's folder (workspace, artifacts and the
suite's files together)."""
MAX_COPY_FILES = 10_000
"""At most this many files (and links) are copied into a command's folder; an agent that
produced more file artifacts than this is refused before any of them is looked at."""
MAX_PATH_PARTS = 64
"""A path in the command's folder (an artifact's, a suite file's) has at most this many parts."""
MAX_OUTPUT_BYTES = 1024 * 1024
"""A command's output (stdout and stderr together) is kept up to its last this many bytes."""
OUTPUT_DETAIL_CHARS = 4096
"""A check's details show the last this many characters of the command's output."""
OUTPUT_MESSAGE_CHARS = 300
"""A failed check's message quotes the last this many characters of the command's output."""
MAX_JUNIT_BYTES = 16 * 1024 * 1024
"""A JUnit report larger than this is not read."""
MAX_RUFF_BYTES = 64 * 1024 * 1024
"""A ruff JSON report larger than this is not read."""
SHOWN_FAILURES = 50
"""How many failed or errored tests a ``pytest`` check's details list."""
NAMED_FAILURES = 3
"""How many of them its message names."""
SHOWN_FINDINGS = 100
"""How many findings a ``lint`` check's details list (all are counted)."""
NAMED_FINDINGS = 3
"""How many of them its message quotes."""
SHOWN_PATHS = 20
"""How many paths (of duplicate artifacts, of tests from outside the suite's files) the
details list."""
FAILURE_TEXT_CHARS = 600
"""A failed test's report text (its traceback) is kept up to its last this many characters."""
COMMAND_SHARE = 5 / 6
"""The share of the evaluator's own time limit a command may take: the rest is for copying
files in, reading reports and cleaning up."""
DRAIN_SECONDS = 2.0
"""After a command ends, how long ATP waits for the end of its output (a process it started
and that escaped its group may hold the pipe open)."""
PROBE_SECONDS = 2.0
"""How long one ``unshare`` probe may take. A probe that takes longer is not remembered: the
next command probes again."""
CLEANUP_WAIT_SECONDS = 60.0
"""How long cleanup waits for a copy that was cancelled to stop, before removing the folder."""
KILL_WAIT_SECONDS = 10.0
"""How long ATP waits for a command it killed with SIGKILL to end, before leaving it."""
MAX_MEMORY_MB = 4096
"""The default ``max_memory_mb``: the command's address space (``RLIMIT_AS``), in MiB."""
MAX_FILE_MB = 1024
"""The default ``max_file_mb``: the largest file the command may write (``RLIMIT_FSIZE``), in
MiB."""
MAX_OPEN_FILES = 4096
"""How many files the command may have open at once (``RLIMIT_NOFILE``)."""
INSTALL_HINT = "pip install 'atp-evaluators[code]'"
PYTHON_SUFFIXES = (".py", ".pyi")

UNSHARE_FLAGS = ("--net", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--map-current-user")
"""The ``unshare`` options that isolate a command: no network, its own PID namespace (whose
processes all die with its first one, which dies with ``unshare``), its own mount namespace
with a ``/proc`` of that PID namespace, in a user namespace of its own (which an unprivileged
user may create) as ATP's user, without capabilities. The last option is swapped for
``--map-root-user`` where ``unshare`` does not know it (util-linux before 2.38), and left out
for root where user namespaces are not allowed."""

Seconds = Annotated[float, msgspec.Meta(gt=0, le=3600)]


# --- configs ----------------------------------------------------------------------------------


def relative_path(path: str, what: str) -> str:
    """``path`` as a relative POSIX path inside a folder; ValueError saying why when it is
    empty, absolute, leads out of the folder with ``..`` or has more than
    :data:`MAX_PATH_PARTS` parts."""
    if not path or "\0" in path:
        raise ValueError(f"{what} {path!r} names no file")
    normal = _norm(path)
    if posixpath.isabs(normal):
        raise ValueError(f"{what} {shorten(path)!r} is an absolute path; it must be relative to the folder")
    if normal == ".." or normal.startswith("../"):
        raise ValueError(f"{what} {shorten(path)!r} leads out of the folder (..)")
    if normal == "." or path.endswith("/"):
        raise ValueError(f"{what} {shorten(path)!r} names no file")
    if normal.count("/") >= MAX_PATH_PARTS:
        raise ValueError(
            f"{what} {shorten(path)!r} has {normal.count('/') + 1} parts; ATP takes at most {MAX_PATH_PARTS}"
        )
    return normal


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


# --- the folder a command runs in --------------------------------------------------------------


class FolderError(Exception):
    """The command's folder cannot be made as asked: the check fails with this message."""


class _Stopped(Exception):
    """The evaluation was cancelled while files were being copied (raised in the abandoned
    copying thread, to end it)."""


class Placement(NamedTuple):
    """One of the agent's files, and where it goes in the folder."""

    dest: str
    """The relative path in the folder."""
    content: str | None = None
    """Inline content to write there."""
    source: Path | None = None
    """A file to copy there. Neither: it is in the workspace copy already (checked)."""
    follow: bool = True
    """Whether a last symbolic link of ``source`` is followed (not for a file of the workspace,
    whose links :func:`~atp.evaluators.artifact.resolve` has resolved already)."""


class Folder(NamedTuple):
    """A command's folder, made."""

    root: Path
    """The temporary folder that holds all of it; removed afterwards."""
    work: Path
    """Where the command runs."""
    home: Path
    tmp: Path
    placed: list[str]
    """The agent's files placed (relative paths), in artifact order."""
    replaced: list[str]
    """The suite's files that replaced a file of the agent's (or of its workspace)."""
    skipped: int
    """Special files of the workspace (FIFOs, sockets, devices) not copied."""
    duplicates: tuple[str, ...] = ()
    """Paths that several of the agent's artifacts name (the last of them was used), each with
    how many."""


class _Copier:
    """Copies into a folder within :data:`MAX_COPY_FILES` and :data:`MAX_COPY_BYTES`; stops
    (:class:`_Stopped`) at its next file or chunk once :attr:`stop` is set."""

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0
        self.skipped = 0
        self.stop = threading.Event()
        self.done = threading.Event()

    def count(self, files: int = 0, size: int = 0) -> None:
        """Count what is about to be copied; FolderError past the bounds."""
        if self.stop.is_set():
            raise _Stopped
        self.files += files
        self.bytes += size
        if self.files > MAX_COPY_FILES or self.bytes > MAX_COPY_BYTES:
            raise FolderError(
                f"the command's folder would hold more than "
                f"{f'{MAX_COPY_FILES:,} files' if self.files > MAX_COPY_FILES else '256 MiB'} "
                f"(the workspace, the agent's files and the suite's together); ATP copies at most "
                f"{MAX_COPY_FILES:,} files and 256 MiB"
            )

    def room_for(self, size: int) -> None:
        """FolderError when ``size`` more bytes would be past the bounds (before copying them)."""
        if self.bytes + size > MAX_COPY_BYTES:
            self.count(size=size)

    def copy_file(self, source: Path, dest: Path, *, follow: bool, shown: str) -> None:
        """Copy the regular file ``source`` to the new file ``dest`` (keeping its permission
        bits); it is opened without blocking (never waiting on a FIFO) and, unless ``follow``,
        without following a last symbolic link."""
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
        if not follow:
            flags |= getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(source, flags)
        except OSError as exc:
            raise FolderError(f"{shown} cannot be read: {exc.strerror or exc}") from None
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                raise FolderError(f"{shown} is not a regular file; ATP copies only regular files")
            self.count(files=1)
            self.room_for(status.st_size)
            out = _create(dest, (status.st_mode & 0o777) | 0o600)
            try:
                while chunk := os.read(fd, 1024 * 1024):  # (counted as read: the file may grow)
                    self.count(size=len(chunk))
                    _write_all(out, chunk)
            finally:
                os.close(out)
        except OSError as exc:
            raise FolderError(f"{shown} cannot be copied: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def write(self, dest: Path, text: str, mode: int = 0o644) -> None:
        data = text.encode("utf-8")
        self.count(files=1, size=len(data))
        out = _create(dest, mode)
        try:
            _write_all(out, data)
        finally:
            os.close(out)

    def copy_tree(self, source: Path, dest: Path, names: tuple[Path, ...]) -> None:
        """Copy the folder ``source`` into the existing ``dest``: folders, regular files, and
        symbolic links as links (one pointing into the workspace by an absolute path, one of
        ``names``, is pointed at the copy instead); other files are skipped and counted."""
        pending = [(source, dest)]
        while pending:
            here, there = pending.pop()
            try:
                entries = list(os.scandir(here))
            except OSError as exc:
                raise FolderError(
                    f"the workspace folder {here} cannot be read: {exc.strerror or exc}"
                ) from None
            for entry in entries:
                target = there / entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    self.count(files=1)
                    os.mkdir(target, 0o700)
                    pending.append((Path(entry.path), target))
                elif stat.S_ISLNK(mode):
                    self.count(files=1)
                    os.symlink(_relinked(os.readlink(entry.path), names, dest), target)
                elif stat.S_ISREG(mode):
                    self.copy_file(Path(entry.path), target, follow=False, shown=entry.path)
                else:
                    self.skipped += 1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _create(path: Path, mode: int) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)


def _relinked(link: str, workspace: tuple[Path, ...], copy: Path) -> str:
    if not os.path.isabs(link):
        return link
    normal = Path(os.path.normpath(link))
    for base in workspace:
        if normal.is_relative_to(base):
            return str(copy / normal.relative_to(base))
    return link


def _free_path(work: Path, rel: str) -> Path:
    """Where ``rel`` goes in ``work``, with nothing at that path and every folder above it a
    real folder: a symbolic link the workspace copy has on the way is removed (a write must never
    follow it out of the folder), as is a file or link at the path itself."""
    parts = rel.split("/")
    here = work
    for part in parts[:-1]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            os.mkdir(here, 0o700)
            continue
        if stat.S_ISLNK(mode):
            os.unlink(here)
            os.mkdir(here, 0o700)
        elif not stat.S_ISDIR(mode):
            raise FolderError(f"cannot place {rel}: {here.relative_to(work)} is a file, not a folder")
    path = here / parts[-1]
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    if stat.S_ISDIR(mode):
        raise FolderError(f"cannot place {rel}: a folder of that name is there")
    os.unlink(path)
    return path


def _last_of_each(placements: list[Placement]) -> tuple[list[Placement], tuple[str, ...]]:
    """One placement per path, the last given for it (in the order the paths first came), and
    the paths given more than once, each with how many times (the first :data:`SHOWN_PATHS`)."""
    last: dict[str, Placement] = {}
    for placement in placements:
        last[placement.dest] = placement
    counts = Counter(p.dest for p in placements)
    duplicates = tuple(
        f"{shorten(dest)} ({count} artifacts; the last was used)"
        for dest, count in counts.items()
        if count > 1
    )
    return list(last.values()), duplicates[:SHOWN_PATHS]


def _materialise(
    root: Path,
    ctx: EvalContext,
    artifacts: list[Artifact],
    suite_files: Mapping[str, str],
    whole_workspace: bool,
    copier: _Copier,
) -> Folder:
    """Make the command's folder under ``root`` (blocking: runs on a worker thread): where each
    artifact goes is worked out here too (:func:`plan_placements`)."""
    try:
        planned, duplicates = _last_of_each(plan_placements(ctx, artifacts, whole_workspace, copier.stop))
        work, home, tmp = root / "work", root / "home", root / "tmp"
        for folder in (work, home, tmp):
            os.mkdir(folder, 0o700)
        # pytest looks for its configuration up from the folder: an empty one here stops it
        (root / "pytest.ini").write_text("")
        workspace = ctx.workspace
        if workspace is not None and whole_workspace:
            names = (Path(os.path.normpath(os.path.abspath(workspace))), Path(os.path.realpath(workspace)))
            if not os.path.isdir(names[1]):
                raise FolderError(f"the workspace {workspace} is not a folder ATP can read")
            copier.copy_tree(names[1], work, names)
        for placement in planned:
            if placement.content is not None:
                copier.write(_free_path(work, placement.dest), placement.content)
            elif placement.source is not None:
                dest = _free_path(work, placement.dest)
                copier.copy_file(
                    placement.source, dest, follow=placement.follow, shown=shorten(placement.dest)
                )
            elif not os.path.lexists(work / placement.dest):
                raise FolderError(f"{shorten(placement.dest)} is not in the workspace")
        replaced = []
        for rel, text in suite_files.items():
            if os.path.lexists(work / rel):
                replaced.append(rel)
            mode = 0o755 if text.startswith("#!") else 0o644
            copier.write(_free_path(work, rel), text, mode)
        placed = [p.dest for p in planned]
        return Folder(root, work, home, tmp, placed, replaced, copier.skipped, duplicates)
    except OSError as exc:
        raise FolderError(f"ATP could not make the command's folder: {exc}") from None
    finally:
        copier.done.set()


_DIRECTORY = (
    os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)
_HELD_FOLDERS = 64
"""While removing a folder, at most this many nested folders are held open: a folder deeper
than that is first moved up to the top (so no depth needs recursion, a long path or many open
files)."""


class _Level:
    """A folder being emptied: its descriptor, its name in the folder above, and the folders in
    it still to empty (``None`` until it has been read)."""

    def __init__(self, fd: int, name: str | None) -> None:
        self.fd = fd
        self.name = name
        self.folders: list[str] | None = None
        self.reads = 0


def _open_folder(name: str, parent: int) -> int | None:
    """The folder ``name`` in ``parent``, opened without following a symbolic link (made
    readable first when it is not); ``None`` when it is gone or is no folder now (then it is
    unlinked)."""
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except FileNotFoundError:
        return None
    except PermissionError:
        with contextlib.suppress(OSError, NotImplementedError):
            os.chmod(name, 0o700, dir_fd=parent, follow_symlinks=False)
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=parent)
    return None


def _unlink_files(fd: int) -> list[str]:
    """Unlink all but the folders in the folder ``fd`` (made writable first); returns the
    folders' names."""
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o700)
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.name, dir_fd=fd)
    return folders


def _remove_tree(root: Path) -> None:
    """Remove the folder ``root`` and everything in it (blocking), without recursion and
    without following a symbolic link: each folder is opened relative to the one above it and
    emptied, then removed; a folder the command made read-only is made writable first."""
    top = os.open(root, _DIRECTORY)
    levels = [_Level(top, None)]
    try:
        while levels:
            level = levels[-1]
            if level.folders is None:
                level.folders = _unlink_files(level.fd)
                level.reads += 1
            if level.folders:
                name = level.folders.pop()
                if len(levels) >= _HELD_FOLDERS:  # too deep: move it up to the top, for later
                    moved = f".atp-deep-{os.urandom(8).hex()}"  # (a name the command cannot guess)
                    with contextlib.suppress(FileNotFoundError):
                        os.rename(name, moved, src_dir_fd=level.fd, dst_dir_fd=top)
                        levels[0].folders.append(moved)  # type: ignore[union-attr]
                    continue
                fd = _open_folder(name, level.fd)
                if fd is not None:
                    levels.append(_Level(fd, name))
                continue
            levels.pop()
            if level.name is None:  # the top, emptied
                break
            os.close(level.fd)
            try:
                os.rmdir(level.name, dir_fd=levels[-1].fd)
            except OSError as exc:
                if exc.errno != errno.ENOTEMPTY or level.reads >= 3:
                    raise
                fd = _open_folder(level.name, levels[-1].fd)  # something was added meanwhile
                if fd is not None:
                    again = _Level(fd, level.name)
                    again.reads = level.reads
                    levels.append(again)
    finally:
        for level in levels[1:]:
            os.close(level.fd)
        os.close(top)
    os.rmdir(root)


def _remove(root: Path, copier: _Copier) -> None:
    """Remove ``root`` (blocking), once a copy still running into it has stopped."""
    copier.stop.set()
    copier.done.wait(CLEANUP_WAIT_SECONDS)
    try:
        _remove_tree(root)
    except OSError as exc:
        logger.warning("ATP could not remove the temporary folder %s: %s", root, exc)


def plan_placements(
    ctx: EvalContext,
    artifacts: list[Artifact],
    whole_workspace: bool = True,
    stop: threading.Event | None = None,
) -> list[Placement]:
    """Where each of the agent's file artifacts goes in the command's folder (blocking: it
    resolves paths; runs on a worker thread). FolderError for more than :data:`MAX_COPY_FILES`
    artifacts (refused before any is looked at) and for one that cannot be placed (an
    absolute path outside the workspace, ``..``, too many parts, a file ATP may not read).

    With a workspace copied whole, an artifact without content is there already; otherwise it
    is copied from where :func:`~atp.evaluators.artifact.resolve` says (within the workspace,
    its symbolic links resolved, when there is one). ``stop`` ends the work early
    (:class:`_Stopped`)."""
    files = [a for a in artifacts if isinstance(a, (FileArtifact, ReferenceArtifact))]
    _count_artifacts(len(files))
    found = []
    workspace = ctx.workspace
    for artifact in files:
        if stop is not None and stop.is_set():
            raise _Stopped
        path = artifact.path
        inline = isinstance(artifact, FileArtifact) and artifact.content is not None
        try:
            dest = relative_path(_inside_workspace(path, workspace), "artifact path")
        except ValueError as exc:
            where = "the workspace" if workspace is not None else "the command's folder"
            raise FolderError(
                f"{exc}; ATP places the agent's files in {where} by their relative paths"
            ) from None
        if inline:
            found.append(Placement(dest, content=artifact.content))  # type: ignore[union-attr]
            continue
        source, problem = resolve(path, ctx)
        if source is None:
            raise FolderError(problem or f"{describe(artifact)} cannot be read")
        if workspace is None:
            found.append(Placement(dest, source=source))
        elif whole_workspace:
            found.append(Placement(dest))  # in the workspace copy
        else:
            found.append(Placement(dest, source=source, follow=False))
    return found


def _count_artifacts(count: int) -> None:
    """FolderError for more file artifacts than :data:`MAX_COPY_FILES`."""
    if count > MAX_COPY_FILES:
        raise FolderError(
            f"the agent produced {count:,} file artifacts; ATP copies at most {MAX_COPY_FILES:,} "
            "files into the command's folder"
        )


def _inside_workspace(path: str, workspace: Path | None) -> str:
    """An absolute ``path`` inside ``workspace`` as a path relative to it; any other as it is."""
    if workspace is None or not os.path.isabs(path):
        return path
    normal = Path(os.path.normpath(path))
    for base in (Path(os.path.normpath(os.path.abspath(workspace))), Path(os.path.realpath(workspace))):
        if normal.is_relative_to(base) and normal != base:
            return normal.relative_to(base).as_posix()
    return path


@contextlib.asynccontextmanager
async def work_folder(
    ctx: EvalContext,
    artifacts: list[Artifact],
    suite_files: Mapping[str, str],
    *,
    whole_workspace: bool = True,
) -> AsyncIterator[Folder]:
    """The folder a command runs in (see the module's docstring), made on a worker thread and
    removed when the block ends, however it ends (cancellation included). With a workspace,
    ``whole_workspace`` copies all of it; else only the artifacts are. FolderError when it
    cannot be made as asked."""
    _count_artifacts(sum(isinstance(a, (FileArtifact, ReferenceArtifact)) for a in artifacts))  # (at once)
    root = Path(tempfile.mkdtemp(prefix="atp-code-"))  # (one mkdir: no await, so nothing leaks)
    copier = _Copier()
    try:
        # abandoned when cancelled: the cleanup below stops the copy before removing the folder
        folder = await anyio.to_thread.run_sync(
            _materialise, root, ctx, artifacts, suite_files, whole_workspace, copier, abandon_on_cancel=True
        )
        yield folder
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_remove, root, copier)


# --- isolation --------------------------------------------------------------------------------


class Isolation(NamedTuple):
    """How commands are isolated in this process."""

    prefix: tuple[str, ...]
    """The ``unshare`` command line a command is run under; empty when there is none."""
    why: str | None = None
    """Why there is none."""


_isolation: Isolation | None = None


async def isolation() -> Isolation:
    """How commands are isolated: probed until a probe gives a definite answer (one that timed
    out is not remembered), then remembered for the process."""
    global _isolation
    if _isolation is not None:
        return _isolation
    found, definite = await _probe()
    if definite:
        _isolation = found
    return found


async def _probe() -> tuple[Isolation, bool]:
    """Whether ``unshare`` with :data:`UNSHARE_FLAGS` runs a command here (with
    ``--map-root-user`` instead of the last where ``unshare`` does not know it; without a user
    namespace for root where user namespaces are not allowed); and whether that answer is
    definite (no probe timed out)."""
    if not sys.platform.startswith("linux"):
        return Isolation((), f"network and PID namespaces are Linux's; this is {sys.platform}"), True
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation((), "the unshare command is not installed"), True
    candidates = [(unshare, *UNSHARE_FLAGS), (unshare, *UNSHARE_FLAGS[:-1], "--map-root-user")]
    if os.geteuid() == 0:
        candidates.append((unshare, *UNSHARE_FLAGS[:-1]))
    why = "unshare failed"
    definite = True
    for prefix in candidates:
        try:
            with anyio.fail_after(PROBE_SECONDS):
                done = await anyio.run_process(
                    [*prefix, sys.executable, "-I", "-S", "-c", ""],
                    check=False,
                    stdin=subprocess.DEVNULL,
                    env={"PATH": os.environ.get("PATH", os.defpath)},
                )
        except TimeoutError:
            why = f"unshare did not finish within {PROBE_SECONDS:g} s"
            definite = False
            continue
        except OSError as exc:
            why = f"unshare cannot be started: {exc.strerror or exc}"
            continue
        if done.returncode == 0:
            return Isolation(prefix), True
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = f"unshare failed: {shorten(said[-1] if said else f'exit code {done.returncode}', 200)}"
    return Isolation((), why), definite


# --- running a command ------------------------------------------------------------------------


class Outcome(NamedTuple):
    """How a command ended and what it wrote."""

    exit_code: int | None
    """``None`` when it was killed at its time limit (negative: ended by a signal)."""
    output: str
    """The end of stdout and stderr together (:data:`MAX_OUTPUT_BYTES` at most)."""
    cut: int
    """Bytes of output before that, not kept."""
    seconds: float
    timeout: float
    network: str
    processes: str
    proc: str = ""
    """What the command's ``/proc`` shows."""
    unfinished_output: bool = False
    """Whether a process that escaped kept the output open after the command ended."""

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None


class _Tail:
    """The last ``keep`` bytes of a stream, and how many came before them."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.buffer = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buffer += chunk
        if len(self.buffer) > 2 * self.keep:
            del self.buffer[: -self.keep]

    def kept(self) -> bytes:
        return bytes(self.buffer[-self.keep :])


_TRAMPOLINE = """\
import os, resource, signal, sys
parent, limits = int(sys.argv[1]), sys.argv[2:sys.argv.index("--")]
argv = sys.argv[sys.argv.index("--") + 1:]
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != parent:  # ATP died before that
        os._exit(137)
for limit in limits:
    name, value = limit.split("=")
    which = getattr(resource, "RLIMIT_" + name)
    hard = resource.getrlimit(which)[1]
    value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
    resource.setrlimit(which, (value, value))
for number in (signal.SIGPIPE, signal.SIGXFSZ):  # (Python ignores them; the command must not)
    signal.signal(number, signal.SIG_DFL)
try:
    os.execv(argv[0], argv)
except OSError as exc:
    sys.stderr.write(f"ATP cannot run {argv[0]}: {exc.strerror or exc}\\n")
    os._exit(127)
"""
"""What runs a command (by ATP's interpreter, ``-I -S``): it sets the parent-death signal (so
the command is killed when ATP is, however ATP ends; strictly, when the thread that started it
ends, which is the event loop's) and the resource limits, then replaces itself with the command
(``execv``: the same process, the same pid). It leaves SIGPIPE and SIGXFSZ as the command would
have them (Python ignores both, and an ignored signal stays ignored across ``exec``)."""


def trampoline(config: CommandConfig) -> list[str]:
    """The command line that runs a command under :data:`_TRAMPOLINE` with ``config``'s limits
    (the command follows it)."""
    limits = ["CORE=0", f"NOFILE={MAX_OPEN_FILES}"]
    if config.max_memory_mb:
        limits.append(f"AS={config.max_memory_mb * 1024 * 1024}")
    if config.max_file_mb:
        limits.append(f"FSIZE={config.max_file_mb * 1024 * 1024}")
    return [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(os.getpid()), *limits, "--"]


class _Command:
    """A started command: its process (which ATP alone reaps, so that until it does, the
    command's pid, which is also its process group's id, names no other process), a pidfd for
    it where there are pidfds, and its ledger record."""

    def __init__(self, popen: subprocess.Popen[bytes], token: str) -> None:
        self.popen = popen
        self.pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(popen.pid)  # (it cannot have been reaped yet: only ATP reaps it)
        self.ledger = ledger.current()
        if self.ledger is not None:
            self.ledger.started(popen.pid, token)

    def exited(self) -> bool:
        """Whether it has ended (not reaping it, where the system can tell without)."""
        if self.popen.returncode is not None:
            return True
        if self.pidfd is not None:
            return _readable(self.pidfd)
        waitid = getattr(os, "waitid", None)
        if waitid is None:  # (then it is reaped as it is found ended: no group kill after that)
            return self.popen.poll() is not None
        try:
            return waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    async def ended(self) -> None:
        """Until it has ended (not reaping it)."""
        if self.pidfd is not None and self.popen.returncode is None:
            await anyio.wait_readable(self.pidfd)
            return
        while not self.exited():
            await anyio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL its process group and it, while it is not reaped (alive or a zombie: its pid
        names its group still). Once reaped, nothing is signalled."""
        if self.popen.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.popen.pid, signal.SIGKILL)

    def reap(self) -> int | None:
        """Its exit code, reaping it once it has ended; ``None`` while it runs."""
        if not self.exited():
            return None
        code = self.popen.wait()
        if self.ledger is not None:
            self.ledger.ended(self.popen.pid)
        return code

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        if self.popen.stdout is not None:
            self.popen.stdout.close()


def _readable(fd: int) -> bool:
    poller = poll()
    poller.register(fd, POLLIN)
    return bool(poller.poll(0))


async def run_command(
    argv: list[str],
    folder: Folder,
    env: Mapping[str, str],
    timeout: float,
    network: bool,
    config: CommandConfig,
) -> Outcome:
    """Run ``argv`` in ``folder.work`` (see the module's docstring), under :func:`trampoline`
    and the isolation there is; killed after ``timeout`` seconds, its process group killed
    once it has ended (its leftovers, before it is reaped), and killed whatever happens when
    this is cancelled. OSError when it cannot be started."""
    isolated = await isolation()
    if isolated.prefix:
        prefix = tuple(a for a in isolated.prefix if a != "--net") if network else isolated.prefix
        net = "allowed (network: true)" if network else "isolated (a network namespace of its own)"
        processes = "PID namespace (every process the command started ends with it)"
        proc = (
            "the namespace's own, but the command is root there and could unmount it"
            if os.geteuid() == 0 or "--map-root-user" in prefix
            else "the namespace's own (ATP's processes are not in it)"
        )
    else:
        prefix = ()
        net = "allowed (network: true)" if network else f"not isolated ({isolated.why})"
        processes = f"process group (no PID namespace: {isolated.why})"
        proc = "the system's (the command can read the environment of ATP's processes)"
    token = ledger.new_token()
    tail = _Tail(MAX_OUTPUT_BYTES)
    read_all = anyio.Event()
    started = anyio.current_time()
    popen = subprocess.Popen(
        [*trampoline(config), *prefix, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=folder.work,
        env={**env, ledger.TOKEN_VARIABLE: token},
        start_new_session=True,
    )
    command = _Command(popen, token)
    assert popen.stdout is not None
    out = popen.stdout.fileno()
    os.set_blocking(out, False)

    async def read() -> None:
        while True:
            try:
                chunk = os.read(out, 65536)
            except BlockingIOError:
                await anyio.wait_readable(out)
                continue
            except OSError:
                break
            if not chunk:
                break
            tail.add(chunk)
        read_all.set()

    code: int | None = None
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            with anyio.move_on_after(timeout) as limit:
                await command.ended()
            seconds = anyio.current_time() - started
            command.kill()  # its leftovers (or itself, at its time limit), before it is reaped
            with anyio.move_on_after(KILL_WAIT_SECONDS):
                await command.ended()
            code = command.reap()
            with anyio.move_on_after(DRAIN_SECONDS):
                await read_all.wait()
            tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if popen.returncode is None:
                command.kill()
                with anyio.move_on_after(KILL_WAIT_SECONDS):
                    await command.ended()
                if command.reap() is None:
                    logger.warning("a command ATP killed (pid %s) has not ended yet", popen.pid)
            command.close()
    return Outcome(
        exit_code=None if limit.cancelled_caught else code,
        output=tail.kept().decode("utf-8", "replace"),
        cut=tail.total - len(tail.kept()),
        seconds=seconds,
        timeout=timeout,
        network=net,
        processes=processes,
        proc=proc,
        unfinished_output=not read_all.is_set(),
    )


def command_env(folder: Folder, python: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The minimal environment of a command: no variable of ATP's own but ``PATH`` (with
    ``python``'s folder in front) and ``LANG`` (:func:`run_command` adds ``ATP_AGENT_TOKEN``)."""
    path = os.environ.get("PATH") or os.defpath
    if os.path.isabs(python):  # (never an empty entry: that would be the command's folder)
        path = os.pathsep.join([os.path.dirname(python), path])
    return {
        "PATH": path,
        "HOME": str(folder.home),
        "TMPDIR": str(folder.tmp),
        "LANG": os.environ.get("LANG") or "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        **extra,
    }


def find_program(name: str, path: str, base: Path) -> tuple[str | None, str | None]:
    """The program ``name`` names, as an absolute path, or why there is none: a name without a
    slash is looked up on ``path``; a relative path is relative to ``base``."""
    if "/" not in name and os.sep not in name:
        found = shutil.which(name, path=path)
        if found is None:
            return None, f"{name!r} was not found on the PATH ({shorten(path, 300)})"
        return os.path.abspath(found), None
    candidate = os.path.join(base, name)
    if not os.path.isfile(candidate):
        return None, f"{name!r} is not a file"
    if not os.access(candidate, os.X_OK):
        return None, f"{name!r} is not executable"
    return os.path.abspath(candidate), None


def _tail_text(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text`` (``…`` in front when cut), secrets masked
    before the cut."""
    if len(text) <= limit:
        return text
    return "…" + masked(text)[-limit:]


# --- the evaluators ---------------------------------------------------------------------------


Judge = Callable[[Folder, Outcome, dict[str, Any]], Awaitable[Check]]
"""Turns how a command ran (its folder, its outcome, the details of every check) into the check."""


class _CodeEvaluator(Evaluator):
    """What ``pytest``, ``lint`` and ``custom_command`` share: the folder, the command, its
    time limit and the details of how it ran."""

    category = "quality"

    def evaluator_limit(self) -> float:
        """The evaluator's own time limit over one run (``evaluators.<name>.timeout_seconds``)."""
        value = self.settings.get("timeout_seconds", self.default_timeout)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            return self.default_timeout
        return float(value)

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
        checks here."""
        chosen = self.python(config)
        python: str | None = chosen
        problem = None
        if chosen != sys.executable:  # (ATP's own interpreter is running: no need to look for it)
            python, problem = find_program(chosen, os.environ.get("PATH") or os.defpath, Path.cwd())
        if python is None:
            return [check(label, False, f"the Python interpreter cannot be used: {problem}")]
        timeout, note = self.command_timeout(config)
        try:
            async with work_folder(
                ctx, artifacts, config.files, whole_workspace=config.path is None
            ) as folder:
                env = command_env(folder, python, config.env)
                command = argv(folder, python)
                program, problem = find_program(command[0], env["PATH"], folder.work)
                if program is None:
                    return [check(label, False, f"the command cannot be run: {problem}", command=command)]
                try:
                    outcome = await run_command(
                        [program, *command[1:]], folder, env, timeout, config.network, config
                    )
                except OSError as exc:
                    message = f"the command cannot be started: {exc.strerror or exc}"
                    return [check(label, False, message, command=command)]
                details = await self.details(folder, outcome, note)
                if outcome.timed_out:
                    message = (
                        f"{shorten(shlex.join(command), 200)} was killed after {timeout:g} s "
                        f"(timeout_seconds); its output ends: {_output_end(details)}"
                    )
                    return [check(label, False, message, **details)]
                return [await judge(folder, outcome, details)]
        except FolderError as exc:
            return [check(label, False, str(exc))]

    async def details(self, folder: Folder, outcome: Outcome, note: str | None) -> dict[str, Any]:
        """What every check of a command shows: how it ended, how long it took, how it was
        isolated, the end of its output, the suite's files that replaced the agent's."""
        details: dict[str, Any] = {
            "exit_code": outcome.exit_code,
            "duration_seconds": round(outcome.seconds, 3),
            "timeout_seconds": outcome.timeout,
            "network": outcome.network,
            "processes": outcome.processes,
            "proc": outcome.proc,
            "output": await off_loop(len(outcome.output), _tail_text, outcome.output, OUTPUT_DETAIL_CHARS),
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
    return check(
        label,
        False,
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


def _read_report(path: Path, limit: int) -> tuple[bytes | None, str | None]:
    """A report file the tool wrote (blocking): its bytes, or ``None`` and why not (``None``
    when there is no file); a regular file only, at most ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "is not a regular file"
        chunks = []
        left = limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1024 * 1024))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        return None, f"is larger than {limit // (1024 * 1024)} MiB; ATP does not read it"
    return data, None


def _output_end(details: Mapping[str, Any]) -> str:
    """The end of the command's output for a check message: cut from the details' (whose
    secrets were masked before it was cut), on one line."""
    return printable(_tail_text(details["output"].strip(), OUTPUT_MESSAGE_CHARS)) or "(no output)"


# --- pytest -----------------------------------------------------------------------------------


class ReportError(ValueError):
    """A tool's report cannot be read: the check fails with this message."""


class FailedTest(NamedTuple):
    test: str
    """``classname::name`` as the report has them."""
    message: str
    text: str
    """The end of the report's text for it (its traceback)."""


class JUnitReport(NamedTuple):
    """What a JUnit XML report says."""

    passed: int
    failed: int
    errors: int
    skipped: int
    failures: list[FailedTest]
    """The failed and errored tests, in report order (the first :data:`SHOWN_FAILURES`)."""
    collection_errors: list[FailedTest]
    """Files pytest could not collect (it reports them as errored test cases; the first
    :data:`SHOWN_FAILURES`)."""
    foreign: int = 0
    """Test cases that are not from the test files :func:`parse_junit` was given."""
    foreign_tests: list[str] = []
    """The first :data:`SHOWN_PATHS` of them (``classname::name``)."""

    @property
    def ran(self) -> int:
        return self.passed + self.failed + self.errors

    @property
    def total(self) -> int:
        """Every test case, skipped ones included."""
        return self.ran + self.skipped


class _RefuseDoctype(Exception):
    pass


_OUTCOME_RANK = {"skipped": 0, "failure": 1, "error": 2}
"""A test case's outcome elements; of several, the one ranked highest counts."""
_COUNTED_AS = {"passed": "passed", "failure": "failed", "error": "errors", "skipped": "skipped"}


class _JUnitCounter:
    """An ``xml.etree`` parser target that counts the test cases by outcome as the XML streams
    by (no tree is built), and refuses a DOCTYPE: the only place to declare the entities of an
    entity expansion ("billion laughs") or an external entity."""

    def __init__(self, modules: Collection[str] = (), files: Collection[str] = ()) -> None:
        self.counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
        self.failures: list[FailedTest] = []
        self.collection_errors: list[FailedTest] = []
        self.modules = tuple(modules)
        self.files = frozenset(files)
        self.foreign = 0
        self.foreign_tests: list[str] = []
        self._case: str | None = None
        self._ours = True
        self._outcome: tuple[str, str] | None = None  # (element, message) of the case
        self._text: list[str] = []
        self._text_size = 0
        self._in_outcome = False

    def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
        raise _RefuseDoctype

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if tag == "testcase":
            classname, name = attrs.get("classname", ""), attrs.get("name", "")
            self._case = f"{classname}::{name}" if classname else name
            self._outcome, self._text, self._text_size = None, [], 0
            self._ours = self._from_suite(classname, attrs.get("file"))
        elif self._case is not None and tag in _OUTCOME_RANK:
            if self._outcome is None or _OUTCOME_RANK[tag] > _OUTCOME_RANK[self._outcome[0]]:
                self._outcome = (tag, attrs.get("message", ""))
            self._in_outcome = tag != "skipped"

    def data(self, text: str) -> None:
        if self._in_outcome:
            self._text.append(text)
            self._text_size += len(text)
            if self._text_size > 4 * FAILURE_TEXT_CHARS:  # only the end is kept
                joined = "".join(self._text)[-FAILURE_TEXT_CHARS - 1 :]
                self._text, self._text_size = [joined], len(joined)

    def end(self, tag: str) -> None:
        if tag in _OUTCOME_RANK:
            self._in_outcome = False
        elif tag == "testcase" and self._case is not None:
            kind, message = self._outcome or ("passed", "")
            self.counts[_COUNTED_AS[kind]] += 1
            if kind != "passed" and kind != "skipped":
                text = "".join(self._text).strip()
                if len(text) > FAILURE_TEXT_CHARS:
                    text = "…" + text[-FAILURE_TEXT_CHARS:]
                failed = FailedTest(shorten(self._case, 300), shorten(message, 300), text)
                collection = kind == "error" and message.startswith("collection failure")
                kept = self.collection_errors if collection else self.failures
                if len(kept) < SHOWN_FAILURES:
                    kept.append(failed)
                if collection:
                    self._ours = True  # (counted as a collection error, not as a test)
            if not self._ours:
                self.foreign += 1
                if len(self.foreign_tests) < SHOWN_PATHS:
                    self.foreign_tests.append(shorten(self._case, 300))
            self._case = None

    def _from_suite(self, classname: str, file: str | None) -> bool:
        """Whether a test case is from one of the test files given (any is, when none were):
        by its ``file`` where the report has one (``junit_family=xunit1``), else by its
        ``classname``, which pytest makes of the file's path (``tests.test_a``, then
        ``.TestClass`` for a test in a class)."""
        if not self.modules:
            return True
        if file is not None:
            return _norm(file) in self.files
        return any(classname == module or classname.startswith(module + ".") for module in self.modules)

    def close(self) -> JUnitReport:
        return JUnitReport(
            failures=self.failures,
            collection_errors=self.collection_errors,
            foreign=self.foreign,
            foreign_tests=self.foreign_tests,
            **self.counts,
        )


def parse_junit(data: bytes, test_files: Collection[str] = ()) -> JUnitReport:
    """Count the test cases of a JUnit XML report (as pytest writes it): each is passed,
    failed, errored or skipped (one that failed and errored counts as errored). With
    ``test_files`` (relative paths of ``.py`` files), the test cases from none of them are
    counted as :attr:`~JUnitReport.foreign`. ReportError when the report is larger than
    :data:`MAX_JUNIT_BYTES`, has a DOCTYPE, or is not XML."""
    if len(data) > MAX_JUNIT_BYTES:
        raise ReportError(
            f"the JUnit report is larger than {MAX_JUNIT_BYTES // (1024 * 1024)} MiB; ATP does not read it"
        )
    modules = [path.removesuffix(".py").replace("/", ".") for path in test_files]
    parser = ElementTree.XMLParser(target=_JUnitCounter(modules, test_files))
    try:
        parser.feed(data)
        report = cast(JUnitReport, parser.close())  # what the target's close() returns
    except _RefuseDoctype:
        raise ReportError("the JUnit report has a DOCTYPE; ATP does not read XML with one") from None
    except ElementTree.ParseError as exc:
        raise ReportError(f"the JUnit report is not well-formed XML: {exc}") from None
    return report


def _reason(failed: FailedTest) -> str:
    """Why a test failed, in one line: its message's first line; for a collection error (whose
    message is only "collection failure") the last line of its text, where the exception is."""
    if failed.message.startswith("collection failure"):
        lines = [line for line in failed.text.splitlines() if line.strip()] or [failed.message]
        line = lines[-1]
    else:
        line = failed.message.splitlines()[0] if failed.message else ""
    if line.startswith("E "):  # pytest's mark of an exception line
        line = line[1:]
    return shorten(line.strip(), 120)


def _named(failures: list[FailedTest], total: int) -> str:
    """The first :data:`NAMED_FAILURES` failed tests of ``total``, each with why, for a check
    message."""
    named = [(f.test, _reason(f)) for f in failures[:NAMED_FAILURES]]
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
    message names the first three. No tests collected (exit code 5), a collection error, no
    report and pytest not installed are failed checks saying so.

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
            return await self.judge(label, config, folder, outcome, details)

        return await self.run(label, ctx, config, artifacts, argv, judge)

    async def judge(
        self, label: str, config: PytestConfig, folder: Folder, outcome: Outcome, details: dict[str, Any]
    ) -> Check:
        code = outcome.exit_code
        data, problem = await anyio.to_thread.run_sync(
            _read_report, folder.root / "junit.xml", MAX_JUNIT_BYTES
        )
        if data is None:
            if _tool_missing(outcome.output, "pytest"):
                message = (
                    f"pytest is not installed for {self.python(config)}; install it with: {INSTALL_HINT}"
                )
            elif problem is not None:
                message = f"pytest's JUnit report {problem}"
            else:
                ended = _PYTEST_EXITS.get(code or 0, "ended")
                message = (
                    f"pytest {ended} (exit code {code}) and wrote no JUnit report; "
                    f"its output ends: {_output_end(details)}"
                )
            return check(label, False, message, **details)
        if code == 5:
            return check(label, False, "pytest collected no tests (exit code 5)", **details)
        test_files = suite_tests(config.files)
        try:
            report = await off_loop(len(data), parse_junit, data, tuple(test_files))
        except ReportError as exc:
            return check(label, False, str(exc), **details)
        if report.collection_errors:
            message = (
                f"pytest could not collect the tests: collection error in "
                f"{_named(report.collection_errors, len(report.collection_errors))}"
            )
            failures = [f._asdict() for f in report.collection_errors[:SHOWN_FAILURES]]
            return check(label, False, message, failures=failures, **details)
        if code in _PYTEST_EXITS:
            message = (
                f"pytest {_PYTEST_EXITS[code]} (exit code {code}); its output ends: {_output_end(details)}"
            )
            return check(label, False, message, **details)
        tests = {
            "passed": report.passed,
            "failed": report.failed,
            "errors": report.errors,
            "skipped": report.skipped,
        }
        bad = report.failed + report.errors
        untrusted = (
            "; the code under test runs in pytest's process and may have changed one of them, "
            "so ATP trusts neither"
        )
        if code not in (0, 1):
            how = f"was ended by signal {-code}" if code is not None and code < 0 else f"exited with {code}"
            message = (
                f"pytest {how}, which is not how pytest ends a test run{untrusted}; "
                f"its output ends: {_output_end(details)}"
            )
            return check(label, False, message, tests=tests, **details)
        if (code == 0) != (bad == 0):
            said = "every test passed" if code == 0 else "a test failed"
            counted = f"counts {bad} failed or errored" if bad else "counts none failed"
            message = f"pytest's exit code {code} says {said}, but its JUnit report {counted}{untrusted}"
            return check(label, False, message, tests=tests, **details)
        if report.foreign:
            shown = printable(shorten(", ".join(report.foreign_tests[:NAMED_FAILURES]), 300))
            message = (
                f"pytest's report holds {_tests(report.foreign)} from outside the suite's test files "
                f"({', '.join(test_files)}): {shown}; only the suite's tests count"
            )
            return check(label, False, message, tests=tests, foreign_tests=report.foreign_tests, **details)
        defined = sum(test_files.values())
        least = config.min_tests or max(defined, 1)
        if report.total < least:
            message = f"pytest's report holds {_tests(report.total)}, "
            if config.min_tests is None and defined:
                message += (
                    f"but the suite's test files define {defined} test functions "
                    "(min_tests; set it to expect fewer)"
                )
            else:
                message += f"fewer than min_tests {least}"
            return check(label, False, message, tests=tests, min_tests=least, **details)
        skipped = f"; {report.skipped} skipped" if report.skipped else ""
        if report.ran == 0:
            return check(label, False, f"no test ran{skipped}", tests=tests, **details)
        rate = report.passed / report.ran
        message = f"{report.passed} of {report.ran} tests passed ({rate:.0%}"
        message += f"; min_pass_rate {config.min_pass_rate:.0%})" if config.min_pass_rate < 1 else ")"
        listed: dict[str, Any] = {}
        if report.failures:
            message += f"; failed: {_named(report.failures, report.failed + report.errors)}"
            listed["failures"] = [f._asdict() for f in report.failures]
        return check(
            label, rate >= config.min_pass_rate, message + skipped, rate, tests=tests, **listed, **details
        )


# --- lint -------------------------------------------------------------------------------------


class Finding(NamedTuple):
    file: str
    line: int | None
    column: int | None
    code: str
    message: str

    def __str__(self) -> str:
        where = "".join(f":{n}" for n in (self.line, self.column) if n is not None)
        return f"{self.file}{where} {self.code} {self.message}"


def parse_ruff(data: bytes, work: Path | None = None) -> tuple[int, list[Finding]]:
    """How many findings ruff's JSON report (``--output-format=json``) holds, and the first
    :data:`SHOWN_FINDINGS` of them, their files relative to ``work``. ReportError when it is
    larger than :data:`MAX_RUFF_BYTES` or is not such a report."""
    if len(data) > MAX_RUFF_BYTES:
        raise ReportError(
            f"ruff's report is larger than {MAX_RUFF_BYTES // (1024 * 1024)} MiB; ATP does not read it"
        )
    try:
        items = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ReportError(f"ruff's report is not JSON: {shorten(str(exc))}") from None
    if not isinstance(items, list):
        raise ReportError("ruff's report is not a JSON list of findings")
    findings = []
    for item in items[:SHOWN_FINDINGS]:
        if not isinstance(item, dict):
            raise ReportError("ruff's report has a finding that is not a JSON object")
        location = item.get("location")
        if not isinstance(location, dict):
            location = {}
        filename = str(item.get("filename") or "")
        if work is not None and os.path.isabs(filename):
            with contextlib.suppress(ValueError):
                filename = Path(filename).relative_to(work).as_posix()
        findings.append(
            Finding(
                file=shorten(filename, 300),
                line=_number(location.get("row")),
                column=_number(location.get("column")),
                code=shorten(str(item.get("code") or item.get("name") or "syntax-error"), 80),
                message=shorten(str(item.get("message") or ""), 300),
            )
        )
    return len(items), findings


def _findings(count: int) -> str:
    return "1 finding" if count == 1 else f"{count} findings"


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
            artifacts = [a for a in artifacts if _norm(a.path).endswith(PYTHON_SUFFIXES)]  # type: ignore[union-attr]
        if not artifacts:
            if config.path is not None:
                return [_missing_artifact(label, ctx, config)]
            message = f"expected a Python file to lint (*.py); the agent produced {produced(ctx)}"
            return [check(label, False, message, produced=produced_names(ctx))]

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
            return await self.judge(label, config, folder, outcome, details)

        return await self.run(label, ctx, config, artifacts, argv, judge)

    async def judge(
        self, label: str, config: LintConfig, folder: Folder, outcome: Outcome, details: dict[str, Any]
    ) -> Check:
        data, problem = await anyio.to_thread.run_sync(
            _read_report, folder.root / "ruff.json", MAX_RUFF_BYTES
        )
        if data is None:
            if _tool_missing(outcome.output, "ruff"):
                message = f"ruff is not installed for {self.python(config)}; install it with: {INSTALL_HINT}"
            elif problem is not None:
                message = f"ruff's report {problem}"
            else:
                message = f"ruff wrote no report (exit code {outcome.exit_code}); its output ends: {_output_end(details)}"
            return check(label, False, message, **details)
        try:
            count, findings = await off_loop(len(data), parse_ruff, data, folder.work)
        except ReportError as exc:
            return check(label, False, str(exc), **details)
        linted = printable(shorten(", ".join(folder.placed), 300))
        listed = {"findings": [f._asdict() for f in findings], "findings_total": count}
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
            return await self.judge(label, config, command, outcome, details)

        return await self.run(label, ctx, config, artifacts, lambda folder, python: command, judge)

    async def judge(
        self,
        label: str,
        config: CustomCommandConfig,
        command: list[str],
        outcome: Outcome,
        details: dict[str, Any],
    ) -> Check:
        shown = shorten(shlex.join(command), 200)
        code = outcome.exit_code
        ended = (
            f"exited with {code}" if code is not None and code >= 0 else f"was ended by signal {-(code or 0)}"
        )
        if code != config.expect_exit:
            message = f"expected {shown} to exit with {config.expect_exit}; it {ended}; its output ends: {_output_end(details)}"
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
            return check(label, False, message, **details)
        if found is None:
            message = (
                f"{shown} {ended} as expected, but its output does not match {config.regex!r}; "
                f"it ends: {_output_end(details)}"
            )
            return check(label, False, message, 0.5, **details)
        return check(
            label, True, f"{shown} exited with {code} and its output matches {config.regex!r}", **details
        )
