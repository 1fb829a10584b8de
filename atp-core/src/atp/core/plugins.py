"""The plugin manager: loads plugins from the ``atp`` entry-point group and keeps the registries.

Built-in adapters, evaluators, reporters and services are plugins like any other: their distributions
name them in the ``atp`` entry-point group, and the kernel knows them only through
:class:`Plugins`. A plugin that fails to load is recorded with its error (``atp plugins`` shows
it) and the others keep working. ``ATP_DISABLE_PLUGINS=name,name`` skips entry points by name
(a name that is no installed plugin's is warned about); ``ATP_DISABLE_PLUGINS=all`` skips every
one.

Loading a plugin imports only its entry-point module; the classes it registers are asked for
(through the registration hooks) when a registry is first needed, so ``atp --help`` stays fast.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from atp.core import entrypoints, hooks, hookspecs
from atp.core.errors import MissingDependencyError, PluginError, PluginFailed

if TYPE_CHECKING:
    from atp.core.adapter import Adapter
    from atp.core.evaluator import Evaluator
    from atp.core.executor import Executor
    from atp.core.reporter import Reporter
    from atp.core.service import Service

ENTRY_POINT_GROUP = "atp"
DISABLE_ENV = "ATP_DISABLE_PLUGINS"

K = TypeVar("K")


@dataclasses.dataclass
class PluginInfo:
    """One plugin as ``atp plugins`` lists it."""

    name: str
    module: str | None = None
    distribution: str | None = None
    version: str | None = None
    adapters: list[str] = dataclasses.field(default_factory=list)
    evaluators: list[str] = dataclasses.field(default_factory=list)
    reporters: list[str] = dataclasses.field(default_factory=list)
    services: list[str] = dataclasses.field(default_factory=list)
    executors: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    tracebacks: list[str] = dataclasses.field(default_factory=list)
    """The tracebacks of the errors that were exceptions (``--debug`` shows them)."""


class _Kind:
    """One registry: which hook fills it, which base class and name attribute it takes."""

    def __init__(
        self, label: str, hook: str, base: str, key: str, check: Callable[[str], str | None] | None = None
    ) -> None:
        self.label = label
        self.hook = hook
        self.base_path = base
        self.key = key
        self.check = check
        """Why a key cannot be registered, or ``None`` (for kinds whose keys have rules)."""

    @property
    def base(self) -> type[Any]:
        module, _, name = self.base_path.rpartition(".")
        cls: type[Any] = getattr(importlib.import_module(module), name)
        return cls


_ADAPTERS = _Kind("adapter", "atp_register_adapters", "atp.core.adapter.Adapter", "type")
_EVALUATORS = _Kind("evaluator", "atp_register_evaluators", "atp.core.evaluator.Evaluator", "name")
_REPORTERS = _Kind("reporter", "atp_register_reporters", "atp.core.reporter.Reporter", "name")


def _service_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a service's key: it must be a name, and not one of a test's or the
    suite defaults' own keys (the suite module is imported only when services are collected)."""
    from atp.core.service import describe_key_problem
    from atp.core.suite import reserved_test_keys

    return describe_key_problem(key, reserved_test_keys())


_SERVICES = _Kind("service", "atp_register_services", "atp.core.service.Service", "key", _service_key_problem)
_EXECUTORS = _Kind("executor", "atp_register_executors", "atp.core.executor.Executor", "name")
_KINDS = (_ADAPTERS, _EVALUATORS, _REPORTERS, _SERVICES, _EXECUTORS)


def disabled_plugins(value: str | None = None) -> set[str]:
    raw = os.environ.get(DISABLE_ENV, "") if value is None else value
    return {name.strip() for name in raw.split(",") if name.strip()}


def require(module: str, *, install: str, feature: str) -> ModuleType:
    """Import a plugin's third-party library, or say which ``pip install`` provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{feature} needs the Python package {module!r}, which is not installed "
            f"({exc}); install it with: pip install '{install}'"
        ) from None


class Plugins:
    """The plugin manager of one ATP process."""

    def __init__(self, *, entry_points: bool = True, disabled: Iterable[str] | None = None) -> None:
        self.pm = pluggy.PluginManager("atp")
        self.pm.add_hookspecs(hookspecs)
        self._infos: dict[str, PluginInfo] = {}
        self._load_errors: dict[str, list[str]] = {}
        self._load_tracebacks: dict[str, list[str]] = {}
        self._registries: dict[str, Registry] | None = None
        self.warnings: list[str] = []
        """Problems with how plugins were chosen (not of one plugin), for a warning on stderr."""
        if entry_points:
            self.load_entry_points(disabled)

    @property
    def hook(self) -> Any:
        return self.pm.hook

    # --- loading ---------------------------------------------------------------------------

    def load_entry_points(self, disabled: Iterable[str] | None = None) -> None:
        """Load the plugins of the ``atp`` entry-point group but those ``disabled`` (by
        default: named in ``ATP_DISABLE_PLUGINS``, where a name that is no installed plugin's
        is recorded in :attr:`warnings`)."""
        skip = set(disabled) if disabled is not None else disabled_plugins()
        if "all" in skip or "*" in skip:
            return
        found = entrypoints.entry_points(ENTRY_POINT_GROUP)
        if disabled is None and skip:
            installed = sorted({ep.name for ep in found})
            for name in sorted(skip.difference(installed)):
                self.warnings.append(
                    f"{DISABLE_ENV} names {name!r}, which is not an installed plugin "
                    f"(installed: {', '.join(installed) or 'none'})"
                )
        for ep in found:
            if ep.name in skip:
                continue
            if ep.name in self._infos:
                first = self._infos[ep.name]
                self.warnings.append(
                    f"two plugins are named {ep.name!r}: {first.module} ({first.distribution}) and "
                    f"{ep.value} ({ep.distribution}); the second is not loaded"
                )
                continue
            info = PluginInfo(name=ep.name, module=ep.value, distribution=ep.distribution, version=ep.version)
            try:
                plugin = ep.load()
            except (Exception, SystemExit) as exc:
                self._load_errors[ep.name] = [f"failed to load: {type(exc).__name__}: {exc}"]
                self._load_tracebacks[ep.name] = [format_exception(exc)]
                self._infos[ep.name] = info
                continue
            self._add(plugin, info)

    def load_local(self, entries: Iterable[str | Path]) -> None:
        """Load a project's own plugins (the config's ``plugins:`` list): a module name is
        imported, a :class:`~pathlib.Path` to a ``.py`` file is loaded from that file. Each is
        a plugin like an entry point's, named as the config names it; one that fails is
        recorded with its error and the others keep working."""
        for entry in entries:
            name = str(entry)
            if name in self._infos:
                continue
            info = PluginInfo(name=name, module=name, distribution=None)
            try:
                plugin = _import_file(entry) if isinstance(entry, Path) else importlib.import_module(entry)
            except (Exception, SystemExit) as exc:
                self._load_errors[name] = [f"failed to load: {type(exc).__name__}: {exc}"]
                self._load_tracebacks[name] = [format_exception(exc)]
                self._infos[name] = info
                continue
            self._add(plugin, info)

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register a plugin object or module directly (tests, in-process tools)."""
        plugin_name = name or getattr(plugin, "__name__", None) or f"plugin-{id(plugin)}"
        module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
        self._add(plugin, PluginInfo(name=plugin_name, module=module))
        return plugin_name

    def unregister(self, name: str) -> None:
        if self.pm.has_plugin(name):
            self.pm.unregister(name=name)
        self._infos.pop(name, None)
        self._load_errors.pop(name, None)
        self._load_tracebacks.pop(name, None)
        self._registries = None

    def _add(self, plugin: object, info: PluginInfo) -> None:
        if info.name in self._infos:
            raise PluginError(f"a plugin named {info.name!r} is already registered")
        try:
            self.pm.register(plugin, name=info.name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            self._load_errors[info.name] = [f"failed to register: {exc}"]
        else:
            hooks.guard(self.pm, info.name)
            unknown = [c.name for c in self.pm.get_hookcallers(plugin) or [] if c.spec is None]
            problems = [f"implements {name!r}, which is not an ATP hook" for name in sorted(unknown)]
            problems.extend(_unmarked(self.pm, plugin))
            if problems:
                self._load_errors[info.name] = problems
        self._infos[info.name] = info
        self._registries = None

    # --- registries ------------------------------------------------------------------------

    def _collect(self) -> dict[str, Registry]:
        if self._registries is not None:
            return self._registries
        for info in self._infos.values():
            info.adapters.clear()
            info.evaluators.clear()
            info.reporters.clear()
            info.services.clear()
            info.executors.clear()
            info.errors[:] = self._load_errors.get(info.name, [])
            info.tracebacks[:] = self._load_tracebacks.get(info.name, [])
        registries: dict[str, Registry] = {}
        for kind in _KINDS:
            registry = Registry(kind.label, self)
            caller = getattr(self.pm.hook, kind.hook)
            for impl in caller.get_hookimpls():
                info = self._infos.get(impl.plugin_name) or PluginInfo(name=impl.plugin_name)
                self._infos.setdefault(impl.plugin_name, info)
                register = _registrar(kind, registry, info)
                try:
                    impl.function(*[{"register": register}[arg] for arg in impl.argnames])
                except Exception as exc:
                    info.errors.append(f"{kind.hook} raised {type(exc).__name__}: {exc}")
                    info.tracebacks.append(format_exception(exc))
            for key, names in registry.conflicts.items():
                for name in names:
                    others = " and ".join(repr(n) for n in names if n != name)
                    self._infos[name].errors.append(
                        f"{kind.label} {key!r} is also registered by plugin {others}: it cannot be "
                        f"used until one is disabled (ATP_DISABLE_PLUGINS) or one declares "
                        f"'replaces' naming the other (docs/plugins.md)"
                    )
            registries[kind.label] = registry
        self._registries = registries
        return registries

    @property
    def adapters(self) -> dict[str, type[Adapter]]:
        return self._collect()["adapter"]

    @property
    def evaluators(self) -> dict[str, type[Evaluator]]:
        return self._collect()["evaluator"]

    @property
    def reporters(self) -> dict[str, type[Reporter]]:
        return self._collect()["reporter"]

    @property
    def services(self) -> dict[str, type[Service]]:
        return self._collect()["service"]

    @property
    def executors(self) -> dict[str, type[Executor]]:
        return self._collect()["executor"]

    def owner_name(self, kind: str, key: str) -> str | None:
        """The name of the plugin that registered ``key`` in the ``kind`` registry
        (``adapter``, ``evaluator``, ``reporter``, ``service``)."""
        return self._collect()[kind].owners.get(key)

    def owner(self, kind: str, key: str) -> str:
        """Who registered ``key``, for messages: ``plugin 'evaluators' (atp-evaluators 0.1.0)``."""
        name = self.owner_name(kind, key)
        return self.describe(name) if name is not None else "an unknown plugin"

    def describe(self, plugin_name: str) -> str:
        info = self._infos.get(plugin_name)
        origin = ""
        if info is not None and info.distribution:
            origin = f" ({info.distribution} {info.version})" if info.version else f" ({info.distribution})"
        elif info is not None and info.module:
            origin = f" ({info.module})"
        return f"plugin {plugin_name!r}{origin}"

    def missing(self, kind: str, key: str) -> str | None:
        """Why ``key`` is not in the ``kind`` registry when a plugin explains it: two plugins
        register it, or plugins failed to load or register (one of them may provide it)."""
        registry = self._collect()[kind]
        names = registry.conflicts.get(key)
        if names:
            both = " and ".join(self.describe(n) for n in names)
            return (
                f"{kind} {key!r} is registered by {both}; ATP uses neither rather than guess. "
                f"Disable one (ATP_DISABLE_PLUGINS=<plugin>) or make one declare 'replaces' "
                f"naming the other (docs/plugins.md)"
            )
        failed = [i for i in self.infos() if i.errors and not getattr(i, kind + "s")]
        if failed:
            lines = "; ".join(f"{self.describe(i.name)}: {i.errors[0]}" for i in failed)
            return f"a plugin that may provide it failed: {lines}"
        return None

    def adapter(self, type_: str) -> type[Adapter]:
        return _lookup(self.adapters, type_, "agent type", "adapters")

    def evaluator(self, name: str) -> type[Evaluator]:
        return _lookup(self.evaluators, name, "assertion type", "evaluators")

    def reporter(self, name: str) -> type[Reporter]:
        return _lookup(self.reporters, name, "output", "reporters")

    def service(self, key: str) -> type[Service]:
        return _lookup(self.services, key, "service", "adapters")

    def executor(self, name: str) -> type[Executor]:
        return _lookup(self.executors, name, "executor", "executors[dask]")

    def infos(self) -> list[PluginInfo]:
        self._collect()
        return sorted(self._infos.values(), key=lambda i: i.name)

    def problems(self, collect: bool = True) -> list[str]:
        """One line per plugin error, for a warning on stderr; without ``collect``, only the
        errors of loading (the registration hooks are not called for it)."""
        if not collect:
            return [f"plugin {n!r}: {e}" for n, errors in sorted(self._load_errors.items()) for e in errors]
        return [f"plugin {i.name!r}: {e}" for i in self.infos() for e in i.errors]

    def has_impls(self, hook_name: str) -> bool:
        """Whether any plugin implements the hook."""
        return hooks.has_impls(self.pm, hook_name)


class Registry(dict[str, type[Any]]):
    """The classes registered under each name for one kind, with who registered them and
    the names two plugins registered (kept out: a conflict is never settled by load order)."""

    def __init__(self, kind: str, plugins: Plugins | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.owners: dict[str, str] = {}
        self.conflicts: dict[str, list[str]] = {}
        self._plugins = plugins

    @property
    def plugins(self) -> Plugins | None:
        """The plugin manager this registry belongs to (its other registries), if any."""
        return self._plugins

    def add(self, key: str, cls: type[Any], plugin: str) -> None:
        if key in self.conflicts:
            if plugin not in self.conflicts[key]:
                self.conflicts[key].append(plugin)
            return
        if key not in self:
            self[key] = cls
            self.owners[key] = plugin
            return
        first, first_cls = self.owners[key], self[key]
        if first_cls is cls:  # the same class twice is no ambiguity
            return
        if getattr(cls, "replaces", None) == first:
            self[key], self.owners[key] = cls, plugin
            return
        if getattr(first_cls, "replaces", None) == plugin:
            return
        del self[key]
        del self.owners[key]
        self.conflicts[key] = [first, plugin]

    def missing(self, key: str) -> str | None:
        """Why ``key`` is not registered, when a plugin explains it (see :meth:`Plugins.missing`)."""
        if self._plugins is None or key in self:
            return None
        return self._plugins.missing(self.kind, key)


def _import_file(path: Path) -> ModuleType:
    """A plugin module loaded from a ``.py`` file, under a module name of its own."""
    import hashlib
    import importlib.util
    import sys

    digest = hashlib.sha1(str(path).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    module_name = f"atp_local_plugin_{path.stem.replace('-', '_')}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def _article(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def format_exception(exc: BaseException) -> str:
    """A plugin's exception with its traceback, as ``--debug`` shows it and results keep it."""
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()


def _unmarked(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    """Functions named like an ATP hook but not marked ``@hookimpl``: pluggy ignores them,
    so a plugin author would wait forever for a call."""
    found = []
    for attribute in dir(plugin):
        if not attribute.startswith("atp_") or not hasattr(hookspecs, attribute):
            continue
        try:
            value = getattr(plugin, attribute)
        except Exception:
            continue
        if callable(value) and pm.parse_hookimpl_opts(plugin, attribute) is None:
            found.append(
                f"defines {attribute}() but it is not marked @hookimpl, so ATP never calls it "
                f"(from atp.core.hookspecs import hookimpl)"
            )
    return found


def _registrar(kind: _Kind, registry: Registry, info: PluginInfo) -> Callable[[type[Any]], None]:
    listed: list[str] = getattr(info, kind.label + "s")
    base = kind.base

    def register(cls: type[Any]) -> None:
        key = getattr(cls, kind.key, None)
        if not (isinstance(cls, type) and issubclass(cls, base)) or not isinstance(key, str):
            info.errors.append(
                f"registered {cls!r}, which is not {_article(base.__name__)} subclass "
                f"with a string {kind.key!r}"
            )
            return
        problem = kind.check(key) if kind.check is not None else None
        if problem is not None:
            info.errors.append(f"registered {kind.label} {cls.__qualname__}, whose {problem}; it is not used")
            return
        registry.add(key, cls, info.name)
        listed.append(key)

    return register


def _lookup(registry: dict[str, type[K]], key: str, what: str, dist: str) -> type[K]:
    try:
        return registry[key]
    except KeyError:
        pass
    if isinstance(registry, Registry):
        why = registry.missing(key)
        if why is not None:
            raise PluginFailed(f"{what} {key!r} cannot be used: {why}")
    known = ", ".join(sorted(registry)) or "none"
    raise PluginError(
        f"unknown {what} {key!r} (installed: {known}); is the plugin providing it "
        f"installed? The built-in ones come with: pip install atp-{dist}"
    )
