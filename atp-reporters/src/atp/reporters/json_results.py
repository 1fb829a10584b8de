"""The ``json`` reporter: the JSON results format, for CI systems and other tools.

``atp test --output=json --output-file=results.json`` writes it to a file (without
``--output-file``, to stdout). The format is documented in docs/results-format.md and described
by the JSON Schema docs/results.schema.json, generated from :class:`atp.core.results.SuiteResults`.
Each run carries its event trace under ``events``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from atp.core.reporter import Reporter, write_file
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


class JsonReporter(Reporter):
    name = "json"
    summary = "the JSON results format (docs/results-format.md), with each run's events"
    file_extension = ".json"

    def report(self, results: SuiteResults, store: RunStore) -> None:
        with_trace = with_events(results, store)
        if store.problems:  # damaged event lines found while embedding them
            with_trace.problems = list(dict.fromkeys([*with_trace.problems, *store.problems]))
        data = msgspec.json.format(_encoder.encode(with_trace), indent=2) + b"\n"
        target = self.options.output_file
        if target is None:
            stream = self.options.stream
            buffer = getattr(stream, "buffer", None)
            if buffer is not None:
                stream.flush()
                buffer.write(data)
                buffer.flush()
            else:
                stream.write(data.decode())
                stream.flush()
            return
        write_file(target, data)

