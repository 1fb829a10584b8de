"""The ``html`` reporter: one self-contained HTML file of a run's results.

``atp test --output=html --output-file=report.html`` writes it (without ``--output-file``, to
stdout); ``atp view`` serves it for each stored run. The file fetches nothing: its stylesheet,
its script and the results are inlined, so it opens from a CI artifact or an email attachment.

What an agent sent is untrusted, and all of it ends up in the file: test names, check
messages, events, artifacts, logs. So:

- the results are one JSON document in ``<script type="application/json" id="atp-data">``,
  with ``<``, ``>``, ``&``, U+2028 and U+2029 written as ``\\u`` escapes, so that no text in it
  can end the element or be read as markup (the JSON means the same after the escaping);
- the page's script builds the DOM from that document with ``createElement`` and
  ``textContent`` only, and sets a link's ``href`` only when its scheme is http or https;
- a Content-Security-Policy in the page allows only its one inline script and its one inline
  stylesheet (by their SHA-256 hashes), no fetch of any kind, no ``<base>``, no form.

Sizes are bounded where an agent decides them: each artifact's content is cut at 64 KiB (its
full size is shown), each log at its last 64 KiB, and each run's events at
:data:`MAX_TRACE_BYTES` (the events left out are counted). The page renders a test's detail
only when it is opened, a trace only when its run's trace is opened, and a long trace in
chunks of 500 events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import msgspec

from atp.core.reporter import Reporter
from atp.core.results import RunResult, RunStore, SuiteResults

if TYPE_CHECKING:
    from atp.core.protocol import Artifact

REPORT_FORMAT = "atp-html-report"
REPORT_FORMAT_VERSION = 1
MAX_CONTENT_BYTES = 64 * 1024
"""An artifact's content and a run's log are shown up to this many bytes (UTF-8)."""
MAX_PRETTY_BYTES = 1024 * 1024
"""JSON content up to this size is pretty-printed before it is cut; larger, it is cut as it is."""
MAX_TRACE_BYTES = 32 * 1024 * 1024
"""A run's events are embedded up to this many bytes of JSON; the rest are counted, not shown."""
ASSETS = "html_assets"
_UNSAFE_IN_ASSETS = (b"</script", b"</style", b"<!--")
"""What an inline asset must not contain: it would end its element early, or (``<!--``) change how
the parser finds the end of a script."""


class ArtifactView(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An artifact as the page shows it: what it is, and its content ready to display."""

    kind: str
    """``file``, ``structured`` or ``reference``."""
    title: str
    """The file's path or the structured artifact's name."""
    content_type: str | None = None
    size_bytes: int | None = None
    content_hash: str | None = None
    schema: str | None = None
    format: str = "none"
    """How the page renders ``text``: ``markdown``, ``json``, ``text``; ``none`` without content."""
    text: str | None = None
    full_size: int | None = None
    """The content's size in bytes (UTF-8) when ``text`` is cut short of it."""


class RunView(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the page shows of a run beside its result: artifacts, log, what was left out."""

    artifacts: list[ArtifactView] = msgspec.field(default_factory=list)
    log: str = ""
    log_note: str | None = None
    """Where ``log`` comes from and whether it is cut."""
    events_left_out: int = 0


# --- content ----------------------------------------------------------------------------------


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _head(data: bytes, limit: int = MAX_CONTENT_BYTES) -> str:
    """The first ``limit`` bytes of UTF-8 ``data`` as text (a character cut in two is dropped)."""
    return data[:limit].decode("utf-8", "ignore")


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def _pretty_json(data: bytes) -> bytes | None:
    """``data`` indented by 2 if it is JSON (and not too large to bother), else ``None``."""
    if len(data) > MAX_PRETTY_BYTES:
        return None
    try:
        msgspec.json.decode(data)
        return msgspec.json.format(data, indent=2)
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
        return None


def _content_format(path: str, content_type: str | None) -> str:
    kind = (content_type or "").lower()
    name = path.lower()
    if "markdown" in kind or name.endswith((".md", ".markdown")):
        return "markdown"
    if "json" in kind or name.endswith(".json"):
        return "json"
    return "text"


def _with_content(view: ArtifactView, data: bytes) -> ArtifactView:
    if view.format == "json":
        pretty = _pretty_json(data)
        if pretty is not None:
            data = pretty
        elif len(data) <= MAX_PRETTY_BYTES:
            view.format = "text"  # says it is JSON, but is not
    view.text = _head(data)
    if len(data) > MAX_CONTENT_BYTES:
        view.full_size = len(data)
    return view


def artifact_view(artifact: Artifact) -> ArtifactView:
    """How the page shows ``artifact``: its content as text cut at 64 KiB, JSON indented."""
    from atp.core.protocol import FileArtifact, StructuredArtifact

    if isinstance(artifact, StructuredArtifact):
        view = ArtifactView(kind="structured", title=artifact.name, schema=artifact.schema, format="json")
        try:
            data = msgspec.json.encode(artifact.data)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            view.format, view.text = "text", f"(ATP cannot show this data: {exc})"
            return view
        return _with_content(view, data)
    view = ArtifactView(
        kind="file" if isinstance(artifact, FileArtifact) else "reference",
        title=artifact.path,
        content_type=artifact.content_type,
        size_bytes=artifact.size_bytes,
        content_hash=artifact.content_hash,
    )
    if isinstance(artifact, FileArtifact) and artifact.content is not None:
        view.format = _content_format(artifact.path, artifact.content_type)
        return _with_content(view, _utf8(artifact.content))
    return view


def _log_of(run: RunResult, store: RunStore) -> tuple[str, str | None]:
    """The log shown for ``run``: the stored log's last 64 KiB (from a line's start), else the
    log tail the result keeps."""
    text = store.log(run) if run.log_file is not None else ""
    if text:
        data = _utf8(text)
        if len(data) <= MAX_CONTENT_BYTES:
            return text, None
        tail = data[-MAX_CONTENT_BYTES:]
        newline = tail.find(b"\n")
        if 0 <= newline < len(tail) - 1:
            tail = tail[newline + 1 :]
        return tail.decode("utf-8", "ignore"), f"the last {_size(len(tail))} of {_size(len(data))}"
    if run.log_tail:
        lines = len(run.log_tail)
        return "\n".join(run.log_tail), f"the last {lines} line{'s' if lines != 1 else ''}"
    return "", None


def _events_of(run: RunResult, store: RunStore) -> tuple[msgspec.Raw, int]:
    """The run's stored events as one JSON array (embedded as they are), and how many were left
    out to keep it within :data:`MAX_TRACE_BYTES`."""
    lines = store.event_lines(run)
    total = 0
    kept = len(lines)
    for number, line in enumerate(lines):
        total += len(line) + 1
        if total > MAX_TRACE_BYTES:
            kept = number
            break
    return msgspec.Raw(b"[" + b",".join(lines[:kept]) + b"]"), len(lines) - kept


# --- the document -----------------------------------------------------------------------------


def report_data(results: SuiteResults, store: RunStore) -> bytes:
    """The page's data as JSON: ``results`` (the results format, each run with its events and
    without its artifacts and log tail) and ``runs`` (per test, per run: a :class:`RunView`)."""
    tests = []
    views: list[list[RunView]] = []
    for test in results.tests:
        runs = []
        test_views = []
        for run in test.runs:
            events, left_out = _events_of(run, store)
            log, log_note = _log_of(run, store)
            test_views.append(
                RunView(
                    artifacts=[artifact_view(a) for a in run.artifacts],
                    log=log,
                    log_note=log_note,
                    events_left_out=left_out,
                )
            )
            # The results format holds any JSON under events; Raw is embedded as it is.
            runs.append(msgspec.structs.replace(run, events=cast(Any, events), artifacts=[], log_tail=[]))
        tests.append(msgspec.structs.replace(test, runs=runs))
        views.append(test_views)
    shown = msgspec.structs.replace(results, tests=tests)
    if store.problems:  # damaged event lines or unreadable logs found while reading them
        shown.problems = list(dict.fromkeys([*results.problems, *store.problems]))
    document = {"format": REPORT_FORMAT, "version": REPORT_FORMAT_VERSION, "results": shown, "runs": views}
    return msgspec.json.encode(document)


_SCRIPT_SAFE = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def script_safe(data: bytes) -> bytes:
    """JSON ``data`` made safe inside a ``<script>`` element: these characters occur in JSON
    only inside strings, where their ``\\u`` escapes mean the same."""
    for raw, escaped in _SCRIPT_SAFE:
        data = data.replace(raw, escaped)
    return data


def _asset(name: str) -> str:
    from importlib.resources import files

    text = (files("atp.reporters") / ASSETS / name).read_text(encoding="utf-8")
    if any(unsafe in text.lower().encode() for unsafe in _UNSAFE_IN_ASSETS):
        raise RuntimeError(f"{ASSETS}/{name} must not contain a closing script or style tag or '<!--'")
    return text


def csp_hash(text: str) -> str:
    """The CSP source of an inline element whose text is ``text``: ``'sha256-...'``."""
    import base64
    import hashlib

    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(script: str, style: str) -> str:
    """Nothing but the page's own script and stylesheet; no fetch of any kind (images only as
    data: URLs, which the page does not use either), no ``<base>``, no form submission."""
    return (
        f"default-src 'none'; script-src {csp_hash(script)}; style-src {csp_hash(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def _escape(text: str) -> str:
    """``text`` as HTML text or a quoted attribute value."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def render(results: SuiteResults, store: RunStore) -> bytes:
    """The whole HTML document."""
    script = _asset("report.js")
    style = _asset("report.css")
    title = _escape(f"ATP report: {results.suite}")
    head = (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{content_security_policy(script, style)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f'<meta name="generator" content="ATP html reporter (format {REPORT_FORMAT_VERSION})">\n'
        f"<title>{title}</title>\n"
        f"<style>{style}</style>\n"
        "</head>\n<body>\n"
        '<noscript><p class="noscript">This report is drawn by its script: allow JavaScript to read it.</p></noscript>\n'
        '<main id="app" aria-live="polite"></main>\n'
        '<script type="application/json" id="atp-data">'
    )
    tail = f"</script>\n<script>{script}</script>\n</body>\n</html>\n"
    return head.encode() + script_safe(report_data(results, store)) + tail.encode()


class HtmlReporter(Reporter):
    name = "html"
    summary = "one self-contained HTML page: tests, checks, statistics and each run's trace"
    file_extension = ".html"

    def report(self, results: SuiteResults, store: RunStore) -> None:
        self.write_output(render(results, store))
