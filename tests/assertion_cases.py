"""One run that every built-in assertion type can judge, and for each type a config that passes
on it and one that fails: for ``negate: true`` on every type (tests/unit/test_negate.py, through
the kernel; tests/e2e/test_assertions_e2e.py, through ``atp test``).

The run: five text files and a binary one that is not text (inline content), a structured artifact, two tool calls, a step, a
recoverable error, an LLM call with tokens and cost, and the metrics that say the same.
"""

from __future__ import annotations

import base64
import json
from typing import Any

ANSWER = "42\n"
REPORT = "# Report\n\n## Summary\nAll good.\n"
REPORT_JSON = {"total": 42, "items": [{"id": "a-1"}]}
SOLUTION = "def add(a, b):\n    return a + b\n"
MESSY = "import os\n"
RESULT = {"status": "ok", "count": 3}
BINARY = {
    "type": "file",
    "path": "logo.png",
    "content_type": "image/png",
    "content": base64.b64encode(b"\x89PNG\r\n\x1a\n\xff\xfe").decode(),
}
"""A file artifact with no text in it (its bytes are not UTF-8): nothing to judge for a check
that reads text or JSON."""

FILES = {
    "answer.md": ANSWER,
    "report.md": REPORT,
    "report.json": json.dumps(REPORT_JSON),
    "solution.py": SOLUTION,
    "messy.py": MESSY,
}
EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("tool_call", {"tool": "web_search", "input": {"query": "acme"}}),
    ("tool_call", {"tool": "lookup", "input": {"id": 1}}),
    ("progress", {"current_step": 2, "message": "looked it up"}),
    ("error", {"error_type": "Flaky", "message": "retried", "recoverable": True}),
    ("llm_request", {"model": "m", "input_tokens": 100, "output_tokens": 50, "cost_usd": 0.01}),
]
METRICS = {"total_steps": 2, "tool_calls": 2, "total_tokens": 150, "cost_usd": 0.01}

TEST_FILE = "from solution import add\n\ndef test_add():\n    assert add(1, 2) == {}\n"

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "artifact_exists": ({"path": "answer.md"}, {"path": "missing.md"}),
    "contains": ({"path": "answer.md", "pattern": "42"}, {"path": "answer.md", "pattern": "41"}),
    "schema": (
        {"name": "result", "schema": {"type": "object", "required": ["status"]}},
        {"name": "result", "schema": {"type": "object", "required": ["owner"]}},
    ),
    "sections": (
        {"path": "report.md", "sections": ["Summary"]},
        {"path": "report.md", "sections": ["Outlook"]},
    ),
    "equals": (
        {"path": "report.json", "json_path": "$.total", "value": 42},
        {"path": "report.json", "json_path": "$.total", "value": 41},
    ),
    "python": (
        {"expression": "files['answer.md'].strip() == '42'"},
        {"expression": "data['result']['count'] > 3"},
    ),
    "must_use_tools": ({"tools": ["web_search"]}, {"tools": ["calendar"]}),
    "forbidden_tools": ({"tools": ["calendar"]}, {"tools": ["web_search"]}),
    "min_tool_calls": ({"limit": 1}, {"limit": 5}),
    "max_tool_calls": ({"limit": 5}, {"limit": 1}),
    "max_steps": ({"limit": 5}, {"limit": 1}),
    "no_errors": ({"allow_recoverable": True}, {}),
    "behavior": ({"max_tool_calls": 5}, {"max_tool_calls": 1}),
    "tool_called_with": (
        {"tool": "web_search", "input": {"query": "acme"}},
        {"tool": "web_search", "input": {"query": "other"}},
    ),
    "tool_sequence": ({"tools": ["web_search", "lookup"]}, {"tools": ["lookup", "web_search"]}),
    "latency": ({"max_seconds": 600}, {"max_seconds": 0.0001}),
    "cost": ({"max_usd": 1, "max_tokens": 1000}, {"max_usd": 0.001, "max_tokens": 10}),
    "pytest": (
        {"path": "solution.py", "files": {"test_add.py": TEST_FILE.format(3)}},
        {"path": "solution.py", "files": {"test_add.py": TEST_FILE.format(4)}},
    ),
    "lint": ({"path": "solution.py", "select": ["F"]}, {"path": "messy.py", "select": ["F"]}),
    "custom_command": (
        {"command": ["python", "-c", "from solution import add; print(add(1, 2))"], "regex": "^3$"},
        {"command": ["python", "-c", "from solution import add; print(add(1, 2))"], "regex": "^4$"},
    ),
    "llm_eval": (
        {"criteria": "factual_accuracy", "artifact": "answer.md", "threshold": 0.5},
        {"criteria": "factual_accuracy", "artifact": "answer.md", "threshold": 0.95},
    ),
}
"""Each built-in type: a config that passes on the run, one that fails (``llm_eval``: with a
judge that scores 0.9)."""

NOTHING_TO_JUDGE: dict[str, list[dict[str, Any]]] = {
    "contains": [{"path": "gone.md", "pattern": "x"}, {"path": "logo.png", "pattern": "x"}],
    "schema": [{"path": "report.md", "schema": {"type": "object"}}],
    "sections": [{"path": "gone.md", "sections": ["Summary"]}, {"path": "logo.png", "sections": ["Summary"]}],
    "equals": [
        {"path": "report.json", "json_path": "$.nothing", "value": 1},
        {"path": "answer.md", "json_path": "$.a", "value": 42},  # not JSON
    ],
    "python": [{"expression": "files['gone.md']"}],
    "llm_eval": [
        {"criteria": "factual_accuracy", "artifact": "gone.md"},
        {"criteria": "factual_accuracy", "artifact": "logo.png"},
    ],
    "pytest": [
        {"path": "solution.py", "python": "no-such-python-for-atp"},  # the interpreter cannot be used
        {"path": "solution.py", "files": {"test_none.py": "x = 1\n"}},  # no tests collected
        {"path": "solution.py", "args": ["--no-such-pytest-option"]},  # a usage error, no report
    ],
    "lint": [
        {"path": "solution.py", "python": "no-such-python-for-atp"},
        {"path": "solution.py", "timeout_seconds": 0.001},  # killed at its time limit
    ],
    "custom_command": [
        {"command": ["no-such-program-for-atp"]},  # not found
        {"command": ["python", "-c", "import time; time.sleep(30)"], "timeout_seconds": 0.5},  # killed
    ],
}
"""Each built-in type that can find nothing to judge in the run: configs for which it does
(the artifact is missing or has no text, the tool cannot run or ran no test), so that ``negate:
true`` leaves the check failed."""

ALWAYS_JUDGED = {
    "artifact_exists",  # its subject is the artifact's presence: negated, it passes when missing
    "must_use_tools",
    "forbidden_tools",
    "min_tool_calls",
    "max_tool_calls",
    "max_steps",
    "no_errors",
    "behavior",
    "tool_called_with",
    "tool_sequence",
    "latency",  # with no duration measured its check is skipped, not failed
    "cost",  # the same with no cost or tokens reported
}
"""The built-in types that judge every run: the trace is always there to judge."""


def agent_source() -> str:
    """A cli agent (stdin/stdout transport, standard library only) that answers every request
    with the run above."""
    return (
        "import json, sys\n"
        "request = json.loads(sys.stdin.readline())\n"
        "task = request['task_id']\n"
        f"events = {EVENTS!r}\n"
        "for number, (kind, payload) in enumerate(events):\n"
        "    print(json.dumps({'version': '1.0', 'task_id': task, 'timestamp': '2026-01-01T00:00:00Z',\n"
        "                      'sequence': number, 'event_type': kind, 'payload': payload}), file=sys.stderr)\n"
        f"files = {FILES!r}\n"
        "artifacts = [{'type': 'file', 'path': path, 'content': text} for path, text in files.items()]\n"
        f"artifacts.append({BINARY!r})\n"
        f"artifacts.append({{'type': 'structured', 'name': 'result', 'data': {RESULT!r}}})\n"
        "print(json.dumps({'version': '1.0', 'task_id': task, 'status': 'completed',\n"
        f"                  'artifacts': artifacts, 'metrics': {METRICS!r}}}))\n"
    )
