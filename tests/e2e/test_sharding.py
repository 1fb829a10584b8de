"""CI sharding at the size the issue names: a 60-test suite split into 3 shards made by three
concurrent `atp test --shard` processes; together they make every run exactly once (the agent
logs each task), the shares are balanced by the durations of the last stored run, and the
merged results equal those of one unsharded run."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from tests.conftest import ATP, write
from tests.e2e.test_atp_command import atp
from tests.e2e.test_reliability import LEDGER_AGENT, ledger_lines


def sixty_tests(tmp_path: Path) -> Path:
    tests = "".join(
        f"  - id: t{i:02d}\n    runs_per_test: {1 + i % 3}\n"
        f"    task: {{description: x, input_data: {{sleep: {0.3 if i < 6 else 0.0}, outcome: {'flaky' if i % 10 == 7 else 'pass'}}}}}\n"
        for i in range(60)
    )
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: sixty\nagents:\n  - name: agent\n    type: cli\n    command: {LEDGER_AGENT!r}\ntests:\n{tests}",
    )


def comparable(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    rows = []
    for test in report["tests"]:
        stats = dict(test.get("statistics") or {})
        stats.get("metrics", {}).pop("wall_time_seconds", None)
        rows.append(
            (
                test["id"],
                test["status"],
                test["flaky"],
                sorted(r["run_number"] for r in test["runs"]),
                test["score"],
                json.dumps(stats, sort_keys=True),
            )
        )
    return rows


def test_three_concurrent_shards_make_every_run_once_and_merge_into_the_whole(tmp_path: Path) -> None:
    suite = sixty_tests(tmp_path)
    planned = Counter({(f"t{i:02d}", n): 1 for i in range(60) for n in range(1, 2 + i % 3)})
    assert sum(planned.values()) == 120
    ledger = tmp_path / "whole.ledger"
    whole = atp(
        "test",
        f"--suite={suite}",
        "--parallel=4",
        "--output=json:whole.json",
        cwd=tmp_path,
        env={"LEDGER": str(ledger)},
    )
    assert whole.returncode == 1, whole.stdout + whole.stderr  # the flaky tests fail
    assert Counter(ledger_lines(ledger)) == planned

    env = {**os.environ, "NO_COLOR": "1", "LEDGER": str(tmp_path / "shards.ledger")}
    processes = [
        subprocess.Popen(
            [
                ATP,
                "test",
                f"--suite={suite}",
                f"--shard={k}/3",
                "--parallel=2",
                f"--output=json:shard{k}.json",
                "-q",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (1, 2, 3)
    ]
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode in (0, 1), out + err
    assert Counter(ledger_lines(tmp_path / "shards.ledger")) == planned, "every run made exactly once"
    shards = [json.loads((tmp_path / f"shard{k}.json").read_text()) for k in (1, 2, 3)]
    basis = {s["shard"]["basis"] for s in shards}
    whole_report = json.loads((tmp_path / "whole.json").read_text())
    assert basis == {whole_report["run_id"]}, "balanced by the durations of the last whole run"
    slow = [sum(1 for t in s["tests"] for r in t["runs"] if int(t["id"][1:]) < 6) for s in shards]
    assert max(slow) - min(slow) <= 2, f"the slow runs are spread over the shards: {slow}"
    counts = [s["summary"]["runs"] for s in shards]
    assert sum(counts) == 120 and max(counts) - min(counts) <= 30

    directories = [str(tmp_path / ".atp" / "runs" / s["run_id"]) for s in shards]
    merged = atp("merge", *directories, "--output=json:merged.json", cwd=tmp_path)
    assert merged.returncode == 1, merged.stdout + merged.stderr
    merged_report = json.loads((tmp_path / "merged.json").read_text())
    assert comparable(merged_report) == comparable(whole_report)
    assert merged_report["summary"] == whole_report["summary"]
    assert merged_report["suite_fingerprint"] == whole_report["suite_fingerprint"]
    latest = atp("report", "--output=json:latest.json", cwd=tmp_path)
    assert json.loads((tmp_path / "latest.json").read_text())["run_id"] == merged_report["run_id"]
    assert latest.returncode == 1
