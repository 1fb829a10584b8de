"""`atp view` as a user starts it: a real server on 127.0.0.1 over real run directories, asked
over HTTP: the list of runs, a test's trend across runs, each run's report, and what it
refuses (other hosts, writes, unknown runs, paths out of the run directory)."""

from __future__ import annotations

import http.client
import os
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from atp.core.plugins import Plugins
from tests.conftest import ATP, write
from tests.e2e.test_atp_command import atp

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "agents" / "noisy_agent.py"
HOSTILE = "<script>window.__pwned=1</script>"


def suite(tmp_path: Path, steps: int) -> Path:
    return write(
        tmp_path / "suite.yaml",
        "test_suite: trend\n"
        "defaults:\n  runs_per_test: 2\n  constraints: {max_steps: 100}\n"
        "  scoring: {quality_weight: 0, completeness_weight: 0, cost_weight: 0, efficiency_weight: 1}\n"
        "agents:\n"
        f"  - name: noisy\n    type: cli\n    command: [{sys.executable!r}, {str(AGENT)!r}, '--steps={steps}', '--spread=0']\n"
        "tests:\n"
        "  - id: summarise\n    task: {description: Summarise}\n"
        f"  - id: '{HOSTILE}'\n    task: {{description: Plan}}\n",
    )


class Viewer:
    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        self.process = process
        self.port = port

    def get(self, path: str, method: str = "GET", host: str | None = None) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Host": host} if host is not None else {}
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        body = response.read().decode()
        connection.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body


@pytest.fixture
def viewer(tmp_path: Path) -> Iterator[Viewer]:
    for steps in (20, 30):  # two runs of one suite: the second scores 10 points lower
        result = atp("test", f"--suite={suite(tmp_path, steps)}", "--agent=noisy", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
    process = subprocess.Popen(
        [ATP, "view", "--no-open", "--port=0"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    ready, _, _ = select.select([process.stderr], [], [], 30)
    assert ready, "atp view said nothing in 30 s"
    line = process.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    assert found, line
    try:
        yield Viewer(process, int(found.group(1)))
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_lists_the_runs_with_suite_agent_and_pass_rate(viewer: Viewer, tmp_path: Path) -> None:
    status, headers, page = viewer.get("/")
    assert status == 200
    assert "script-src" not in headers["content-security-policy"]  # the list runs no script
    runs = sorted(p.name for p in (tmp_path / ".atp" / "runs").iterdir())
    assert len(runs) == 2
    for run_id in runs:
        assert f'href="/runs/{run_id}/report.html"' in page
    assert page.count("<td>noisy</td>") == 2 and ">trend</a>" in page
    assert page.count(">100%</td>") == 2  # both runs passed every test


def test_the_trend_shows_each_tests_score_across_the_runs(viewer: Viewer) -> None:
    status, _, page = viewer.get("/trend?suite=trend&agent=noisy")
    assert status == 200
    assert page.count("<svg") == 2  # one chart per test
    assert page.count("<circle") == 4  # two runs of each
    # the noisy agent scores 100 - steps: 80 in the first run, 70 in the second
    assert '<td class="num">70.0</td><td class="num">-10.0</td>' in page
    assert HOSTILE not in page and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page


def test_a_runs_report_is_the_html_reporters(viewer: Viewer, tmp_path: Path) -> None:
    run_id = sorted(p.name for p in (tmp_path / ".atp" / "runs").iterdir())[0]
    status, headers, page = viewer.get(f"/runs/{run_id}/report.html")
    assert "html" in Plugins().reporters
    assert status == 200 and "<html" in page and 'id="atp-data"' in page
    # the report carries its own policy, with its script's hash; the header only forbids framing
    assert headers["content-security-policy"] == "frame-ancestors 'none'"


def test_refuses_other_hosts_writes_and_unknown_paths(viewer: Viewer) -> None:
    assert viewer.get("/", host="attacker.example")[0] == 403  # a DNS name rebound to 127.0.0.1
    assert viewer.get("/", host=f"attacker.example:{viewer.port}")[0] == 403
    assert viewer.get("/", method="POST")[0] == 405
    assert viewer.get("/", method="DELETE")[0] == 405
    assert viewer.get("/runs/nothing/report.html")[0] == 404
    assert viewer.get("/runs/..%2F..%2F..%2Fetc%2Fpasswd/report.html")[0] == 404
    assert viewer.get("/../../etc/passwd")[0] == 404
    assert viewer.get("/", method="HEAD")[0] == 200


def test_listens_on_loopback_only(viewer: Viewer) -> None:
    result = subprocess.run(["ss", "-ltnH", f"sport = :{viewer.port}"], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip("ss is not available")
    listening = result.stdout.split()
    assert f"127.0.0.1:{viewer.port}" in listening, result.stdout
