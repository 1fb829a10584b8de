"""YAML files whose every error names the file, the path inside it and the line.

The file is composed once into nodes (which carry line numbers) and constructed from those
nodes, so a msgspec validation error on the constructed data (``$.tests[2].assertions[0].type``)
can be traced back to the line it came from.

A file is untrusted input, and its size bounds the work of reading it: at most
:data:`MAX_FILE_BYTES` are read, nodes nest at most :data:`MAX_DEPTH` levels (aliases
included), and aliases repeat at most :data:`MAX_ALIAS_NODES` nodes in all. The nodes are
composed from the parser's events without recursion, and these bounds, duplicate anchors,
recursive aliases and duplicate keys are checked while composing, before anything recursive
(constructing the data, validating it) runs on them.

Memory: nodes are large (over 100 bytes each, several per line of YAML), so a document keeps
as few as it can. Nodes keep where they start, not where they end, and the nodes of one line
share one mark. The items of the top-level sequences named by ``items_of`` (a suite's
``tests``) are constructed as soon as each is composed and their nodes dropped: a suite of
10,000 tests never holds the nodes of more than one test (the text is kept instead, and
composed again only to locate an error inside an item). :meth:`YamlDocument.keeping` is what a
loaded suite keeps afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml
from yaml.constructor import ConstructorError

from atp.core.errors import SuiteError, SuiteErrors
from atp.core.mistakes import MAX_MISTAKES, collect, key_part, locate
from atp.core.mistakes import short as _short
from atp.core.spelling import mend, restore_spellings

T = TypeVar("T")
PathPart = str | int

MAX_FILE_BYTES = 4 * 1024 * 1024
"""The largest suite or config file ATP reads (4 MiB)."""
MAX_DEPTH = 64
"""How deep mappings and sequences may nest, counting what aliases bring in."""
MAX_ALIAS_NODES = 100_000
"""How many nodes all the aliases of a file may repeat together (an alias repeats every node
of its anchor, each time it is used)."""
MAX_INT_CHARS = 1000
"""The longest integer ATP reads; reading a longer one could take very long."""

_MERGE_TAG = "tag:yaml.org,2002:merge"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_BUILT_TAG = "tag:atp,built"
"""The tag of a node standing for an item constructed while composing: its value is the item's
index (an ``int``, which no node read from a file has) in the loader's ``built`` list."""

_Base: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
_C_PARSER = _Base is not yaml.SafeLoader  # the C parser reports positions in bytes


class _Loader(_Base):  # type: ignore[misc]
    """PyYAML's safe loader, whose constructors' own failures (an integer too long to read, a
    tag that does not fit its value) become located YAML errors, and which reads a timestamp
    as the text written (:func:`_construct_timestamp`)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.built: list[Any] = []
        """Items constructed while composing (see :data:`_BUILT_TAG`)."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:
            raise ConstructorError(
                None, None, f"cannot read the value as {_tag_name(node.tag)}: {exc}", node.start_mark
            ) from None


def _construct_int(loader: Any, node: yaml.Node) -> Any:
    if isinstance(node.value, str) and len(node.value) > MAX_INT_CHARS:
        raise ConstructorError(
            None, None, f"an integer longer than {MAX_INT_CHARS} characters", node.start_mark
        )
    return loader.construct_yaml_int(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _construct_timestamp(loader: Any, node: yaml.Node) -> Any:
    """An unquoted date or time (``2024-01-01``, ``2024-01-01 10:00:00``) as the string written,
    not a Python date: nothing ATP reads is a date, a date is no JSON value (``equals``' ``value:
    2024-01-01`` would never equal anything), and YAML 1.2 has no timestamp type either."""
    return loader.construct_scalar(node)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


def _construct_built(loader: Any, node: yaml.Node) -> Any:
    if type(node.value) is not int:  # a file's own !<tag:atp,built>: an unknown tag, as any other
        return loader.construct_undefined(node)
    return loader.built[node.value]


_Loader.add_constructor(_BUILT_TAG, _construct_built)


def format_path(parts: Sequence[PathPart]) -> str:
    """``("tests", 2, "type")`` as ``tests[2].type``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = _short(part if part.isprintable() else part.encode("unicode_escape").decode("ascii"))
            out += f".{text}" if out else text
    return out


def _tag_name(tag: str) -> str:
    return tag.rsplit(":", 1)[-1] if tag.startswith("tag:yaml.org,2002:") else tag


class YamlDocument:
    """A parsed YAML file: its data, and where each value stands in the text."""

    def __init__(
        self,
        path: Path,
        text: str,
        error_cls: type[SuiteError] = SuiteError,
        *,
        items_of: Sequence[str] = (),
    ) -> None:
        """``items_of``: top-level keys whose sequence's items are constructed one by one as
        they are composed, their nodes not kept (see the module's docstring)."""
        self.path = path
        self.error_cls = error_cls
        self._text: str | None = None
        """The text, when nodes were dropped: composed again to locate an error in them."""
        self._whole: yaml.Node | None = None
        if len(text) > MAX_FILE_BYTES:
            raise error_cls(_too_large(), file=str(path))
        loader: Any = None
        try:
            try:
                loader = _Loader(text)
                self.root: yaml.Node | None = self._compose(loader, frozenset(items_of))
                if loader.built:
                    self._text = text
                self.data: Any = loader.construct_document(self.root) if self.root else None
            finally:
                if loader is not None:
                    loader.built = []
                    loader.dispose()
        except UnicodeEncodeError as exc:  # a str with lone surrogates is no UTF-8 text
            raise error_cls(f"not UTF-8 text: {exc.reason}", file=str(path)) from None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = exc.problem or str(exc)
            if exc.context:
                problem = f"{exc.context}, {problem}"
            raise error_cls(f"invalid YAML: {problem}", file=str(path), line=line) from None
        except yaml.reader.ReaderError as exc:
            if _C_PARSER:
                line = text.encode("utf-8", "replace")[: exc.position].count(b"\n") + 1
            else:  # pragma: no cover - PyYAML built without libyaml
                line = text.count("\n", 0, exc.position) + 1
            raise error_cls(
                f"invalid YAML: unacceptable character {_character(exc.character)}: {exc.reason}",
                file=str(path),
                line=line,
            ) from None
        except yaml.YAMLError as exc:
            raise error_cls(f"invalid YAML: {exc}", file=str(path)) from None

    @classmethod
    def load(
        cls, path: Path, error_cls: type[SuiteError] = SuiteError, *, items_of: Sequence[str] = ()
    ) -> YamlDocument:
        """Read ``path`` (at most :data:`MAX_FILE_BYTES`, UTF-8) and parse it."""
        return cls(path, read_text(path, error_cls), error_cls, items_of=items_of)

    def error(self, message: str, parts: Sequence[PathPart] = ()) -> SuiteError:
        return self.error_cls(
            message, file=str(self.path), path=format_path(parts) or None, line=self.line_of(parts)
        )

    def line_of(self, parts: Sequence[PathPart]) -> int | None:
        """The line of the value at ``parts``; of its nearest existing parent when it is missing."""
        if self.root is None:
            return None
        line, dropped = _line_in(self.root, parts)
        if dropped and self._text is not None:  # inside an item whose nodes were dropped
            if self._whole is None:  # composed again whole, once, when first needed
                loader = _Loader(self._text)
                try:
                    self._whole = self._compose(loader, frozenset())
                finally:
                    loader.dispose()
            if self._whole is not None:
                line, _ = _line_in(self._whole, parts)
        return line

    def keeping(self, keys: Sequence[str]) -> YamlDocument:
        """A copy that still locates what is below the top-level ``keys`` (and every top-level
        key), without the data and the nodes of the rest: what a loaded file keeps for errors
        found after loading, instead of every node of the file. A value elsewhere is located
        at its top-level key's line."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.data = None
        copy._text = copy._whole = None
        root = self.root
        if isinstance(root, yaml.MappingNode):
            kept = set(keys)
            copy.root = yaml.MappingNode(
                root.tag,
                [
                    (key, value if isinstance(key, yaml.ScalarNode) and key.value in kept else _stub(value))
                    for key, value in root.value
                ],
                root.start_mark,
                None,
                flow_style=root.flow_style,
            )
        return copy

    def convert(self, data: Any, type_: type[T], at: Sequence[PathPart] = ()) -> T:
        """``msgspec.convert`` with every validation error located in this file. Data that
        does not convert is read again as :mod:`atp.core.spelling` says (empty values, other
        spellings of a key) before it is an error; the error names each mistake
        (:func:`atp.core.mistakes.collect`, at most :data:`~atp.core.mistakes.MAX_MISTAKES`):
        a :class:`~atp.core.errors.SuiteErrors` when there are several."""
        try:
            return msgspec.convert(data, type_)
        except msgspec.ValidationError as exc:
            error = exc
        renames: dict[tuple[PathPart, ...], str] = {}
        mended = mend(data, type_, renames)
        if mended is not data:
            try:
                return msgspec.convert(mended, type_)
            except msgspec.ValidationError as exc:
                error, data = exc, mended
        found = collect(data, type_, MAX_MISTAKES + 1) or [locate(data, type_, str(error))]
        errors = [
            self.error(text, [*at, *restore_spellings(parts, renames)])
            for parts, text in found[:MAX_MISTAKES]
        ]
        raise SuiteErrors.of(errors, more=len(found) > MAX_MISTAKES) from None

    def _compose(self, loader: Any, items_of: frozenset[str]) -> yaml.Node | None:
        """The document's root node, composed from the parser's events as PyYAML's composer
        does, but without recursion and checking on the way, each node once: how deep the
        nodes nest (aliases included), how many nodes the aliases repeat, recursive aliases,
        duplicate anchors and duplicate keys.

        The mappings and sequences that are items of a plain sequence under a top-level key in
        ``items_of`` are constructed when they are complete, into ``loader.built``, and stand
        in the tree as a node tagged :data:`_BUILT_TAG`."""
        return _Composer(loader, self.path, self.error_cls, items_of).compose()


class _Composer:
    """Composes one document from the parser's events (see :meth:`YamlDocument._compose`):
    one method per kind of event, each checking the bounds that kind can break.

    Nodes keep only where they start, and the nodes starting on one line share one mark (the
    first one's): a node's line is all that is read from it (its column and end are not), and
    a mark per event would be most of the memory the nodes take. Equal scalars share one
    string (keys, types, values repeated in every test)."""

    __slots__ = (
        "anchors",
        "built",
        "documents",
        "error_cls",
        "failed",
        "items_of",
        "line_mark",
        "loader",
        "measures",
        "path",
        "repeated",
        "root",
        "stack",
        "strings",
    )

    def __init__(
        self, loader: Any, path: Path, error_cls: type[SuiteError], items_of: frozenset[str]
    ) -> None:
        self.loader = loader
        self.path = path
        self.error_cls = error_cls
        self.items_of = items_of
        self.stack: list[_Open] = []
        self.built: list[Any] = loader.built
        self.failed = False
        """An item could not be constructed: it and the items after it stay nodes."""
        self.anchors: dict[str, yaml.Node] = {}
        self.measures: dict[int, tuple[int, int]] = {}
        """``id(anchored collection)``: its (height, size)."""
        self.repeated = 0
        """Nodes the aliases repeat, so far."""
        self.root: yaml.Node | None = None
        self.documents = 0
        self.line_mark: Any = None
        """The mark the nodes starting on the current line share."""
        self.strings: dict[str, str] = {}
        """One string per distinct scalar value."""

    def compose(self) -> yaml.Node | None:
        """Read the events to the end of the stream; the root node (``None``: no document)."""
        scalar, alias = yaml.ScalarEvent, yaml.AliasEvent
        sequence_start, mapping_start = yaml.SequenceStartEvent, yaml.MappingStartEvent
        ends = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
        while True:
            event = self.next_event()
            kind = type(event)
            if kind is scalar:
                self.scalar(event)
            elif kind is sequence_start or kind is mapping_start:
                self.open(event, kind is mapping_start)
            elif kind in ends:
                self.close()
            elif kind is alias:
                self.alias(event)
            elif kind is yaml.DocumentStartEvent:
                self.document_start(event)
            elif kind is yaml.StreamEndEvent:
                return self.root

    def next_event(self) -> Any:
        """The parser's next event; its own nesting limit refused as ours is."""
        try:
            return self.loader.get_event()
        except yaml.MarkedYAMLError as exc:
            if "exceeded maximum nesting depth" not in (exc.problem or ""):
                raise
            # libyaml 0.2.6 (PyYAML 6.0.3 and later) scans a flow collection's opening
            # brackets ahead of its events and stops at its own depth limit, above ours,
            # before the events reach MAX_DEPTH here: the same refusal, said the same way
            raise self.fail(
                f"nested deeper than {MAX_DEPTH} levels", exc.problem_mark or exc.context_mark
            ) from None

    def fail(self, message: str, mark: Any, here: bool = True, key: str | None = None) -> SuiteError:
        """An error at the node being added to the innermost open collection (``here``),
        or at its ``key``, or at that collection."""
        stack = self.stack
        parts: list[PathPart] = [frame.part for frame in stack if frame.part is not None]
        if key is not None:
            parts.append(key)
        elif here and stack:
            part = stack[-1].child_part()
            if part is not None:
                parts.append(part)
        return self.error_cls(
            message, file=str(self.path), path=format_path(parts) or None, line=mark.line + 1
        )

    def shared_mark(self, mark: Any) -> Any:
        """The mark a node starting at ``mark`` keeps: the first one of its line."""
        line_mark = self.line_mark
        if line_mark is None or mark.line != line_mark.line:
            line_mark = self.line_mark = mark
        return line_mark

    def scalar(self, event: Any) -> None:
        mark = event.start_mark
        line_mark = self.shared_mark(mark)
        value = event.value
        value = self.strings.setdefault(value, value)
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, value, event.implicit)
        node = yaml.ScalarNode(tag, value, line_mark, None, style=event.style)
        self.anchor(event, node)
        self.add(node, 0, 1, mark)

    def open(self, event: Any, mapping: bool) -> None:
        """A sequence or mapping starts: refused beyond :data:`MAX_DEPTH`."""
        stack = self.stack
        mark = event.start_mark
        if len(stack) >= MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels", mark)
        line_mark = self.shared_mark(mark)
        node_cls = yaml.MappingNode if mapping else yaml.SequenceNode
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(node_cls, None, event.implicit)
        node = node_cls(tag, [], line_mark, None, flow_style=event.flow_style)
        self.anchor(event, node)
        part = stack[-1].child_part() if stack else None
        frame = _Open(node, part, mapping, event.anchor is not None)
        frame.build = (
            len(stack) == 1 and part in self.items_of and tag == _SEQ_TAG and stack[0].node.tag == _MAP_TAG
        )
        stack.append(frame)

    def close(self) -> None:
        """A sequence or mapping ends: it is added to its parent (measured, if anchored)."""
        frame = self.stack.pop()
        if frame.anchored:
            self.measures[id(frame.node)] = (frame.height, frame.size)
        self.add(frame.node, frame.height, frame.size, frame.node.start_mark)

    def alias(self, event: Any) -> None:
        """An alias: its anchor's node, refused when undefined, recursive, nesting beyond
        :data:`MAX_DEPTH` here, or repeating more than :data:`MAX_ALIAS_NODES` in all."""
        name = event.anchor
        target = self.anchors.get(name)
        if target is None:
            raise self.fail(f"invalid YAML: found undefined alias *{_short(name)}", event.start_mark)
        if isinstance(target, yaml.ScalarNode):
            height, size = 0, 1
        elif id(target) in self.measures:
            height, size = self.measures[id(target)]
        else:
            raise self.fail(
                f"recursive alias *{_short(name)}: the anchor &{_short(name)} "
                f"(line {target.start_mark.line + 1}) contains it",
                event.start_mark,
            )
        if len(self.stack) + height > MAX_DEPTH:
            raise self.fail(
                f"nested deeper than {MAX_DEPTH} levels through the alias *{_short(name)}",
                event.start_mark,
            )
        self.repeated += size
        if self.repeated > MAX_ALIAS_NODES:
            raise self.fail(
                f"the aliases repeat more than {MAX_ALIAS_NODES:,} nodes "
                f"(the limit is reached at the alias *{_short(name)})",
                event.start_mark,
            )
        self.add(target, height, size, event.start_mark)

    def document_start(self, event: Any) -> None:
        """A document starts: only one is allowed."""
        self.documents += 1
        if self.documents > 1:
            raise self.fail(
                "invalid YAML: expected a single document in the stream, but found another document",
                event.start_mark,
                here=False,
            )

    def anchor(self, event: Any, node: yaml.Node) -> None:
        """Define the event's anchor (if any) as ``node``; an anchor defined twice is refused."""
        name = event.anchor
        if name is None:
            return
        first = self.anchors.get(name)
        if first is not None:
            raise self.fail(
                f"duplicate anchor &{_short(name)} (first defined at line {first.start_mark.line + 1})",
                event.start_mark,
            )
        self.anchors[name] = node

    def add(self, node: yaml.Node, height: int, size: int, mark: Any) -> None:
        """Add a complete node to the innermost open collection (or make it the root): an item
        of a sequence (constructed now if the sequence's items are), or a mapping's key (a
        duplicate key refused) or value."""
        stack = self.stack
        if not stack:
            self.root = node
            return
        frame = stack[-1]
        if frame.height <= height:
            frame.height = height + 1
        frame.size += size
        if frame.seen is None:
            if frame.build and type(node) is not yaml.ScalarNode:
                node = self.build(node)
            frame.node.value.append(node)
            frame.index += 1
        elif frame.key is None:
            if type(node) is yaml.ScalarNode and node.tag != _MERGE_TAG:
                if node.value in frame.seen:
                    raise self.fail(f"duplicate key {_short(node.value)!r}", mark, key=node.value)
                frame.seen.add(node.value)
            frame.key = node
        else:
            frame.node.value.append((frame.key, node))
            frame.key = None

    def build(self, node: yaml.Node) -> yaml.Node:
        """The item constructed now and the node standing for it in the tree; the item
        itself when it cannot be constructed, and every item after it: the document's
        construction then fails on it where and as it would have with every node kept
        (after any error of the parser, and after errors it meets first)."""
        if self.failed:
            return node
        loader = self.loader
        built = self.built
        try:
            built.append(loader.construct_document(node))
        except yaml.YAMLError:
            self.failed = True
            # what the failed construction left (construct_document resets it on success)
            loader.state_generators = []
            loader.constructed_objects = {}
            loader.recursive_objects = {}
            loader.deep_construct = False
            return node
        return yaml.ScalarNode(_BUILT_TAG, len(built) - 1, node.start_mark, None)


class _Open:
    """A mapping or sequence being composed: its node, where it stands in its parent, and
    what is known so far of its height (levels of nesting, aliases included) and size (nodes,
    counting what aliases repeat)."""

    __slots__ = ("anchored", "build", "height", "index", "key", "node", "part", "seen", "size")

    def __init__(self, node: yaml.Node, part: PathPart | None, mapping: bool, anchored: bool) -> None:
        self.node = node
        self.part = part
        self.anchored = anchored
        self.height = 1
        self.size = 1
        self.index = 0
        self.key: yaml.Node | None = None
        self.seen: set[str] | None = set() if mapping else None
        self.build = False
        """Its items are constructed as soon as they are complete (see ``items_of``)."""

    def child_part(self) -> PathPart | None:
        """The path part of the node being added (``None`` for a mapping's key)."""
        if self.seen is None:
            return self.index
        if self.key is None:
            return None
        return self.key.value if isinstance(self.key, yaml.ScalarNode) else "?"


def _line_in(node: yaml.Node, parts: Sequence[PathPart]) -> tuple[int, bool]:
    """The line of the value at ``parts`` below ``node`` (of its nearest existing parent when it
    is missing), and whether the walk stopped at an item whose nodes were dropped."""
    line: int = node.start_mark.line + 1
    for part in parts:
        if node.tag == _BUILT_TAG and type(node.value) is int:
            return line, True
        child, key_line = _child(node, part)
        if child is None:
            return (key_line if key_line is not None else line), False
        node = child
        line = key_line if key_line is not None else node.start_mark.line + 1
    return line, False


def _stub(node: yaml.Node) -> yaml.Node:
    """``node`` without what is below it (its line stays)."""
    if isinstance(node, yaml.CollectionNode):
        return type(node)(node.tag, [], node.start_mark, None, flow_style=node.flow_style)
    return node


def _child(node: yaml.Node, part: PathPart) -> tuple[yaml.Node | None, int | None]:
    """The child node at ``part`` and the line of its key (mappings) or item (sequences)."""
    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for key_node, value_node in node.value:
            if key_node.value == part:
                return value_node, key_node.start_mark.line + 1
        for key_node, value_node in node.value:  # a key that is no string: 0x1, True
            if isinstance(key_node, yaml.ScalarNode) and _scalar_key(key_node) == part:
                return value_node, key_node.start_mark.line + 1
        return None, None
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        item = node.value[part]
        return item, item.start_mark.line + 1
    return None, None


def _scalar_key(node: yaml.ScalarNode) -> str | None:
    try:
        return key_part(yaml.constructor.SafeConstructor().construct_object(node))
    except Exception:  # a key that cannot be read is no key a path names
        return None


def read_text(path: Path, error_cls: type[SuiteError] = SuiteError) -> str:
    """A suite or config file's text: at most :data:`MAX_FILE_BYTES`, UTF-8; any problem is an
    ``error_cls`` naming the file (and the line of a byte that is not UTF-8)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise error_cls("file not found", file=str(path)) from None
    except OSError as exc:
        raise error_cls(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    if len(raw) > MAX_FILE_BYTES:
        raise error_cls(_too_large(), file=str(path))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error_cls(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} ({exc.reason})",
            file=str(path),
            line=line,
        ) from None


def _too_large() -> str:
    return (
        f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB, the most ATP reads "
        f"from a suite or config file"
    )


def _character(value: Any) -> str:
    return f"#x{value:04x}" if isinstance(value, int) else repr(value)
