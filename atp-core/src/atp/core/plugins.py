"""The plugin manager: loads plugins from the ``atp`` entry-point group and keeps the registries.

Built-in adapters, evaluators and reporters are plugins like any other: their distributions
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
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from atp.core import entrypoints, hookspecs
from atp.core.errors import MissingDependencyError, PluginError

if TYPE_CHECKING:
    from atp.core.adapter import Adapter
    from atp.core.evaluator import Evaluator
    from atp.core.reporter import Reporter

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
    errors: list[str] = dataclasses.field(default_factory=list)


class _Kind:
    """One registry: which hook fills it, which base class and name attribute it takes."""

    def __init__(self, label: str, hook: str, base: str, key: str) -> None:
        self.label = label
        self.hook = hook
        self.base_path = base
        self.key = key

    @property
    def base(self) -> type[Any]:
        module, _, name = self.base_path.rpartition(".")
        cls: type[Any] = getattr(importlib.import_module(module), name)
        return cls


_ADAPTERS = _Kind("adapter", "atp_register_adapters", "atp.core.adapter.Adapter", "type")
_EVALUATORS = _Kind("evaluator", "atp_register_evaluators", "atp.core.evaluator.Evaluator", "name")
_REPORTERS = _Kind("reporter", "atp_register_reporters", "atp.core.reporter.Reporter", "name")


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
        self._registries: dict[str, dict[str, type[Any]]] | None = None
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
            if ep.name in skip or ep.name in self._infos:
                continue
            info = PluginInfo(
                name=ep.name, module=ep.value, distribution=ep.distribution, version=ep.version
            )
            try:
                plugin = ep.load()
            except Exception as exc:
                self._load_errors[ep.name] = [f"failed to load: {type(exc).__name__}: {exc}"]
                self._infos[ep.name] = info
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
        self._registries = None

    def _add(self, plugin: object, info: PluginInfo) -> None:
        if info.name in self._infos:
            raise PluginError(f"a plugin named {info.name!r} is already registered")
        try:
            self.pm.register(plugin, name=info.name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            self._load_errors[info.name] = [f"failed to register: {exc}"]
        else:
            unknown = [c.name for c in self.pm.get_hookcallers(plugin) or [] if c.spec is None]
            if unknown:
                self._load_errors[info.name] = [
                    f"implements {name!r}, which is not an ATP hook" for name in sorted(unknown)
                ]
        self._infos[info.name] = info
        self._registries = None

    # --- registries ------------------------------------------------------------------------

    def _collect(self) -> dict[str, dict[str, type[Any]]]:
        if self._registries is not None:
            return self._registries
        for info in self._infos.values():
            info.adapters.clear()
            info.evaluators.clear()
            info.reporters.clear()
            info.errors[:] = self._load_errors.get(info.name, [])
        registries: dict[str, dict[str, type[Any]]] = {}
        owners: dict[tuple[str, str], str] = {}
        for kind in (_ADAPTERS, _EVALUATORS, _REPORTERS):
            registry: dict[str, type[Any]] = {}
            caller = getattr(self.pm.hook, kind.hook)
            for impl in caller.get_hookimpls():
                info = self._infos.get(impl.plugin_name) or PluginInfo(name=impl.plugin_name)
                self._infos.setdefault(impl.plugin_name, info)
                register = self._registrar(kind, registry, owners, info)
                try:
                    impl.function(*[{"register": register}[arg] for arg in impl.argnames])
                except Exception as exc:
                    info.errors.append(f"{kind.hook} raised {type(exc).__name__}: {exc}")
            registries[kind.label] = registry
        self._registries = registries
        return registries

    @staticmethod
    def _registrar(
        kind: _Kind,
        registry: dict[str, type[Any]],
        owners: dict[tuple[str, str], str],
        info: PluginInfo,
    ) -> Callable[[type[Any]], None]:
        listed: list[str] = getattr(info, kind.label + "s")
        base = kind.base

        def register(cls: type[Any]) -> None:
            key = getattr(cls, kind.key, None)
            if not (isinstance(cls, type) and issubclass(cls, base)) or not isinstance(key, str):
                info.errors.append(
                    f"registered {cls!r}, which is not a {base.__name__} subclass "
                    f"with a string {kind.key!r}"
                )
                return
            if key in registry:
                info.errors.append(
                    f"{kind.label} {key!r} is already registered by plugin "
                    f"{owners[(kind.label, key)]!r}; this one is ignored"
                )
                return
            registry[key] = cls
            owners[(kind.label, key)] = info.name
            listed.append(key)

        return register

    @property
    def adapters(self) -> dict[str, type[Adapter]]:
        return self._collect()["adapter"]

    @property
    def evaluators(self) -> dict[str, type[Evaluator]]:
        return self._collect()["evaluator"]

    @property
    def reporters(self) -> dict[str, type[Reporter]]:
        return self._collect()["reporter"]

    def adapter(self, type_: str) -> type[Adapter]:
        return self._lookup(self.adapters, type_, "agent type", "adapters")

    def evaluator(self, name: str) -> type[Evaluator]:
        return self._lookup(self.evaluators, name, "assertion type", "evaluators")

    def reporter(self, name: str) -> type[Reporter]:
        return self._lookup(self.reporters, name, "output", "reporters")

    @staticmethod
    def _lookup(registry: dict[str, type[K]], key: str, what: str, dist: str) -> type[K]:
        try:
            return registry[key]
        except KeyError:
            known = ", ".join(sorted(registry)) or "none"
            raise PluginError(
                f"unknown {what} {key!r} (installed: {known}); is the plugin providing it "
                f"installed? The built-in ones come with: pip install atp-{dist}"
            ) from None

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
        return bool(getattr(self.pm.hook, hook_name).get_hookimpls())
