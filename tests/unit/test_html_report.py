"""The ``html`` reporter without a browser: the page is one document that fetches nothing, its
CSP hashes are those of its script and stylesheet, its data is the results and reads back, agent
text cannot become markup, and sizes stay bounded. tests/browser drives the page itself.

The stores made here (:func:`make_store`, :func:`hostile_store`, :func:`large_store`) are used by
tests/browser too.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from atp.core.baseline import Baseline, BaselineRun, BaselineTest
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.plugins import Plugins
from atp.core.protocol import (
    ATPRequest,
    ATPResponse,
    ErrorPayload,
    FileArtifact,
    Metrics,
    ReasoningPayload,
    ReferenceArtifact,
    StructuredArtifact,
    ToolCallPayload,
    make_event,
)
from atp.core.reporter import ReportOptions
from atp.core.results import (
    Check,
    PassRule,
    PlannedTest,
    PluginFailure,
    RunHeader,
    RunResult,
    RunStore,
    SuiteResults,
)
from atp.core.runner import Runner
from atp.core.suite import load_suite
from atp.core.trace import EventSink
from atp.reporters import html as html_reporter
from atp.reporters.html import HtmlReporter, render, script_safe
from tests.conftest import builtin_plugins, write

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TID = "550e8400-e29b-41d4-a716-446655440000"

PWN = "window.__pwned=1"
HOSTILE_SCRIPT = f"<script>{PWN}</script>"
HOSTILE_IMG = f'<img src=x onerror="{PWN}">'
HOSTILE_CLOSE = f"</script><script>{PWN}</script>"
HOSTILE_LINK = f"[x](javascript:{PWN})"
HOSTILE_TEXTS = (HOSTILE_SCRIPT, HOSTILE_IMG, HOSTILE_CLOSE)
"""What a hostile agent writes everywhere it can; the page must show each as text."""
HOSTILE_ID = f"t {HOSTILE_CLOSE} {HOSTILE_IMG}"


# --- stores -------------------------------------------------------------------------------------


def event(
    sequence: int, event_type: str, payload: dict[str, Any], at: float = 0.0, **extra: Any
) -> dict[str, Any]:
    """An ATP event as stored (``at``: seconds after NOW)."""
    stamp = (NOW + timedelta(seconds=at)).isoformat().replace("+00:00", "Z")
    return {
        "version": "1.0",
        "task_id": TID,
        "timestamp": stamp,
        "sequence": sequence,
        "event_type": event_type,
        "payload": payload,
        **extra,
    }


def write_events(store: RunStore, test_id: str, run_number: int, events: list[dict[str, Any]]) -> str:
    name = store.events_file(test_id, run_number)
    path = store.directory / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return name


def write_log(store: RunStore, test_id: str, run_number: int, text: str) -> str:
    name = store.log_file(test_id, run_number)
    path = store.directory / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return name


def run_result(test_id: str, number: int = 1, **fields: Any) -> RunResult:
    defaults: dict[str, Any] = {
        "outcome": "passed",
        "status": "completed",
        "score": 100.0,
        "duration_seconds": 1.0,
    }
    return RunResult(
        test_id=test_id, run_number=number, task_id=TID, started_at=NOW, **{**defaults, **fields}
    )


REPORT_MD = """# Market report

Teams leads the market; see [the source](https://example.com/teams) and **bold** and *emphasis*.

## Competitors
1. Microsoft Teams
2. `Slack`

- a point
- another

```
code block
```
"""

TRACE = [
    event(0, "state_change", {"from_state": "idle", "to_state": "searching", "reason": "task received"}, 0.0),
    event(
        1,
        "llm_request",
        {"model": "gpt-test", "input_tokens": 120, "output_tokens": 30, "duration_ms": 850.0},
        0.1,
    ),
    event(
        2,
        "reasoning",
        {"thought": "I should search the web first", "plan": ["search", "summarise"], "step": "plan"},
        1.0,
    ),
    event(
        3,
        "tool_call",
        {
            "tool": "web_search",
            "input": {"query": "video conferencing market"},
            "output": {"results": ["Teams", "Zoom"]},
            "duration_ms": 420.0,
            "status": "success",
        },
        1.2,
    ),
    event(
        4, "progress", {"current_step": 2, "total_steps": 4, "percentage": 50.0, "message": "half way"}, 2.0
    ),
    event(
        5,
        "error",
        {"error_type": "RateLimit", "message": "slow down", "recoverable": True, "retry_after_ms": 500.0},
        2.5,
    ),
    event(6, "artifact_created", {"artifact_type": "file", "path": "report.md", "size_bytes": 240}, 3.0),
    event(7, "custom_thing", {"anything": [1, 2, 3]}, 3.5),
    event(
        0,
        "tool_call",
        {"tool": "calendar", "input": {"day": "monday"}, "output": "busy"},
        3.6,
        recorded_by="tools",
    ),
]


def make_store(tmp_path: Path) -> tuple[SuiteResults, RunStore]:
    """A run of three tests: one passed twice with a full trace and artifacts, one failed with
    a log, one skipped; compared with a baseline the first regressed against."""
    header = RunHeader(
        run_id="20260101-000000-abcdef",
        suite="competitor_analysis",
        agent="research",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW + timedelta(seconds=7.4),
        tests=[
            PlannedTest(id="basic_search", name="Basic search", runs=2, tags=["web", "smoke"]),
            PlannedTest(
                id="unknown_company",
                name="Unknown company",
                tags=["web"],
                pass_rule=PassRule(rule="min_score", threshold=70),
            ),
            PlannedTest(id="later", name="Later", skip="not ready", tags=["slow"]),
        ],
    )
    baseline = Baseline(
        suite="competitor_analysis",
        tests={
            "basic_search": BaselineTest(
                mean_score=99.0, n_runs=5, runs=[BaselineRun(score=s) for s in (99, 98, 100, 99, 99)]
            ),
        },
    )
    store = RunStore.create(tmp_path / "runs", header, baseline=baseline)
    ok = Check(
        name="contains:report.md", passed=True, score=1.0, message="report.md contains 'Teams' (line 3)"
    )
    bad = Check(
        name="sections:report.md",
        passed=False,
        score=0.5,
        message="missing ['Summary']",
        details={"expected": ["Overview", "Summary"], "found": ["Overview"]},
    )
    artifacts = [
        FileArtifact(path="report.md", content_type="text/markdown", content=REPORT_MD),
        StructuredArtifact(name="result", data={"competitors": ["Microsoft Teams", "Zoom"], "count": 2}),
        ReferenceArtifact(path="/tmp/big.bin", size_bytes=5_000_000),
    ]
    judged = Check(
        name="llm_eval:clarity",
        passed=False,
        score=0.0,
        message="the LLM judge has no API key",
        skipped="the LLM judge has no API key",
    )
    for number, score in ((1, 88.0), (2, 87.0)):
        store.append(
            run_result(
                "basic_search",
                number,
                score=score,
                checks=[ok, judged],
                artifacts=artifacts,
                score_breakdown={"quality": 0.9, "efficiency": 0.7},
                metrics=Metrics(total_tokens=150, tool_calls=1, llm_calls=1, cost_usd=0.002),
                events_file=write_events(store, "basic_search", number, TRACE),
            )
        )
    store.append(
        run_result(
            "unknown_company",
            outcome="failed",
            status="timeout",
            score=40.0,
            duration_seconds=2.0,
            checks=[ok, bad],
            error="timed out after 2 s; the agent was stopped",
            warnings=["the agent sent 2 events out of order"],
            log_file=write_log(store, "unknown_company", 1, "thinking...\nstill thinking\n"),
            log_tail=["thinking...", "still thinking"],
        )
    )
    store.close()
    return store.results(), store


def hostile_store(tmp_path: Path) -> tuple[SuiteResults, RunStore]:
    """A run whose every agent-supplied text tries to become markup or script."""
    header = RunHeader(
        run_id="hostile",
        suite=f"suite {HOSTILE_SCRIPT}",
        agent=f"agent {HOSTILE_IMG}",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW + timedelta(seconds=1),
        tests=[
            PlannedTest(
                id=HOSTILE_ID,
                name=f"name {HOSTILE_SCRIPT}",
                description=HOSTILE_CLOSE,
                tags=[HOSTILE_IMG],
                runs=1,
            )
        ],
        plugin_failures=[
            PluginFailure(
                plugin=HOSTILE_SCRIPT, where="atp_run_finished", message=HOSTILE_CLOSE, traceback=HOSTILE_IMG
            )
        ],
    )
    store = RunStore.create(tmp_path / "runs", header)
    markdown = (
        f"# Title {HOSTILE_SCRIPT}\n\n{HOSTILE_IMG}\n\nclick {HOSTILE_LINK} or [y](JaVaScRiPt:{PWN}) "
        f"or [z](data:text/html,{HOSTILE_SCRIPT}) or [fine](https://example.com/ok)\n\n"
        f"- {HOSTILE_CLOSE}\n\n```\n{HOSTILE_CLOSE}\n```\n\n**{HOSTILE_IMG}** `{HOSTILE_SCRIPT}`\n"
    )
    events = [
        event(
            0,
            "tool_call",
            {
                "tool": HOSTILE_SCRIPT,
                "input": {HOSTILE_IMG: HOSTILE_CLOSE},
                "output": HOSTILE_CLOSE,
                "error": HOSTILE_IMG,
                "status": HOSTILE_SCRIPT,
            },
        ),
        event(1, "reasoning", {"thought": HOSTILE_CLOSE, "plan": [HOSTILE_IMG], "step": HOSTILE_SCRIPT}, 0.5),
        event(2, "llm_request", {"model": HOSTILE_IMG, "stop_reason": HOSTILE_CLOSE}, 0.6),
        event(
            3,
            "state_change",
            {"from_state": HOSTILE_SCRIPT, "to_state": HOSTILE_IMG, "reason": HOSTILE_CLOSE},
            0.7,
        ),
        event(4, "error", {"error_type": HOSTILE_IMG, "message": HOSTILE_CLOSE}, 0.8),
        event(5, "progress", {"message": HOSTILE_CLOSE, "percentage": "100%; background:url(http://x)"}, 0.9),
        event(6, "artifact_created", {"name": HOSTILE_IMG, "path": HOSTILE_SCRIPT}, 1.0),
        event(7, HOSTILE_IMG, {HOSTILE_SCRIPT: HOSTILE_CLOSE}, 1.1),
        {**event(8, "\u2028</script>", {"x": "\u2029<!--<script>"}, 1.2), "timestamp": HOSTILE_CLOSE},
    ]
    check = Check(
        name=HOSTILE_IMG,
        passed=False,
        score=0.0,
        message=HOSTILE_CLOSE,
        details={HOSTILE_SCRIPT: [HOSTILE_CLOSE, HOSTILE_IMG]},
    )
    store.append(
        run_result(
            HOSTILE_ID,
            outcome="failed",
            status="failed",
            score=0.0,
            checks=[check],
            error=HOSTILE_CLOSE,
            warnings=[HOSTILE_IMG],
            traceback=HOSTILE_SCRIPT,
            score_breakdown={HOSTILE_IMG: 0.5},
            artifacts=[
                FileArtifact(path=f"{HOSTILE_IMG}.md", content_type="text/markdown", content=markdown),
                FileArtifact(
                    path="page.html",
                    content_type="text/html",
                    content=f"<html>{HOSTILE_CLOSE}{HOSTILE_IMG}</html>",
                ),
                FileArtifact(path="data.json", content=json.dumps({"x": HOSTILE_CLOSE})),
                StructuredArtifact(
                    name=HOSTILE_SCRIPT, data={HOSTILE_IMG: HOSTILE_CLOSE}, schema=HOSTILE_IMG
                ),
                ReferenceArtifact(path=HOSTILE_CLOSE, content_type=HOSTILE_IMG),
            ],
            events_file=write_events(store, HOSTILE_ID, 1, events),
            log_file=write_log(store, HOSTILE_ID, 1, f"starting\n{HOSTILE_CLOSE}\n{HOSTILE_IMG}\n"),
        )
    )
    store.close()
    return store.results(), store


def large_store(tmp_path: Path, tests: int = 1000, events: int = 10_000) -> tuple[SuiteResults, RunStore]:
    """``tests`` tests of every status with tags, one run each (two for every tenth); the first
    test's run has ``events`` events of every type, a second apart at most."""
    planned = []
    for i in range(tests):
        skip = "not ready" if i % 10 == 9 else None
        tags = ["even" if i % 2 == 0 else "odd", f"group-{i % 3}"]
        planned.append(
            PlannedTest(
                id=f"test_{i:04d}",
                name=f"Test number {i}",
                tags=tags,
                skip=skip,
                runs=2 if i % 10 == 0 else 1,
            )
        )
    header = RunHeader(
        run_id="large",
        suite="large",
        agent="bulk",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW + timedelta(seconds=3600),
        tests=planned,
    )
    store = RunStore.create(tmp_path / "runs", header)
    kinds = [
        (
            "tool_call",
            lambda n: {"tool": f"tool_{n % 7}", "input": {"query": f"q {n}"}, "output": {"hits": n % 13}},
        ),
        (
            "llm_request",
            lambda n: {
                "model": "gpt-test",
                "input_tokens": n % 500,
                "output_tokens": n % 80,
                "duration_ms": 12.5,
            },
        ),
        ("reasoning", lambda n: {"thought": f"thinking about step {n}"}),
        (
            "progress",
            lambda n: {"current_step": n, "total_steps": events, "percentage": 100.0 * n / max(events, 1)},
        ),
        ("state_change", lambda n: {"from_state": "a", "to_state": "b"}),
        ("error", lambda n: {"error_type": "Retry", "message": f"retry {n}", "recoverable": True}),
    ]
    trace = [
        event(n, kinds[n % len(kinds)][0], kinds[n % len(kinds)][1](n), at=n * 0.25) for n in range(events)
    ]
    failing = Check(
        name="contains:report.md", passed=False, score=0.0, message="report.md does not contain 'Teams'"
    )
    passing = Check(name="artifact_exists:result", passed=True, score=1.0, message="found")
    for i, test in enumerate(planned):
        if test.skip:
            continue
        for number in range(1, test.runs + 1):
            fields: dict[str, Any] = {
                "score": float((i * 37 + number * 11) % 101),
                "duration_seconds": 0.1 + (i % 17) / 10,
            }
            if i % 7 == 3:
                fields.update(
                    outcome="error", status="failed", score=0.0, error="the agent exited with code 1"
                )
            elif i % 5 == 1:
                fields.update(outcome="failed", checks=[passing, failing])
            else:
                fields.update(checks=[passing])
            if i == 0 and number == 1:
                fields["events_file"] = write_events(store, test.id, number, trace)
            store.append(run_result(test.id, number, **fields))
    store.close()
    return store.results(), store


def write_report(results: SuiteResults, store: RunStore, target: Path) -> Path:
    HtmlReporter(ReportOptions(output_file=target)).report(results, store)
    return target


# --- reading the page ---------------------------------------------------------------------------


class Page(HTMLParser):
    """The elements of a page, with the text of its scripts and stylesheets as they are."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.styles: list[str] = []
        self.doctype: str | None = None
        self._raw: tuple[str, dict[str, str | None], list[str]] | None = None
        self.feed(text)
        self.close()

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._raw = (tag, dict(attrs), [])

    def handle_data(self, data: str) -> None:
        if self._raw is not None:
            self._raw[2].append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._raw is not None and tag == self._raw[0]:
            text = "".join(self._raw[2])
            if tag == "script":
                self.scripts.append((self._raw[1], text))
            else:
                self.styles.append(text)
            self._raw = None

    @property
    def data(self) -> str:
        return next(text for attrs, text in self.scripts if attrs.get("id") == "atp-data")

    @property
    def script(self) -> str:
        return next(text for attrs, text in self.scripts if "type" not in attrs)

    @property
    def policy(self) -> dict[str, list[str]]:
        content = next(
            a["content"]
            for tag, a in self.elements
            if tag == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy"
        )
        assert content is not None
        return {d.split()[0]: d.split()[1:] for d in content.split(";") if d.strip()}


def sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def check_self_contained(text: str) -> Page:
    """``text`` is one HTML document that references nothing outside itself, with its CSP."""
    page = Page(text)
    assert page.doctype is not None and page.doctype.lower() == "doctype html"
    assert text.count("<html") == 1 and text.rstrip().endswith("</html>")
    assert [t for t, _ in page.elements].count("script") == 2 and len(page.styles) == 1
    fetching = {
        "src",
        "href",
        "srcset",
        "action",
        "formaction",
        "poster",
        "data",
        "background",
        "ping",
        "manifest",
    }
    for tag, attrs in page.elements:
        assert tag not in ("link", "img", "iframe", "object", "embed", "base", "form", "frame"), tag
        assert not fetching & set(attrs), (tag, attrs)
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
    style = page.styles[0]
    assert "url(" not in style.lower() and "@import" not in style.lower()
    static = text.replace(page.data, "")  # the page without the results
    assert "http://" not in static and "https://" not in static
    for api in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "DOMParser",
        "createContextualFragment",
        "srcdoc",
        "XMLHttpRequest",
        "fetch(",
        "import(",
        "WebSocket",
        "sendBeacon",
        'setAttribute("href',
        "setAttribute('href",
    ):
        assert api not in page.script, api
    policy = page.policy
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == [sha256_source(page.script)]
    assert policy["style-src"] == [sha256_source(style)]
    assert (
        policy["img-src"] == ["data:"]
        and policy["base-uri"] == ["'none'"]
        and policy["form-action"] == ["'none'"]
    )
    return page


# --- tests --------------------------------------------------------------------------------------


def test_the_report_is_one_self_contained_document(tmp_path: Path) -> None:
    results, store = make_store(tmp_path)
    target = write_report(results, store, tmp_path / "out" / "report.html")
    text = target.read_text()
    page = check_self_contained(text)
    data = json.loads(page.data)
    assert data["format"] == "atp-html-report" and data["version"] == 1
    shown = data["results"]
    assert [t["id"] for t in shown["tests"]] == ["basic_search", "unknown_company", "later"]
    assert shown["summary"]["failed"] == 1 and shown["baseline"]["regressions"] == 1
    first = shown["tests"][0]
    assert first["statistics"]["score"]["ci_95"] is not None and first["baseline"]["verdict"] == "regression"
    events = first["runs"][0]["events"]
    assert [e["event_type"] for e in events] == [e["event_type"] for e in TRACE]
    assert events[3]["payload"]["input"] == {"query": "video conferencing market"}
    assert first["runs"][0]["artifacts"] == []  # they are shown from the run views
    views = data["runs"][0][0]
    assert [a["kind"] for a in views["artifacts"]] == ["file", "structured", "reference"]
    assert views["artifacts"][0]["format"] == "markdown" and views["artifacts"][0]["text"] == REPORT_MD
    assert json.loads(views["artifacts"][1]["text"]) == {
        "competitors": ["Microsoft Teams", "Zoom"],
        "count": 2,
    }
    assert views["artifacts"][1]["text"].startswith("{\n  ")  # indented
    assert data["runs"][1][0]["log"] == "thinking...\nstill thinking\n"
    assert data["runs"][2] == []  # the skipped test has no runs
    assert "<title>ATP report: competitor_analysis</title>" in text


def test_stdout_gets_the_same_document(tmp_path: Path) -> None:
    results, store = make_store(tmp_path)
    file_text = write_report(results, store, tmp_path / "report.html").read_text()

    class Stream(io.StringIO):
        pass

    stream = Stream()
    HtmlReporter(ReportOptions(stream=stream)).report(results, store)
    assert stream.getvalue() == file_text
    raw = io.BytesIO()
    wrapper = io.TextIOWrapper(raw, encoding="utf-8")
    HtmlReporter(ReportOptions(stream=wrapper)).report(results, store)
    assert raw.getvalue().decode() == file_text


def test_agent_text_cannot_become_markup(tmp_path: Path) -> None:
    results, store = hostile_store(tmp_path)
    text = write_report(results, store, tmp_path / "report.html").read_text()
    page = check_self_contained(text)
    # nothing an agent wrote opens or ends an element: the page's own two scripts only
    assert text.count("<script") == 2 and text.lower().count("</script") == 2
    assert "<img" not in text.lower() and "<!--" not in text
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in page.data
    # and the JSON means exactly what the agent sent
    data = json.loads(page.data)
    test = data["results"]["tests"][0]
    assert test["id"] == HOSTILE_ID and test["tags"] == [HOSTILE_IMG]
    assert data["results"]["suite"] == f"suite {HOSTILE_SCRIPT}"
    run = test["runs"][0]
    assert run["checks"][0]["message"] == HOSTILE_CLOSE
    assert run["events"][0]["payload"]["output"] == HOSTILE_CLOSE
    assert (
        run["events"][8]["event_type"] == "\u2028</script>"
        and run["events"][8]["payload"]["x"] == "\u2029<!--<script>"
    )
    assert HOSTILE_CLOSE in data["runs"][0][0]["log"]
    assert HOSTILE_LINK in data["runs"][0][0]["artifacts"][0]["text"]
    assert "&lt;script&gt;" in text  # the title, escaped by the server side


def test_script_safe_escapes_keep_the_json_equal() -> None:
    value = {"a": "</script><!-- & \u2028\u2029 >", "<b>": ["&amp;", "\\u003c"]}
    encoded = msgspec.json.encode(value)
    safe = script_safe(encoded)
    assert re.fullmatch(rb"[^<>&\xe2]*", safe)  # \xe2 starts the UTF-8 of U+2028 and U+2029
    assert json.loads(safe) == value and msgspec.json.decode(safe) == value


def test_large_content_is_cut_and_its_size_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = RunHeader(
        run_id="big",
        suite="s",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        tests=[PlannedTest(id="t", name="t")],
    )
    store = RunStore.create(tmp_path / "runs", header)
    content = "é" * 100_000  # 200,000 bytes: the cut falls inside a character
    log = "".join(f"line {n}\n" for n in range(20_000))
    store.append(
        run_result(
            "t",
            artifacts=[
                FileArtifact(path="a.txt", content=content),
                FileArtifact(path="b.json", content=json.dumps({"k": "v" * 100_000})),
                FileArtifact(path="c.json", content="{not json"),
                StructuredArtifact(name="small", data={"k": 1}),
            ],
            events_file=write_events(
                store, "t", 1, [event(n, "progress", {"current_step": n}) for n in range(50)]
            ),
            log_file=write_log(store, "t", 1, log),
        )
    )
    store.close()
    monkeypatch.setattr(html_reporter, "MAX_TRACE_BYTES", 2000)
    data = json.loads(Page(render(store.results(), store).decode()).data)
    text, as_json, not_json, small = data["runs"][0][0]["artifacts"]
    assert text["full_size"] == 200_000 and text["text"] == "é" * 32768 and text["format"] == "text"
    assert (
        as_json["full_size"] > 100_000
        and len(as_json["text"].encode()) <= 65536
        and as_json["format"] == "json"
    )
    assert not_json["format"] == "text" and not_json["text"] == "{not json" and "full_size" not in not_json
    assert small["text"] == '{\n  "k": 1\n}' and "full_size" not in small
    view = data["runs"][0][0]
    assert view["log"].startswith("line ") and view["log"].endswith("line 19999\n")
    assert len(view["log"].encode()) <= 65536 and view["log_note"] == "the last 64.0 KiB of 204.0 KiB"
    kept = len(data["results"]["tests"][0]["runs"][0]["events"])
    assert 0 < kept < 50 and kept + view["events_left_out"] == 50


def test_damaged_events_and_a_missing_log_are_problems_not_failures(tmp_path: Path) -> None:
    header = RunHeader(
        run_id="d",
        suite="s",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        tests=[PlannedTest(id="t", name="t")],
    )
    store = RunStore.create(tmp_path / "runs", header)
    events_file = write_events(store, "t", 1, [event(0, "progress", {})])
    with (store.directory / events_file).open("a") as handle:
        handle.write('{"cut short\n')
    store.append(run_result("t", events_file=events_file, log_file="logs/gone.log", log_tail=["the tail"]))
    store.close()
    data = json.loads(Page(render(store.results(), store).decode()).data)
    assert len(data["results"]["tests"][0]["runs"][0]["events"]) == 1
    assert any("damaged" in p for p in data["results"]["problems"])
    assert any("gone.log" in p for p in data["results"]["problems"])
    assert data["runs"][0][0]["log"] == "the tail" and data["runs"][0][0]["log_note"] == "the last 1 line"


def test_an_empty_run(tmp_path: Path) -> None:
    header = RunHeader(run_id="e", suite="s", agent="a", agent_type="cli", started_at=NOW)
    store = RunStore.create(tmp_path / "runs", header)
    store.close()
    page = check_self_contained(render(store.results(), store).decode())
    assert json.loads(page.data)["results"]["tests"] == []


def test_the_size_of_1000_tests_and_10000_events(tmp_path: Path) -> None:
    results, store = large_store(tmp_path / "no-events", events=0)
    no_events = len(render(results, store))
    results, store = large_store(tmp_path / "events")
    text = render(results, store)
    check_self_contained(text.decode())
    events_bytes = (store.directory / results.tests[0].runs[0].events_file).stat().st_size  # type: ignore[operator]
    print(
        f"\nhtml report: 1,000 tests {no_events / 1e6:.2f} MB; with a 10,000-event run {len(text) / 1e6:.2f} MB "
        f"(the events file is {events_bytes / 1e6:.2f} MB)"
    )
    assert no_events < 2_000 * 1000  # under 2 kB a test
    assert len(text) - no_events < 1.2 * events_bytes  # the events are embedded about as stored


def test_the_reporter_is_registered_and_cheap_to_import() -> None:
    plugins = builtin_plugins(test_helpers=False)
    assert plugins.reporters["html"] is HtmlReporter
    assert HtmlReporter.file_extension == ".html" and HtmlReporter.summary
    # beyond what every reporter imports (the kernel's results), the module imports nothing
    code = (
        "import sys, atp.core.reporter, atp.core.results; before = set(sys.modules); import atp.reporters.html; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert set(loaded) <= {"atp.reporters", "atp.reporters.html"}, loaded


def test_an_asset_that_would_end_its_element_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("report.js", "report.css"):
        html_reporter._asset(name)  # the real ones load
    from importlib.resources import files

    class Asset:
        def __init__(self, text: str) -> None:
            self.text = text

        def __truediv__(self, name: str) -> Asset:
            return self

        def read_text(self, encoding: str) -> str:
            return self.text

    for bad in ("x = '</SCRIPT>'", "/* </style> */", "a <!-- b"):
        monkeypatch.setattr("importlib.resources.files", lambda package, bad=bad: Asset(bad))
        with pytest.raises(RuntimeError, match="must not contain"):
            html_reporter._asset("report.js")
    assert files is not None


# --- a real run ---------------------------------------------------------------------------------


def agent_hostile(request: ATPRequest, sink: EventSink) -> ATPResponse:
    """An in-process agent whose events, log and artifacts carry markup and script."""
    sink.event(
        make_event(
            request.task_id,
            0,
            ToolCallPayload(tool="web_search", input={"q": HOSTILE_SCRIPT}, output=HOSTILE_CLOSE),
        )
    )
    sink.event(make_event(request.task_id, 1, ReasoningPayload(thought=HOSTILE_IMG)))
    sink.event(make_event(request.task_id, 2, ErrorPayload(message=HOSTILE_CLOSE, recoverable=False)))
    sink.log(HOSTILE_CLOSE)
    return ATPResponse(
        version="1.0",
        task_id=request.task_id,
        status="completed",
        artifacts=[
            FileArtifact(
                path="report.md",
                content_type="text/markdown",
                content=f"# {HOSTILE_SCRIPT}\n{HOSTILE_LINK}\n",
            ),
            StructuredArtifact(name="result", data={"html": HOSTILE_IMG}),
        ],
        metrics=Metrics(total_steps=3),
    )


def test_a_real_run_of_a_hostile_agent(tmp_path: Path, plugins: Plugins) -> None:
    suite_file = write(
        tmp_path / "suite.yaml",
        f"""
        test_suite: real
        agents:
          - name: agent
            type: function
            function: {__name__}:agent_hostile
        tests:
          - id: hostile
            task: {{description: "do it"}}
            assertions:
              - type: artifact_exists
                config: {{name: missing</script><img src=x>}}
    """,
    )
    suite = load_suite(suite_file, plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs")
    anyio.run(runner.run)
    assert runner.store is not None
    store = RunStore.open(runner.store.directory)
    results = store.results()
    text = write_report(results, store, tmp_path / "report.html").read_text()
    page = check_self_contained(text)
    assert text.count("<script") == 2 and "<img" not in text
    data = json.loads(page.data)
    run = data["results"]["tests"][0]["runs"][0]
    assert [e["event_type"] for e in run["events"]] == ["tool_call", "reasoning", "error"]
    assert run["events"][0]["payload"]["output"] == HOSTILE_CLOSE
    assert "missing</script><img src=x>" in run["checks"][0]["message"]
    assert HOSTILE_CLOSE in data["runs"][0][0]["log"]
