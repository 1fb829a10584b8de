"""Lifecycle hooks called through pluggy, each plugin's implementation isolated from the others.

The runner tells plugins what happens (``atp_suite_started`` ... ``atp_suite_finished``) by
calling ``pm.hook.<name>(...)``, so everything pluggy offers works as a pytest user expects:
``@hookimpl(wrapper=True)`` (and the old ``hookwrapper=True``) around the other
implementations, ``tryfirst``/``trylast`` ordering, and pluggy's tracing (``atp --debug`` shows
each hook call).

pluggy stops at the first implementation that raises; ATP must not (a plugin's bug is its own,
the run and the other plugins go on). So each implementation of a lifecycle hook is *guarded*
where it is registered (:func:`guard`): a plain implementation that raises returns ``None``
instead, a wrapper that raises before or after its ``yield`` lets the others run and returns
what they returned. What was raised goes to the :class:`FailureSink` of the call in progress
(:func:`notify` names it for the length of one call), which names the plugin in a warning and
in the results' ``plugin_failures``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pluggy

__all__ = ["GUARDED_HOOKS", "LIFECYCLE_HOOKS", "FailureSink", "Notifier", "guard", "has_impls", "notify"]

LIFECYCLE_HOOKS = (
    "atp_suite_resumed",
    "atp_suite_started",
    "atp_test_started",
    "atp_run_started",
    "atp_event",
    "atp_run_finished",
    "atp_test_finished",
    "atp_suite_finished",
)
"""The hooks that tell plugins what happens during a run (guarded, called through pluggy)."""
GUARDED_HOOKS = (*LIFECYCLE_HOOKS, "atp_register_commands")
"""The hooks whose implementations are isolated from each other (:func:`guard`)."""


class FailureSink(Protocol):
    """Where a lifecycle hook's failure goes: the plugin's name, the hook, what it raised."""

    def __call__(self, plugin: str, hook_name: str, exc: BaseException, /) -> None: ...


_sink: ContextVar[FailureSink | None] = ContextVar("atp_hook_failures", default=None)


def notify(pm: pluggy.PluginManager, hook_name: str, failed: FailureSink, **kwargs: Any) -> None:
    """Call a lifecycle hook through pluggy; what an implementation raises goes to ``failed``
    (the others are still called)."""
    token = _sink.set(failed)
    try:
        getattr(pm.hook, hook_name)(**kwargs)
    finally:
        _sink.reset(token)


def has_impls(pm: pluggy.PluginManager, hook_name: str) -> bool:
    """Whether any plugin implements the hook (a hot hook, ``atp_event``, is not called at all
    when none does)."""
    return bool(getattr(pm.hook, hook_name).get_hookimpls())


def _report(plugin: str, hook_name: str, exc: BaseException) -> None:
    sink = _sink.get()
    if sink is not None:
        sink(plugin, hook_name, exc)


def guard(pm: pluggy.PluginManager, plugin_name: str) -> None:
    """Isolate each lifecycle hook implementation of the plugin ``plugin_name`` (call it right
    after registering the plugin)."""
    plugin = pm.get_plugin(plugin_name)
    if plugin is None:
        return
    for caller in pm.get_hookcallers(plugin) or []:
        if caller.name not in GUARDED_HOOKS:
            continue
        for impl in caller.get_hookimpls():
            if impl.plugin_name != plugin_name or getattr(impl.function, "_atp_guarded", False):
                continue
            wrap = _guarded_wrapper if impl.wrapper or impl.hookwrapper else _guarded
            # pluggy marks ``function`` final for its users; replacing it right after registering
            # is the one way to keep pluggy's own calling (order, wrappers, tracing) and still
            # isolate each implementation.
            object.__setattr__(impl, "function", wrap(impl.function, plugin_name, caller.name))


def _guarded(function: Callable[..., Any], plugin: str, hook_name: str) -> Callable[..., Any]:
    @functools.wraps(function)
    def call(*args: Any) -> Any:
        try:
            return function(*args)
        except Exception as exc:
            _report(plugin, hook_name, exc)
            return None

    call._atp_guarded = True  # type: ignore[attr-defined]
    return call


def _guarded_wrapper(function: Callable[..., Any], plugin: str, hook_name: str) -> Callable[..., Any]:
    """A wrapper (new-style or old-style) whose own failures, before or after its ``yield``,
    are reported while the implementations inside still run and their result stands."""

    @functools.wraps(function)
    def call(*args: Any) -> Generator[Any, Any, Any]:
        inner: Generator[Any, Any, Any] | None = None
        try:
            inner = function(*args)
            next(inner)
        except StopIteration:
            _report(plugin, hook_name, RuntimeError("the wrapper did not yield"))
            inner = None
        except Exception as exc:
            _report(plugin, hook_name, exc)
            inner = None
        returned = yield
        if inner is None:
            return returned
        try:
            inner.send(returned)
        except StopIteration as stop:
            return stop.value if stop.value is not None else returned
        except Exception as exc:
            _report(plugin, hook_name, exc)
            return returned
        inner.close()
        _report(plugin, hook_name, RuntimeError("the wrapper yielded more than once"))
        return returned

    call._atp_guarded = True  # type: ignore[attr-defined]
    return call


class Notifier:
    """A runner's lifecycle hook calls: which hooks any plugin implements (looked up when the
    runs begin: a hook nobody implements costs nothing, ``atp_event`` above all), and each call
    through pluggy with its failures sent to the runner's sink."""

    def __init__(self, pm: pluggy.PluginManager, failed: FailureSink) -> None:
        self._pm = pm
        self.failed = failed
        self._implemented: frozenset[str] = frozenset()

    def refresh(self) -> None:
        """Look up which lifecycle hooks are implemented (plugins registered until now count)."""
        self._implemented = frozenset(name for name in LIFECYCLE_HOOKS if has_impls(self._pm, name))

    def wants(self, hook_name: str) -> bool:
        """Whether any plugin implements the hook."""
        return hook_name in self._implemented

    def __call__(self, hook_name: str, **kwargs: Any) -> None:
        """Call the hook when any plugin implements it."""
        if hook_name in self._implemented:
            notify(self._pm, hook_name, self.failed, **kwargs)
