"""Reading what the tools report: a report file as written (:func:`read_report`), pytest's
JUnit XML (:func:`parse_junit`, streamed, no DOCTYPE) and ruff's JSON (:func:`parse_ruff`), each
within a size bound. What they quote of a report (test names, messages, tracebacks, file
names) comes from the agent's code: the secrets of the masker given (the run's) are masked
before it is cut."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import xml.etree.ElementTree as ElementTree
from collections.abc import Collection
from pathlib import Path
from typing import Any, NamedTuple, cast

from atp.core.portability import RAW_FLAGS
from atp.core.secrets import Masker
from atp.core.text import mask, shorten
from atp.evaluators.code_exec.folder import SHOWN_PATHS
from atp.evaluators.paths import norm

MAX_JUNIT_BYTES = 16 * 1024 * 1024
"""A JUnit report larger than this is not read."""
MAX_RUFF_BYTES = 64 * 1024 * 1024
"""A ruff JSON report larger than this is not read."""
SHOWN_FAILURES = 50
"""How many failed or errored tests a ``pytest`` check's details list."""
SHOWN_FINDINGS = 100
"""How many findings a ``lint`` check's details list (all are counted)."""
FAILURE_TEXT_CHARS = 600
"""A failed test's report text (its traceback) is kept up to its last this many characters."""
MASK_MARGIN = 4096
"""Characters of a failed test's text kept beyond :data:`FAILURE_TEXT_CHARS` while the report
streams by, so that it is masked before its last cut: a secret that straddles that cut is
masked whole (no secret is this long)."""
_KEPT_TEXT = FAILURE_TEXT_CHARS + MASK_MARGIN


def read_report(path: Path, limit: int) -> tuple[bytes | None, str | None]:
    """A report file the tool wrote (blocking): its bytes, or ``None`` and why not (``None``
    when there is no file); a regular file only, at most ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | RAW_FLAGS | getattr(os, "O_NOFOLLOW", 0))
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

    def __init__(
        self, modules: Collection[str] = (), files: Collection[str] = (), masker: Masker | None = None
    ) -> None:
        self.masker = masker
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
            if self._text_size > 2 * _KEPT_TEXT:  # only the end is kept (cut for good once masked)
                joined = "".join(self._text)[-_KEPT_TEXT:]
                self._text, self._text_size = [joined], len(joined)

    def end(self, tag: str) -> None:
        if tag in _OUTCOME_RANK:
            self._in_outcome = False
        elif tag == "testcase" and self._case is not None:
            kind, message = self._outcome or ("passed", "")
            self.counts[_COUNTED_AS[kind]] += 1
            if kind != "passed" and kind != "skipped":
                text = mask("".join(self._text).strip(), self.masker)
                if len(text) > FAILURE_TEXT_CHARS:
                    text = "…" + text[-FAILURE_TEXT_CHARS:]
                failed = FailedTest(
                    shorten(self._case, 300, self.masker), shorten(message, 300, self.masker), text
                )
                collection = kind == "error" and message.startswith("collection failure")
                kept = self.collection_errors if collection else self.failures
                if len(kept) < SHOWN_FAILURES:
                    kept.append(failed)
                if collection:
                    self._ours = True  # (counted as a collection error, not as a test)
            if not self._ours:
                self.foreign += 1
                if len(self.foreign_tests) < SHOWN_PATHS:
                    self.foreign_tests.append(shorten(self._case, 300, self.masker))
            self._case = None

    def _from_suite(self, classname: str, file: str | None) -> bool:
        """Whether a test case is from one of the test files given (any is, when none were):
        by its ``file`` where the report has one (``junit_family=xunit1``), else by its
        ``classname``, which pytest makes of the file's path (``tests.test_a``, then
        ``.TestClass`` for a test in a class)."""
        if not self.modules:
            return True
        if file is not None:
            return norm(file) in self.files
        return any(classname == module or classname.startswith(module + ".") for module in self.modules)

    def close(self) -> JUnitReport:
        return JUnitReport(
            failures=self.failures,
            collection_errors=self.collection_errors,
            foreign=self.foreign,
            foreign_tests=self.foreign_tests,
            **self.counts,
        )


def parse_junit(data: bytes, test_files: Collection[str] = (), masker: Masker | None = None) -> JUnitReport:
    """Count the test cases of a JUnit XML report (as pytest writes it): each is passed,
    failed, errored or skipped (one that failed and errored counts as errored). With
    ``test_files`` (relative paths of ``.py`` files), the test cases from none of them are
    counted as :attr:`~JUnitReport.foreign`. What it quotes has the secrets of ``masker`` (the
    run's) masked. ReportError when the report is larger than :data:`MAX_JUNIT_BYTES`, has a
    DOCTYPE, or is not XML."""
    if len(data) > MAX_JUNIT_BYTES:
        raise ReportError(
            f"the JUnit report is larger than {MAX_JUNIT_BYTES // (1024 * 1024)} MiB; ATP does not read it"
        )
    modules = [path.removesuffix(".py").replace("/", ".") for path in test_files]
    parser = ElementTree.XMLParser(target=_JUnitCounter(modules, test_files, masker))
    try:
        parser.feed(data)
        report = cast(JUnitReport, parser.close())  # what the target's close() returns
    except _RefuseDoctype:
        raise ReportError("the JUnit report has a DOCTYPE; ATP does not read XML with one") from None
    except ElementTree.ParseError as exc:
        raise ReportError(f"the JUnit report is not well-formed XML: {exc}") from None
    return report


# --- ruff's JSON ------------------------------------------------------------------------------


class Finding(NamedTuple):
    file: str
    line: int | None
    column: int | None
    code: str
    message: str

    def __str__(self) -> str:
        where = "".join(f":{n}" for n in (self.line, self.column) if n is not None)
        return f"{self.file}{where} {self.code} {self.message}"


def parse_ruff(
    data: bytes, work: Path | None = None, masker: Masker | None = None
) -> tuple[int, list[Finding]]:
    """How many findings ruff's JSON report (``--output-format=json``) holds, and the first
    :data:`SHOWN_FINDINGS` of them, their files relative to ``work`` (what they quote with the
    secrets of ``masker``, the run's, masked). ReportError when it is larger than
    :data:`MAX_RUFF_BYTES` or is not such a report."""
    if len(data) > MAX_RUFF_BYTES:
        raise ReportError(
            f"ruff's report is larger than {MAX_RUFF_BYTES // (1024 * 1024)} MiB; ATP does not read it"
        )
    try:
        items = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ReportError(f"ruff's report is not JSON: {shorten(str(exc), masker=masker)}") from None
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
                file=shorten(filename, 300, masker),
                line=_number(location.get("row")),
                column=_number(location.get("column")),
                code=shorten(str(item.get("code") or item.get("name") or "syntax-error"), 80, masker),
                message=shorten(str(item.get("message") or ""), 300, masker),
            )
        )
    return len(items), findings


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
