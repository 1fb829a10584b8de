"""What an agent declares of its file artifacts (``size_bytes``, ``content_hash``) checked, and
binary content read from base64, through the `atp` command: a mismatch fails the run as the
agent's failure naming both values; honest artifacts pass, a PNG and a text sent in base64
included; the other tests' results are intact (tests/agents/declared_artifacts.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.facts import says

AGENT = [PYTHON, str(AGENTS / "declared_artifacts.py")]

HONEST = """\
  - id: honest
    task: {description: x, input_data: {mode: honest}}
    assertions:
      - type: contains
        config: {path: report.md, pattern: Microsoft Teams}
      - type: artifact_exists
        config: {path: logo.png}
      - type: contains
        config: {path: notes.bin, pattern: naïve estimate}
      - type: contains
        config: {path: data.bin, pattern: "0123456789"}
"""


def run_suite(
    tmp_path: Path, tests: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, object]]]:
    """`atp test` of the honest test and ``tests``; its output and each test's first run."""
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    suite = write(
        tmp_path / "suite.yaml",
        f"test_suite: declared\nagents:\n  - name: agent\n    type: cli\n    command: {AGENT!r}\n"
        f"    cwd: {agent_dir}\ntests:\n{HONEST}{tests}",
    )
    result = subprocess.run(
        [ATP, "test", f"--suite={suite}", "--output=json", "--output-file=results.json"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    data = json.loads((tmp_path / "results.json").read_text())
    return result, {test["id"]: test["runs"][0] for test in data["tests"]}


def honest_is_intact(runs: dict[str, dict[str, object]]) -> None:
    honest = runs["honest"]
    assert honest["outcome"] == "passed", honest
    assert honest["error"] is None and honest["warnings"] == []
    messages = [check["message"] for check in honest["checks"]]  # type: ignore[attr-defined]
    says(messages[1], "logo.png exists")
    says(messages[2], "notes.bin contains", "naïve estimate")


def test_honest_artifacts_pass_and_base64_is_read(tmp_path: Path) -> None:
    """A PNG (its bytes verified against its sha256) and a text in base64, a text inline and a
    file named by path, each with its true size and hash: every check passes."""
    result, runs = run_suite(
        tmp_path,
        """\
  - id: png_is_not_text
    task: {description: x, input_data: {mode: honest}}
    assertions:
      - type: contains
        config: {path: logo.png, pattern: PNG}
""",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    honest_is_intact(runs)
    png = runs["png_is_not_text"]
    assert png["outcome"] == "failed" and png["error"] is None, png
    (check,) = png["checks"]  # type: ignore[misc]
    says(check["message"], "logo.png is binary", "image/png", "not UTF-8 text")
    sent = next(a for a in png["artifacts"] if a["path"] == "logo.png")  # type: ignore[attr-defined]
    assert sent["content_hash"] == "sha256:" + hashlib.sha256(_png()).hexdigest()


def test_a_hash_mismatch_fails_the_run_naming_both_values(tmp_path: Path) -> None:
    result, runs = run_suite(
        tmp_path,
        """\
  - id: lies_about_hash
    task: {description: x, input_data: {mode: hash_mismatch}}
    assertions:
      - type: contains
        config: {path: report.md, pattern: Microsoft Teams}
""",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    honest_is_intact(runs)
    run = runs["lies_about_hash"]
    assert run["outcome"] == "failed" and run["status"] == "completed", run
    claimed = "sha256:" + hashlib.sha256(b"another report").hexdigest()
    actual = "sha256:" + hashlib.sha256(_report()).hexdigest()
    says(run["error"], "artifact report.md", f"content_hash says {claimed}", f"the content's is {actual}")
    says(result.stdout, "lies_about_hash", claimed, actual)
    assert all(check["passed"] for check in run["checks"])  # type: ignore[attr-defined]


def test_a_size_mismatch_fails_the_run_naming_both_values(tmp_path: Path) -> None:
    result, runs = run_suite(
        tmp_path,
        """\
  - id: lies_about_size
    task: {description: x, input_data: {mode: size_mismatch}}
  - id: lies_about_a_file
    task: {description: x, input_data: {mode: file_mismatch}}
""",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    honest_is_intact(runs)
    inline, on_disk = runs["lies_about_size"], runs["lies_about_a_file"]
    assert inline["outcome"] == on_disk["outcome"] == "failed"
    says(inline["error"], "artifact report.md: size_bytes says 120, the content has 98 bytes")
    says(on_disk["error"], "artifact data.bin: size_bytes says 12, the file has 10 bytes")
    says(result.stdout, "size_bytes says 120, the content has 98 bytes")


def test_content_that_is_not_base64_and_a_hash_atp_cannot_check_fail_the_run(tmp_path: Path) -> None:
    result, runs = run_suite(
        tmp_path,
        """\
  - id: bad_base64
    task: {description: x, input_data: {mode: bad_base64}}
    assertions:
      - type: artifact_exists
        config: {path: logo.png}
  - id: bad_hash
    task: {description: x, input_data: {mode: bad_hash}}
""",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    honest_is_intact(runs)
    says(runs["bad_base64"]["error"], "logo.png", "image/png", "binary", "base64")
    says(runs["bad_hash"]["error"], "report.md", "md5:", "sha256")
    assert runs["bad_base64"]["outcome"] == runs["bad_hash"]["outcome"] == "failed"


def _agent() -> Any:
    """The test agent's module (its report and its PNG)."""
    spec = importlib.util.spec_from_file_location("declared_artifacts", AGENTS / "declared_artifacts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report() -> bytes:
    return _agent().REPORT.encode("utf-8")  # type: ignore[no-any-return]


def _png() -> bytes:
    return _agent().png()  # type: ignore[no-any-return]
