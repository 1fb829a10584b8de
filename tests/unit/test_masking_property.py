"""Mask first, then cut (issue 26, kind 1), as a property: for any secret, any text around it,
any spelling (as is, JSON-escaped, Python's repr) and any cut or line split, no 6-character
piece of the secret appears in what ATP shows or keeps."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from atp.adapters.stdio import StderrLines
from atp.core.secrets import Masker
from atp.core.text import describe, shorten, shown

SECRETS = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=12, max_size=40)
"""(An alphabet no ATP wording and no filler below can spell six characters of.)"""
FILLER = st.text(alphabet="abcdefghij .,:\n\t", max_size=400)


def spelled(secret: str, how: str) -> str:
    if how == "json":
        return json.dumps(secret, ensure_ascii=True)[1:-1].replace("A", "\\u0041")
    if how == "repr":
        return repr(secret)[1:-1]
    return secret


def leaks(secret: str, text: str) -> list[str]:
    return [secret[i : i + 6] for i in range(len(secret) - 5) if secret[i : i + 6] in text]


class Lines:
    """An EventSink keeping what it was given."""

    def __init__(self, masker: Masker) -> None:
        self.masker = masker
        self.kept: list[str] = []

    def event(self, event: Any, raw: bytes | None = None) -> None:
        self.kept.append(repr(event))

    def events(self, events: Any, raw: bytes | None = None) -> None:
        self.kept.extend(map(repr, events))

    def log(self, line: str) -> None:
        self.kept.append(line)

    def warn(self, message: str) -> None:
        self.kept.append(message)


@settings(max_examples=300, deadline=None)
@given(
    secret=SECRETS,
    before=FILLER,
    after=FILLER,
    how=st.sampled_from(["plain", "json", "repr"]),
    limit=st.integers(1, 300),
)
def test_what_the_text_helpers_show_holds_no_piece_of_a_secret(
    secret: str, before: str, after: str, how: str, limit: int
) -> None:
    masker = Masker([secret])
    text = before + spelled(secret, how) + after
    for out in (shorten(text, limit, masker), shown(text, masker, limit), describe(text, masker)):
        assert not leaks(secret, out), out


@settings(max_examples=200, deadline=None)
@given(
    secret=SECRETS,
    before=FILLER,
    after=FILLER,
    how=st.sampled_from(["plain", "json", "repr"]),
    max_line=st.integers(8, 200),
    splits=st.lists(st.integers(0, 1000), max_size=6),
)
def test_an_agents_log_cut_and_split_anywhere_keeps_no_piece_of_a_secret(
    secret: str, before: str, after: str, how: str, max_line: int, splits: list[int]
) -> None:
    masker = Masker([secret])
    data = (before + spelled(secret, how) + after).encode()
    sink = Lines(masker)
    lines = StderrLines(sink, max_line)  # type: ignore[arg-type]
    at = 0
    for split in sorted({min(split, len(data)) for split in splits}):
        lines.feed(data[at:split])
        at = split
    lines.feed(data[at:])
    lines.finish()
    # what the sink was handed the sink masks (RunTrace.log): the pieces the adapter cut itself
    # must not hold a part of the secret that no longer matches it whole
    for kept in sink.kept:
        assert not leaks(secret, masker.text(kept)), (kept, sink.kept)
