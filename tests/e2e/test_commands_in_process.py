"""The commands as ``atp`` runs them, called in this process (``atp.cli.main.main``): what each
command parses, calls and renders, with real agent processes behind it. The other end-to-end
tests start the ``atp`` program itself; these run the same code where coverage and a debugger
see it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atp.cli.main import main
from tests.conftest import EXAMPLES, PYTHON, write

NOISY = str(EXAMPLES / "agents" / "noisy_agent.py")
MINIMAL = str(EXAMPLES / "agents" / "minimal_agent.py")
TESTS = ("alpha", "beta")


def suite(folder: Path) -> Path:
    agents = "".join(
        f"  - {{name: {name}, type: cli, command: {[PYTHON, NOISY, f'--steps={steps}', '--spread=2', f'--seed={seed}']!r}}}\n"
        for name, steps, seed in (("good", 10, 0), ("worse", 60, 1))
    )
    minimal = f"  - {{name: minimal, type: cli, command: {[PYTHON, MINIMAL]!r}}}\n"
    return write(
        folder / "suite.yaml",
        "test_suite: in_process\n"
        "defaults:\n"
        "  runs_per_test: 3\n"
        "  constraints: {max_steps: 100}\n"
        "  scoring: {quality_weight: 0, completeness_weight: 0, cost_weight: 0, efficiency_weight: 1}\n"
        "  pass_rule: {min_score: 50}\n"
        "agents:\n"
        + agents
        + minimal
        + "tests:\n"
        + "".join(f"  - {{id: {t}, task: {{description: {t}}}}}\n" for t in TESTS),
    )


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    suite(tmp_path)
    return tmp_path


def run_dirs(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / ".atp" / "runs").iterdir() if (p / "run.json").is_file())


def test_compare_runs_both_agents_interleaved_and_finds_the_worse_one(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare", "--agents=good,worse", "--suite=suite.yaml", "--parallel=2", "--output=json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    comparison = json.loads(out.out)
    assert comparison["agents"] == ["good", "worse"]
    (pair,) = comparison["overall"]
    assert (pair["a"], pair["b"]) == ("good", "worse") and pair["delta"] > 20
    assert [row["id"] for row in comparison["tests"]] == list(TESTS)
    directories = run_dirs(folder)
    assert sorted(json.loads((d / "run.json").read_text())["agent"] for d in directories) == ["good", "worse"]
    for directory in directories:  # each agent: 2 tests x 3 runs in its own run directory
        assert len((directory / "results.jsonl").read_text().splitlines()) == 6


def test_baseline_saved_then_a_worse_agent_is_a_regression(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["baseline", "save", "--suite=suite.yaml", "--agent=good", "--output=base.json"]) == 0
    saved = json.loads((folder / "base.json").read_text())
    assert sorted(saved["tests"]) == list(TESTS) and all(len(t["runs"]) == 3 for t in saved["tests"].values())
    capsys.readouterr()
    code = main(
        [
            "test",
            "suite.yaml",
            "--agent=worse",
            "--baseline=base.json",
            "--output=json",
            "--output-file=r.json",
        ]
    )
    assert code == 1, capsys.readouterr().err  # the worse agent's tests fail and regress
    results = json.loads((folder / "r.json").read_text())
    assert results["baseline"]["file"] == "base.json"
    latest = max(run_dirs(folder), key=lambda d: json.loads((d / "run.json").read_text())["started_at"])
    capsys.readouterr()
    assert (
        main(["baseline", "compare", "--baseline=base.json", str(latest), "--fail-on-regression=false"]) == 0
    )
    shown = capsys.readouterr().out
    assert all(test in shown for test in TESTS)


def test_report_renders_a_stored_run_as_the_live_run_did(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["test", "suite.yaml", "--agent=good", "--output=json", "--output-file=live.json"]) == 0
    (directory,) = run_dirs(folder)
    capsys.readouterr()
    assert main(["report", str(directory), "--output=json", "--output-file=again.json"]) == 0
    live, again = (json.loads((folder / name).read_text()) for name in ("live.json", "again.json"))
    assert live == again
    assert main(["report", str(directory)]) == 0
    assert "alpha" in capsys.readouterr().out


def test_shards_merge_into_one_run(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for shard in ("1/2", "2/2"):
        assert main(["test", "suite.yaml", "--agent=good", f"--shard={shard}", "-q"]) == 0
    shards = run_dirs(folder)
    assert len(shards) == 2
    capsys.readouterr()
    assert main(["merge", *map(str, shards), "--output=json", "--output-file=merged.json"]) == 0
    merged = json.loads((folder / "merged.json").read_text())
    assert sorted(t["id"] for t in merged["tests"]) == list(TESTS)
    assert sum(len(t["runs"]) for t in merged["tests"]) == 6


def test_validate_checks_an_agent_and_list_agents_checks_its_health(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "suite.yaml", "--agent=minimal", "--json"]) == 0
    validation = json.loads(capsys.readouterr().out)
    assert validation["agent"] == "minimal" and validation["ok"] is True
    names = [c["name"] for c in validation["checks"]]
    assert names[:3] == ["reachable", "probe", "events"], names
    assert all(c["outcome"] != "failed" for c in validation["checks"]), validation["checks"]
    assert main(["list-agents", "--suite=suite.yaml"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in ("good", "worse", "minimal"))


def test_clean_finds_nothing_left_behind(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "suite.yaml", "--agent=good", "-q"]) == 0
    capsys.readouterr()
    assert main(["clean"]) == 0
    assert "nothing" in capsys.readouterr().out.lower()


def test_the_viewer_serves_the_runs_their_reports_and_trends_read_only(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import http.client
    import threading

    from atp.cli.viewer import RunIndex, Viewer
    from atp.core.reporter import ReportOptions
    from atp.core.results import RunStore, SuiteResults
    from tests.conftest import builtin_plugins

    for _ in range(2):
        assert main(["test", "suite.yaml", "--agent=good", "-q"]) == 0
    first = run_dirs(folder)[0]
    run_id = json.loads((first / "run.json").read_text())["run_id"]
    html = builtin_plugins().reporter("html")

    def render(store: RunStore, results: SuiteResults) -> bytes:
        target = folder / "report.html"
        html(ReportOptions(output_file=target)).report(results, store)
        return target.read_bytes()

    server = Viewer(RunIndex(folder / ".atp" / "runs"), render)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    def ask(method: str, path: str, host: str = f"127.0.0.1:{port}") -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request(method, path, headers={"Host": host})
        answer = connection.getresponse()
        return answer.status, answer.read().decode()

    try:
        status, index = ask("GET", "/")
        assert status == 200 and index.count("in_process") >= 2 and run_id in index
        status, trend = ask("GET", "/trend?suite=in_process&agent=good")
        assert status == 200 and "alpha" in trend and "<svg" in trend
        status, report = ask("GET", f"/runs/{run_id}/report.html")
        assert status == 200 and "alpha" in report and "beta" in report
        assert ask("GET", "/runs/no-such-run/report.html")[0] == 404
        assert ask("POST", "/")[0] == 405
        assert ask("GET", "/", host="evil.example:80")[0] == 403
        assert ask("GET", "/../../etc/passwd")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_plugins_evaluators_versions_and_agents_health_are_listed(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugins", "--json"]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    assert "cli" in listed["adapters"]["adapters"] and "console" in listed["reporters"]["reporters"]
    assert "artifact_exists" in listed["evaluators"]["evaluators"]
    assert all(not p["errors"] for p in listed.values()), listed
    assert main(["list-evaluators", "-v"]) == 0
    evaluators = capsys.readouterr().out
    assert "artifact_exists" in evaluators and "config:" in evaluators
    assert main(["version"]) == 0
    assert "atp-kernel" in capsys.readouterr().out
    assert main(["list-agents", "--suite=suite.yaml", "--check"]) == 0
    health = {
        line.split()[0]: line.split()[-1] for line in capsys.readouterr().out.splitlines() if line.strip()
    }
    assert health == {"good": "healthy", "minimal": "healthy", "worse": "healthy"}
