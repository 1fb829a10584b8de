"""The built-in evaluators against hostile agent output: nothing an agent sends may block the
event loop, run unbounded work on it, be read from the wrong place, or flood a check message."""

from __future__ import annotations

import inspect
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from atp.core.errors import ConfigError
from atp.core.evaluator import EvalContext, Evaluator
from atp.core.protocol import (
    PROTOCOL_VERSION,
    ATPRequest,
    ATPResponse,
    ErrorPayload,
    FileArtifact,
    ReferenceArtifact,
    StructuredArtifact,
    ToolCallPayload,
    make_event,
)
from atp.core.results import Check
from atp.core.testing import make_test, response, run_evaluator
from atp.core.trace import Trace
from atp.evaluators import artifact, behavior, reading
from tests.facts import says

MiB = 1024 * 1024
TID = "00000000-0000-0000-0000-000000000000"


def ctx_for(
    resp: ATPResponse, *, workspace: Path | None = None, agent_dir: Path | None = None
) -> EvalContext:
    test = make_test()
    request = ATPRequest(version=PROTOCOL_VERSION, task_id=TID, task=test.task)
    return EvalContext(
        test=test,
        request=request,
        response=resp,
        trace=Trace.of([]),
        workspace=workspace,
        agent_dir=agent_dir,
    )


def run(
    evaluator: type[Evaluator] | Evaluator,
    config: dict[str, Any],
    resp: ATPResponse,
    *,
    workspace: Path | None = None,
    agent_dir: Path | None = None,
) -> Check:
    instance = evaluator() if isinstance(evaluator, type) else evaluator
    parsed = msgspec.convert(config, instance.Config)

    async def go() -> list[Check]:
        with anyio.fail_after(30):
            return await instance.evaluate(ctx_for(resp, workspace=workspace, agent_dir=agent_dir), parsed)

    (result,) = anyio.run(go)
    return result


def refs(*paths: str | Path) -> ATPResponse:
    return response(artifacts=[ReferenceArtifact(path=str(p)) for p in paths])


@pytest.fixture
def unblock_fifos() -> Iterator[list[Path]]:
    """FIFOs listed here get a writer after 10 s, so a regression fails instead of hanging."""
    fifos: list[Path] = []

    def open_writers() -> None:
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    timer = threading.Timer(10, open_writers)
    timer.daemon = True
    timer.start()
    yield fifos
    timer.cancel()


# --- 1. sections: a heading parser linear in the line length -------------------------------------


def test_a_hostile_heading_line_is_parsed_in_linear_time() -> None:
    # a 200,000-character line of this shape took the old regex hours (cubic in its length)
    line = "# a" + " " * 200_000 + "b"
    assert artifact.headings(f"# Intro\n{line}\n## Summary\n") == [
        "Intro",
        "a" + " " * 200_000 + "b",
        "Summary",
    ]
    spaces_and_hashes = "#" + " #" * 100_000 + " x"
    assert artifact.headings(spaces_and_hashes) == ["#" + " #" * 99_999 + " x"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("# Title", ["Title"]),
        ("   ### Three spaces", ["Three spaces"]),
        ("    # four spaces is code", []),
        ("\t# a tab is code", []),
        ("###### Six", ["Six"]),
        ("####### Seven", []),
        ("#hashtag", []),
        ("#", [""]),
        ("## Competitors ##", ["Competitors"]),
        ("## Closed ##   ", ["Closed"]),
        ("# C#", ["C#"]),
        ("# A # B #", ["A # B"]),
        ("# ###", [""]),
        ("#\tTabbed\t#", ["Tabbed"]),
        ("#   Spaced   ", ["Spaced"]),
    ],
)
def test_headings_follow_commonmark_atx_rules(line: str, expected: list[str]) -> None:
    assert artifact.headings(line) == expected


def test_headings_on_any_line_ending() -> None:
    assert artifact.headings("# One\r\n## Two\r### Three\nnot\n") == ["One", "Two", "Three"]


def test_sections_passes_on_a_report_with_a_hostile_heading() -> None:
    report = "# Intro\n\n# a" + " " * 50_000 + "b\n\n## Summary\n"
    checked = run(
        artifact.Sections,
        {"path": "r.md", "sections": ["Intro", "Summary"]},
        response(files={"r.md": report}),
    )
    assert checked.passed and checked.message == "all 2 sections present"


# --- 2. contains: regex with a time limit, plain text without regex -------------------------------


def test_a_catastrophic_regex_is_stopped_after_the_time_limit() -> None:
    bomb = response(files={"out.txt": "a" * 40 + "!"})
    evaluator = artifact.Contains({"regex_timeout_seconds": 0.2})
    checked = run(evaluator, {"path": "out.txt", "pattern": "^(a|aa)+$", "regex": True}, bomb)
    assert not checked.passed and checked.score == 0.0
    says(checked.message, "regex '^(a|aa)+$'", "longer than 0.2 s", "out.txt", "stopped")


def test_the_nested_quantifier_of_the_classic_example_finishes() -> None:
    bomb = response(files={"out.txt": "a" * 40 + "!"})
    checked = run(artifact.Contains, {"path": "out.txt", "pattern": "^(a+)+$", "regex": True}, bomb)
    assert not checked.passed and "not found in 41 characters" in checked.message
    assert run(artifact.Contains, {"pattern": "^(a+)+!$", "regex": True}, bomb).passed


def test_regex_time_limit_setting() -> None:
    assert artifact.Contains().regex_timeout() == artifact.REGEX_TIMEOUT_SECONDS == 1.0
    assert artifact.Contains({"regex_timeout_seconds": 2.5}).regex_timeout() == 2.5
    assert artifact.Contains({"regex_timeout_seconds": "3"}).regex_timeout() == 3.0  # from ${VAR}
    for bad in (0, -1, "soon", True, float("inf"), None):
        with pytest.raises(ConfigError) as raised:
            artifact.Contains({"regex_timeout_seconds": bad}).regex_timeout()
        says(str(raised.value), "regex_timeout_seconds", "positive number")


def test_a_bad_time_limit_setting_fails_the_check_as_an_evaluator_error() -> None:
    evaluator = artifact.Contains({"regex_timeout_seconds": "soon"})
    with pytest.raises(ConfigError):
        run(evaluator, {"pattern": "x", "regex": True}, response(files={"a": "x"}))
    # plain text needs no time limit and ignores the setting
    assert run(evaluator, {"pattern": "x"}, response(files={"a": "x"})).passed


def test_regex_is_compiled_at_load_by_the_regex_module() -> None:
    with pytest.raises(msgspec.ValidationError) as raised:
        msgspec.convert({"pattern": "(", "regex": True}, artifact.ContainsConfig)
    says(str(raised.value), "'pattern'", "not a valid regular expression", "missing )")
    assert artifact.compile_regex(r"\d+", False).__class__.__module__.startswith("_regex")
    # re syntax keeps its meaning
    resp = response(files={"a.md": "Version 12 of Teams"})
    assert run(artifact.Contains, {"pattern": r"(?P<v>\d+) of (?i:teams)", "regex": True}, resp).passed
    assert run(artifact.Contains, {"pattern": "TEAMS$", "regex": True, "ignore_case": True}, resp).passed


def test_plain_contains_does_not_use_regular_expressions(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_regex(*args: Any) -> Any:
        raise AssertionError("plain text must not be compiled as a regex")

    monkeypatch.setattr(artifact, "compile_regex", no_regex)
    resp = response(files={"a.md": "line 1\nStraße a.b (x+\n"})
    says(run(artifact.Contains, {"pattern": "a.b (x+"}, resp).message, "a.md", "'a.b (x+'", "line 2")
    assert not run(artifact.Contains, {"pattern": "a.c"}, resp).passed
    folded = run(artifact.Contains, {"pattern": "STRASSE", "ignore_case": True}, resp)
    assert folded.passed
    says(folded.message, "line 2")


# --- 3. files: only regular files, bounded, off the loop -----------------------------------------


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, unblock_fifos: list[Path]) -> None:
    fifo = tmp_path / "out.txt"
    os.mkfifo(fifo)
    unblock_fifos.append(fifo)
    checked = run(artifact.Contains, {"path": str(fifo), "pattern": "x"}, refs(fifo))
    assert not checked.passed
    says(checked.message, "'x'", str(fifo), "read none of it", "FIFO, not a regular file")


def test_a_symlink_to_a_fifo_is_refused(tmp_path: Path, unblock_fifos: list[Path]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    unblock_fifos.append(fifo)
    (tmp_path / "out.txt").symlink_to(fifo)
    checked = run(
        artifact.Sections, {"path": str(tmp_path / "out.txt"), "sections": ["A"]}, refs(tmp_path / "out.txt")
    )
    assert not checked.passed and "is a FIFO, not a regular file" in checked.message


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/dev/zero", "a character device"), ("/dev/null", "a character device"), ("/", "a directory")],
)
def test_devices_and_directories_are_refused(path: str, kind: str) -> None:
    checked = run(artifact.Contains, {"path": path, "pattern": "x"}, refs(path))
    assert not checked.passed
    assert checked.message.endswith(f"{path} is {kind}, not a regular file; ATP reads only regular files")


def test_dev_stdin_is_refused() -> None:
    # ATP's standard input: a pipe whose writer stays open (reading it would never end)
    saved = os.dup(0)
    reader, writer = os.pipe()
    os.dup2(reader, 0)
    try:
        checked = run(artifact.Contains, {"path": "/dev/stdin", "pattern": "x"}, refs("/dev/stdin"))
    finally:
        os.dup2(saved, 0)
        for fd in (saved, reader, writer):
            os.close(fd)
    assert not checked.passed
    assert checked.message.endswith("/dev/stdin is a FIFO, not a regular file; ATP reads only regular files")


def test_a_missing_file_says_why() -> None:
    checked = run(
        artifact.Contains, {"path": "/nonexistent/x.txt", "pattern": "x"}, refs("/nonexistent/x.txt")
    )
    assert checked.message.endswith("/nonexistent/x.txt cannot be read: No such file or directory")


def test_only_the_first_16_mib_of_a_file_are_read(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.write(b"start\n")
        handle.write(b"x" * artifact.MAX_READ_BYTES)
        handle.write(b"\nneedle at the end\n")
    assert run(artifact.Contains, {"path": str(big), "pattern": "start"}, refs(big)).passed
    missed = run(artifact.Contains, {"path": str(big), "pattern": "needle"}, refs(big))
    assert not missed.passed
    says(
        missed.message,
        f"'needle' in {big}",
        f"not found in {artifact.MAX_READ_BYTES} characters",
        "larger than 16 MiB",
        "first 16 MiB",
        f"{big} begins: 'start\\n{'x' * (artifact.EXCERPT_CHARS - 6)}…'",
    )
    as_json = run(artifact.Schema, {"path": str(big), "schema": {}}, refs(big))
    assert not as_json.passed
    says(as_json.message, "first 16 MiB", "JSON cannot be checked")


def test_a_file_of_exactly_the_cap_is_read_whole(tmp_path: Path) -> None:
    exact = tmp_path / "exact.txt"
    exact.write_bytes(b"y" * (artifact.MAX_READ_BYTES - 3) + b"end")
    assert run(artifact.Contains, {"path": str(exact), "pattern": "end"}, refs(exact)).passed


def test_text_of_and_data_of_are_async_and_read_on_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert inspect.iscoroutinefunction(artifact.text_of) and inspect.iscoroutinefunction(artifact.data_of)
    (tmp_path / "d.json").write_text('{"n": 1}')
    threads: list[threading.Thread] = []
    read_content = reading.read_content

    def spy(*args: Any) -> Any:
        threads.append(threading.current_thread())
        return read_content(*args)

    monkeypatch.setattr(reading, "read_content", spy)

    async def go() -> tuple[artifact.Content, tuple[Any, str | None]]:
        ctx = ctx_for(refs("d.json"), agent_dir=tmp_path)
        item = ctx.response.artifacts[0]
        return await artifact.text_of(item, ctx), await artifact.data_of(item, ctx)

    content, data = anyio.run(go)
    assert content == artifact.Content('{"n": 1}') and data == ({"n": 1}, None)
    assert len(threads) == 2 and all(t is not threading.main_thread() for t in threads)


def test_json_nested_too_deeply_fails_the_check(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    checked = run(artifact.Schema, {"path": str(deep), "schema": {}}, refs(deep))
    assert not checked.passed
    says(checked.message, str(deep), "JSON", "nested too deeply")
    nested: Any = 0
    for _ in range(890):  # as deep as the protocol lets structured data be
        nested = [nested]
    schema = {
        "$defs": {"level": {"type": ["array", "integer"], "items": {"$ref": "#/$defs/level"}}},
        "properties": {"v": {"$ref": "#/$defs/level"}},
    }
    resp = response(artifacts=[StructuredArtifact(name="n", data={"v": nested})])
    checked = run(artifact.Schema, {"name": "n", "schema": schema}, resp)
    assert not checked.passed
    says(checked.message, "n (structured)", "nested too deeply", "validate")


# --- 4. CPU-heavy work on agent data runs off the event loop -------------------------------------


def _record_threads(monkeypatch: pytest.MonkeyPatch, name: str) -> list[bool]:
    """Replace ``artifact.<name>`` with a wrapper noting whether each call ran off the main thread."""
    calls: list[bool] = []
    original: Callable[..., Any] = getattr(artifact, name)

    def wrapper(*args: Any) -> Any:
        calls.append(threading.current_thread() is not threading.main_thread())
        return original(*args)

    monkeypatch.setattr(artifact, name, wrapper)
    return calls


def test_sections_parses_large_text_on_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record_threads(monkeypatch, "headings")
    small = response(files={"r.md": "# A\n"})
    large = response(files={"r.md": "# A\n" + "text\n" * 20_000})
    assert run(artifact.Sections, {"path": "r.md", "sections": ["A"]}, small).passed
    assert run(artifact.Sections, {"path": "r.md", "sections": ["A"]}, large).passed
    assert calls == [False, True]


def test_plain_search_of_large_text_runs_on_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[bool] = []
    finder = artifact._finder

    def spy_finder(config: Any, timeout: float) -> Callable[[str], int | None]:
        find = finder(config, timeout)

        def spy(text: str) -> int | None:
            threads.append(threading.current_thread() is not threading.main_thread())
            return find(text)

        return spy

    monkeypatch.setattr(artifact, "_finder", spy_finder)
    assert run(artifact.Contains, {"pattern": "x"}, response(files={"a": "x"})).passed
    assert run(artifact.Contains, {"pattern": "x"}, response(files={"a": "y" * 100_000 + "x"})).passed
    assert run(artifact.Contains, {"pattern": "x", "regex": True}, response(files={"a": "x"})).passed
    assert threads == [False, True, True]  # a regex always runs on a worker thread


def test_schema_validates_large_data_on_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record_threads(monkeypatch, "_validate")
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    small = response(structured={"items": [1, 2, 3]})
    large = response(structured={"items": list(range(50_000))})
    large_file = response(files={"d.json": json.dumps({"items": list(range(50_000))})})
    assert run(artifact.Schema, {"name": "result", "schema": schema}, small).passed
    assert run(artifact.Schema, {"name": "result", "schema": schema}, large).passed
    assert run(artifact.Schema, {"path": "d.json", "schema": schema}, large_file).passed
    # jsonschema matches 'pattern' with Python's re: never on the event loop
    assert run(
        artifact.Schema, {"name": "result", "schema": {"properties": {"s": {"pattern": "^a"}}}}, small
    ).passed
    assert calls == [False, True, True, True]


def test_the_event_loop_keeps_running_during_a_long_regex_match() -> None:
    evaluator = artifact.Contains({"regex_timeout_seconds": 0.5})
    config = msgspec.convert({"pattern": "^(a|aa)+$", "regex": True}, artifact.ContainsConfig)
    ticks = 0
    result: list[Check] = []

    async def go() -> None:
        nonlocal ticks

        async def check_it() -> None:
            result.extend(await evaluator.evaluate(ctx_for(response(files={"a": "a" * 40 + "!"})), config))
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(check_it)
            while True:
                await anyio.sleep(0.01)
                ticks += 1

    anyio.run(go)
    assert "took longer than 0.5 s" in result[0].message
    assert ticks >= 10  # the loop ran while the match did (blocked, it would not tick at all)


def test_small_data_is_bounded() -> None:
    assert artifact.small_data({"a": [1, 2, {"b": "c"}]})
    assert not artifact.small_data({"s": "x" * 100_000})
    assert not artifact.small_data(list(range(100_000)))
    assert not artifact.small_data({str(i): i for i in range(100_000)})
    assert artifact.small_data("x" * 100, limit=200) and not artifact.small_data("x" * 300, limit=200)


def test_off_loop_runs_small_work_inline_and_large_work_on_a_thread() -> None:
    async def go() -> list[bool]:
        def where() -> bool:
            return threading.current_thread() is not threading.main_thread()

        return [
            await artifact.off_loop(10, where),
            await artifact.off_loop(artifact.INLINE_CHARS + 1, where),
            await artifact.off_loop(-1, where),
        ]

    assert anyio.run(go) == [False, True, True]


# --- 5. where relative paths are read from -------------------------------------------------------


@pytest.fixture
def decoy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ATP's working directory, with a report.md that is not the agent's."""
    atp_dir = tmp_path / "atp"
    atp_dir.mkdir()
    (atp_dir / "report.md").write_text("# Decoy\nDECOY\n")
    monkeypatch.chdir(atp_dir)
    return atp_dir


def test_a_relative_path_is_not_read_from_atps_working_directory(decoy: Path) -> None:
    resp = refs("report.md")
    checked = run(artifact.Contains, {"path": "report.md", "pattern": "DECOY"}, resp)
    assert not checked.passed
    says(checked.message, "'DECOY'", "report.md", "read none of it", "relative path", "no working folder")
    assert not run(artifact.Sections, {"path": "report.md", "sections": ["Decoy"]}, resp).passed


def test_a_relative_path_is_read_from_the_agents_folder(decoy: Path, tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    (agent_dir / "out").mkdir(parents=True)
    (agent_dir / "out" / "report.md").write_text("# Own\nthe agent's own\n")
    resp = refs("out/report.md")
    assert run(
        artifact.Contains, {"path": "out/report.md", "pattern": "own"}, resp, agent_dir=agent_dir
    ).passed
    assert not run(
        artifact.Contains, {"path": "out/report.md", "pattern": "DECOY"}, resp, agent_dir=agent_dir
    ).passed


def test_the_workspace_comes_before_the_agents_folder(tmp_path: Path) -> None:
    workspace, agent_dir = tmp_path / "ws", tmp_path / "agent"
    workspace.mkdir()
    agent_dir.mkdir()
    (workspace / "r.txt").write_text("from the workspace")
    (agent_dir / "r.txt").write_text("from the agent's folder")
    resp = refs("r.txt")
    config = {"path": "r.txt", "pattern": "workspace"}
    assert run(artifact.Contains, config, resp, workspace=workspace, agent_dir=agent_dir).passed
    config = {"path": "r.txt", "pattern": "agent's"}
    assert not run(artifact.Contains, config, resp, workspace=workspace, agent_dir=agent_dir).passed


def test_paths_leaving_the_workspace_are_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("secret")
    (workspace / "sub" / "in.txt").write_text("inside")
    (workspace / "link_out").symlink_to(tmp_path / "secret.txt")
    (workspace / "link_in").symlink_to(workspace / "sub" / "in.txt")
    (workspace / "dir_out").symlink_to(tmp_path)
    for path in (
        "../secret.txt",
        "sub/../../secret.txt",
        str(tmp_path / "secret.txt"),
        "link_out",
        "dir_out/secret.txt",
        "/etc/passwd",
    ):
        checked = run(artifact.Contains, {"path": path, "pattern": "e"}, refs(path), workspace=workspace)
        assert not checked.passed, path
        assert checked.message.endswith(
            f"{path} is outside the workspace {workspace}; ATP reads only files inside the workspace"
        ), checked.message
    for path in ("sub/in.txt", "./sub/../sub/in.txt", str(workspace / "sub" / "in.txt"), "link_in"):
        assert run(
            artifact.Contains, {"path": path, "pattern": "inside"}, refs(path), workspace=workspace
        ).passed, path


def test_absolute_paths_without_a_workspace_are_read_as_they_are(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("absolute")
    assert run(
        artifact.Contains, {"path": str(tmp_path / "a.txt"), "pattern": "absolute"}, refs(tmp_path / "a.txt")
    ).passed


def test_resolve(tmp_path: Path) -> None:
    resp = refs()
    assert artifact.resolve("/x/y", ctx_for(resp)) == (Path("/x/y"), None)
    assert artifact.resolve("y", ctx_for(resp, agent_dir=tmp_path)) == (tmp_path / "y", None)
    real_tmp = Path(os.path.realpath(tmp_path))
    assert artifact.resolve("a/../y", ctx_for(resp, workspace=tmp_path, agent_dir=Path("/elsewhere"))) == (
        real_tmp / "y",
        None,
    )
    where, why = artifact.resolve("y", ctx_for(resp))
    assert where is None and why is not None and "relative path" in why
    where, why = artifact.resolve("a\0b", ctx_for(resp, agent_dir=tmp_path))
    assert where is None and why is not None and "NUL" in why


# --- 6. assertions that would always pass are refused at load ------------------------------------


@pytest.mark.parametrize(
    ("struct", "config", "message"),
    [
        (artifact.ContainsConfig, {"pattern": ""}, "'pattern' is empty"),
        (artifact.ContainsConfig, {"pattern": "", "regex": True}, "'pattern' is empty"),
        (artifact.SectionsConfig, {"sections": []}, "names no section"),
        (artifact.SectionsConfig, {"sections": ["A", " "]}, "blank section name"),
        (behavior.ToolsConfig, {"tools": []}, "'tools' names no tool"),
        (behavior.ToolsConfig, {"tools": ["web_search", ""]}, "'tools' has a blank tool name"),
        (behavior.ToolsConfig, {"tools": ["  "]}, "'tools' has a blank tool name"),
        (behavior.BehaviorConfig, {"must_use_tools": []}, "'must_use_tools' names no tool"),
        (behavior.BehaviorConfig, {"forbidden_tools": [], "max_steps": 3}, "'forbidden_tools' names no tool"),
        (behavior.BehaviorConfig, {"must_use_tools": ["\t"]}, "'must_use_tools' has a blank tool name"),
    ],
)
def test_empty_assertions_are_refused(
    struct: type[msgspec.Struct], config: dict[str, Any], message: str
) -> None:
    with pytest.raises(msgspec.ValidationError, match=message):
        msgspec.convert(config, struct)


def test_non_empty_assertions_still_load() -> None:
    msgspec.convert({"tools": ["web_search"]}, behavior.ToolsConfig)
    msgspec.convert({"must_use_tools": ["a"], "forbidden_tools": ["b"]}, behavior.BehaviorConfig)
    msgspec.convert({"max_steps": 3}, behavior.BehaviorConfig)
    msgspec.convert({"pattern": " "}, artifact.ContainsConfig)  # a space is something to find


# --- 7. an invalid JSON Schema is refused at load ------------------------------------------------


def test_an_invalid_schema_is_refused_at_load() -> None:
    with pytest.raises(msgspec.ValidationError) as raised:
        msgspec.convert({"name": "r", "schema": {"minItems": "3"}}, artifact.SchemaConfig)
    says(str(raised.value), "'schema'", "not a valid JSON Schema", "'3' is not of type 'integer'")
    with pytest.raises(msgspec.ValidationError, match="'schema' is not a valid JSON Schema"):
        msgspec.convert({"name": "r", "schema": {"type": "nonsense"}}, artifact.SchemaConfig)
    config = msgspec.convert({"name": "r", "schema": {"type": "object"}}, artifact.SchemaConfig)
    config.schema = {"type": "nonsense"}  # made some other way: checked again when it runs
    (checked,) = run_evaluator(
        artifact.Schema, config, response(artifacts=[StructuredArtifact(name="r", data={})])
    )
    assert not checked.passed and "the assertion's schema is not a valid JSON Schema" in checked.message


# --- check messages quote little of the agent ----------------------------------------------------


def test_schema_messages_quote_a_preview_of_the_data() -> None:
    resp = response(structured={"s": "x" * 1_000_000, "items": [{"k": "y" * 10_000}] * 5000})
    schema = {
        "properties": {"s": {"maxLength": 3}, "items": {"items": {"properties": {"k": {"type": "integer"}}}}}
    }
    checked = run(artifact.Schema, {"name": "result", "schema": schema}, resp)
    assert not checked.passed and len(checked.message) < 2000
    assert "more than 997 more; ATP stopped counting" in checked.message
    details = checked.details
    assert details is not None and details["errors"] == artifact.MAX_SCHEMA_ERRORS
    assert details["path"] == "$.items[0].k" and details["expected"] == 'type: "integer"'
    assert details["actual"] == '"' + "y" * (artifact.VALUE_CHARS - 1) + "…"
    assert len(details["failures"]) == 3 and len(json.dumps(details)) < 2000


def test_json_errors_and_artifact_names_are_previews(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": ' + "1" * 100 + "x" * 1_000_000)
    assert len(run(artifact.Schema, {"path": str(bad), "schema": {}}, refs(bad)).message) < 1000
    many = response(artifacts=[FileArtifact(path=f"{'p' * 1000}{i}.txt", content="") for i in range(2000)])
    assert len(run(artifact.ArtifactExists, {"path": "missing"}, many).message) < 2000
    assert len(run(artifact.ArtifactExists, {"path": "*.txt"}, many).message) < 2000
    assert len(run(artifact.Contains, {"path": "*.txt", "pattern": "x"}, many).message) < 2000
    long_name = response(artifacts=[StructuredArtifact(name="n" * 100_000, data={})])
    assert len(run(artifact.Contains, {"pattern": "x"}, long_name).message) < 2000


def test_behavior_messages_quote_a_preview_of_the_trace() -> None:
    flood = [make_event(TID, i, ToolCallPayload(tool=f"tool_{i}_" + "t" * 100)) for i in range(5000)]
    (missing,) = run_evaluator(behavior.MustUseTools, {"tools": ["web_search"]}, response(), flood)
    assert not missing.passed and len(missing.message) < 2000
    tools = [f"tool_{i}_" + "t" * 100 for i in range(5000)]
    (forbidden,) = run_evaluator(behavior.ForbiddenTools, {"tools": tools}, response(), flood)
    assert not forbidden.passed and len(forbidden.message) < 3000
    huge_error = [make_event(TID, 0, ErrorPayload(error_type="e" * 10_000, message="m" * 1_000_000))]
    (errors,) = run_evaluator(behavior.NoErrors, {}, response(), huge_error)
    assert not errors.passed and len(errors.message) < 1000


# --- regular expressions inside JSON Schemas ---------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"v": {"type": "string", "pattern": "^(a|aa)+$"}}},
        {"type": "object", "patternProperties": {"^(a|aa)+$": {"type": "integer"}}},
        {"type": "object", "patternProperties": {"^(a|aa)+$": {}}, "additionalProperties": False},
        {"type": "object", "propertyNames": {"pattern": "^(a|aa)+$"}},
    ],
)
def test_expressions_in_a_schema_are_matched_with_a_time_limit(schema: dict[str, Any]) -> None:
    from atp.evaluators.artifact import Schema

    hostile = "a" * 60 + "!"
    started = time.monotonic()
    (result,) = run_evaluator(
        Schema({"regex_timeout_seconds": 0.2}),
        {"name": "result", "schema": schema},
        response(structured={"v": hostile, hostile: 1}),
    )
    assert time.monotonic() - started < 5
    assert not result.passed
    says(
        result.message,
        "regular expression of the schema",
        "longer than 0.2 s",
        "result (structured)",
        "evaluators.schema.regex_timeout_seconds",
    )
    ok = {"type": "object", "properties": {"v": {"type": "string", "pattern": "^a+$"}}}
    (fine,) = run_evaluator(Schema(), {"name": "result", "schema": ok}, response(structured={"v": "aaa"}))
    (bad,) = run_evaluator(Schema(), {"name": "result", "schema": ok}, response(structured={"v": "b"}))
    assert fine.passed and not bad.passed and "does not match" in bad.message
