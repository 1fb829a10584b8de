"""The content of an agent's file artifacts: found, decoded and checked against what the agent
declared, once per run, by one helper (:func:`verify_artifacts`).

ATP Protocol 1.0 gives a file artifact as ``path``, ``content_type``, ``size_bytes``,
``content_hash`` (``"sha256:..."``) and ``content`` ("Optional: inline content (base64 for
binary)"); a reference artifact has the same fields but ``content``. ATP reads them so:

- **Binary or text.** An artifact is binary when its ``content_type`` is a media type
  (``type/subtype``) that is not a text type (:func:`is_binary`). Text types: ``text/*``; any
  type with a ``+json``, ``+xml`` or ``+yaml`` suffix; any type with a ``charset`` parameter; the
  textual ``application/`` types of :data:`TEXT_TYPES` (``application/json``, ...). An artifact
  without a ``content_type`` (or with one that is not a media type) is text.
- **The bytes of inline content.** A binary artifact's ``content`` is base64: RFC 4648's
  standard alphabet with its ``=`` padding and nothing else (no line breaks, no URL-safe
  alphabet); content that is not is the agent's failure. A text artifact's ``content`` is the
  text itself, and its bytes are its UTF-8 encoding. Without ``content``, the bytes are those of
  the file at ``path`` (:func:`resolve_path`: inside the workspace, or the agent's folder).
- **size_bytes** is the number of those bytes; **content_hash** is ``<algorithm>:<hex digest>``
  of them, the algorithm one of :data:`HASHES` (the spec's ``sha256``, and ``sha384``,
  ``sha512``), its name and the hex digits in either case. A hash of another form or algorithm
  is the agent's failure, as a wrong one is: a hash ATP cannot check would pass for a checked one.

A mismatch fails the run as the agent's failure, naming both values ("artifact report.md:
size_bytes says 120, the content has 98 bytes"). A file ATP cannot read (missing, outside the
workspace, a FIFO, a relative path without a folder ATP knows: an agent elsewhere) is not
checked, with a warning. Work is bounded: at most :data:`MAX_CHECKED_FILES` files are looked at
and :data:`MAX_HASHED_BYTES` of them hashed per run (beyond, a warning says what was not
checked); inline content is bounded by the response's own limit; evaluators see at most
:data:`MAX_READ_BYTES` of a file, and ATP keeps at most :data:`MAX_KEPT_BYTES` of the files it
hashed for them (the rest they read again).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from atp.core.bounds import MAX_COUNT, number_in, shown_number
from atp.core.files import kind, open_inside, reason
from atp.core.portability import RAW_FLAGS
from atp.core.protocol import Artifact, FileArtifact, ReferenceArtifact
from atp.core.text import describe, shorten

if TYPE_CHECKING:
    from atp.core.secrets import Masker

__all__ = [
    "HASHES",
    "MAX_CHECKED_FILES",
    "MAX_HASHED_BYTES",
    "MAX_KEPT_BYTES",
    "MAX_READ_BYTES",
    "TEXT_TYPES",
    "ArtifactContent",
    "ArtifactContents",
    "Verified",
    "Where",
    "content_bytes",
    "encode_content",
    "inline_content",
    "is_binary",
    "media_type",
    "parse_hash",
    "read_artifact",
    "resolve_path",
    "utf8_text",
    "verify_artifacts",
]

MAX_READ_BYTES = 16 * 1024 * 1024
"""A file artifact is read up to this many bytes for evaluators; the rest is not looked at."""
MAX_HASHED_BYTES = 256 * 1024 * 1024
"""The most bytes of files read in one run to check their ``content_hash``; a file that would
take more is not checked, with a warning (its ``size_bytes`` still is)."""
MAX_KEPT_BYTES = 64 * 1024 * 1024
"""The most bytes of the files hashed in one run kept for evaluators (each file's first
:data:`MAX_READ_BYTES`); past it, an evaluator reads the file again."""
MAX_CHECKED_FILES = 1000
"""The most files of one run whose ``size_bytes`` or ``content_hash`` are checked."""
MAX_SHOWN_PROBLEMS = 5
"""A run's reason names this many artifacts that do not match, and counts the rest."""

HASHES: dict[str, int] = {"sha256": 32, "sha384": 48, "sha512": 64}
"""The algorithms a ``content_hash`` may name (lowercase, as :func:`hashlib.new` names them),
with the size of their digests in bytes."""
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/x-ndjson",
        "application/jsonl",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-toml",
        "application/sql",
        "application/graphql",
        "application/csv",
        "application/x-sh",
        "application/x-shellscript",
        "application/x-python",
        "application/x-tex",
        "application/x-latex",
        "application/rtf",
        "application/x-www-form-urlencoded",
    }
)
"""The media types outside ``text/`` whose content is text."""
_TEXT_SUFFIXES = ("+json", "+xml", "+yaml")
_PIECE = 1024 * 1024
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/=]")
_NAME_CHARS = 120


class Where(NamedTuple):
    """Where an artifact's relative ``path`` is: the request's workspace (a path leaving it is
    not read), else the agent's own working folder; never ATP's working directory."""

    workspace: Path | None = None
    agent_dir: Path | None = None


class ArtifactContent(NamedTuple):
    """What ATP found of a file or reference artifact's content."""

    text: str | None = None
    """The content as text: a text artifact's (a file's decoded from UTF-8, an invalid byte
    U+FFFD); a binary artifact's when its bytes are UTF-8 (:func:`utf8_text`); else ``None``."""
    data: bytes | None = None
    """The bytes of a binary artifact (decoded from base64, or read from the file)."""
    note: str | None = None
    """Why there is no content; or, with some, that only the first part of a larger file was read."""
    binary: bool = False
    """Whether the artifact is binary (:func:`is_binary`)."""
    size: int | None = None
    """How many bytes the content has in all (``None``: unknown)."""


class ArtifactContents:
    """The content ATP found for a run's artifacts, by artifact (the very objects of the
    response): what evaluators read (:attr:`atp.core.evaluator.EvalContext.contents`)."""

    __slots__ = ("_found",)

    def __init__(self) -> None:
        self._found: dict[int, tuple[Artifact, ArtifactContent]] = {}

    def add(self, artifact: Artifact, content: ArtifactContent) -> None:
        self._found[id(artifact)] = (artifact, content)

    def of(self, artifact: Artifact) -> ArtifactContent | None:
        """The content found for ``artifact``; ``None`` when ATP has none kept (read it then)."""
        found = self._found.get(id(artifact))
        return found[1] if found is not None and found[0] is artifact else None

    def __len__(self) -> int:
        return len(self._found)


class Verified(NamedTuple):
    """What :func:`verify_artifacts` found: the content for evaluators, the agent's failures
    (artifacts that do not match what it declared), what could not be checked."""

    contents: ArtifactContents
    problems: list[str]
    """The first :data:`MAX_SHOWN_PROBLEMS` problems."""
    warnings: list[str]
    total: int = 0
    """How many problems there are in all."""

    @property
    def reason(self) -> str | None:
        """The run's reason for the problems (at most :data:`MAX_SHOWN_PROBLEMS` named);
        ``None`` when there are none."""
        if not self.problems:
            return None
        return f"the agent's artifacts failed verification: {_listed(self.problems, self.total, 'problem')}"


def _listed(items: list[str], count: int, what: str) -> str:
    """``items`` (the first of ``count``), joined, and how many more there are."""
    more = count - len(items)
    if more <= 0:
        return "; ".join(items)
    noun = f" {what}{'s' if more > 1 else ''}" if what else ""
    return "; ".join(items) + f"; and {more} more{noun}"


# --- the rule ------------------------------------------------------------------------------


def media_type(content_type: object) -> str:
    """``content_type``'s media type, lowercase, without parameters (``""`` when none)."""
    if not isinstance(content_type, str):
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def is_binary(content_type: object) -> bool:
    """Whether an artifact of this ``content_type`` is binary, so its inline ``content`` is
    base64 (see the module): a media type ``type/subtype`` that is not a text type."""
    kind_, slash, subtype = media_type(content_type).partition("/")
    if not slash or not kind_ or not subtype:
        return False
    if kind_ == "text" or subtype.endswith(_TEXT_SUFFIXES) or f"{kind_}/{subtype}" in TEXT_TYPES:
        return False
    parameters = str(content_type).split(";")[1:]
    return not any(p.strip().lower().startswith("charset=") for p in parameters)


def parse_hash(value: str) -> tuple[str, str] | None:
    """A ``content_hash`` as its algorithm and hex digest (both lowercase), when it is
    ``<algorithm>:<hex digest>`` of an algorithm of :data:`HASHES` with a digest of its size;
    else ``None``."""
    algorithm, colon, digest = value.partition(":")
    algorithm = algorithm.lower()
    size = HASHES.get(algorithm)
    if not colon or size is None:
        return None
    digest = digest.lower()
    if len(digest) != 2 * size or any(c not in "0123456789abcdef" for c in digest):
        return None
    return algorithm, digest


def encode_content(data: bytes, content_type: str | None) -> str:
    """``data`` as an artifact's inline ``content``: base64 when ``content_type`` is binary,
    else the UTF-8 text (``UnicodeDecodeError`` when it is not UTF-8)."""
    if is_binary(content_type):
        return base64.b64encode(data).decode("ascii")
    return data.decode("utf-8")


def content_bytes(content: str, content_type: str | None) -> bytes:
    """The bytes an inline ``content`` stands for: base64 decoded for a binary
    ``content_type`` (``ValueError`` saying why when it is not base64), else the UTF-8
    encoding of the text."""
    if not is_binary(content_type):
        return content.encode("utf-8", "surrogatepass")
    try:
        return base64.b64decode(content.encode("ascii", "replace"), validate=True)
    except binascii.Error as exc:
        stray = _NOT_BASE64.search(content)
        if stray is not None:  # (binascii does not say where)
            where = f"character {stray.start()} ({stray.group()!a})"
            raise ValueError(f"{where} is not in the base64 alphabet (A-Z, a-z, 0-9, +, /, =)") from None
        raise ValueError(str(exc)) from None


def inline_content(artifact: FileArtifact, masker: Masker | None = None) -> ArtifactContent:
    """The content of a file artifact sent inline, decoded (see the module)."""
    content, content_type = artifact.content, artifact.content_type
    binary = is_binary(content_type)
    if not isinstance(content, str):
        return ArtifactContent(note=f"{_name(artifact, masker)} has no content", binary=binary)
    if not binary:
        return ArtifactContent(text=content)
    try:
        data = content_bytes(content, content_type)
    except ValueError as exc:
        return ArtifactContent(note=_not_base64(artifact, exc, masker), binary=True)
    return ArtifactContent(text=utf8_text(data), data=data, binary=True, size=len(data))


def utf8_text(data: bytes, cut: bool = False) -> str | None:
    """``data`` as text when it is UTF-8 (``cut``: the first bytes of more, so a character cut
    at the end is left out), else ``None``: the bytes of a binary artifact are text too when
    they are UTF-8 (a text file sent in base64), and evaluators read them as such."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=not cut)
    except UnicodeDecodeError:
        return None


def _name(artifact: FileArtifact | ReferenceArtifact, masker: Masker | None) -> str:
    return shorten(artifact.path, _NAME_CHARS, masker) if isinstance(artifact.path, str) else "?"


def _not_base64(artifact: FileArtifact, exc: ValueError, masker: Masker | None) -> str:
    return (
        f"artifact {_name(artifact, masker)}: its content_type "
        f"{shorten(str(artifact.content_type), 80, masker)} is binary, so its content must be "
        f"base64, and it is not: {exc}"
    )


# --- files ---------------------------------------------------------------------------------


def resolve_path(path: str, where: Where, masker: Masker | None = None) -> tuple[Path | None, str | None]:
    """Where ATP reads the file an artifact's ``path`` names, or why it reads none.

    A relative path is relative to the request's workspace when it has one, else to the
    agent's working folder; never to ATP's own working directory (a relative path of an agent
    whose working folder ATP does not know is not read at all). With a workspace, a path that
    leads out of it, by ``..`` or by a symbolic link, is refused; the path returned then has
    its symbolic links resolved. Without a workspace an absolute path is read as it is."""
    shown = shorten(path, masker=masker)
    if "\0" in path:
        return None, f"{shown!r} contains a NUL character; it names no file"
    given = Path(path)
    if where.workspace is not None:
        root = Path(os.path.realpath(where.workspace))
        real = Path(os.path.realpath(root / given))
        if not real.is_relative_to(root):
            return None, (
                f"{shown} is outside the workspace {where.workspace}; ATP reads only files inside the workspace"
            )
        return real, None
    if given.is_absolute():
        return given, None
    if where.agent_dir is not None:
        return where.agent_dir / given, None
    return None, (
        f"{shown} is a relative path and the agent has no working folder ATP knows; ATP does not read it"
    )


def _elsewhere(path: str, where: Where, exc: OSError) -> str:
    """A hint when a relative path missing from the run's workspace names a file in the agent's
    own folder: the agent wrote it there (a persistent agent, whose process stays in its
    ``cwd``), not in the run's folder."""
    if not isinstance(exc, FileNotFoundError) or where.workspace is None or where.agent_dir is None:
        return ""
    try:
        if os.path.isabs(path) or not (where.agent_dir / path).is_file():
            return ""
    except (OSError, ValueError):
        return ""
    return (
        f" in the run's folder (context.workspace_path); the agent's own folder {where.agent_dir} has "
        "one: write the run's files in context.workspace_path"
    )


def _not_regular(shown: str, mode: int) -> str:
    what = kind(mode)
    what = "a special file" if what == "not a regular file" else what
    return f"{shown} is {what}, not a regular file; ATP reads only regular files"


def _open(path: str, where: Where, masker: Masker | None) -> tuple[int, int] | str:
    """The file an artifact's ``path`` names open for reading, and its size; or why not.
    Only a regular file is opened, never blocking on a FIFO; its type is checked before
    opening (a device is never opened) and on the open descriptor. Inside a workspace no link
    is followed in any part of the (resolved) path, so nothing put there since sends ATP
    elsewhere (:func:`atp.core.files.open_inside`)."""
    shown = shorten(path, masker=masker)
    real, problem = resolve_path(path, where, masker)
    if real is None:
        return problem or f"{shown} cannot be read"
    inside = where.workspace is not None
    try:
        before = os.stat(real, follow_symlinks=not inside)
        if not stat.S_ISREG(before.st_mode):
            return _not_regular(shown, before.st_mode)
        if where.workspace is not None:
            root = Path(os.path.realpath(where.workspace))
            with open_inside(root, real.relative_to(root).as_posix()) as handle:
                fd = os.dup(handle.fileno())
        else:
            fd = os.open(real, os.O_RDONLY | RAW_FLAGS | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        return f"{shown} cannot be read: {reason(exc)}{_elsewhere(path, where, exc)}"
    try:
        opened = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return f"{shown} cannot be read: {reason(exc)}"
    if not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        return _not_regular(shown, opened.st_mode)
    return fd, opened.st_size


def _read(fd: int, keep: int, limit: int, hasher: Any | None) -> tuple[bytes, int]:
    """The first ``keep`` bytes of the open file ``fd`` and how many bytes were read in all
    (at most ``limit``; one more tells there are more), each fed to ``hasher`` when given."""
    chunks: list[bytes] = []
    kept = size = 0
    while size <= limit:
        chunk = os.read(fd, min(_PIECE, limit + 1 - size))
        if not chunk:
            break
        size += len(chunk)
        if hasher is not None:
            hasher.update(chunk)
        if kept < keep:
            chunks.append(chunk[: keep - kept])
            kept += len(chunks[-1])
    return b"".join(chunks), size


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def _as_content(data: bytes, size: int, binary: bool, shown: str) -> ArtifactContent:
    """A file's first bytes as what evaluators read (with a note when the file is larger)."""
    note = None
    if size > MAX_READ_BYTES:
        data = data[:MAX_READ_BYTES]
        cap = _mib(MAX_READ_BYTES)
        note = f"{shown} is larger than {cap}; ATP read only its first {cap}"
    if binary:
        return ArtifactContent(utf8_text(data, size > len(data)), data, note, True, size)
    return ArtifactContent(text=data.decode("utf-8", "replace"), note=note, size=size)


def read_artifact(
    path: str, content_type: str | None, where: Where, masker: Masker | None = None
) -> ArtifactContent:
    """The content of the file an artifact's ``path`` names, at most :data:`MAX_READ_BYTES` of
    it (blocking: call it on a worker thread); text decoded from UTF-8 (an invalid byte
    becomes U+FFFD) unless ``content_type`` is binary."""
    shown = shorten(path, masker=masker)
    opened = _open(path, where, masker)
    if isinstance(opened, str):
        return ArtifactContent(note=opened, binary=is_binary(content_type))
    fd, length = opened
    try:
        data, size = _read(fd, MAX_READ_BYTES, MAX_READ_BYTES, None)
    except OSError as exc:
        return ArtifactContent(note=f"{shown} cannot be read: {reason(exc)}", binary=is_binary(content_type))
    finally:
        os.close(fd)
    if size > MAX_READ_BYTES:  # (the rest was not read: its size on disk says how much)
        size = max(size, length)
    return _as_content(data, size, is_binary(content_type), shown)


# --- checking what the agent declared ------------------------------------------------------


class _Run:
    """One run's check: its bounds spent so far, what it found."""

    def __init__(self, where: Where, masker: Masker | None) -> None:
        self.where = where
        self.masker = masker
        self.hashed = MAX_HASHED_BYTES
        self.kept = MAX_KEPT_BYTES
        self.files = MAX_CHECKED_FILES
        self.contents = ArtifactContents()
        self.problems: list[str] = []
        self.problem_count = 0
        self.unchecked: list[str] = []
        self.unchecked_count = 0

    def problem(self, text: str) -> None:
        """A problem of the agent's (the first :data:`MAX_SHOWN_PROBLEMS` kept, the rest counted)."""
        self.problem_count += 1
        if len(self.problems) < MAX_SHOWN_PROBLEMS:
            self.problems.append(text)

    def not_checked(self, text: str) -> None:
        """Something not checked, and why (the first few kept, the rest counted)."""
        self.unchecked_count += 1
        if len(self.unchecked) < MAX_SHOWN_PROBLEMS:
            self.unchecked.append(text)

    def verified(self) -> Verified:
        warnings = []
        if self.unchecked:
            shown = _listed(self.unchecked, self.unchecked_count, "")
            warnings.append(
                f"what the agent declared of some artifacts (size_bytes, content_hash) was not checked: {shown}"
            )
        return Verified(self.contents, self.problems, warnings, self.problem_count)

    def declared(
        self, artifact: FileArtifact | ReferenceArtifact
    ) -> tuple[int | None, tuple[str, str] | None]:
        """The artifact's ``size_bytes`` and parsed ``content_hash``, each ``None`` when not
        given; one that is not valid is a problem (and ``None``)."""
        size = artifact.size_bytes
        name = _name(artifact, self.masker)
        if size is not None and number_in(size, 0, MAX_COUNT, integer=True) is None:
            self.problem(
                f"artifact {name}: size_bytes = {shown_number(size)} is out of bounds (an integer from 0 to 1e15)"
            )
            size = None
        claimed = artifact.content_hash
        parsed = None
        if claimed is not None:
            parsed = parse_hash(claimed) if isinstance(claimed, str) else None
            if parsed is None:
                shown = (
                    shorten(claimed, 100, self.masker)
                    if isinstance(claimed, str)
                    else describe(claimed, self.masker)
                )
                self.problem(
                    f"artifact {name}: content_hash {shown!r} is not <algorithm>:<hex digest> of an algorithm "
                    f"ATP checks ({', '.join(HASHES)})"
                )
        return size, parsed

    def compare(
        self,
        artifact: FileArtifact | ReferenceArtifact,
        what: str,
        size: tuple[int | None, int | None],
        digest: tuple[tuple[str, str] | None, str | None],
    ) -> None:
        """A problem for each of ``size`` and ``digest`` (declared, found) that differ; ``what``:
        "the content", "the file"."""
        name = _name(artifact, self.masker)
        (declared, actual), (claimed, computed) = size, digest
        if declared is not None and actual is not None and declared != actual:
            self.problem(
                f"artifact {name}: size_bytes says {declared}, {what} has {actual} byte{'s' if actual != 1 else ''}"
            )
        if claimed is not None and computed is not None and claimed[1] != computed:
            self.problem(
                f"artifact {name}: content_hash says {shorten(str(artifact.content_hash), 140, self.masker)}, "
                f"{what}'s is {claimed[0]}:{computed}"
            )

    def inline(self, artifact: FileArtifact) -> None:
        size, claimed = self.declared(artifact)
        text = artifact.content
        if not isinstance(text, str):
            name = _name(artifact, self.masker)
            self.problem(f"artifact {name}: content is {describe(text, self.masker)}, not text")
            return
        content = inline_content(artifact, self.masker)
        if content.binary:
            self.contents.add(artifact, content)
            if content.data is None:
                self.problem(content.note or f"artifact {_name(artifact, self.masker)}: no content")
                return
        if size is None and claimed is None:
            return
        data = content.data if content.data is not None else text.encode("utf-8", "surrogatepass")
        computed = hashlib.new(claimed[0], data).hexdigest() if claimed is not None else None
        self.compare(artifact, "the content", (size, len(data)), (claimed, computed))

    def file(self, artifact: FileArtifact | ReferenceArtifact) -> None:
        size, claimed = self.declared(artifact)
        if size is None and claimed is None:
            return
        name = _name(artifact, self.masker)
        if not isinstance(artifact.path, str):
            self.problem(f"artifact path {describe(artifact.path, self.masker)} is not text")
            return
        if self.files <= 0:
            self.not_checked(f"{name} (ATP checks at most {MAX_CHECKED_FILES} files per run)")
            return
        self.files -= 1
        opened = _open(artifact.path, self.where, self.masker)
        if isinstance(opened, str):
            self.not_checked(opened)
            return
        fd, length = opened
        try:
            self._file(artifact, fd, length, size, claimed)
        except OSError as exc:
            self.not_checked(f"{name} cannot be read: {reason(exc)}")
        finally:
            os.close(fd)

    def _file(
        self,
        artifact: FileArtifact | ReferenceArtifact,
        fd: int,
        length: int,
        size: int | None,
        claimed: tuple[str, str] | None,
    ) -> None:
        """Check an open file of ``length`` bytes (by its size on disk, then by its bytes)."""
        if claimed is None or length > self.hashed:
            if claimed is not None:
                self.not_checked(
                    f"the content_hash of {_name(artifact, self.masker)} (ATP hashes at most "
                    f"{_mib(MAX_HASHED_BYTES)} of files per run)"
                )
            self.compare(artifact, "the file", (size, length), (None, None))
            return
        hasher = hashlib.new(claimed[0])
        keep = min(MAX_READ_BYTES + 1, self.kept)
        data, read = _read(fd, keep, self.hashed, hasher)
        self.hashed -= read
        if read > length and self.hashed < 0:  # (the file grew past the bound while read)
            self.not_checked(f"{_name(artifact, self.masker)} (it grew while ATP read it)")
            return
        if len(data) == min(read, MAX_READ_BYTES + 1):
            self.kept -= len(data)
            binary = is_binary(artifact.content_type)
            shown = shorten(artifact.path, masker=self.masker)
            self.contents.add(artifact, _as_content(data, read, binary, shown))
        self.compare(artifact, "the file", (size, read), (claimed, hasher.hexdigest()))


def verify_artifacts(
    artifacts: Sequence[Artifact], where: Where | None = None, masker: Masker | None = None
) -> Verified:
    """Each file and reference artifact of a response checked against what the agent declared
    (``size_bytes``, ``content_hash``), its inline content decoded (see the module), once per
    run (blocking: the runner calls it on a worker thread). Names and values quoted are the
    agent's: masked with ``masker`` (the run's secrets) and cut."""
    run = _Run(where or Where(), masker)
    for artifact in artifacts:
        if isinstance(artifact, FileArtifact) and artifact.content is not None:
            run.inline(artifact)
        elif isinstance(artifact, (FileArtifact, ReferenceArtifact)):
            run.file(artifact)
    return run.verified()
