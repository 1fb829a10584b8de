from __future__ import annotations

import sys
import types
from importlib import metadata
from typing import Any

import msgspec
import pytest

from atp.core import plugins as plugins_module
from atp.core.entrypoints import EntryPoint
from atp.core.errors import MissingDependencyError, PluginError, PluginFailed
from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.hookspecs import hookimpl
from atp.core.plugins import Plugins, disabled_plugins, require
from atp.core.results import Check
from tests.facts import says


class Shout(Evaluator):
    name = "shout"
    summary = "the answer is in capitals"

    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        return [check("shout", True, "loud")]


class ShoutPlugin:
    @hookimpl
    def atp_register_evaluators(self, register: Any) -> None:
        register(Shout)


def fake_module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> list[metadata.EntryPoint]:
    eps: list[metadata.EntryPoint] = []

    def fake(group: str) -> list[EntryPoint]:
        return [EntryPoint(e.name, e.value) for e in eps if e.group == group]

    monkeypatch.setattr(plugins_module.entrypoints, "entry_points", fake)
    return eps


def test_register_and_unregister_a_throwaway_plugin(plugins: Plugins) -> None:
    name = plugins.register(ShoutPlugin(), "shout-plugin")
    try:
        assert plugins.evaluator("shout") is Shout
        info = next(i for i in plugins.infos() if i.name == "shout-plugin")
        assert info.evaluators == ["shout"] and info.errors == []
    finally:
        plugins.unregister(name)
    assert "shout" not in plugins.evaluators


def test_entry_points_load_and_a_broken_one_is_reported(entry_points: list[metadata.EntryPoint]) -> None:
    @hookimpl
    def atp_register_evaluators(register: Any) -> None:
        register(Shout)

    fake_module("atp_test_good_plugin", atp_register_evaluators=atp_register_evaluators)
    entry_points.append(metadata.EntryPoint("good", "atp_test_good_plugin", "atp"))
    entry_points.append(metadata.EntryPoint("broken", "atp_test_no_such_module_xyz", "atp"))
    entry_points.append(metadata.EntryPoint("other-group", "whatever", "not-atp"))
    loaded = Plugins()
    assert loaded.evaluator("shout") is Shout
    infos = {i.name: i for i in loaded.infos()}
    assert set(infos) == {"good", "broken"}
    [error] = infos["broken"].errors
    says(error, "load", "ModuleNotFoundError", "'atp_test_no_such_module_xyz'")
    [problem] = loaded.problems()
    says(problem, "plugin 'broken'", "load", "ModuleNotFoundError", "'atp_test_no_such_module_xyz'")


def test_disable_plugins(entry_points: list[metadata.EntryPoint], monkeypatch: pytest.MonkeyPatch) -> None:
    fake_module("atp_test_plugin_a")
    entry_points.append(metadata.EntryPoint("a", "atp_test_plugin_a", "atp"))
    entry_points.append(metadata.EntryPoint("b", "atp_test_plugin_a", "atp"))
    monkeypatch.setenv("ATP_DISABLE_PLUGINS", "b, c")
    assert disabled_plugins() == {"b", "c"}
    assert [i.name for i in Plugins().infos()] == ["a"]
    monkeypatch.setenv("ATP_DISABLE_PLUGINS", "all")
    assert Plugins().infos() == []


def test_registration_problems_do_not_stop_the_others(plugins: Plugins) -> None:
    class NotAnEvaluator:
        name = "nope"

    class Broken:
        @hookimpl
        def atp_register_evaluators(self, register: Any) -> None:
            register(NotAnEvaluator)
            raise RuntimeError("boom")

    class Twice:
        @hookimpl
        def atp_register_evaluators(self, register: Any) -> None:
            register(Shout)

    plugins.register(ShoutPlugin(), "first")
    plugins.register(Broken(), "broken")
    plugins.register(Twice(), "second")
    infos = {i.name: i for i in plugins.infos()}
    assert plugins.evaluator("shout") is Shout
    assert "contains" in plugins.evaluators
    registered, raised = infos["broken"].errors
    says(registered, "NotAnEvaluator", "Evaluator subclass", "'name'")
    says(raised, "atp_register_evaluators", "RuntimeError: boom")
    assert infos["second"].errors == []  # the same class twice is no conflict
    assert len(infos["first"].evaluators) == 1


class OtherShout(Shout):
    pass


def test_two_plugins_registering_one_name_is_an_error_naming_both(plugins: Plugins) -> None:
    class Rival:
        @hookimpl
        def atp_register_evaluators(self, register: Any) -> None:
            register(OtherShout)

    plugins.register(ShoutPlugin(), "first")
    plugins.register(Rival(), "rival")
    assert "shout" not in plugins.evaluators  # neither wins by load order
    with pytest.raises(PluginFailed) as failed:
        plugins.evaluator("shout")
    says(str(failed.value), "'shout'", "plugin 'first'", "plugin 'rival'", "ATP_DISABLE_PLUGINS")
    infos = {i.name: i for i in plugins.infos()}
    [first] = infos["first"].errors
    says(first, "'shout'", "plugin 'rival'")
    [rival] = infos["rival"].errors
    says(rival, "'shout'", "plugin 'first'")
    assert "contains" in plugins.evaluators  # the rest is untouched


def test_a_declared_replacement_wins_whatever_the_load_order(plugins: Plugins) -> None:
    class Replacing(Shout):
        replaces = "first"

    class Replacer:
        @hookimpl
        def atp_register_evaluators(self, register: Any) -> None:
            register(Replacing)

    plugins.register(Replacer(), "replacer")
    plugins.register(ShoutPlugin(), "first")
    assert plugins.evaluator("shout") is Replacing
    assert plugins.owner("evaluator", "shout").startswith("plugin 'replacer'")
    assert all(i.errors == [] for i in plugins.infos())


def test_hook_named_functions_without_hookimpl_are_reported(plugins: Plugins) -> None:
    class Forgetful:
        def atp_register_evaluators(self, register: Any) -> None:
            register(Shout)

        def atp_helper(self) -> None:  # not a hook name: no warning
            pass

    plugins.register(Forgetful(), "forgetful")
    errors = next(i for i in plugins.infos() if i.name == "forgetful").errors
    [error] = errors  # atp_helper is no hook name: no error
    says(error, "atp_register_evaluators()", "@hookimpl", "from atp.core.hookspecs import hookimpl")


def test_plugin_names_are_unique(plugins: Plugins) -> None:
    plugins.register(ShoutPlugin(), "x")
    with pytest.raises(PluginError) as info:
        plugins.register(ShoutPlugin(), "x")
    says(str(info.value), "'x'", "already registered")


def test_unknown_names_list_what_is_installed(plugins: Plugins) -> None:
    with pytest.raises(PluginError) as info:
        plugins.evaluator("llm_judge")
    says(str(info.value), "assertion type 'llm_judge'", "contains", "llm_eval")
    with pytest.raises(PluginError) as info:
        plugins.adapter("smtp")
    says(str(info.value), "agent type 'smtp'", "pip install atp-adapters")
    with pytest.raises(PluginError) as info:
        plugins.reporter("markdown")
    says(str(info.value), "output 'markdown'", "console, html, json, junit")


def test_builtins_register_through_the_same_hooks(plugins: Plugins) -> None:
    assert set(plugins.adapters) >= {"cli", "function"}
    assert {
        "artifact_exists",
        "contains",
        "schema",
        "sections",
        "must_use_tools",
        "forbidden_tools",
        "max_tool_calls",
        "max_steps",
        "no_errors",
        "behavior",
        "llm_eval",
    } <= set(plugins.evaluators)
    assert {"console", "json"} <= set(plugins.reporters)


def test_require_names_the_fix() -> None:
    assert require("json", install="x", feature="y").dumps({}) == "{}"
    with pytest.raises(MissingDependencyError, match=r"pip install 'atp-adapters\[container\]'"):
        require("atp_no_such_library", install="atp-adapters[container]", feature="the container adapter")


def test_lifecycle_hooks_reach_plugins(plugins: Plugins) -> None:
    seen: list[str] = []

    class Listener:
        @hookimpl
        def atp_run_finished(self, result: Any) -> None:
            seen.append(result)

    assert not plugins.has_impls("atp_run_finished")
    plugins.register(Listener(), "listener")
    assert plugins.has_impls("atp_run_finished")
    plugins.hook.atp_run_finished(result="r")
    assert seen == ["r"]


def test_hookimpl_with_wrong_name_is_reported(plugins: Plugins) -> None:
    class Typo:
        @hookimpl
        def atp_run_finshed(self, result: Any) -> None: ...

    plugins.register(Typo(), "typo")
    info = next(i for i in plugins.infos() if i.name == "typo")
    [error] = info.errors
    says(error, "'atp_run_finshed'", "hook")
    assert msgspec.json.encode(info)
