"""YAML files whose every error names the file, the path inside it and the line.

The file is composed once into nodes (which carry line numbers) and constructed from those
nodes, so a msgspec validation error on the constructed data (``$.tests[2].assertions[0].type``)
can be traced back to the line it came from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml

from atp.core.errors import SuiteError

T = TypeVar("T")
PathPart = str | int

try:
    _Loader: type[Any] = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_UNKNOWN_FIELD = re.compile(r"^Object contains unknown field `(?P<field>[^`]+)`")


def format_path(parts: Sequence[PathPart]) -> str:
    """``("tests", 2, "type")`` as ``tests[2].type``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


class YamlDocument:
    """A parsed YAML file: its data, and where each value stands in the text."""

    def __init__(self, path: Path, text: str, error_cls: type[SuiteError] = SuiteError) -> None:
        self.path = path
        self.error_cls = error_cls
        try:
            loader = _Loader(text)
            try:
                self.root = loader.get_single_node()
                self.data: Any = loader.construct_document(self.root) if self.root else None
            finally:
                loader.dispose()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = exc.problem or str(exc)
            if exc.context:
                problem = f"{exc.context}, {problem}"
            raise error_cls(f"invalid YAML: {problem}", file=str(path), line=line) from None
        except yaml.YAMLError as exc:
            raise error_cls(f"invalid YAML: {exc}", file=str(path)) from None
        if self.root is not None:
            self._check_duplicate_keys(self.root, ())

    @classmethod
    def load(cls, path: Path, error_cls: type[SuiteError] = SuiteError) -> YamlDocument:
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            raise error_cls("file not found", file=str(path)) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise error_cls(f"cannot read: {exc}", file=str(path)) from None
        return cls(path, text, error_cls)

    def error(self, message: str, parts: Sequence[PathPart] = ()) -> SuiteError:
        return self.error_cls(
            message, file=str(self.path), path=format_path(parts) or None, line=self.line_of(parts)
        )

    def line_of(self, parts: Sequence[PathPart]) -> int | None:
        """The line of the value at ``parts``; of its nearest existing parent when it is missing."""
        node = self.root
        if node is None:
            return None
        line: int = node.start_mark.line + 1
        for part in parts:
            child, key_line = _child(node, part)
            if child is None:
                return key_line if key_line is not None else line
            node = child
            line = key_line if key_line is not None else node.start_mark.line + 1
        return line

    def convert(self, data: Any, type_: type[T], at: Sequence[PathPart] = ()) -> T:
        """``msgspec.convert`` with any validation error located in this file."""
        try:
            return msgspec.convert(data, type_)
        except msgspec.ValidationError as exc:
            raise self._located(str(exc), at) from None

    def _located(self, text: str, at: Sequence[PathPart]) -> SuiteError:
        parts: list[PathPart] = list(at)
        match = _AT.search(text)
        if match:
            text = text[: match.start()]
            for key, index in _PART.findall(match.group("path")):
                parts.append(int(index) if index else key)
        unknown = _UNKNOWN_FIELD.match(text)
        if unknown:
            parts.append(unknown.group("field"))
            text = f"unknown field {unknown.group('field')!r}"
        return self.error(_humane(text), parts)

    def _check_duplicate_keys(self, node: yaml.Node, parts: tuple[PathPart, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, value_node in node.value:
                key = key_node.value
                if isinstance(key_node, yaml.ScalarNode) and key != "<<":
                    if key in seen:
                        raise self.error_cls(
                            f"duplicate key {key!r}",
                            file=str(self.path),
                            path=format_path((*parts, key)),
                            line=key_node.start_mark.line + 1,
                        )
                    seen.add(key)
                self._check_duplicate_keys(value_node, (*parts, key))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._check_duplicate_keys(item, (*parts, index))


def _child(node: yaml.Node, part: PathPart) -> tuple[yaml.Node | None, int | None]:
    """The child node at ``part`` and the line of its key (mappings) or item (sequences)."""
    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for key_node, value_node in node.value:
            if key_node.value == part:
                return value_node, key_node.start_mark.line + 1
        return None, None
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        item = node.value[part]
        return item, item.start_mark.line + 1
    return None, None


def _humane(text: str) -> str:
    """msgspec's wording, made to read as a sentence: ``Expected `int`, got `str``` → expected int, got str."""
    text = text.replace("`", "")
    return text[:1].lower() + text[1:] if text else text
