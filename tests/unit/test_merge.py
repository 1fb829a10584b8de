"""``atp merge``: the run directories of a sharded run's shards combined into one whose results,
statistics and baseline comparison are those of the run made whole."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest

from atp.core.baseline import Baseline, BaselineRun, BaselineTest
from atp.core.errors import AtpError
from atp.core.merge import merge_runs
from atp.core.protocol import Metrics
from atp.core.results import (
    BASELINE_FILE,
    HEADER_FILE,
    RESULTS_FILE,
    BaselineRef,
    Budget,
    Check,
    PassRule,
    PlannedTest,
    PluginFailure,
    RunHeader,
    RunResult,
    RunStore,
    Shard,
    SuiteResults,
    build_suite_results,
    events_path,
    log_path,
    workspace_path,
)
from tests.facts import says

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
ORDER = ["a", "b", "c", "d", "e"]
PLAN = {
    "a": PlannedTest(id="a", name="A", runs=2, fingerprint="fa"),
    "b": PlannedTest(
        id="b", name="B", runs=3, fingerprint="fb", pass_rule=PassRule(rule="pass_rate", threshold=0.5)
    ),
    "c": PlannedTest(id="c", name="C", tags=["smoke"], fingerprint="fc"),
    "d": PlannedTest(id="d", name="D", skip="later", fingerprint="fd"),
    "e": PlannedTest(id="e", name="E", runs=2, fingerprint="fe", quarantined=True),
}
SCORES = {("a", 1): 80.0, ("a", 2): 60.0, ("b", 1): 90.0, ("b", 2): 10.0, ("b", 3): 70.0, ("c", 1): 55.0,
          ("e", 1): 0.0, ("e", 2): 30.0}  # fmt: skip
THREE = [  # a is split over shards 1 and 2, b over all three, d (skipped) is in shard 1 only
    {"a": [1], "b": [1], "d": None},
    {"a": [2], "b": [2], "c": None},
    {"b": [3], "e": None},
]


def run_result(test_id: str, number: int) -> RunResult:
    score = SCORES[(test_id, number)]
    outcome = "passed" if score >= 50 else "failed"
    return RunResult(
        test_id=test_id, run_number=number, task_id=f"{test_id}-{number}", outcome=outcome, status="completed",
        score=score, score_breakdown={"quality": score / 100}, duration_seconds=number + score / 100,
        started_at=NOW + timedelta(seconds=number), metrics=Metrics(total_tokens=int(score) * 10, cost_usd=0.01),
        checks=[Check(name="contains", passed=outcome == "passed", score=score / 100, message="m")],
        events_file=events_path(test_id, number), log_file=log_path(test_id, number),
    )  # fmt: skip


def event_line(test_id: str, number: int) -> str:
    return json.dumps({
        "version": "1.0", "task_id": f"{test_id}-{number}", "timestamp": "2026-01-01T00:00:00Z", "sequence": 0,
        "event_type": "progress", "payload": {"percentage": number},
    })  # fmt: skip


def make_shards(
    root: Path,
    shares: list[dict[str, list[int] | None]],
    baseline: Baseline | None = None,
    **overrides: dict[int, object],
) -> list[Path]:
    """A shard run directory for each share, as ``atp test --shard=K/N`` leaves them;
    ``overrides`` maps a header field to its value by shard index."""
    directories = []
    for index, share in enumerate(shares, 1):
        tests = [msgspec.structs.replace(PLAN[i], run_numbers=share[i]) for i in ORDER if i in share]
        fields: dict[str, object] = {
            "run_id": f"20261126-12000{index}-00000{index}", "suite": "s", "agent": "ag", "agent_type": "cli",
            "started_at": NOW + timedelta(seconds=index), "finished_at": NOW + timedelta(seconds=60 - index),
            "suite_fingerprint": "sfp", "tests": tests, "deselected": 2,
            "shard": Shard(index=index, count=len(shares), order=list(ORDER)),
            "baseline": BaselineRef(file="base.json") if baseline is not None else None,
        }  # fmt: skip
        for name, values in overrides.items():
            if index in values:
                fields[name] = values[index]
        header = RunHeader(**fields)  # type: ignore[arg-type]
        store = RunStore.create(root, header, baseline=baseline)
        for test in header.tests:
            for number in test.share() if test.skip is None else []:
                (store.directory / "events").mkdir(exist_ok=True)
                (store.directory / "logs").mkdir(exist_ok=True)
                (store.directory / events_path(test.id, number)).write_text(
                    event_line(test.id, number) + "\n"
                )
                (store.directory / log_path(test.id, number)).write_text(f"log of {test.id} {number}\n")
                store.append(run_result(test.id, number))
        store.close()
        directories.append(store.directory)
    return directories


def whole(baseline: Baseline | None = None) -> tuple[RunHeader, list[RunResult]]:
    """The unsharded run the three shards of :data:`THREE` make together."""
    header = RunHeader(
        run_id="whole", suite="s", agent="ag", agent_type="cli", started_at=NOW + timedelta(seconds=1),
        finished_at=NOW + timedelta(seconds=59), suite_fingerprint="sfp", deselected=2,
        tests=[PLAN[i] for i in ORDER], baseline=BaselineRef(file="base.json") if baseline is not None else None,
    )  # fmt: skip
    shares = [
        (i, numbers or range(1, PLAN[i].runs + 1))
        for share in THREE
        for i, numbers in share.items()
        if i != "d"
    ]
    return header, [run_result(i, n) for i, numbers in shares for n in numbers]


def same(merged: SuiteResults, expected: SuiteResults) -> None:
    assert merged.run_id != expected.run_id
    expected = msgspec.structs.replace(expected, run_id=merged.run_id)
    assert msgspec.json.encode(merged) == msgspec.json.encode(expected)


def test_three_shards_merge_into_the_whole_run(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", THREE)
    merged = merge_runs(shards, tmp_path / "runs")
    assert merged.parent == tmp_path / "runs"
    store = RunStore(merged)
    results = store.results()
    header, runs = whole()
    same(results, build_suite_results(header, runs))
    assert [t.id for t in results.tests] == ORDER
    assert [t.status for t in results.tests] == ["passed", "passed", "passed", "skipped", "failed"]
    assert [len(t.runs) for t in results.tests] == [2, 3, 1, 0, 2]
    assert results.summary.runs == 8 and results.summary.incomplete == 0 and results.summary.ok
    assert results.summary.quarantined == 1 and results.shard is None and not results.problems
    b = results.tests[1]
    assert b.statistics is not None and b.statistics.runs == 3 and b.statistics.passed_runs == 2
    merged_header = store.read_header()
    assert merged_header.merged_from == [RunStore(d).read_header().run_id for d in shards]
    assert merged_header.shard is None and merged_header.deselected == 2
    assert all(t.run_numbers is None for t in merged_header.tests)
    # the results as each shard stored them, in shard order
    stored = b"".join((d / RESULTS_FILE).read_bytes() for d in shards)
    assert (merged / RESULTS_FILE).read_bytes() == stored


def test_a_directory_given_twice_counts_once_and_order_given_does_not_matter(tmp_path: Path) -> None:
    one, two, three = make_shards(tmp_path / "shards", THREE)
    merged = merge_runs([three, one, two, one, tmp_path / "shards" / "." / one.name], tmp_path / "runs")
    assert RunStore(merged).read_header().merged_from == [
        RunStore(d).read_header().run_id for d in (one, two, three)
    ]
    same(RunStore(merged).results(), build_suite_results(*whole()))


def test_a_test_split_over_shards_has_every_run_number(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", [{"a": [2], "b": [1, 3], "c": None, "d": None, "e": [2]},
                                               {"a": [1], "b": [2], "e": [1]}])  # fmt: skip
    header = RunStore(merge_runs(shards, tmp_path / "runs")).read_header()
    assert [t.id for t in header.tests] == ORDER
    assert all(t.run_numbers is None for t in header.tests)
    assert [RunStore(d).read_header().tests[0].run_numbers for d in shards] == [[2], [1]]


def test_runs_no_shard_planned_are_left_planned_as_the_shards_did(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", [{"a": [1], "c": None, "d": None}, {"b": [2, 3], "e": None}])
    store = RunStore(merge_runs(shards, tmp_path / "runs"))
    header, results = store.read_header(), store.results()
    assert [t.run_numbers for t in header.tests] == [[1], [2, 3], None, None, None]
    assert results.summary.incomplete == 0  # each test made what the shards planned of it


def test_overlapping_shares_are_refused(tmp_path: Path) -> None:
    shards = make_shards(
        tmp_path / "shards", [{"a": [1, 2], "b": None, "c": None, "d": None}, {"a": [2], "e": None}]
    )
    with pytest.raises(AtpError) as raised:
        merge_runs(shards, tmp_path / "runs")
    says(str(raised.value), "run 2", "test 'a'", "shards 1 and 2", shards[0], shards[1], "overlap")
    assert not (tmp_path / "runs").exists()


def test_a_missing_shard_is_refused(tmp_path: Path) -> None:
    one, _, three = make_shards(tmp_path / "shards", THREE)
    with pytest.raises(AtpError) as raised:
        merge_runs([one, three], tmp_path / "runs")
    says(str(raised.value), "shard 2 of 3", "missing", "all three")
    with pytest.raises(AtpError) as raised:
        merge_runs([three], tmp_path / "runs")
    says(str(raised.value), "shards 1 and 2 of 3", "missing", "all three")


def test_the_same_shard_twice_is_refused(tmp_path: Path) -> None:
    one, two, three = make_shards(tmp_path / "shards", THREE)
    again = make_shards(tmp_path / "again", THREE)[0]
    with pytest.raises(AtpError) as raised:
        merge_runs([one, two, three, again], tmp_path / "runs")
    says(str(raised.value), one, again, "shard 1 of 3")


def test_shards_balanced_on_different_runs_are_refused(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", THREE, shard={
        2: Shard(index=2, count=3, basis="20261125-101010-abcdef", order=list(ORDER)),
    })  # fmt: skip
    with pytest.raises(AtpError) as raised:
        merge_runs(shards, tmp_path / "runs")
    says(
        str(raised.value),
        f"none in {shards[0]}",
        f"20261125-101010-abcdef in {shards[1]}",
        "overlap",
        "same stored runs",
    )


@pytest.mark.parametrize(
    ("field", "value", "facts"),
    [
        ("suite", "other", ("suite 'other'", "suite 's'")),
        ("agent", "bot", ("agent 'bot'", "agent 'ag'")),
        ("agent_type", "http", ("agent 'ag'", "type 'http'", "type 'cli'")),
        ("suite_fingerprint", "changed", ("suite 's'", "selections")),
        ("shard", Shard(index=3, count=4, order=list(ORDER)), ("shard 3 of 4", "shard 1 of 3")),
        ("shard", Shard(index=3, count=3, order=["a", "b", "c", "d", "x"]), ("test 'x'",)),
    ],
)  # fmt: skip
def test_shards_of_different_runs_are_refused(
    tmp_path: Path, field: str, value: object, facts: tuple[str, ...]
) -> None:
    shards = make_shards(tmp_path / "shards", THREE, **{field: {3: value}})
    with pytest.raises(AtpError) as raised:
        merge_runs(shards, tmp_path / "runs")
    says(str(raised.value), shards[2], shards[0], *facts)
    assert not (tmp_path / "runs").exists()


def test_a_run_directory_that_is_no_shard_is_refused(tmp_path: Path) -> None:
    plain = RunStore.create(
        tmp_path, RunHeader(run_id="plain", suite="s", agent="ag", agent_type="cli", started_at=NOW)
    )
    with pytest.raises(AtpError) as raised:
        merge_runs([plain.directory], tmp_path / "runs")
    says(str(raised.value), plain.directory, "not a shard", "--shard")
    with pytest.raises(AtpError) as raised:
        merge_runs([tmp_path / "nothing"], tmp_path / "runs")
    says(str(raised.value), tmp_path / "nothing", HEADER_FILE)
    with pytest.raises(AtpError) as raised:
        merge_runs([], tmp_path / "runs")
    says(str(raised.value), "run directories")


def test_tests_planned_differently_are_refused(tmp_path: Path) -> None:
    changed = [msgspec.structs.replace(PLAN["a"], runs=5, run_numbers=[2]), PLAN["c"]]
    shards = make_shards(tmp_path / "shards", [{"a": [1], "b": None, "d": None}, {"a": [2], "c": None, "e": None}],
                         tests={2: changed})  # fmt: skip
    with pytest.raises(AtpError) as raised:
        merge_runs(shards, tmp_path / "runs")
    says(str(raised.value), "shards 1 and 2", "test 'a'", "runs")


def test_damaged_results_are_refused(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", THREE)
    with (shards[1] / RESULTS_FILE).open("ab") as handle:
        handle.write(b'{"test_id": "a", "run_nu')
    with pytest.raises(AtpError) as raised:
        merge_runs(shards, tmp_path / "runs")
    says(str(raised.value), f"{shards[1] / RESULTS_FILE}:4", "cut short", f"--resume={shards[1]}")


def test_a_result_outside_its_share_is_refused(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", THREE)
    store = RunStore.reopen(shards[2])
    store.append(run_result("a", 1))
    store.close()
    with pytest.raises(AtpError) as raised:
        merge_runs(shards, tmp_path / "runs")
    says(str(raised.value), shards[2], "run 1", "test 'a'", "shard 3")


def test_a_failed_merge_leaves_no_directory(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", THREE)
    for directory in shards[:2]:  # the same file in two shards
        (directory / "events" / "stray.jsonl").write_text("{}\n")
    with pytest.raises(AtpError) as raised:
        merge_runs(shards, tmp_path / "runs")
    says(str(raised.value), "events/stray.jsonl", "shards 1 and 2", shards[0], shards[1])
    assert list((tmp_path / "runs").iterdir()) == []


def test_events_logs_and_workspaces_come_along(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", THREE)
    outside = tmp_path / "secret.txt"
    outside.write_text("outside")
    workspace = shards[2] / workspace_path("e", 1)
    (workspace / "sub").mkdir(parents=True)
    (workspace / "sub" / "out.md").write_text("# report")
    (workspace / "link").symlink_to(outside)
    os.mkfifo(workspace / "pipe")
    (shards[1] / "logs" / "extra").mkdir()
    os.symlink(tmp_path, shards[0] / "workspaces")  # a link in place of the folder is not followed
    merged = merge_runs(shards, tmp_path / "runs")
    store = RunStore(merged)
    results = store.results()
    for test in results.tests:
        for run in test.runs:
            assert run.events_file is not None
            assert (merged / run.events_file).samefile(
                shards[0].parent / _owner(shards, run) / run.events_file
            )
            assert store.event_lines(run) == [event_line(test.id, run.run_number).encode()]
            assert len(list(store.events(run))) == 1
            assert store.log(run) == f"log of {test.id} {run.run_number}\n"
    assert not store.problems
    copied = merged / workspace_path("e", 1)
    assert (copied / "sub" / "out.md").read_text() == "# report"
    assert (copied / "link").is_symlink() and os.readlink(copied / "link") == str(outside)
    assert not (copied / "pipe").exists() and (merged / "logs" / "extra").is_dir()
    assert sorted(p.name for p in (merged / "workspaces").iterdir()) == [Path(workspace_path("e", 1)).name]


def _owner(shards: list[Path], run: RunResult) -> str:
    return next(d.name for d in shards if (d / str(run.events_file)).exists())


def baseline() -> Baseline:
    return Baseline(suite="s", agent="ag", tests={
        "a": BaselineTest(mean_score=90.0, n_runs=3, runs=[BaselineRun(score=s) for s in (88.0, 90.0, 92.0)]),
        "b": BaselineTest(mean_score=50.0, n_runs=3, runs=[BaselineRun(score=s) for s in (40.0, 50.0, 60.0)]),
        "c": BaselineTest(mean_score=55.0, n_runs=2, runs=[BaselineRun(score=s) for s in (54.0, 56.0)]),
    })  # fmt: skip


def test_the_baseline_comes_along_and_compares_alike(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", THREE, baseline=baseline())
    merged = merge_runs(shards, tmp_path / "runs")
    assert (merged / BASELINE_FILE).read_bytes() == (shards[0] / BASELINE_FILE).read_bytes()
    results = RunStore(merged).results()
    assert results.baseline is not None and results.baseline.file == "base.json"
    header, runs = whole(baseline())
    same(results, build_suite_results(header, runs, baseline=baseline()))
    assert [t.baseline is not None for t in results.tests] == [True, True, True, False, True]


def test_shards_compared_with_different_baselines_are_refused(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards", THREE, baseline=baseline())
    (shards[1] / BASELINE_FILE).write_bytes((shards[1] / BASELINE_FILE).read_bytes().replace(b"90", b"91"))
    with pytest.raises(AtpError) as raised:
        merge_runs(shards, tmp_path / "runs")
    says(str(raised.value), shards[0], shards[1], "different baselines", BASELINE_FILE, "--baseline")
    (shards[1] / BASELINE_FILE).unlink()
    with pytest.raises(AtpError) as raised:
        merge_runs(shards, tmp_path / "runs")
    # which shard had a baseline and which had none is the fact, so the pairing is kept
    says(str(raised.value), f"{shards[0]} was compared with a baseline", f"{shards[1]} was not", "--baseline")


def test_the_header_adds_up_the_shards(tmp_path: Path) -> None:
    failure = PluginFailure(plugin="p", where="atp_run_finished", message="boom")
    shards = make_shards(
        tmp_path / "shards", THREE,
        finished_at={2: None},
        interrupted={2: True},
        stopped_by={2: "budget", 3: "SIGINT"},
        plugin_failures={1: [failure], 3: [failure]},
        budget={
            1: Budget(max_cost_usd=1.0, spent_cost_usd=0.25, spent_tokens=10),
            2: Budget(max_cost_usd=1.0, spent_cost_usd=0.5, spent_tokens=20, exceeded="cost 1.01 > 1"),
            3: Budget(max_cost_usd=1.0, spent_cost_usd=0.5, spent_tokens=5, exceeded="cost 1.2 > 1"),
        },
        resumed_at={3: [NOW + timedelta(seconds=30)], 1: [NOW + timedelta(seconds=40), NOW + timedelta(seconds=20)]},
        suite_file={1: "suite.yaml", 2: "elsewhere.yaml"},
    )  # fmt: skip
    header = RunStore(merge_runs(shards, tmp_path / "runs")).read_header()
    assert header.started_at == NOW + timedelta(seconds=1) and header.finished_at is None
    assert header.interrupted and header.stopped_by == "budget" and header.suite_file == "suite.yaml"
    assert header.plugin_failures == [failure, failure]
    assert header.budget == Budget(max_cost_usd=3.0, spent_cost_usd=1.25, spent_tokens=35,  # each shard's limit
                                   exceeded="cost 1.01 > 1; cost 1.2 > 1")  # fmt: skip
    assert header.resumed_at == [NOW + timedelta(seconds=s) for s in (20, 30, 40)]
    assert header.run_id not in header.merged_from and header.run_id[:8].isdigit()
    assert (tmp_path / "runs" / header.run_id / HEADER_FILE).is_file()
    finished = make_shards(tmp_path / "finished", THREE)
    header = RunStore(merge_runs(finished, tmp_path / "runs")).read_header()
    assert (
        header.finished_at == NOW + timedelta(seconds=59) and header.budget is None and not header.interrupted
    )
