"""Results: the JSON results format, and where each part of it lives.

- :mod:`atp.core.records`: the Structs of the format (:class:`RunResult`, :class:`RunHeader`,
  :class:`TestResult`, :class:`SuiteResults`, ...);
- :mod:`atp.core.aggregate`: what runs add up to (:func:`build_suite_results`, the statistics,
  :func:`baseline_of`);
- :mod:`atp.core.store`: the run directory (:class:`RunStore`, its files' names).

Every name is importable from here as well. :func:`results_schema` is the format's JSON Schema
(``python -m atp.core.results > docs/results.schema.json``).
"""

from typing import Any

import msgspec

from atp.core.aggregate import METRIC_NAMES as METRIC_NAMES
from atp.core.aggregate import baseline_of as baseline_of
from atp.core.aggregate import build_suite_results as build_suite_results
from atp.core.aggregate import is_flaky as is_flaky
from atp.core.aggregate import is_incomplete as is_incomplete
from atp.core.aggregate import make_test_result as make_test_result
from atp.core.aggregate import run_metrics as run_metrics
from atp.core.aggregate import status_of_runs as status_of_runs
from atp.core.aggregate import suite_statistics as suite_statistics
from atp.core.aggregate import test_statistics as test_statistics
from atp.core.aggregate import unchecked_reason as unchecked_reason
from atp.core.records import ALL_RUNS as ALL_RUNS
from atp.core.records import BUDGET_EXCEEDED as BUDGET_EXCEEDED
from atp.core.records import MAX_RUNS_PER_TEST as MAX_RUNS_PER_TEST
from atp.core.records import MAX_SHARDS as MAX_SHARDS
from atp.core.records import MAX_TESTS as MAX_TESTS
from atp.core.records import RESULTS_FORMAT as RESULTS_FORMAT
from atp.core.records import RESULTS_FORMAT_VERSION as RESULTS_FORMAT_VERSION
from atp.core.records import STOPPED_BY as STOPPED_BY
from atp.core.records import BaselineRef as BaselineRef
from atp.core.records import Budget as Budget
from atp.core.records import Check as Check
from atp.core.records import Outcome as Outcome
from atp.core.records import PassRule as PassRule
from atp.core.records import PlannedTest as PlannedTest
from atp.core.records import PluginFailure as PluginFailure
from atp.core.records import Retry as Retry
from atp.core.records import RunHeader as RunHeader
from atp.core.records import RunResult as RunResult
from atp.core.records import Shard as Shard
from atp.core.records import SuiteResults as SuiteResults
from atp.core.records import SuiteStatistics as SuiteStatistics
from atp.core.records import Summary as Summary
from atp.core.records import TestResult as TestResult
from atp.core.records import TestStatistics as TestStatistics
from atp.core.records import TestStatus as TestStatus
from atp.core.records import Usage as Usage
from atp.core.records import add_usage as add_usage
from atp.core.records import utcnow as utcnow
from atp.core.store import BASELINE_FILE as BASELINE_FILE
from atp.core.store import HEADER_FILE as HEADER_FILE
from atp.core.store import LOCK_FILE as LOCK_FILE
from atp.core.store import MAX_STEM_CHARS as MAX_STEM_CHARS
from atp.core.store import RESULTS_FILE as RESULTS_FILE
from atp.core.store import RUN_FILES as RUN_FILES
from atp.core.store import RunStore as RunStore
from atp.core.store import events_path as events_path
from atp.core.store import log_path as log_path
from atp.core.store import new_run_id as new_run_id
from atp.core.store import stored_runs as stored_runs
from atp.core.store import workspace_path as workspace_path


def results_schema() -> dict[str, Any]:
    """The JSON Schema of the JSON results format (docs/results.schema.json)."""
    schema: dict[str, Any] = msgspec.json.schema(SuiteResults)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"ATP results, format {RESULTS_FORMAT_VERSION}"
    return schema


if __name__ == "__main__":  # python -m atp.core.results > docs/results.schema.json
    print(msgspec.json.format(msgspec.json.encode(results_schema()), indent=2).decode())
