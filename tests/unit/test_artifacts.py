"""atp.core.artifacts: what an agent declares of its file artifacts (``size_bytes``,
``content_hash``) checked against their content, inline content decoded as ATP Protocol 1.0
says ("inline content (base64 for binary)"), files read bounded and never out of the workspace;
and what evaluators then see of them."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atp.adapters import term_sdk
from atp.adapters.workspace import with_workspace_files
from atp.core import artifacts
from atp.core.artifacts import (
    ArtifactContents,
    Where,
    content_bytes,
    encode_content,
    inline_content,
    is_binary,
    parse_hash,
    read_artifact,
    verify_artifacts,
)
from atp.core.evaluator import EvalContext
from atp.core.protocol import (
    PROTOCOL_VERSION,
    ATPRequest,
    FileArtifact,
    ReferenceArtifact,
    StructuredArtifact,
)
from atp.core.secrets import Masker
from atp.core.testing import make_test, response
from atp.core.trace import Trace
from atp.evaluators import artifact as evaluators
from atp.evaluators.code_exec.folder import FolderError, plan_placements
from tests.facts import says

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


def sha(data: bytes, algorithm: str = "sha256") -> str:
    return f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"


def declared(data: bytes, content_type: str | None = None, **fields: Any) -> FileArtifact:
    """A file artifact sent inline with its true size and hash, but for ``fields``."""
    values: dict[str, Any] = {
        "path": "out.bin" if is_binary(content_type) else "out.txt",
        "content_type": content_type,
        "size_bytes": len(data),
        "content_hash": sha(data),
        "content": encode_content(data, content_type),
    }
    values.update(fields)
    return FileArtifact(**values)


# --- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "binary"),
    [
        (None, False),
        ("", False),
        ("markdown", False),  # not a media type: says nothing of binary
        ("text/markdown", False),
        ("TEXT/CSV; charset=utf-8", False),
        ("application/json", False),
        ("application/vnd.api+json", False),
        ("image/svg+xml", False),
        ("application/octet-stream; charset=utf-8", False),
        ("image/png", True),
        ("application/pdf", True),
        ("application/octet-stream", True),
        ("Application/Zip", True),
        ("audio/mpeg; rate=44100", True),
    ],
)
def test_binary_is_a_media_type_that_is_not_text(content_type: str | None, binary: bool) -> None:
    assert is_binary(content_type) is binary


def test_parse_hash_takes_the_algorithms_atp_checks_in_either_case() -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    assert parse_hash(f"sha256:{digest}") == ("sha256", digest)
    assert parse_hash(f"SHA256:{digest.upper()}") == ("sha256", digest)
    assert parse_hash(sha(b"x", "sha512")) == ("sha512", hashlib.sha512(b"x").hexdigest())
    for bad in (
        digest,  # no algorithm
        f"md5:{hashlib.md5(b'x').hexdigest()}",  # not one ATP checks
        f"sha256:{digest[:-1]}",  # too short
        f"sha256:{digest}0",  # too long
        f"sha256:{digest[:-1]}g",  # not hex
        f"sha256: {digest[:-1]}",
        "sha256:",
        "",
    ):
        assert parse_hash(bad) is None, bad


def test_content_is_base64_for_binary_and_utf8_text_otherwise() -> None:
    assert content_bytes("aGVsbG8=", "image/png") == b"hello"
    assert content_bytes("aGVsbG8=", "text/plain") == b"aGVsbG8="
    assert content_bytes("naïve", None) == "naïve".encode()
    assert encode_content(PNG, "image/png") == base64.b64encode(PNG).decode()
    assert encode_content("naïve".encode(), "text/markdown") == "naïve"
    for bad, says_what in (
        ("aGVsbG8", "padding"),
        ("aGVs\nbG8=", "character 4 ('\\n') is not in the base64 alphabet"),
        ("aGVs-_G8=", "character 4 ('-')"),  # the URL-safe alphabet is not base64's
        ("aGVsbG8=é", "character 8 ('\\xe9')"),
    ):
        with pytest.raises(ValueError) as raised:
            content_bytes(bad, "application/octet-stream")
        says(str(raised.value), says_what)


def test_inline_content_is_decoded_and_read_as_text_when_it_is_utf8() -> None:
    png = inline_content(declared(PNG, "image/png"))
    assert png.binary and png.data == PNG and png.text is None and png.size == len(PNG)
    notes = inline_content(declared("± naïve".encode(), "application/octet-stream"))
    assert notes.binary and notes.text == "± naïve"
    text = inline_content(declared(b"# Report\n", "text/markdown"))
    assert not text.binary and text.text == "# Report\n" and text.data is None


# --- verifying inline content --------------------------------------------------------------------


def test_true_declarations_verify() -> None:
    found = verify_artifacts(
        [
            declared(b"# Report\n", "text/markdown"),
            declared(PNG, "image/png", content_hash=f"SHA512:{hashlib.sha512(PNG).hexdigest().upper()}"),
            declared(
                "naïve".encode(), "application/octet-stream", content_hash=sha("naïve".encode(), "sha384")
            ),
            FileArtifact(path="bare.txt", content="no declarations"),
            StructuredArtifact(name="s", data={}),
        ]
    )
    assert found.problems == [] and found.warnings == [] and found.reason is None


def test_a_size_or_hash_that_does_not_match_fails_naming_both_values() -> None:
    report = "x" * 98
    found = verify_artifacts(
        [
            declared(report.encode(), "text/markdown", path="report.md", size_bytes=120),
            declared(PNG, "image/png", path="logo.png", content_hash=sha(b"another")),
        ]
    )
    assert found.problems == [
        "artifact report.md: size_bytes says 120, the content has 98 bytes",
        f"artifact logo.png: content_hash says {sha(b'another')}, the content's is {sha(PNG)}",
    ]
    says(found.reason, "the agent's artifacts failed verification", "size_bytes says 120", sha(PNG))


def test_what_cannot_be_checked_fails_too() -> None:
    not_base64 = FileArtifact(path="c.png", content_type="image/png", content="not base64!")
    found = verify_artifacts(
        [
            declared(b"x", None, path="a.txt", content_hash="md5:" + hashlib.md5(b"x").hexdigest()),
            declared(b"x", None, path="b.txt", content_hash="whatever"),
            not_base64,
        ]
    )
    says(found.problems[0], "a.txt", "'md5:", "sha256, sha384, sha512")
    says(found.problems[1], "b.txt", "'whatever'", "<algorithm>:<hex digest>")
    says(found.problems[2], "c.png", "image/png", "base64", "character 3 (' ')")
    content = found.contents.of(not_base64)  # what evaluators see: why there is nothing
    assert content is not None and content.data is None and content.note == found.problems[2]
    assert found.contents.of(FileArtifact(path="c.png")) is None  # (the very artifact object only)


def test_numbers_and_types_from_an_agent_in_the_same_process_are_checked() -> None:
    """A Struct made in ATP's process is not validated as a decoded one is: number_in checks."""
    for size, shown in ((True, "True"), (-1, "-1"), (1.5, "1.5"), (10**20, "an integer of 21 digits")):
        (problem,) = verify_artifacts([declared(b"x", size_bytes=size)]).problems
        says(problem, "size_bytes", shown, "out of bounds")
    (problem,) = verify_artifacts([FileArtifact(path="b", content=b"raw")]).problems  # type: ignore[arg-type]
    says(problem, "artifact b", "bytes", "not text")
    (problem,) = verify_artifacts([declared(b"x", content_hash=123)]).problems
    says(problem, "content_hash", "int")


def test_what_a_problem_quotes_is_masked_and_bounded() -> None:
    secret = "sk-live-secret-1234"
    masker = Masker([secret])
    path = f"{secret}/" + "p" * 5000
    found = verify_artifacts(
        [declared(b"x", None, path=path, content_hash=f"sha256:{secret}{'0' * 5000}", size_bytes=2)],
        masker=masker,
    )
    assert len(found.problems) == 2
    for problem in found.problems:
        assert secret not in problem and "***" in problem and len(problem) < 600, problem


def test_the_reason_names_a_few_artifacts_and_counts_the_rest() -> None:
    lies = [declared(b"x", path=f"f{i}.txt", size_bytes=2) for i in range(12)]
    reason = verify_artifacts(lies).reason
    says(reason, "f0.txt", "f4.txt", "and 7 more problems")
    assert reason is not None and "f5.txt" not in reason


def test_problems_are_kept_bounded_however_many_artifacts_lie() -> None:
    lie = declared(b"x", size_bytes=2)
    found = verify_artifacts([lie] * 20_000)
    assert len(found.problems) == 5 and found.total == 20_000
    says(found.reason, "and 19995 more problems")


# --- verifying files ---------------------------------------------------------------------------


def on_disk(folder: Path, name: str, data: bytes, **fields: Any) -> ReferenceArtifact:
    (folder / name).write_bytes(data)
    values: dict[str, Any] = {"path": name, "size_bytes": len(data), "content_hash": sha(data)}
    values.update(fields)
    return ReferenceArtifact(**values)


def test_a_file_is_checked_where_the_agent_put_it_and_kept_for_evaluators(tmp_path: Path) -> None:
    good = on_disk(tmp_path, "good.csv", b"a,b\n1,2\n", content_type="text/csv")
    png = on_disk(tmp_path, "logo.png", PNG, content_type="image/png")
    short = on_disk(tmp_path, "short.bin", b"0123456789", size_bytes=12)
    wrong = on_disk(tmp_path, "wrong.bin", b"abc", content_hash=sha(b"abd"))
    found = verify_artifacts([good, png, short, wrong], Where(agent_dir=tmp_path))
    assert found.problems == [
        "artifact short.bin: size_bytes says 12, the file has 10 bytes",
        f"artifact wrong.bin: content_hash says {sha(b'abd')}, the file's is {sha(b'abc')}",
    ]
    assert found.warnings == []
    kept = found.contents.of(good)
    assert kept is not None and kept.text == "a,b\n1,2\n"
    kept = found.contents.of(png)
    assert kept is not None and kept.data == PNG and kept.binary


def test_a_file_atp_cannot_read_is_not_checked_with_a_warning(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    (workspace / "out").symlink_to(tmp_path / "secret.txt")
    os.mkfifo(workspace / "pipe")
    lies = [
        ReferenceArtifact(path=name, size_bytes=999)
        for name in ("missing.txt", "../secret.txt", "out", "pipe", str(tmp_path / "secret.txt"), "gone/x")
    ]
    found = verify_artifacts(lies, Where(workspace=workspace))
    assert found.problems == []
    (warning,) = found.warnings
    says(
        warning,
        "was not checked",
        "missing.txt cannot be read",
        "../secret.txt is outside the workspace",
        "out is outside the workspace",
        "pipe is a FIFO, not a regular file",
        "and 1 more",
    )
    relative = verify_artifacts([ReferenceArtifact(path="r.txt", content_hash=sha(b""))])
    says(relative.warnings[0], "r.txt is a relative path", "no working folder")


def test_files_are_checked_within_the_runs_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts, "MAX_HASHED_BYTES", 25)
    monkeypatch.setattr(artifacts, "MAX_CHECKED_FILES", 3)
    monkeypatch.setattr(artifacts, "MAX_KEPT_BYTES", 12)
    first = on_disk(tmp_path, "a", b"0123456789")
    second = on_disk(tmp_path, "b", b"0123456789")
    too_big = on_disk(tmp_path, "c", b"0123456789", size_bytes=11)  # past the hash budget: size only
    too_many = on_disk(tmp_path, "d", b"x", size_bytes=5)
    found = verify_artifacts([first, second, too_big, too_many], Where(agent_dir=tmp_path))
    assert found.problems == ["artifact c: size_bytes says 11, the file has 10 bytes"]
    says(found.warnings[0], "the content_hash of c", "ATP hashes at most", "d (ATP checks at most 3 files")
    assert found.contents.of(first) is not None and found.contents.of(second) is None  # past 12 bytes kept


# --- the property -----------------------------------------------------------------------------

TEXT_TYPES = st.sampled_from([None, "text/markdown", "application/json", "text/plain; charset=utf-8"])
BINARY_TYPES = st.sampled_from(["image/png", "application/octet-stream", "application/pdf"])
ALGORITHMS = st.sampled_from(sorted(artifacts.HASHES))


@st.composite
def contents(draw: st.DrawFn) -> tuple[bytes, str | None]:
    """Bytes an artifact may hold, with a content_type they may be sent under."""
    if draw(st.booleans()):
        return draw(st.text(max_size=300)).encode("utf-8", "surrogatepass"), draw(TEXT_TYPES)
    return draw(st.binary(max_size=300)), draw(BINARY_TYPES)


PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(contents(), ALGORITHMS, st.booleans())
def test_any_bytes_encoded_as_the_spec_says_with_their_true_size_and_hash_verify(
    sent: tuple[bytes, str | None], algorithm: str, upper: bool
) -> None:
    data, content_type = sent
    digest = sha(data, algorithm)
    claim = FileArtifact(
        path="a",
        content_type=content_type,
        size_bytes=len(data),
        content_hash=digest.upper() if upper else digest,
        content=encode_content(data, content_type)
        if is_binary(content_type)
        else data.decode("utf-8", "surrogatepass"),
    )
    found = verify_artifacts([claim])
    assert found.problems == [] and found.warnings == []
    content = inline_content(claim)
    assert (content.data if content.binary else content_bytes(content.text or "", None)) == data


@PROPERTY
@given(contents(), ALGORITHMS, st.integers(0, 10**15), st.binary(min_size=1, max_size=64))
def test_any_other_size_or_hash_fails(
    sent: tuple[bytes, str | None], algorithm: str, size: int, other: bytes
) -> None:
    data, content_type = sent
    content = (
        encode_content(data, content_type)
        if is_binary(content_type)
        else data.decode("utf-8", "surrogatepass")
    )
    if size != len(data):
        lie = FileArtifact(path="a", content_type=content_type, size_bytes=size, content=content)
        (problem,) = verify_artifacts([lie]).problems
        says(problem, f"size_bytes says {size}", f"has {len(data)} byte")
    wrong = hashlib.new(algorithm, data + other).hexdigest()
    lie = FileArtifact(
        path="a", content_type=content_type, content_hash=f"{algorithm}:{wrong}", content=content
    )
    (problem,) = verify_artifacts([lie]).problems
    says(problem, f"content_hash says {algorithm}:{wrong}", sha(data, algorithm))


# --- what evaluators see ----------------------------------------------------------------------


def ctx_for(*items: Any, where: Where | None = None, contents: ArtifactContents | None = None) -> EvalContext:
    where = where or Where()
    test = make_test()
    request = ATPRequest(version=PROTOCOL_VERSION, task_id="t", task=test.task)
    ctx = EvalContext(
        test=test,
        request=request,
        response=response(artifacts=list(items)),
        trace=Trace.of([]),
        workspace=where.workspace,
        agent_dir=where.agent_dir,
    )
    ctx.contents = contents
    return ctx


def evaluate(evaluator: type[Any], config: dict[str, Any], ctx: EvalContext) -> Any:
    instance = evaluator()

    async def go() -> Any:
        return await instance.evaluate(ctx, msgspec.convert(config, instance.Config))

    (checked,) = anyio.run(go)
    return checked


def test_evaluators_read_base64_content_decoded() -> None:
    notes = declared(b"Microsoft Teams leads", "application/octet-stream", path="notes.bin")
    png = declared(PNG, "image/png", path="logo.png")
    data = declared(b'{"n": 1}', "application/octet-stream", path="data.bin")
    for contents in (None, verify_artifacts([notes, png, data]).contents):  # found by the runner or not
        ctx = ctx_for(notes, png, data, contents=contents)
        assert evaluate(evaluators.Contains, {"path": "notes.bin", "pattern": "Teams"}, ctx).passed
        assert evaluate(evaluators.ArtifactExists, {"path": "logo.png"}, ctx).passed
        assert evaluate(evaluators.Schema, {"path": "data.bin", "schema": {"required": ["n"]}}, ctx).passed
        binary = evaluate(evaluators.Contains, {"path": "logo.png", "pattern": "PNG"}, ctx)
        assert not binary.passed
        says(binary.message, "logo.png is binary", "image/png", f"{len(PNG)} bytes", "not UTF-8 text")


def test_evaluators_read_what_the_runner_kept(tmp_path: Path) -> None:
    report = on_disk(tmp_path, "report.md", b"# Verified\n")
    contents = verify_artifacts([report], Where(agent_dir=tmp_path)).contents
    (tmp_path / "report.md").write_text("# Changed since\n")  # the check read what was verified
    ctx = ctx_for(report, where=Where(agent_dir=tmp_path), contents=contents)
    assert evaluate(evaluators.Contains, {"path": "report.md", "pattern": "Verified"}, ctx).passed
    assert read_artifact("report.md", None, Where(agent_dir=tmp_path)).text == "# Changed since\n"


def test_code_exec_writes_the_bytes_of_a_binary_artifact(tmp_path: Path) -> None:
    png = declared(PNG, "image/png", path="logo.png")
    (placement,) = plan_placements(ctx_for(png), [png])
    assert placement.content == PNG
    bad = FileArtifact(path="x.png", content_type="image/png", content="not base64!")
    with pytest.raises(FolderError, match="base64"):
        plan_placements(ctx_for(bad), [bad])


def test_an_adapter_completes_only_what_the_agent_left_out(tmp_path: Path) -> None:
    """A container's workspace files get a size and hash where the agent gave none; what it
    declared is kept, for the runner to check."""
    (tmp_path / "a.txt").write_bytes(b"0123456789")
    (tmp_path / "b.txt").write_bytes(b"abc")
    sent = response(
        artifacts=[
            FileArtifact(path="a.txt", size_bytes=12),
            FileArtifact(path="b.txt", content_hash=sha(b"x")),
        ]
    )
    completed, _ = with_workspace_files(sent, tmp_path, 0)
    a, b = completed.artifacts[:2]
    assert isinstance(a, FileArtifact) and isinstance(b, FileArtifact)
    assert (a.size_bytes, a.content_hash) == (12, sha(b"0123456789"))
    assert (b.size_bytes, b.content_hash) == (3, sha(b"x"))
    problems = verify_artifacts(completed.artifacts, Where(workspace=tmp_path)).problems
    says(problems[0], "a.txt", "size_bytes says 12", "10 bytes")
    says(problems[1], "b.txt", sha(b"x"), sha(b"abc"))


def test_a_term_sdk_agents_binary_file_is_kept_in_base64(tmp_path: Path) -> None:
    """The term-sdk adapter keeps the files of a temporary folder inline, as the protocol says:
    a binary one in base64, so the runner's check of its size and hash holds."""
    (tmp_path / "logo.png").write_bytes(PNG)
    (tmp_path / "notes.txt").write_text("naïve")
    sent = response(
        artifacts=[FileArtifact(path="logo.png", content_type="image/png"), FileArtifact(path="notes.txt")]
    )
    kept, _ = term_sdk._artifacts(sent, tmp_path, 0, True)
    logo, notes = kept.artifacts[:2]
    assert isinstance(logo, FileArtifact) and isinstance(notes, FileArtifact)
    assert logo.content == base64.b64encode(PNG).decode() and logo.content_hash == sha(PNG)
    assert notes.content == "naïve" and notes.size_bytes == len("naïve".encode())
    assert verify_artifacts(kept.artifacts).problems == []
