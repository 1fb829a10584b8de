"""``atp test --shard=K/N`` in three processes, then ``atp merge``: the same report as one
``atp test`` making every run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import behave_agent, write
from tests.e2e.test_atp_command import atp
from tests.facts import one_error


def a_test(test_id: str, passes: bool) -> str:
    pattern = "ok" if passes else "no such text anywhere"
    return (
        f"  - id: {test_id}\n    task: {{description: x}}\n    assertions:\n"
        f"      - {{type: contains, config: {{pattern: {pattern!r}}}}}\n"
    )


def shape(results: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (t["id"], t["status"], t["planned_runs"], sorted(r["run_number"] for r in t["runs"]), t["score"],
         [r["score"] for r in sorted(t["runs"], key=lambda r: r["run_number"])])
        for t in results["tests"]
    ]  # fmt: skip


def test_three_shards_merge_into_the_report_of_the_whole_run(tmp_path: Path) -> None:
    tests = "".join(a_test(f"t{i}", passes=i != 4) for i in range(1, 7))
    suite = write(
        tmp_path / "suite.yaml",
        f"test_suite: e2e\ndefaults: {{runs_per_test: 2}}\nagents:\n  - name: agent\n    type: cli\n"
        f"    command: {behave_agent('ok')!r}\ntests:\n{tests}",
    )
    shards, made_by = [], []
    for index in (1, 2, 3):
        made = atp("test", f"--suite={suite}", f"--shard={index}/3", "--run-dir=shards", "--output=json",
                   f"--output-file=shard{index}.json", cwd=tmp_path)  # fmt: skip
        assert made.returncode in (0, 1), made.stdout + made.stderr
        shard = json.loads((tmp_path / f"shard{index}.json").read_text())
        assert shard["shard"]["index"] == index and shard["shard"]["count"] == 3
        shards.append(str(tmp_path / "shards" / shard["run_id"]))
        made_by.append({t["id"] for t in shard["tests"] if t["runs"]})
    assert made_by[0] & made_by[1]  # a test's runs split over shards
    merged = atp("merge", *shards, "--output=json", "--output-file=merged.json", cwd=tmp_path)
    assert merged.returncode == 1, merged.stdout + merged.stderr  # t4 fails, as in the whole run
    assert "Merged 3 shards into " in merged.stderr
    full = atp(
        "test", f"--suite={suite}", "--run-dir=full", "--output=json", "--output-file=full.json", cwd=tmp_path
    )
    assert full.returncode == 1, full.stdout + full.stderr
    merged_results = json.loads((tmp_path / "merged.json").read_text())
    full_results = json.loads((tmp_path / "full.json").read_text())
    assert [t["id"] for t in merged_results["tests"]] == [f"t{i}" for i in range(1, 7)]
    assert shape(merged_results) == shape(full_results)
    assert merged_results["summary"] == full_results["summary"]
    assert merged_results["summary"]["runs"] == 12 and merged_results["summary"]["failed"] == 1
    assert merged_results["statistics"] == full_results["statistics"]
    assert (
        merged_results["shard"] is None
        and merged_results["suite_fingerprint"] == full_results["suite_fingerprint"]
    )
    directory = tmp_path / ".atp" / "runs" / merged_results["run_id"]
    header = json.loads((directory / "run.json").read_text())
    assert header["merged_from"] == [Path(s).name for s in shards]
    for test in merged_results["tests"]:
        for run in test["runs"]:
            assert (directory / run["events_file"]).is_file()
    # the same merge through 'atp report --merge', into the run root of the config
    again = atp("report", "--merge", *shards, "--output=json", "--output-file=again.json", cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    assert shape(json.loads((tmp_path / "again.json").read_text())) == shape(full_results)
    missing = atp("merge", shards[0], shards[2], cwd=tmp_path)
    assert missing.returncode == 2
    one_error(missing.stderr, "shard 2 of 3", "missing")
