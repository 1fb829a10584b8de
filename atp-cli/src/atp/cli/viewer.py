"""The local viewer of ``atp view``: stored runs, each run's HTML report, and each test's score
across the runs of one suite and agent, served read-only on 127.0.0.1.

Pages are built on the server from the run directories, every stored string escaped; they need
no script. A run's report is the ``html`` reporter's file, rendered on request (the reporter is
a plugin: without it, the page says how to install it). The server answers GET and HEAD only,
and only requests whose ``Host`` is the loopback address it listens on (a web page elsewhere
cannot reach it through a DNS name that resolves to 127.0.0.1).

Reports are bounded per request: at most :data:`MAX_RENDERS` are rendered at once (a request
past them waits up to :data:`RENDER_WAIT_SECONDS`, then is told the viewer is busy), and a
rendered report is kept (up to :data:`MAX_CACHED_BYTES` in all) until its run directory
changes, so a report asked for again, or by several tabs at once, is not read again.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from atp.core.errors import AtpError
from atp.core.results import HEADER_FILE, RESULTS_FILE, RunStore, SuiteResults
from atp.core.secrets import Masker

FRAMING_POLICY = "frame-ancestors 'none'"
"""No other site may frame a page of the viewer (a header only: browsers ignore it in a <meta>)."""
META_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
)
"""The pages of the viewer run no script and fetch nothing but themselves."""
PAGE_POLICY = f"{META_POLICY}; {FRAMING_POLICY}"
CHART_WIDTH, CHART_HEIGHT = 360, 90
MAX_RENDERS = 2
"""Reports rendered at once (each reads a run's events and logs)."""
RENDER_WAIT_SECONDS = 30.0
"""How long a request waits for a render to end before it is answered 503."""
MAX_CACHED_BYTES = 64 * 1024 * 1024
"""The rendered reports kept, in all (the oldest go first); a larger report is not kept."""

ReportRenderer = Callable[[RunStore, SuiteResults], bytes]
"""Renders one run's HTML report (the ``html`` reporter), or raises :class:`LookupError` when
there is no such reporter."""


@dataclass
class Run:
    """What the viewer shows of one run directory."""

    run_id: str
    directory: Path
    suite: str
    agent: str
    started_at: datetime
    results: SuiteResults
    problems: list[str] = field(default_factory=list)

    @property
    def pass_rate(self) -> float | None:
        ran = self.results.summary.passed + self.results.summary.failed + self.results.summary.errors
        return self.results.summary.passed / ran if ran else None


class RunIndex:
    """The run directories below ``root``, read once and again only when they change."""

    def __init__(self, root: Path, masker: Masker | None = None) -> None:
        self.root = root
        self.masker = masker
        """What the runs read back are masked with (they may hold what an agent wrote there)."""
        self._cache: dict[Path, tuple[tuple[float, ...], Run | None]] = {}
        self._lock = threading.Lock()

    def runs(self) -> list[Run]:
        """Every readable run, newest first."""
        found = []
        directories = (
            sorted(p for p in self.root.iterdir() if (p / HEADER_FILE).is_file())
            if self.root.is_dir()
            else []
        )
        with self._lock:
            for directory in directories:
                run = self._read(directory)
                if run is not None:
                    found.append(run)
            for gone in set(self._cache) - set(directories):
                del self._cache[gone]
        found.sort(key=lambda r: (r.started_at.timestamp(), r.run_id), reverse=True)
        return found

    def run(self, run_id: str) -> Run | None:
        """The run of that id: looked up among the listed ones, never used as a path."""
        return next((r for r in self.runs() if r.run_id == run_id), None)

    def _read(self, directory: Path) -> Run | None:
        key = tuple(_mtime(directory / name) for name in (HEADER_FILE, RESULTS_FILE))
        cached = self._cache.get(directory)
        if cached is not None and cached[0] == key:
            return cached[1]
        run: Run | None
        try:
            store = RunStore.open(directory, self.masker)
            results = store.results()
            run = Run(
                run_id=directory.name,
                directory=directory,
                suite=results.suite,
                agent=results.agent,
                started_at=results.started_at,
                results=results,
                problems=list(store.problems),
            )
        except AtpError:
            run = None
        self._cache[directory] = (key, run)
        return run


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime_ns / 1e9
    except OSError:
        return 0.0


# --- pages -------------------------------------------------------------------------------------

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem 2rem;color:#1d2330;background:#fff}
h1{font-size:1.35rem;margin:0 0 .3rem}h2{font-size:1.1rem;margin:1.6rem 0 .4rem}
table{border-collapse:collapse;margin:.4rem 0}th,td{padding:.25rem .6rem;border-bottom:1px solid #e3e6ec;text-align:left;vertical-align:top}
th{font-weight:600;background:#f5f6f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
a{color:#1f5fbf;text-decoration:none}a:hover{text-decoration:underline}
.muted{color:#6b7280}.bad{color:#b42318}.good{color:#067647}
svg .line{fill:none;stroke:#1f5fbf;stroke-width:1.5}svg .axis{stroke:#c8ccd4;stroke-width:1}
svg circle.passed{fill:#067647}svg circle.failed{fill:#b42318}svg circle.error{fill:#b54708}
"""


def _page(title: str, body: str) -> bytes:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{META_POLICY}">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>{body}</body></html>\n"
    ).encode()


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _rate(rate: float | None) -> str:
    return "—" if rate is None else f"{rate * 100:.0f}%"


def _trend_link(suite: str, agent: str) -> str:
    return f"/trend?suite={quote(suite, safe='')}&amp;agent={quote(agent, safe='')}"


def index_page(runs: list[Run], root: Path) -> bytes:
    """Every stored run, newest first, with links to its report and its suite's trend."""
    rows = []
    for run in runs:
        summary = run.results.summary
        state = "interrupted" if run.results.interrupted else ""
        rows.append(
            "<tr>"
            f'<td><a href="/runs/{quote(run.run_id, safe="")}/report.html">{_e(run.run_id)}</a></td>'
            f"<td>{_e(run.started_at.strftime('%Y-%m-%d %H:%M:%S'))}</td>"
            f'<td><a href="{_trend_link(run.suite, run.agent)}">{_e(run.suite)}</a></td>'
            f"<td>{_e(run.agent)}</td>"
            f'<td class="num">{summary.total}</td>'
            f'<td class="num">{summary.passed}</td>'
            f'<td class="num{" bad" if summary.failed else ""}">{summary.failed}</td>'
            f'<td class="num{" bad" if summary.errors else ""}">{summary.errors}</td>'
            f'<td class="num">{summary.skipped}</td>'
            f'<td class="num">{_rate(run.pass_rate)}</td>'
            f'<td class="num">{run.results.duration_seconds:.1f}s</td>'
            f'<td class="muted">{state}</td>'
            "</tr>"
        )
    table = (
        "<table><thead><tr><th>Run</th><th>Started</th><th>Suite (trend)</th><th>Agent</th><th>Tests</th>"
        "<th>Passed</th><th>Failed</th><th>Errors</th><th>Skipped</th><th>Pass rate</th><th>Time</th><th></th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        if rows
        else f"<p>No runs in {_e(root)} yet: <code>atp test</code> stores each run there.</p>"
    )
    body = f'<h1>ATP runs</h1><p class="muted">{len(runs)} run{"s" if len(runs) != 1 else ""} in {_e(root)}</p>{table}'
    return _page("ATP runs", body)


def _chart(points: list[tuple[float, str, str]]) -> str:
    """An inline SVG of scores (0-100) in run order; each point is (score, status, label)."""
    width, height, pad = CHART_WIDTH, CHART_HEIGHT, 6
    span = max(len(points) - 1, 1)

    def x(i: int) -> float:
        return pad + (width - 2 * pad) * (i / span if len(points) > 1 else 0.5)

    def y(score: float) -> float:
        return pad + (height - 2 * pad) * (1 - max(0.0, min(score, 100.0)) / 100)

    line = " ".join(f"{x(i):.1f},{y(s):.1f}" for i, (s, _, _) in enumerate(points))
    dots = "".join(
        f'<circle class="{_e(status)}" cx="{x(i):.1f}" cy="{y(s):.1f}" r="3"><title>{_e(label)}</title></circle>'
        for i, (s, status, label) in enumerate(points)
    )
    axes = f'<line class="axis" x1="{pad}" y1="{y(0):.1f}" x2="{width - pad}" y2="{y(0):.1f}"/>' + (
        f'<line class="axis" x1="{pad}" y1="{y(100):.1f}" x2="{width - pad}" y2="{y(100):.1f}"/>'
    )
    return (
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f'{axes}<polyline class="line" points="{line}"/>{dots}</svg>'
    )


def trend_page(runs: list[Run], suite: str, agent: str) -> bytes:
    """Each test's score across the stored runs of ``suite`` by ``agent``, oldest first."""
    mine = sorted(
        (r for r in runs if r.suite == suite and r.agent == agent),
        key=lambda r: (r.started_at.timestamp(), r.run_id),
    )
    tests: dict[str, list[tuple[float, str, str]]] = {}
    for run in mine:
        for test in run.results.tests:
            if not test.runs:
                continue
            label = f"{run.run_id}: {test.score:.1f} ({test.status}, {len(test.runs)} run{'s' if len(test.runs) != 1 else ''})"
            tests.setdefault(test.id, []).append((test.score, test.status, label))
    rows = []
    for test_id, points in tests.items():
        scores = [s for s, _, _ in points]
        last = scores[-1]
        change = f"{last - scores[-2]:+.1f}" if len(scores) > 1 else "—"
        rows.append(
            f"<tr><td>{_e(test_id)}</td><td>{_chart(points)}</td>"
            f'<td class="num">{last:.1f}</td><td class="num">{change}</td>'
            f'<td class="num">{min(scores):.1f} – {max(scores):.1f}</td><td class="num">{len(points)}</td></tr>'
        )
    runs_list = "".join(
        f'<li><a href="/runs/{quote(r.run_id, safe="")}/report.html">{_e(r.run_id)}</a> '
        f'<span class="muted">{_e(r.started_at.strftime("%Y-%m-%d %H:%M"))}, pass rate {_rate(r.pass_rate)}</span></li>'
        for r in mine
    )
    title = f"{suite} · {agent}"
    table = (
        "<table><thead><tr><th>Test</th><th>Score across runs (oldest to newest)</th><th>Latest</th>"
        f"<th>Change</th><th>Range</th><th>Runs</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        if rows
        else "<p>No stored run of this suite and agent has a test that ran.</p>"
    )
    body = (
        f'<p><a href="/">← all runs</a></p><h1>{_e(title)}</h1>'
        f"<p class=\"muted\">Each test's mean score in each stored run (0–100); a point's colour is the test's status "
        f"(green passed, red failed, orange error), its tooltip the run.</p>{table}"
        f"<h2>Runs</h2><ol>{runs_list}</ol>"
    )
    return _page(title, body)


def message_page(title: str, text: str) -> bytes:
    return _page(title, f'<p><a href="/">← all runs</a></p><h1>{_e(title)}</h1><p>{_e(text)}</p>')


# --- the server --------------------------------------------------------------------------------


class Viewer(ThreadingHTTPServer):
    """The viewer's HTTP server: bound to 127.0.0.1 (``port`` 0 takes a free one)."""

    daemon_threads = True

    def __init__(self, index: RunIndex, render_report: ReportRenderer, port: int = 0) -> None:
        self.index = index
        self.render_report = render_report
        self.reports = ReportCache(render_report)
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


class ReportCache:
    """Rendered reports by run, each valid while its run directory's files are unchanged; at
    most :data:`MAX_RENDERS` made at once (:class:`TimeoutError` past
    :data:`RENDER_WAIT_SECONDS` of waiting)."""

    def __init__(self, render: ReportRenderer) -> None:
        self.render = render
        self._renders = threading.BoundedSemaphore(MAX_RENDERS)
        self._lock = threading.Lock()
        self._kept: dict[tuple[object, ...], bytes] = {}

    def get(self, run: Run, masker: Masker | None) -> bytes:
        key = _state(run.directory)
        with self._lock:
            data = self._kept.get(key)
        if data is not None:
            return data
        if not self._renders.acquire(timeout=RENDER_WAIT_SECONDS):
            raise TimeoutError
        try:
            data = self.render(RunStore.open(run.directory, masker), run.results)
        finally:
            self._renders.release()
        if len(data) <= MAX_CACHED_BYTES // 4:
            with self._lock:
                self._kept[key] = data
                while sum(map(len, self._kept.values())) > MAX_CACHED_BYTES:
                    del self._kept[next(iter(self._kept))]
        return data


def _state(directory: Path) -> tuple[object, ...]:
    """What tells a run directory's report apart from an older one: its files' sizes and times."""
    state: list[object] = [str(directory)]
    for name in (HEADER_FILE, RESULTS_FILE):
        try:
            found = (directory / name).stat()
            state += [found.st_size, found.st_mtime_ns]
        except OSError:
            state += [None, None]
    return tuple(state)


class _Handler(BaseHTTPRequestHandler):
    server: Viewer
    server_version = "atp-view"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:
        pass  # a quiet viewer: the terminal shows where it listens, not every request

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _refuse_method(self) -> None:
        self._send(
            405,
            message_page("Not allowed", "The viewer is read-only: it answers GET and HEAD."),
            {"Allow": "GET, HEAD"},
        )

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def _answer(self, head: bool) -> None:
        host = self.headers.get("Host", "")
        port = self.server.server_address[1]
        if host not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            self._send(
                403, message_page("Forbidden", "The viewer answers requests to 127.0.0.1 only."), head=head
            )
            return
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        try:
            if not parts:
                self._send(200, index_page(self.server.index.runs(), self.server.index.root), head=head)
            elif parts == ["trend"]:
                query = parse_qs(url.query)
                suite, agent = query.get("suite", [""])[0], query.get("agent", [""])[0]
                self._send(200, trend_page(self.server.index.runs(), suite, agent), head=head)
            elif len(parts) == 3 and parts[0] == "runs" and parts[2] == "report.html":
                self._report(parts[1], head)
            else:
                self._send(404, message_page("Not found", f"Nothing at {url.path}."), head=head)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _report(self, run_id: str, head: bool) -> None:
        from urllib.parse import unquote

        run = self.server.index.run(unquote(run_id))
        if run is None:
            self._send(404, message_page("No such run", f"There is no run {unquote(run_id)!r}."), head=head)
            return
        try:
            data = self.server.reports.get(run, self.server.index.masker)
        except TimeoutError:
            self._send(
                503,
                message_page("Busy", f"{MAX_RENDERS} reports are being made; ask again in a moment."),
                {"Retry-After": "5"},
                head=head,
            )
            return
        except LookupError as exc:
            self._send(501, message_page("No HTML reporter", str(exc)), head=head)
            return
        except AtpError as exc:
            self._send(500, message_page("The report failed", str(exc)), head=head)
            return
        # the report carries its own policy, with its script's hash; the header adds the framing rule
        self._send(200, data, head=head, policy=FRAMING_POLICY)

    def _send(
        self,
        status: int,
        data: bytes,
        extra: dict[str, str] | None = None,
        head: bool = False,
        policy: str | None = PAGE_POLICY,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        if policy is not None:
            self.send_header("Content-Security-Policy", policy)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(data)
