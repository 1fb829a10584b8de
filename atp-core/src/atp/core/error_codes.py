"""The protocol's error codes (000, "Error Codes"): what an agent says of its failure, kept.

An agent that fails may answer with ``error_code`` (``TOOL_NOT_FOUND``, ``LLM_ERROR``, ...),
``error_details`` (any JSON object) and a ``trace_id`` naming its own trace. ATP keeps all three
in the run's result (:class:`~atp.core.results.RunResult`), shows the code in every report,
counts failed runs by code in the test's statistics and the suite's summary, and lets a test
expect a failure (``expect: {status: failed, error_code: TOOL_NOT_FOUND}``).

Where ATP itself ends a run it gives the code of the reason when the agent gave none:
``TIMEOUT`` (the time limit) and, for the limits of the task's constraints passed while the
agent ran, ``MAX_STEPS_EXCEEDED``, ``MAX_TOKENS_EXCEEDED`` and ``BUDGET_EXCEEDED``.

All three come from the agent, so they are bounded here, once, for every adapter: each string is
masked and then cut (a code to :data:`MAX_CODE_CHARS` printable characters, a trace id to
:data:`MAX_TRACE_ID_CHARS`), details to :data:`MAX_DETAILS_BYTES` of JSON, and the counts by code
to :data:`MAX_COUNTED_CODES` codes (the rest counted as :data:`OTHER_CODES`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal, get_args

import msgspec

from atp.core.protocol import ResponseStatus
from atp.core.secrets import Masker
from atp.core.text import printable, shorten

StandardCode = Literal[
    "INVALID_REQUEST",
    "TOOL_NOT_FOUND",
    "TOOL_ERROR",
    "LLM_ERROR",
    "TIMEOUT",
    "BUDGET_EXCEEDED",
    "INTERNAL_ERROR",
]
"""The specification's standard codes (an agent may send others; the tool server sends these)."""
STANDARD_CODES: tuple[str, ...] = get_args(StandardCode)
TIMEOUT = "TIMEOUT"
MAX_STEPS_EXCEEDED = "MAX_STEPS_EXCEEDED"
MAX_TOKENS_EXCEEDED = "MAX_TOKENS_EXCEEDED"
BUDGET_EXCEEDED = "BUDGET_EXCEEDED"

MAX_CODE_CHARS = 64
MAX_TRACE_ID_CHARS = 256
MAX_DETAILS_BYTES = 8192
"""The most JSON of ``error_details`` a result keeps; larger details are kept as their first
part, cut, under the key ``truncated``."""
MAX_COUNTED_CODES = 50
"""The most distinct codes counted apart; an agent could send a new code in every run."""
OTHER_CODES = "(other codes)"

Code = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CODE_CHARS, pattern=r"^\S+$")]


class Expectation(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a test expects the agent to answer instead of ``completed``: a ``status`` and, if
    given, an ``error_code``. A run meets it when the agent's own response has both (a response
    ATP made up, on a timeout or a crash, never does); a run that meets it passes if its checks
    do, and is scored like a completed run."""

    status: ResponseStatus = "failed"
    error_code: Code | None = None

    def met_by(self, status: str, code: str | None) -> bool:
        return status == self.status and (self.error_code is None or code == self.error_code)

    def describe(self) -> str:
        code = f" with error_code {self.error_code}" if self.error_code is not None else ""
        return f"status {self.status}{code}"


def bounded_code(value: object, masker: Masker | None) -> str | None:
    """An agent's ``error_code`` as a result keeps it: masked, then cut to its first
    :data:`MAX_CODE_CHARS` characters (no note of the cut: a code stays one word a test can
    expect) and made printable; ``None`` for nothing (or not a string, or blank)."""
    if type(value) is not str or not value.strip():
        return None
    code = value.strip()
    if masker is not None:
        code = masker.text(code)
    return printable(code[:MAX_CODE_CHARS])


def bounded_trace_id(value: object, masker: Masker | None) -> str | None:
    """An agent's ``trace_id``, bounded as :func:`bounded_code` bounds a code."""
    if type(value) is not str or not value:
        return None
    return printable(shorten(value, MAX_TRACE_ID_CHARS, masker))


def bounded_details(value: object, masker: Masker | None) -> dict[str, Any] | None:
    """An agent's ``error_details``: masked, and when its JSON is over :data:`MAX_DETAILS_BYTES`
    (or it is no JSON at all: a Python agent may hand over any object), replaced by
    ``{"truncated": <the first part of its JSON, or its description>}``."""
    if type(value) is not dict or not value:  # (a subclass could raise from __len__)
        return None
    try:
        if masker is not None:
            value = masker.value(value)
        encoded = msgspec.json.encode(value)
    except Exception as exc:  # any object, any __str__: nothing of it is trusted
        return {"truncated": f"error_details that are not JSON ({type(exc).__name__})"}
    if len(encoded) <= MAX_DETAILS_BYTES:
        return msgspec.json.decode(encoded, type=dict[str, Any])
    text = encoded.decode("utf-8", "replace")
    return {"truncated": shorten(text, MAX_DETAILS_BYTES // 2, masker)}


def count_codes(codes: Iterable[str | None]) -> dict[str, int]:
    """How many runs ended with each code (``None`` not counted), bounded by :func:`bounded_counts`."""
    counts: dict[str, int] = {}
    for code in codes:
        if code is not None:
            counts[code] = counts.get(code, 0) + 1
    return bounded_counts(counts)


def bounded_counts(counts: dict[str, int]) -> dict[str, int]:
    """Counts by code, the most frequent first; past :data:`MAX_COUNTED_CODES` codes the rest
    are added up under :data:`OTHER_CODES`."""
    other = counts.get(OTHER_CODES, 0)
    ranked = sorted(
        ((c, n) for c, n in counts.items() if c != OTHER_CODES), key=lambda item: (-item[1], item[0])
    )
    kept = dict(ranked[:MAX_COUNTED_CODES])
    other += sum(count for _, count in ranked[MAX_COUNTED_CODES:])
    if other:
        kept[OTHER_CODES] = other
    return kept


def words(code: str | None, status: str | None = None) -> str:
    """A code as reports show it after a status: `` [TOOL_NOT_FOUND]``; nothing without one, or
    when it only repeats the status (``timeout [TIMEOUT]``)."""
    if not code or (status is not None and code.lower() == status.lower()):
        return ""
    return f" [{code}]"
