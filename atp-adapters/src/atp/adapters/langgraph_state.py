"""A LangGraph state as ATP data (for the ``langgraph`` adapter, :mod:`atp.adapters.langgraph`):
the JSON-safe parts of a value within a budget (:func:`plain`), the default artifacts of a final
state (the last AI message's text and the state), and what an output mapper returned as
artifacts (:func:`mapped_artifacts`). Blocking: the adapter calls these in a worker thread."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import sys
import uuid
from collections.abc import Mapping
from decimal import Decimal
from pathlib import PurePath
from typing import Any

import msgspec

from atp.core.errors import AgentError
from atp.core.protocol import Artifact, FileArtifact, ReferenceArtifact, StructuredArtifact
from atp.core.secrets import Masker
from atp.core.text import guarded_repr, mask

ANSWER_PATH = "answer.md"
"""The file artifact holding the last AI message's text (without an ``output_mapper``)."""
STATE_ARTIFACT = "state"
"""The structured artifact holding the final state's JSON-safe parts."""
MAX_DEPTH = 64
"""How deep :func:`plain` follows nested values; deeper containers become a note, other
objects their ``repr``."""
MAX_ITEMS = 10_000
"""How many values :func:`plain` converts (a shared value counts each time it appears); then
it stops with a ``<truncated: ...>`` note."""
MAX_BYTES = 1 << 20
"""About how many bytes of JSON :func:`plain` makes (characters of text, keys and numbers);
then it stops with a ``<truncated: ...>`` note (a longer text is cut, its secrets masked
first)."""
_INT_RANGE = (-(2**63), 2**64 - 1)
_DROP: Any = object()


def text(content: Any) -> str:
    """A message's content as text: a string, or the text of its content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif (
                isinstance(block, Mapping)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ):
                parts.append(block["text"])
        return "".join(parts)
    return "" if content is None else str(content)


def last_ai_text(state: Any, message_type: type[Any]) -> str | None:
    """The text of the state's last AI message (``message_type``: LangChain's ``BaseMessage``),
    or ``None``."""
    messages = state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    if not isinstance(messages, (list, tuple)):
        return None
    for message in reversed(messages):
        if isinstance(message, message_type) and message.type == "ai":
            return text(message.content)
    return None


def default_artifacts(state: Any, message_type: type[Any], masker: Masker | None) -> list[Artifact]:
    """(In a worker thread.) The last AI message's text and the state's JSON-safe parts
    (``masker``, the run's, masks a text before it is cut: :func:`plain`)."""
    artifacts: list[Artifact] = []
    answer = last_ai_text(state, message_type)
    if answer is not None:
        artifacts.append(FileArtifact(path=ANSWER_PATH, content=answer, content_type="text/markdown"))
    artifacts.append(StructuredArtifact(name=STATE_ARTIFACT, data=state_data(state, masker)))
    return artifacts


def state_data(state: Any, masker: Masker | None) -> dict[str, Any]:
    """The JSON-safe parts of a state: messages as dicts, objects JSON cannot hold left out
    (``masker``, the run's, masks a text before it is cut: :func:`plain`)."""
    data = plain(state, keep=False, masker=masker)
    if isinstance(data, dict):
        return data
    return {} if data is _DROP else {"value": data}


def plain(value: Any, *, keep: bool = True, masker: Masker | None = None) -> Any:
    """``value`` as JSON can hold it: messages as dicts, pydantic models and dataclasses as their
    fields; what is not data becomes its ``repr`` (``keep``) or is left out. At most
    :data:`MAX_ITEMS` values and about :data:`MAX_BYTES` (then a ``<truncated: ...>`` note; a
    text cut there has its secrets masked first, with ``masker``, the run's), at most
    :data:`MAX_DEPTH` levels; a value met again is converted once, a cycle is a note."""
    return _Plain(keep, masker).convert(value, 0)


_CONTAINERS = (Mapping, list, tuple, set, frozenset)


class _Plain:
    """One conversion of :func:`plain`: its budget, the values converted so far (by id, each
    kept alive meanwhile), and the containers being converted (for cycles)."""

    def __init__(self, keep: bool, masker: Masker | None = None) -> None:
        self.keep = keep
        self.masker = masker
        self.items = 0
        self.bytes = 0
        self.done: dict[int, tuple[Any, Any, int, int]] = {}
        """id: (the value, what it became, the values and bytes that took)."""
        self.open: set[int] = set()

    def full(self) -> bool:
        return self.items >= MAX_ITEMS or self.bytes >= MAX_BYTES

    def note(self, more: int | None = None, what: str = "items") -> str:
        """The note saying the budget is spent (and how many ``what`` are left out)."""
        self.items = max(self.items, MAX_ITEMS)
        left = f"{more:,} more {what} left out, " if more else ""
        return f"<truncated: {left}past ATP's budget of {MAX_ITEMS:,} values or {MAX_BYTES // 1024:,} KiB>"

    def text(self, value: str) -> str:
        room = MAX_BYTES - self.bytes
        if len(value) + 2 <= room:
            self.bytes += len(value) + 2
            return value
        value = mask(value, self.masker)  # (before the cut: it never leaves part of a secret)
        if len(value) + 2 <= room:
            self.bytes += len(value) + 2
            return value
        self.bytes = MAX_BYTES
        kept = max(room - 2, 0)
        return value[:kept] + self.note(len(value) - kept, "characters")

    def convert(self, value: Any, depth: int) -> Any:
        self.items += 1
        if value is None or isinstance(value, bool):
            self.bytes += 5
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, int):
            self.bytes += 8
            return value if _INT_RANGE[0] <= value <= _INT_RANGE[1] else self.text(guarded_repr(value))
        if isinstance(value, float):
            self.bytes += 12
            return value if math.isfinite(value) else str(value)
        key = id(value)
        if key in self.open:
            return f"<cycle: a {type(value).__name__} inside itself>"
        known = self.done.get(key)
        if known is not None:
            _, result, items, size = known
            if self.items + items > MAX_ITEMS or self.bytes + size > MAX_BYTES:
                return self.note()
            self.items += items
            self.bytes += size
            return result
        if depth >= MAX_DEPTH:
            if isinstance(value, _CONTAINERS):
                return f"<a {type(value).__name__} nested deeper than {MAX_DEPTH} levels>"
            return self.text(guarded_repr(value)) if self.keep else _DROP
        items, size = self.items, self.bytes
        self.open.add(key)
        try:
            result = self.convert_object(value, depth + 1)
        finally:
            self.open.discard(key)
        self.done[key] = (value, result, self.items - items, self.bytes - size)
        return result

    def convert_object(self, value: Any, depth: int) -> Any:
        keep = self.keep
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for index, (key, item) in enumerate(value.items()):
                if self.full():
                    out["<truncated>"] = self.note(_len(value) - index, "entries")
                    break
                name = key if isinstance(key, str) else str(key)
                self.bytes += len(name) + 4
                item = self.convert(item, depth)
                if item is not _DROP:
                    out[name] = item
            return out
        if isinstance(value, (list, tuple, set, frozenset)):
            items: list[Any] = []
            for index, item in enumerate(value):
                if self.full():
                    items.append(self.note(len(value) - index))
                    break
                item = self.convert(item, depth)
                if item is not _DROP:
                    items.append(item)
            return items
        messages = sys.modules.get("langchain_core.messages")
        if messages is not None and isinstance(value, messages.BaseMessage):
            return self.message(value, depth)
        if isinstance(value, (bytes, bytearray)):
            return self.text(bytes(value[: MAX_BYTES + 1]).decode("utf-8", "replace"))
        if isinstance(value, (dt.datetime, dt.date, dt.time)):
            return self.text(value.isoformat())
        if isinstance(value, (uuid.UUID, PurePath, Decimal)):
            return self.text(str(value))
        if isinstance(value, enum.Enum):
            return self.convert(value.value, depth)
        if not isinstance(value, type):
            dump = getattr(value, "model_dump", None)
            if callable(dump):
                try:
                    dumped = dump(mode="json")
                except Exception:
                    pass
                else:
                    return self.convert(dumped, depth)
            if dataclasses.is_dataclass(value):
                fields: dict[str, Any] = {}
                for field in dataclasses.fields(value):
                    if self.full():
                        fields["<truncated>"] = self.note()
                        break
                    item = self.convert(getattr(value, field.name, None), depth)
                    if item is not _DROP:
                        fields[field.name] = item
                return fields
        return self.text(guarded_repr(value)) if keep else _DROP

    def message(self, message: Any, depth: int) -> dict[str, Any]:
        """A LangChain message as a small dict: type, content, and what it has of name, tool
        calls, tool call id, status and token usage."""
        data: dict[str, Any] = {"type": message.type, "content": self.convert(message.content, depth)}
        name = getattr(message, "name", None)
        if name:
            data["name"] = self.convert(name, depth)
        calls = getattr(message, "tool_calls", None)
        if calls:
            data["tool_calls"] = [
                {
                    "name": call.get("name"),
                    "args": self.convert(call.get("args"), depth),
                    "id": call.get("id"),
                }
                for call in calls
                if isinstance(call, Mapping)
            ]
        for key in ("tool_call_id", "usage_metadata"):
            value = getattr(message, key, None)
            if value:
                data[key] = self.convert(value, depth)
        if getattr(message, "status", None) == "error":
            data["status"] = "error"
        return data


def _len(value: Any) -> int:
    try:
        return len(value)
    except Exception:
        return 0


def mapped_artifacts(value: Any, mapper: str | None, masker: Masker | None) -> list[Artifact]:
    """What the output mapper ``mapper`` returned, as artifacts: a list of artifacts (or dicts of
    them), one artifact, ``None``, or a dict of ``name: value`` (text: a file of that path; a
    dict: a structured artifact of that name; anything else: a structured artifact ``{"value":
    ...}``; ``masker``, the run's, masks a text before :func:`plain` cuts it). AgentError when
    it is none of these."""
    items: list[Any]
    if value is None:
        return []
    if isinstance(value, (FileArtifact, StructuredArtifact, ReferenceArtifact)):
        items = [value]
    elif isinstance(value, (list, tuple)):
        items = [plain(item, masker=masker) if isinstance(item, Mapping) else item for item in value]
    elif isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            name = str(key)
            if isinstance(item, str):
                items.append(FileArtifact(path=name, content=item))
            elif isinstance(item, Mapping):
                items.append({"type": "structured", "name": name, "data": plain(item, masker=masker)})
            else:
                data = {"value": plain(item, masker=masker)}
                items.append({"type": "structured", "name": name, "data": data})
    else:
        raise AgentError(
            f"the output_mapper {mapper} returned {type(value).__name__}, "
            f"not artifacts: return a list of artifacts, or a dict of name: text or data",
            evidence=guarded_repr(value),
        )
    try:
        return msgspec.convert(
            [msgspec.to_builtins(item) if isinstance(item, msgspec.Struct) else item for item in items],
            list[Artifact],
        )
    except (msgspec.MsgspecError, TypeError, ValueError) as exc:
        raise AgentError(
            f"the output_mapper {mapper} returned what are not valid ATP artifacts ({exc})",
            evidence=guarded_repr(value),
        ) from None
