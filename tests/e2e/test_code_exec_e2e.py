"""``pytest``, ``lint`` and ``custom_command`` through the `atp` command: the code-execution
example's agent (examples/code_exec/agent.py) writes ``solution.py``, right or with bugs, and
the suite's tests, ruff and a command of the suite's judge it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLES, PYTHON, write
from tests.e2e.test_atp_command import atp

AGENT = [PYTHON, str(EXAMPLES / "code_exec" / "agent.py")]
ASSERTIONS = """\
    assertions:
      - type: pytest
        config:
          path: solution.py
          files:
            test_solution.py: |
              from solution import mean, median

              def test_mean():
                  assert mean([1, 2, 3, 4]) == 2.5

              def test_median_odd():
                  assert median([3, 1, 2]) == 2
      - type: lint
        config: {path: solution.py, select: [F]}
      - type: custom_command
        name: median_cli
        config:
          command: [python, -c, "from solution import median; print(median([5, 1, 4]))"]
          regex: "^4$"
"""


def checks(tmp_path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The checks of each test's run, by test id and check name."""
    data = json.loads((tmp_path / "results.json").read_text())
    return {test["id"]: {c["name"]: c for c in test["runs"][0]["checks"]} for test in data["tests"]}


def test_code_is_tested_linted_and_run_by_atp_test(tmp_path: Path) -> None:
    suite = write(
        tmp_path / "suite.yaml",
        f"test_suite: code\nagents:\n  - name: coder\n    type: cli\n    command: {AGENT!r}\ntests:\n"
        f"  - id: good\n    task:\n      description: write solution.py\n      input_data: {{variant: good}}\n"
        f"{ASSERTIONS}"
        f"  - id: buggy\n    task:\n      description: write solution.py\n      input_data: {{variant: buggy}}\n"
        f"{ASSERTIONS}",
    )
    temporary = tmp_path / "tmp"  # where the commands' folders are made (and removed)
    temporary.mkdir()
    result = atp(
        "test", f"--suite={suite}", "--output=console", "--output=json", "--output-file=results.json",
        cwd=tmp_path, env={"TMPDIR": str(temporary)},
    )  # fmt: skip
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "  ✓ good" in out and "  ✗ buggy" in out
    assert "Summary: 1 passed, 1 failed, 0 skipped" in out
    assert (
        "    - pytest:solution.py: 1 of 2 tests passed (50%); failed: test_solution::test_median_odd "
        "(assert 1 == 2)" in out
    )
    assert (
        "    - lint:solution.py: 1 finding in solution.py (max_findings 0): solution.py:2:8 F401 `os` imported but unused"
        in out
    )
    assert (
        "    - median_cli: python -c 'from solution import median; print(median([5, 1, 4]))' exited with 0 as "
        "expected, but its output does not match '^4$'; it ends: 1" in out
    )

    runs = checks(tmp_path)
    good = runs["good"]
    assert set(good) == {"pytest:solution.py", "lint:solution.py", "median_cli"}
    assert all(check["passed"] and check["score"] == 1.0 for check in good.values()), good
    assert good["pytest:solution.py"]["details"]["tests"] == {
        "passed": 2,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
    }

    buggy = runs["buggy"]
    tested = buggy["pytest:solution.py"]
    assert not tested["passed"] and tested["score"] == 0.5
    assert [f["test"] for f in tested["details"]["failures"]] == ["test_solution::test_median_odd"]
    linted = buggy["lint:solution.py"]
    assert linted["score"] == 0.5 and linted["details"]["findings"] == [
        {"file": "solution.py", "line": 2, "column": 8, "code": "F401", "message": "`os` imported but unused"}
    ]
    for check in (*good.values(), *buggy.values()):
        assert check["details"]["network"].startswith(("isolated", "not isolated ("))
    assert list(temporary.iterdir()) == []
