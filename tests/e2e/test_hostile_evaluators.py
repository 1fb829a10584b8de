"""The built-in evaluators against a hostile agent, through the `atp` command: each suite has a
hostile test and ordinary ones, and `atp test` ends quickly with the ordinary results intact.

ATP runs with a pipe as its standard input whose writing end stays open, so an evaluator that
read /dev/stdin would wait forever."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.facts import one_error, says

HOSTILE = [PYTHON, str(AGENTS / "hostile_artifacts.py")]


NORMAL = """\
  - id: normal
    task: {description: x, input_data: {mode: normal}}
    assertions:
      - type: contains
        config: {path: report.md, pattern: Microsoft Teams}
      - type: sections
        config: {path: report.md, sections: [Overview, Competitors]}
      - type: schema
        config: {name: result, schema: {type: object, required: [competitors]}}
"""


def run_atp(*args: str, cwd: Path, timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    """`atp` and how long it took, with a standard input that never ends."""
    reader, writer = os.pipe()
    started = time.monotonic()
    try:
        result = subprocess.run(
            [ATP, *args],
            cwd=cwd,
            env={**os.environ, "NO_COLOR": "1"},
            stdin=reader,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        os.close(reader)
        os.close(writer)
    return result, time.monotonic() - started


def hostile_suite(tmp_path: Path, tests: str, agent_cwd: str | None = None, shared: bool = False) -> Path:
    """``shared``: every run in the agent's ``cwd`` (``working_folder: shared``), without a
    workspace: paths are read as the agent gives them, not from a folder of the run's own."""
    cwd = f"\n    cwd: {agent_cwd}" if agent_cwd else ""
    cwd += "\n    working_folder: shared" if shared else ""
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: hostile\nagents:\n  - name: agent\n    type: cli\n    command: {HOSTILE!r}{cwd}\n"
        f"tests:\n{NORMAL}{tests}",
    )


def results(tmp_path: Path) -> dict[str, dict[str, object]]:
    data = json.loads((tmp_path / "results.json").read_text())
    return {test["id"]: test["runs"][0] for test in data["tests"]}


def messages(run: dict[str, object]) -> list[str]:
    return [check["message"] for check in run["checks"]]  # type: ignore[attr-defined]


def test_a_cubic_heading_line_is_parsed_quickly(tmp_path: Path) -> None:
    """1: a 4,000-character heading line of spaces took the old heading regex minutes."""
    suite = hostile_suite(
        tmp_path,
        """\
  - id: long_heading
    task: {description: x, input_data: {mode: long_heading}}
    assertions:
      - type: sections
        config: {path: report.md, sections: [Intro, Summary]}
""",
    )
    result, elapsed = run_atp("test", f"--suite={suite}", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert elapsed < 10, elapsed
    assert "  ✓ normal" in result.stdout and "  ✓ long_heading" in result.stdout
    assert "Summary: 2 passed, 0 failed, 0 skipped" in result.stdout


def test_a_catastrophic_regex_fails_after_its_time_limit(tmp_path: Path) -> None:
    """2: the regex is stopped after the default 1 s; the classic nested quantifier finishes."""
    suite = hostile_suite(
        tmp_path,
        """\
  - id: regex_bomb
    task: {description: x, input_data: {mode: regex_bomb}}
    assertions:
      - type: contains
        config: {path: out.txt, pattern: "^(a|aa)+$", regex: true}
  - id: nested_quantifier
    task: {description: x, input_data: {mode: regex_bomb}}
    assertions:
      - type: contains
        config: {path: out.txt, pattern: "^(a+)+!$", regex: true}
""",
    )
    result, elapsed = run_atp("test", f"--suite={suite}", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert elapsed < 10, elapsed
    assert "  ✓ normal" in result.stdout and "  ✓ nested_quantifier" in result.stdout
    assert "  ✗ regex_bomb" in result.stdout
    assert (
        "    - contains:out.txt: the regex '^(a|aa)+$' took longer than 1 s on out.txt; ATP stopped it"
        in result.stdout
    )
    assert "Summary: 2 passed, 1 failed, 0 skipped" in result.stdout


def test_the_regex_time_limit_is_an_evaluator_setting(tmp_path: Path) -> None:
    """2: `evaluators.contains.regex_timeout_seconds` in atp.config.yaml."""
    write(tmp_path / "atp.config.yaml", "evaluators:\n  contains: {regex_timeout_seconds: 0.3}\n")
    suite = hostile_suite(
        tmp_path,
        """\
  - id: regex_bomb
    task: {description: x, input_data: {mode: regex_bomb}}
    assertions:
      - type: contains
        config: {path: out.txt, pattern: "^(a|aa)+$", regex: true}
""",
    )
    result, elapsed = run_atp(
        "test", f"--suite={suite}", "--output=json", "--output-file=results.json", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert elapsed < 10, elapsed
    runs = results(tmp_path)
    assert runs["normal"]["outcome"] == "passed"
    assert runs["regex_bomb"]["outcome"] == "failed"
    assert messages(runs["regex_bomb"]) == [
        "the regex '^(a|aa)+$' took longer than 0.3 s on out.txt; ATP stopped it"
    ]


def test_fifos_devices_and_directories_are_refused_without_blocking(tmp_path: Path) -> None:
    """3: only regular files are read; the old open() of a FIFO or /dev/stdin never returned."""
    fifo, folder = tmp_path / "agent_fifo", tmp_path / "agent_folder"
    cases = {
        "fifo": (fifo, "fifo"),
        "stdin": ("/dev/stdin", None),
        "zero": ("/dev/zero", None),
        "folder": (folder, "dir"),
    }
    tests = ""
    for test_id, (path, make) in cases.items():
        data = {"mode": "special", "path": str(path), **({"make": make} if make else {})}
        tests += (
            f"  - id: {test_id}\n    task: {{description: x, input_data: {json.dumps(data)}}}\n"
            f"    assertions:\n      - type: contains\n        config: {{path: {json.dumps(str(path))}, pattern: x}}\n"
        )
    suite = hostile_suite(tmp_path, tests, shared=True)  # (absolute paths: no workspace to leave)
    result, elapsed = run_atp(
        "test", f"--suite={suite}", "--output=json", "--output-file=results.json", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert elapsed < 10, elapsed
    runs = results(tmp_path)
    assert runs["normal"]["outcome"] == "passed"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # the agent did make one
    for test_id, kind in (
        ("fifo", "a FIFO"),
        ("stdin", "a FIFO"),
        ("zero", "a character device"),
        ("folder", "a directory"),
    ):
        path = str(cases[test_id][0])
        assert runs[test_id]["outcome"] == "failed", test_id
        assert messages(runs[test_id]) == [
            f"expected text 'x' in {path}, but ATP read none of it: "
            f"{path} is {kind}, not a regular file; ATP reads only regular files"
        ]


def test_cpu_heavy_evaluation_does_not_hold_up_other_runs(tmp_path: Path) -> None:
    """4: a 4-second regex match runs on a worker thread: a run in parallel times out on time
    (with the match on the event loop, its 2 s limit would only be noticed after 4 s)."""
    write(tmp_path / "atp.config.yaml", "evaluators:\n  contains: {regex_timeout_seconds: 4}\n")
    suite = hostile_suite(
        tmp_path,
        """\
  - id: regex_bomb
    task: {description: x, input_data: {mode: regex_bomb}}
    assertions:
      - type: contains
        config: {path: out.txt, pattern: "^(a|aa)+$", regex: true}
  - id: sleeper
    task: {description: x, input_data: {mode: sleep}}
    constraints: {timeout_seconds: 2}
""",
    )
    result, elapsed = run_atp(
        "test",
        f"--suite={suite}",
        "--parallel=3",
        "--output=json",
        "--output-file=results.json",
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert elapsed < 15, elapsed
    runs = results(tmp_path)
    assert runs["normal"]["outcome"] == "passed"
    assert messages(runs["regex_bomb"]) == [
        "the regex '^(a|aa)+$' took longer than 4 s on out.txt; ATP stopped it"
    ]
    sleeper = runs["sleeper"]
    assert sleeper["status"] == "timeout" and sleeper["error"] == "timed out after 2 s; the agent was stopped"
    assert 1.9 < sleeper["duration_seconds"] < 3.2, sleeper["duration_seconds"]  # type: ignore[operator]


def test_relative_artifact_paths_are_read_from_the_agents_folder(tmp_path: Path) -> None:
    """5: report.md is the one in the agent's working folder, not a same-named file beside ATP."""
    (tmp_path / "agent_home").mkdir()
    (tmp_path / "report.md").write_text("# Decoy\nDECOY\n")
    suite = hostile_suite(
        tmp_path,
        """\
  - id: own_report
    task: {description: x, input_data: {mode: relative}}
    assertions:
      - type: contains
        config: {path: report.md, pattern: "the agent's own report"}
  - id: decoy_report
    task: {description: x, input_data: {mode: relative}}
    assertions:
      - type: contains
        config: {path: report.md, pattern: DECOY}
""",
        agent_cwd="agent_home",
        shared=True,  # (the agent's folder, not one of the run's own: tests/e2e/test_run_folders.py)
    )
    result, elapsed = run_atp(
        "test", f"--suite={suite}", "--output=json", "--output-file=results.json", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert elapsed < 10, elapsed
    runs = results(tmp_path)
    assert (tmp_path / "agent_home" / "report.md").read_text() == "the agent's own report\n"
    assert runs["normal"]["outcome"] == "passed"
    assert runs["own_report"]["outcome"] == "passed", messages(runs["own_report"])
    assert runs["decoy_report"]["outcome"] == "failed"
    (decoy,) = messages(runs["decoy_report"])
    says(decoy, "'DECOY'", "report.md", "not found in 23 characters", "'the agent's own report\\n'")


@pytest.mark.parametrize(
    ("assertion", "reason"),
    [
        (
            "{type: contains, config: {path: report.md, pattern: ''}}",
            ("'pattern'", "empty"),
        ),
        ("{type: must_use_tools, config: {tools: []}}", ("'tools'", "names no tool", "always pass")),
        ("{type: forbidden_tools, config: {tools: [shell, ' ']}}", ("'tools'", "blank tool name")),
        (
            "{type: behavior, config: {must_use_tools: [], max_steps: 3}}",
            ("'must_use_tools'", "names no tool", "always pass"),
        ),
        (
            "{type: behavior, config: {forbidden_tools: []}}",
            ("'forbidden_tools'", "names no tool", "always pass"),
        ),
    ],
)
def test_assertions_that_would_always_pass_are_refused_at_load(
    tmp_path: Path, assertion: str, reason: tuple[str, ...]
) -> None:
    """6: the suite does not load; the error names the file, the line and the assertion."""
    suite = hostile_suite(
        tmp_path,
        f"  - id: empty\n    task: {{description: x, input_data: {{mode: normal}}}}\n"
        f"    assertions:\n      - {assertion}\n",
    )
    line = len(suite.read_text().splitlines())
    result, elapsed = run_atp("test", f"--suite={suite}", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert elapsed < 10, elapsed
    assert result.stdout == ""
    one_error(result.stderr, f"{suite}:{line}:", "tests[1].assertions[0].config", *reason)
    assert not (tmp_path / ".atp").exists()  # nothing ran


def test_an_invalid_json_schema_is_refused_before_the_agent_runs(tmp_path: Path) -> None:
    """7: the schema is checked when the suite loads, not after the agent ran."""
    suite = hostile_suite(
        tmp_path,
        """\
  - id: bad_schema
    task: {description: x, input_data: {mode: normal}}
    assertions:
      - type: schema
        config: {name: result, schema: {type: object, properties: {n: {minimum: ten}}}}
""",
    )
    line = len(suite.read_text().splitlines())
    result, elapsed = run_atp("test", f"--suite={suite}", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert elapsed < 10, elapsed
    one_error(
        result.stderr,
        f"{suite}:{line}:",
        "tests[1].assertions[0].config",
        "'schema' is not a valid JSON Schema",
        "'ten' is not of type 'number'",
    )
    assert not (tmp_path / ".atp").exists()
