"""atp.core.spelling: empty values and other spellings read where they are unambiguous, and the
hint of an unknown key, through YamlDocument.convert as suites and configs are read."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest

from atp.core.errors import SuiteError
from atp.core.spelling import mend, unknown_key_hint
from atp.core.suite import ScoringSpec, SuiteSpec
from atp.core.yamlfile import YamlDocument


class Inner(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    aliases: ClassVar[dict[str, str]] = {"n": "count"}
    spellings: ClassVar[dict[str, str]] = {"size": "'outer.size'"}

    count: int = 1
    names: list[str] = msgspec.field(default_factory=list)


class Outer(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    inner: Inner = msgspec.field(default_factory=Inner)
    table: dict[str, Inner] = msgspec.field(default_factory=dict)
    either: str | list[str] = "x"
    maybe: list[str] | None = None
    anything: Any = "a"


def document(tmp_path: Path, text: str) -> YamlDocument:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    return YamlDocument.load(path)


def test_empty_mappings_and_lists_are_read_as_empty(tmp_path: Path) -> None:
    doc = document(tmp_path, "inner:\n  names:\ntable:\n  a:\nmaybe:\nanything:\n")
    assert doc.convert(doc.data, Outer) == Outer(table={"a": Inner()}, maybe=None, anything=None)


def test_an_empty_value_of_a_type_that_takes_a_scalar_too_stays_an_error(tmp_path: Path) -> None:
    doc = document(tmp_path, "inner:\neither:\n")
    with pytest.raises(SuiteError) as info:
        doc.convert(doc.data, Outer)
    assert (info.value.path, info.value.line) == ("either", 2)


def test_another_spelling_is_taken_and_its_errors_name_it_as_written(tmp_path: Path) -> None:
    doc = document(tmp_path, "table:\n  a: {n: 3}\n")
    assert doc.convert(doc.data, Outer).table["a"].count == 3
    bad = document(tmp_path, "table:\n  a:\n    n: many\n")
    with pytest.raises(SuiteError) as info:
        bad.convert(bad.data, Outer)
    assert (info.value.path, info.value.line) == ("table.a.n", 3)
    both = document(tmp_path, "inner: {n: 3, count: 2}\n")
    with pytest.raises(SuiteError) as info:
        both.convert(both.data, Outer)
    assert info.value.path == "inner.n" and "'count', which is given too" in info.value.reason


def test_the_data_given_is_not_changed(tmp_path: Path) -> None:
    data: dict[str, Any] = {"inner": {"n": 2, "names": None}, "table": {"a": None}}
    before = copy.deepcopy(data)
    renames: dict[tuple[str | int, ...], str] = {}
    mended = mend(data, Outer, renames)
    assert data == before
    assert mended == {"inner": {"count": 2, "names": []}, "table": {"a": {}}}
    assert renames == {("inner", "count"): "n"}
    same = {"inner": {"count": 2}}
    assert mend(same, Outer, {}) is same


def test_hints_name_the_right_key() -> None:
    assert unknown_key_hint("size", Inner) == "; did you mean 'outer.size'?"
    assert unknown_key_hint("cuont", Inner) == "; did you mean 'count'?"
    assert unknown_key_hint("zzz", Inner) == ""
    assert unknown_key_hint("qualty", ScoringSpec | None) == "; did you mean 'quality'?"
    assert "defaults: {runs_per_test: ...}" in unknown_key_hint("runs", SuiteSpec)
