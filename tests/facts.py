"""Assertions on messages by the facts they carry (file, line, path, value, names, the hint's
option), not by their wording: a reworded message still passes, a message that lost a fact fails."""

from __future__ import annotations


def says(text: str | None, *facts: object) -> None:
    """Assert that a message names each fact: the wording may change, the facts may not."""
    assert text is not None
    for fact in facts:
        assert str(fact) in text, f"{fact!r} is not in {text!r}"


def one_error(stderr: str, *facts: object) -> None:
    """Assert that stderr is the single line ``atp: error: ...`` and that it names each fact."""
    says(stderr, *facts)
    assert stderr.startswith("atp: error: ") and len(stderr.strip().splitlines()) == 1, stderr
