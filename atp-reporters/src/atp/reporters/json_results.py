"""The ``json`` reporter: the JSON results format, for CI systems and other tools.

``atp test --output=json --output-file=results.json`` writes it to a file (without
``--output-file``, to stdout). The format is documented in docs/results-format.md and described
by the JSON Schema docs/results.schema.json, generated from :class:`atp.core.results.SuiteResults`.
Each run carries its event trace under ``events``. The figures are the kernel's, written as the
results hold them: each test's ``statistics`` (score, components, metrics, pass@k, pass^k),
``pass_rule``, an adaptive test's ``adaptive`` plan and ``stop``, and with a baseline its
``baseline`` comparison; the suite's ``statistics`` and ``baseline`` summary.
"""

from __future__ import annotations

from typing import Any

import msgspec

from atp.core.reporter import Reporter
from atp.core.results import RunResult, RunStore, SuiteResults

_encoder = msgspec.json.Encoder()


def with_events(results: SuiteResults, store: RunStore) -> SuiteResults:
    """The results with each run's events read back from the run directory."""
    tests = []
    for test in results.tests:
        runs = [_run_with_events(run, store) for run in test.runs]
        tests.append(msgspec.structs.replace(test, runs=runs))
    return msgspec.structs.replace(results, tests=tests)


def _run_with_events(run: RunResult, store: RunStore) -> RunResult:
    if run.events_file is None:
        return msgspec.structs.replace(run, events=[])
    # The stored lines are checked, masked JSON events: embed them as they are.
    raw: Any = msgspec.Raw(b"[" + b",".join(store.event_lines(run)) + b"]")
    return msgspec.structs.replace(run, events=raw)


_TESTS = b'\n  "tests": []'
"""Where the tests go in the formatted document (a top-level key: two spaces in; no string of
formatted JSON holds a newline, so this is found nowhere else)."""


def formatted(results: SuiteResults, store: RunStore) -> bytearray:
    """The results with each run's events, as formatted JSON (indented by 2): the same bytes as
    ``msgspec.json.format`` of :func:`with_events` whole, made one test at a time, so that no
    copy of all the results with their events is held at once (only the document itself).
    Damaged event lines found on the way are added to the document's ``problems``."""
    skeleton = msgspec.structs.replace(results, tests=[])
    head, _ = msgspec.json.format(_encoder.encode(skeleton), indent=2).split(_TESTS, 1)
    out = bytearray(head)
    out += _TESTS[:-1]
    for number, test in enumerate(results.tests):
        runs = [_run_with_events(run, store) for run in test.runs]
        chunk = msgspec.json.format(_encoder.encode(msgspec.structs.replace(test, runs=runs)), indent=2)
        out += b"\n    " if number == 0 else b",\n    "
        out += chunk.replace(b"\n", b"\n    ")
    out += b"\n  ]" if results.tests else b"]"
    if store.problems:  # damaged event lines found while embedding them
        skeleton.problems = list(dict.fromkeys([*results.problems, *store.problems]))
    _, tail = msgspec.json.format(_encoder.encode(skeleton), indent=2).split(_TESTS, 1)
    out += tail
    out += b"\n"
    return out


class JsonReporter(Reporter):
    name = "json"
    summary = "the JSON results format (docs/results-format.md), with each run's events"
    file_extension = ".json"

    def report(self, results: SuiteResults, store: RunStore) -> None:
        self.write_output(formatted(results, store))  # written as it is: no copy into bytes
