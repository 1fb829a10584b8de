"""`atp test` with a persistent agent, as a user runs it: Ctrl-C stops every pooled process,
the busy ones and the idle ones, and keeps every finished result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.e2e.test_hostile_agents import running, wait_until


def test_ctrl_c_stops_every_pooled_process_and_keeps_the_finished_results(tmp_path: Path) -> None:
    folder = tmp_path / "pids"
    folder.mkdir()
    command = [PYTHON, str(AGENTS / "persistent.py")]
    descriptions = ["a", "b", "c", "hang", "d", "hang"]
    tests = "".join(f"  - id: t{i}\n    task: {{description: {d}}}\n" for i, d in enumerate(descriptions))
    suite = write(
        tmp_path / "suite.yaml",
        f"test_suite: persistent\nagents:\n  - name: agent\n    type: cli\n    command: {command!r}\n"
        f"    persistent: true\n    grace_seconds: 1\ntests:\n{tests}",
    )
    env = {**os.environ, "NO_COLOR": "1", "AGENT_PIDS_DIR": str(folder)}
    process = subprocess.Popen(
        [ATP, "test", f"--suite={suite}", "--parallel=3", "--output=json", "--output-file=out.json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # two processes hang on a request each; a third serves the rest and waits idle
        assert wait_until(lambda: len(os.listdir(folder)) == 3, within=30), os.listdir(folder)
        time.sleep(1.0)
        agents = [int(name) for name in os.listdir(folder)]
        assert all(running(pid) for pid in agents)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "finished runs are kept in" in stderr
    assert wait_until(lambda: not any(running(pid) for pid in agents), within=3)
    (run_dir,) = (tmp_path / ".atp" / "runs").iterdir()
    finished = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["test_id"] for r in finished if r["outcome"] == "passed") == ["t0", "t1", "t2", "t4"]
    assert not (run_dir / "processes.jsonl").exists()  # every process recorded has ended
