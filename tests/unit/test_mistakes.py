"""atp.core.mistakes: every mistake of a file found at once, up to a bound, each located and
with its hint; and the protocol's errors naming every missing field."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import msgspec
import pytest

from atp.core.errors import ProtocolError, SuiteError, SuiteErrors
from atp.core.mistakes import MAX_MISTAKES, Mistakes, collect
from atp.core.protocol import MAX_RESAID_BYTES, decode_response
from atp.core.spelling import closest, describe
from atp.core.yamlfile import YamlDocument
from tests.facts import says


class Item(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    command: str
    cwd: str | None = None
    mode: Literal["fast", "careful"] = "fast"
    runs: Annotated[int, msgspec.Meta(ge=1, le=10)] | Literal["auto"] = 1


class Whole(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    examples: ClassVar[dict[str, str]] = {"items": "items: [{command: run}]"}

    name: str
    items: list[Item] = msgspec.field(default_factory=list)
    table: dict[str, Item] = msgspec.field(default_factory=dict)


class Checked(msgspec.Struct, forbid_unknown_fields=True):
    low: int = 0
    high: int = 1

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("low is above high")


def document(tmp_path: Path, text: str) -> YamlDocument:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    return YamlDocument.load(path)


def test_data_that_converts_has_no_mistakes() -> None:
    assert collect({"name": "a", "items": [{"command": "x", "runs": "auto"}]}, Whole) == []


def test_every_kind_of_mistake_is_found_in_one_walk() -> None:
    data = {
        "nmae": "a",
        "items": [{"command": "x", "mode": "carefull"}, {"cmd": "y", "runs": 0}],
        "table": {"t": {"command": 3}},
    }
    found = {tuple(path): text for path, text in collect(data, Whole)}
    assert set(found) == {
        ("nmae",),
        ("items", 0, "mode"),
        ("items", 1, "cmd"),
        ("items", 1, "runs"),
        ("table", "t", "command"),
    }
    says(found[("nmae",)], "did you mean 'name'")  # and 'name' is not also said missing
    says(found[("items", 0, "mode")], "'carefull'", "'fast' or 'careful'", "did you mean 'careful'")
    # 'cmd' shortens 'command' (closer by letters to 'cwd')
    says(found[("items", 1, "cmd")], "did you mean 'command'")
    says(found[("items", 1, "runs")], "0 is not allowed", "a whole number from 1 to 10 or 'auto'")
    says(found[("table", "t", "command")], "expected str, got int")


def test_a_missing_field_is_not_reported_beside_the_unknown_key_meant_for_it() -> None:
    found = collect({"items": [{"comand": "x"}], "name": "n"}, Whole)
    assert found == [(["items", 0, "comand"], "unknown field 'comand'; did you mean 'command'?")]
    found = collect({"items": [{"other": "x"}], "name": "n"}, Whole)
    assert [text for _, text in found] == ["unknown field 'other'", "missing required field 'command'"]


def test_a_list_where_a_mapping_goes_gets_the_example_of_its_struct() -> None:
    ((path, text),) = collect({"name": "a", "items": {"command": "x"}}, Whole)
    assert path == ["items"]
    says(text, "expected a list", "got a mapping", "items: [{command: run}]")


def test_a_check_of_the_structs_own_is_msgspecs_first_error() -> None:
    assert collect({"low": 1, "high": 1}, Checked) == []
    ((path, text),) = collect({"low": 2, "high": 1}, Checked)
    assert path == [] and "low is above high" in text


def test_the_walk_stops_at_its_bound() -> None:
    data = {f"key{i}": i for i in range(50)}
    assert len(collect(data, Checked)) == MAX_MISTAKES
    assert len(collect(data, Checked, limit=3)) == 3


def test_a_file_reports_its_mistakes_up_to_the_bound_and_says_there_are_more(tmp_path: Path) -> None:
    doc = document(tmp_path, "".join(f"k{i}: {i}\n" for i in range(MAX_MISTAKES)))
    with pytest.raises(SuiteErrors) as info:
        doc.convert(doc.data, Checked)
    assert len(info.value.errors) == MAX_MISTAKES and not info.value.more
    assert [e.line for e in info.value.errors] == list(range(1, MAX_MISTAKES + 1))
    assert info.value.line == 1 and info.value.path == "k0"  # the first one's location
    assert str(info.value).splitlines()[0] == f"{MAX_MISTAKES} mistakes in {doc.path}:"

    doc = document(tmp_path, "".join(f"k{i}: {i}\n" for i in range(MAX_MISTAKES + 1)))
    with pytest.raises(SuiteErrors) as info:
        doc.convert(doc.data, Checked)
    assert len(info.value.errors) == MAX_MISTAKES and info.value.more
    says(str(info.value).splitlines()[0], "the first ones", "run again")


def test_one_mistake_is_a_plain_located_error(tmp_path: Path) -> None:
    doc = document(tmp_path, "low: 1\nhihg: 2\n")
    with pytest.raises(SuiteError) as info:
        doc.convert(doc.data, Checked)
    assert type(info.value) is SuiteError
    assert (info.value.line, info.value.path) == (2, "hihg")
    says(info.value.reason, "did you mean 'high'")


def test_mistakes_gather_errors_in_the_order_of_the_lines_up_to_their_bound() -> None:
    gathered = Mistakes(limit=3)
    for line in (5, 2):
        with gathered.collecting():
            raise SuiteError("wrong", file="f", line=line)
    with gathered.collecting():
        raise SuiteErrors([SuiteError("a", file="f", line=9), SuiteError("b", file="f", line=1)])
    assert gathered.full and gathered.more  # the fourth did not fit
    error = gathered.error()
    assert isinstance(error, SuiteErrors)
    assert [e.line for e in error.errors] == [2, 5, 9]
    with pytest.raises(ValueError), gathered.collecting():  # only suite errors are gathered
        raise ValueError("a bug")


def test_types_and_names_in_words() -> None:
    assert describe(Annotated[int, msgspec.Meta(ge=1, le=10)] | Literal["auto"]) == (
        "a whole number from 1 to 10 or 'auto'"
    )
    assert describe(Annotated[float, msgspec.Meta(gt=0)] | None) == "a number above 0"
    assert describe(Annotated[str, msgspec.Meta(min_length=1)]) == "non-empty text"
    assert closest("contain", ["contains", "contains_any", "regex"]) == "contains"
    assert closest("cmd", ["cwd", "command"]) == "command"
    assert closest("zzz", ["command"]) is None


def response(**drop: Any) -> str:
    import json

    data = {"version": "1.0", "task_id": "t", "status": "completed", "artifacts": [], "metrics": {}}
    for key in drop:
        del data[key]
    return json.dumps(data)


def test_a_response_missing_fields_names_every_one() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_response(response(task_id=1, status=1, metrics=1))
    says(str(info.value), "missing required fields", "`task_id`", "`status`", "`metrics`")
    with pytest.raises(ProtocolError) as info:
        decode_response(response(status=1))
    says(str(info.value), "missing required field `status`")


def test_a_long_response_missing_fields_gets_the_first_error_only() -> None:
    """Naming every missing field decodes the message a second time: only below a bound."""
    import json

    data = {"version": "1.0", "artifacts": [{"type": "file", "path": "a", "content": ""}]}
    pad = MAX_RESAID_BYTES - len(json.dumps(data))
    data["artifacts"][0]["content"] = "x" * pad  # at the bound: every field named
    with pytest.raises(ProtocolError) as info:
        decode_response(json.dumps(data))
    says(str(info.value), "missing required fields", "`task_id`", "`status`", "`metrics`")
    data["artifacts"][0]["content"] = "x" * (pad + 1)  # past it: msgspec's first error
    with pytest.raises(ProtocolError) as info:
        decode_response(json.dumps(data).encode())
    says(str(info.value), "missing required field `task_id`")
    assert "`status`" not in str(info.value)


def test_a_key_in_a_hint_is_shown_escaped_and_cut() -> None:
    class Assertion(msgspec.Struct, forbid_unknown_fields=True):
        elsewhere: ClassVar[str] = "settings go under 'config:' (config: {{{key}: ...}})"
        type: str = ""

    key = "\x1b[2J\nzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
    ((_, text),) = collect({key: 1}, Assertion)
    assert "\x1b" not in text and "\n" not in text, text
    says(text, "config: {\\e[2J\\nzzz", "…: ...}")


def test_a_response_status_not_allowed_lists_those_that_are() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_response(response().replace('"completed"', '"ok"'))
    says(str(info.value), "'ok'", "'completed'", "'failed'", "$.status")


def test_several_mistakes_of_a_config_file_are_still_a_config_file_error(tmp_path: Path) -> None:
    import pickle

    from atp.core.config import ConfigFileError, load_config

    path = tmp_path / "atp.config.yaml"
    path.write_text("agents:\n  - {name: a}\ndefaults: {runs_per_test: three}\n")
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert isinstance(info.value, SuiteErrors) and [e.line for e in info.value.errors] == [1, 3]
    says(info.value.errors[0].reason, "agents: {my-agent: {type: cli")
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is type(info.value) and str(copy) == str(info.value)


class Labels(msgspec.Struct, forbid_unknown_fields=True):
    examples: list[Item]
    aliases: int = 0


def test_fields_named_as_the_hints_settings_are_fields() -> None:
    found = collect({"examples": {"command": "x"}, "aliases": "x", "alaises": 1}, Labels)
    assert [(path, text.split(";")[0]) for path, text in found] == [
        (["examples"], "expected a list (items written '- ...'), got a mapping"),
        (["aliases"], "expected int, got str"),
        (["alaises"], "unknown field 'alaises'"),
    ]
