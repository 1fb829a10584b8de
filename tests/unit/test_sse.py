"""atp.adapters.sse: Server-Sent Events as the specification defines them (issue 26: CR line
endings and a leading byte order mark, both valid, were refused)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atp.adapters.sse import MessageReader

STREAM = 'event: progress\ndata: {"a": 1}\n\n: a comment\nid: 7\ndata: line one\ndata: line two\n\nevent: response\ndata: {"done": true}\n\n'


def read(chunks: list[bytes]) -> list[tuple[str, str]]:
    reader = MessageReader()
    messages = [m for chunk in chunks for m in reader.feed(chunk)] + reader.end()
    return [(m.event, m.data) for m in messages]


EXPECTED = [("progress", '{"a": 1}'), ("message", "line one\nline two"), ("response", '{"done": true}')]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_every_valid_line_ending_and_a_leading_bom(ending: str, bom: str) -> None:
    assert read([(bom + STREAM.replace("\n", ending)).encode()]) == EXPECTED


@settings(max_examples=200, deadline=None)
@given(ending=st.sampled_from(["\n", "\r\n", "\r"]), cuts=st.lists(st.integers(0, 200), max_size=8))
def test_a_stream_cut_anywhere_into_chunks_reads_the_same(ending: str, cuts: list[int]) -> None:
    data = ("\ufeff" + STREAM.replace("\n", ending)).encode()
    points = sorted({min(cut, len(data)) for cut in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert read(chunks) == EXPECTED


def test_a_stream_ending_without_its_last_blank_line_still_ends_its_message_at_a_cr() -> None:
    assert read([b"data: x\r", b"\r"]) == [("message", "x")]
    assert read([b"data: x\n"]) == []  # (a message is dispatched by a blank line only)


def test_bytes_that_are_not_utf8_raise() -> None:
    with pytest.raises(UnicodeDecodeError):
        MessageReader().feed(b"data: \xff\n\n")
