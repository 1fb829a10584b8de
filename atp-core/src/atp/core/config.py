"""The configuration file ``atp.config.yaml`` and agent definitions.

Named with ``--config``, or found beside the suite, else in the working directory
(:mod:`atp.core.configsearch`): ``atp.config.yaml`` (or ``atp.config.yml``), else the
``[tool.atp]`` table of ``pyproject.toml``. When both a config file and a ``[tool.atp]`` table
are in one folder, the file is the configuration and :attr:`Config.warnings` says the table is
ignored. Its sections (design section 6.2):
``defaults``, ``agents`` (by name), ``evaluators`` (settings per evaluator), ``reporting``,
``secrets``, ``limits`` and ``plugins`` (the project's own plugin modules and files). An agent
is defined in the config or in a suite's ``agents`` list; a suite entry that gives only a
``name`` refers to the config's agent of that name.

``${VAR}`` (and ``${VAR:-default}``; ``$$`` for a literal ``$``) is replaced by the environment
variable's value in agent settings, evaluator settings and secrets; ``${ATP_PYTHON}`` is the
Python interpreter running ATP unless the environment sets it. Secret values, and the values of
variables whose names look secret (``*KEY*``, ``*TOKEN*``, ...), are masked in everything ATP
writes.
"""

import importlib
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import msgspec

from atp.core.adapter import Adapter
from atp.core.bounds import MAX_COUNT
from atp.core.configsearch import CONFIG_NAMES as CONFIG_NAMES
from atp.core.configsearch import PYPROJECT as PYPROJECT
from atp.core.configsearch import search, shown
from atp.core.errors import ConfigError, SuiteError
from atp.core.protocol import TimeoutSeconds
from atp.core.secrets import Masker, looks_secret
from atp.core.suite import (
    NonEmpty,
    Retries,
    RunsSpec,
    StrictSpec,
    Suite,
    check_format_version,
    normalize_version,
    unavailable,
)
from atp.core.trace import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_EVENTS, DEFAULT_MAX_LOG_BYTES
from atp.core.yamlfile import PathPart, YamlDocument, format_path, read_text

if TYPE_CHECKING:
    from atp.core.evaluator import Evaluator
    from atp.core.limits import RateLimit

TOOL_TABLE = ("tool", "atp")
"""Where the configuration sits in ``pyproject.toml``: ``[tool.atp]``."""
PYTHON_VARIABLE = "ATP_PYTHON"
"""``${ATP_PYTHON}``: the Python interpreter running ATP, unless the environment sets it."""
DEFAULT_RUN_DIR = ".atp/runs"
COMMON_AGENT_KEYS = ("name", "type", "timeout", "rate_limit", "secrets")
MAX_AGENT_TIMEOUT = 86400  # seconds, like a test's timeout_seconds
MAX_EVALUATOR_TIMEOUT = 86400

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigFileError(SuiteError):
    """An error in ``atp.config.yaml``, located like a suite error."""


class ConfigDefaults(StrictSpec, kw_only=True):
    aliases: ClassVar[dict[str, str]] = {"runs": "runs_per_test"}  # as on a test (atp.core.spelling)

    timeout_seconds: TimeoutSeconds | None = None
    runs_per_test: RunsSpec | None = None
    parallel_workers: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None
    retries: Retries | None = None
    """How many times a run that met a fault of the infrastructure is tried again (a suite's
    ``defaults.retries`` and ``--retries`` win)."""
    retry_backoff_seconds: Annotated[float, msgspec.Meta(gt=0, le=600)] | None = None
    """About how long the wait before the second attempt is (it doubles each time after)."""


class BudgetSpec(StrictSpec, kw_only=True):
    """What one ``atp test`` may spend (``--max-cost-usd`` and ``--max-tokens`` win)."""

    max_cost_usd: Annotated[float, msgspec.Meta(gt=0, le=1e9)] | None = None
    max_tokens: Annotated[int, msgspec.Meta(gt=0, le=MAX_COUNT)] | None = None


MiB = 1024 * 1024


class LimitsSpec(StrictSpec, kw_only=True):
    """What one run of an agent may send ATP (docs/untrusted-agents.md)."""

    max_events: Annotated[int, msgspec.Meta(ge=1, le=100_000_000)] = DEFAULT_MAX_EVENTS
    max_event_bytes: Annotated[int, msgspec.Meta(ge=1024, le=64 * 1024 * MiB)] = DEFAULT_MAX_EVENT_BYTES
    max_log_bytes: Annotated[int, msgspec.Meta(ge=1024, le=64 * 1024 * MiB)] = DEFAULT_MAX_LOG_BYTES


class ReportingSpec(StrictSpec, kw_only=True):
    default: str | list[str] = "console"
    verbose: bool = False
    run_dir: str = DEFAULT_RUN_DIR


class ConfigSpec(StrictSpec, kw_only=True):
    examples: ClassVar[dict[str, str]] = {
        "agents": "agents: {my-agent: {type: cli, command: [python3, agent.py]}} (a mapping by name in "
        "atp.config.yaml; in a suite, agents is a list)"
    }

    version: str = "1.0"
    defaults: ConfigDefaults = msgspec.field(default_factory=ConfigDefaults)
    agents: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    evaluators: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    reporting: ReportingSpec = msgspec.field(default_factory=ReportingSpec)
    limits: LimitsSpec = msgspec.field(default_factory=LimitsSpec)
    secrets: dict[str, str | None] = msgspec.field(default_factory=dict)
    plugins: list[NonEmpty] = msgspec.field(default_factory=list)
    """The project's own plugins: module names (``my_team.checks``) or ``.py`` files, relative
    to the config file (``checks/house_style.py``)."""
    budget: BudgetSpec = msgspec.field(default_factory=BudgetSpec)
    executors: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    """Settings per executor (``atp test --executor=NAME``), like ``dask: {address: ...}``."""
    quarantine_file: NonEmpty | None = None
    """A file (relative to the config file) of test ids to quarantine, one per line (``#``
    starts a comment), in every suite that has them."""


_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def is_plugin_file(entry: str) -> bool:
    """Whether a ``plugins:`` entry names a file (it ends in ``.py`` or has a ``/``) rather
    than a module."""
    return entry.endswith(".py") or "/" in entry or "\\" in entry


def plugin_entry_problem(entry: str) -> str | None:
    """What is wrong with the form of a ``plugins:`` entry, or ``None``."""
    if "\0" in entry:
        return "the entry holds a NUL byte (\\0), which no module name or path can"
    if is_plugin_file(entry):
        if not entry.endswith(".py"):
            return (
                f"{entry!r} is a path but not a .py file; name a plugin module file, or a module "
                f"(like my_team.checks) that is on the Python path"
            )
        return None
    if not _MODULE_NAME.match(entry):
        return (
            f"{entry!r} is neither a module name (like my_team.checks) nor a .py file (like "
            f"checks/my_plugin.py, relative to the config file)"
        )
    return None


def with_builtin_variables(environ: Mapping[str, str]) -> Mapping[str, str]:
    """``environ`` with ``ATP_PYTHON`` (the Python running ATP) unless it sets it itself."""
    if PYTHON_VARIABLE in environ:
        return environ
    return {**environ, PYTHON_VARIABLE: sys.executable or "python3"}


class Config:
    """A loaded configuration (empty when there is no file)."""

    def __init__(
        self,
        spec: ConfigSpec,
        document: YamlDocument | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.document = document
        self.path = document.path if document else None
        self.base_dir = self.path.parent if self.path else Path.cwd()
        self.environ = with_builtin_variables(os.environ if environ is None else environ)
        self.evaluator_overrides: dict[str, dict[str, Any]] = {}
        """Settings the command line sets over ``evaluators.<name>`` (``atp test
        --no-judge-cache`` sets ``llm_judge.cache: false``)."""
        self.origin = "no config file was used"
        """Which config file this is and how it was found, or where none was found (for errors
        that depend on it, like an agent that is not defined)."""
        self.source: str | None = None
        """The same in a few words, for ``atp test``'s header (``myproj/atp.config.yaml
        (beside the suite)``); ``None`` for a config not loaded by :func:`load_config`."""
        self.warnings: list[str] = []
        """What the user should hear about the configuration (a ``[tool.atp]`` table that a
        config file overrides), for a warning on stderr."""
        self.secrets: dict[str, str] = {}
        for name, value in spec.secrets.items():
            if value is None:
                continue
            where: tuple[PathPart, ...] = ("secrets", name)
            resolved = interpolate(value, self.environ, self._missing_ok, where)
            if resolved:
                self.secrets[name] = resolved

    @staticmethod
    def _missing_ok(variable: str, where: Sequence[PathPart]) -> str:
        return ""  # an unset secret is an error only where it is needed

    @property
    def run_dir(self) -> Path:
        return self.base_dir / self.spec.reporting.run_dir

    def quarantined(self) -> set[str]:
        """The test ids of ``quarantine_file`` (one per line; ``#`` starts a comment); none
        without one. A file that cannot be read is an error located in the config."""
        entry = self.spec.quarantine_file
        if entry is None:
            return set()
        path = Path(entry).expanduser()
        if not path.is_absolute():
            path = self.base_dir / path
        try:
            text = read_text(path)
        except (OSError, UnicodeDecodeError, ConfigError) as exc:
            message = f"cannot read the quarantine file {path}: {getattr(exc, 'strerror', None) or exc}"
            if self.document is None:
                raise ConfigError(message) from None
            raise self.document.error(message, ("quarantine_file",)) from None
        found = set()
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                found.add(line)
        return found

    def plugin_entries(self) -> list[str | Path]:
        """The ``plugins:`` list, each entry once, in order: a module name as it is, a file as
        an absolute :class:`~pathlib.Path` (a relative one is relative to the config file). A
        file that is not there is an error located in the config."""
        found: dict[str | Path, None] = {}
        for index, entry in enumerate(self.spec.plugins):
            if not is_plugin_file(entry):
                found[entry] = None
                continue
            path = Path(entry).expanduser()
            if not path.is_absolute():
                path = self.base_dir / path
            path = Path(os.path.abspath(path))
            try:
                is_file = path.is_file()
            except OSError:
                is_file = False
            if not is_file:
                message = f"plugin file {entry!r} is not a file (looked for {path})"
                if self.document is None:
                    raise ConfigError(message)
                raise self.document.error(message, ("plugins", index))
            found[path] = None
        return list(found)

    def evaluator_settings(self, name: str) -> dict[str, Any]:
        """The ``evaluators.<name>`` settings, with ``${VAR}`` replaced."""
        where: tuple[PathPart, ...] = ("evaluators", name)

        def missing(variable: str, at: Sequence[PathPart]) -> str:
            message = f"environment variable {variable} is not set (used as ${{{variable}}})"
            if self.document is None:
                raise ConfigError(message)
            raise self.document.error(message, (*where, *at))

        settings: dict[str, Any] = interpolate(self.spec.evaluators.get(name, {}), self.environ, missing)
        settings.update(self.evaluator_overrides.get(name, {}))
        return settings

    def check_evaluator_settings(self, name: str, schema: type[msgspec.Struct] | None) -> None:
        """Check ``evaluators.<name>`` against the evaluator's ``Settings`` (a located error);
        ``timeout_seconds`` is ATP's and not the evaluator's to accept."""
        settings = self.evaluator_settings(name)
        if schema is None:
            return
        own = {k: v for k, v in settings.items() if k != "timeout_seconds"}
        if self.document is not None and name in self.spec.evaluators:
            self.document.convert(own, schema, at=("evaluators", name))
            return
        try:
            msgspec.convert(own, schema)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"evaluators.{name}: {exc}") from None

    def evaluator_secrets(self) -> list[str]:
        """Values of secret-looking variables the ``evaluators`` section uses, to be masked."""
        used: set[str] = set()
        interpolate(self.spec.evaluators, self.environ, self._missing_ok, (), used)
        return [self.environ[v] for v in used if v in self.environ and looks_secret(v)]


def load_config(path: Path | None = None, cwd: Path | None = None, suites: Sequence[Path] = ()) -> Config:
    """Load ``path`` (a YAML config file, or a ``.toml`` file's ``[tool.atp]`` table: what
    ``--config`` names); without one, the config found for ``suites`` (beside them, then in
    ``cwd``: :func:`atp.core.configsearch.search`), else an empty config. Every command finds
    its configuration here; :attr:`Config.origin` says which was used, or where none was."""
    if path is not None:
        config = config_from_file(path)
        config.origin = f"the config is {path} (--config)"
        config.source = f"{shown(path, cwd)} (--config)"
        return config
    found = search(suites, cwd)
    config = config_from_file(found.path) if found.path is not None else Config(ConfigSpec())
    config.warnings.extend(found.warnings)
    config.origin = found.origin()
    config.source = found.summary(cwd)
    return config


def config_from_file(path: Path) -> Config:
    """The config in ``path``: a YAML file, or the ``[tool.atp]`` table of a ``.toml`` file."""
    doc: YamlDocument
    if path.suffix.lower() == ".toml":
        doc = TomlDocument.load_table(path)
    else:
        doc = YamlDocument.load(path, ConfigFileError)
    return config_from_document(doc)


def config_from_document(doc: YamlDocument) -> Config:
    """Validate a loaded config document (YAML, or a ``[tool.atp]`` table) as a :class:`Config`."""
    data = doc.data if doc.data is not None else {}
    if not isinstance(data, dict):
        raise doc.error("a config file must be a mapping")
    normalize_version(data)
    spec = doc.convert(data, ConfigSpec)
    check_format_version(doc, spec.version, "config")
    for name, settings in spec.evaluators.items():
        limit = (settings or {}).get("timeout_seconds")
        if limit is not None and not (
            isinstance(limit, (int, float))
            and not isinstance(limit, bool)
            and 0 < limit <= MAX_EVALUATOR_TIMEOUT
        ):
            raise doc.error(
                f"an evaluator's timeout_seconds must be a number of seconds above 0 and at most "
                f"{MAX_EVALUATOR_TIMEOUT}",
                ("evaluators", name, "timeout_seconds"),
            )
    for index, entry in enumerate(spec.plugins):
        problem = plugin_entry_problem(entry)
        if problem is not None:
            raise doc.error(problem, ("plugins", index))
    return Config(spec, doc)


# --- pyproject.toml ---------------------------------------------------------------------------


_TOML_AT = re.compile(r"\s*\(at (?:line (\d+), column \d+|end of document)\)\s*\Z")
_TOML_HEADER = re.compile(r"\[\[?(?P<key>[^\]\[]*)\]\]?\s*(?:#.*)?\Z")
_TOML_KEY = re.compile(
    r"(?P<key>(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*="
)
_TOML_TABLE_MENTION = re.compile(
    r"^\s*(?:\[\[?\s*tool\s*\.\s*[\"']?atp[\"']?\s*[\].]|tool\s*\.\s*[\"']?atp[\"']?\s*[.=])", re.MULTILINE
)


class TomlDocument(YamlDocument):
    """The ``[tool.atp]`` table of a ``pyproject.toml``, read as a config document: errors name
    the file, the key path (``tool.atp.defaults.parallel_workers``) and a line. TOML parsers do
    not report lines for values, so the line is found by a simple search of the text for the
    key's table header or ``key =`` line (the nearest enclosing key when the exact one is not
    found: a value inside an inline table or an array)."""

    def __init__(self, path: Path, text: str, data: Any, prefix: Sequence[PathPart] = TOOL_TABLE) -> None:
        # No YAML to compose: the data comes from the TOML parser; errors and lines are found
        # by the overrides below.
        self.path = path
        self.error_cls = ConfigFileError
        self.root = None
        self.text = text
        self.data = data
        self.prefix = tuple(prefix)

    @staticmethod
    def _parse(path: Path, text: str) -> dict[str, Any]:
        toml = _toml_module()
        try:
            data: dict[str, Any] = toml.loads(text)
        except toml.TOMLDecodeError as exc:
            message = str(exc)
            match = _TOML_AT.search(message)
            line = int(match.group(1)) if match and match.group(1) else None
            if match:
                message = message[: match.start()]
                if line is None:  # at the end of the document
                    line = text.count("\n") + (0 if text.endswith("\n") else 1)
            raise ConfigFileError(f"invalid TOML: {message}", file=str(path), line=line) from None
        except RecursionError:
            raise ConfigFileError("invalid TOML: nested too deeply", file=str(path)) from None
        return data

    @classmethod
    def find(cls, path: Path) -> "TomlDocument | None":
        """The ``[tool.atp]`` table of ``path``, or ``None`` when it has none. A file that is
        not valid TOML is an error only when its text seems to hold such a table."""
        text = read_text(path, ConfigFileError)
        try:
            data = cls._parse(path, text)
        except ConfigFileError:
            if _TOML_TABLE_MENTION.search(text):
                raise
            return None
        return cls._table(path, text, data, required=False)

    @classmethod
    def load_table(cls, path: Path) -> "TomlDocument":
        """The ``[tool.atp]`` table of ``path`` (``--config pyproject.toml``); an error when
        there is none."""
        text = read_text(path, ConfigFileError)
        found = cls._table(path, text, cls._parse(path, text), required=True)
        assert found is not None
        return found

    @classmethod
    def mentions_table(cls, path: Path) -> bool:
        """Whether ``path`` has a ``[tool.atp]`` table (false when it cannot be read)."""
        try:
            return cls.find(path) is not None
        except ConfigError:
            return False

    @classmethod
    def _table(cls, path: Path, text: str, data: dict[str, Any], *, required: bool) -> "TomlDocument | None":
        tool = data.get("tool")
        table = tool.get("atp") if isinstance(tool, dict) else None
        if table is None:
            if required:
                raise ConfigFileError(
                    "has no [tool.atp] table; ATP's configuration goes there (or in atp.config.yaml)",
                    file=str(path),
                )
            return None
        document = cls(path, text, table)
        if not isinstance(table, dict):
            raise document.error("[tool.atp] must be a table")
        return document

    def error(self, message: str, parts: Sequence[PathPart] = ()) -> SuiteError:
        full = [*self.prefix, *parts]
        return self.error_cls(message, file=str(self.path), path=format_path(full), line=self.line_of(parts))

    def line_of(self, parts: Sequence[PathPart]) -> int | None:
        """The line of the key at ``parts`` (below ``[tool.atp]``), found by searching the text."""
        wanted: list[str] = []
        for part in (*self.prefix, *parts):
            if not isinstance(part, str):
                break
            wanted.append(part)
        return _toml_line(self.text, wanted)


def _toml_module() -> Any:
    """``tomllib`` (Python 3.11+), or ``tomli`` before it."""
    name = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - Python 3.10 without the dependency
        raise ConfigError(
            "reading pyproject.toml needs the Python package 'tomli' on Python 3.10; install it "
            "with: pip install tomli"
        ) from None


def _toml_keys(text: str) -> list[str]:
    """A dotted TOML key (``a."b.c".d``) as its parts."""
    keys: list[str] = []
    for match in re.finditer(r"\s*(\"[^\"]*\"|'[^']*'|[^.\s]+)\s*(?:\.|\Z)", text.strip()):
        key = match.group(1)
        keys.append(key[1:-1] if key[:1] in "\"'" else key)
    return keys


def _toml_line(text: str, wanted: Sequence[str]) -> int | None:
    """The first line that defines the longest part of the key path ``wanted``: a table header
    or a ``key = value`` line, with the current table's path in front of the key."""
    best_length, best_line = 0, None
    table: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = _TOML_HEADER.match(line)
        if header:
            table = _toml_keys(header.group("key"))
            keys = table
        else:
            key = _TOML_KEY.match(line)
            if not key:
                continue
            keys = table + _toml_keys(key.group("key"))
        length = 0
        for have, want in zip(keys, wanted, strict=False):
            if have != want:
                break
            length += 1
        on_the_way = length == len(keys) or length == len(wanted)  # above or at the key, or in it
        if on_the_way and length > best_length:
            best_length, best_line = length, number
    return best_line


# --- interpolation --------------------------------------------------------------------------


def interpolate(
    value: Any,
    environ: Mapping[str, str],
    on_missing: Any,
    where: Sequence[PathPart] = (),
    used: set[str] | None = None,
) -> Any:
    """Replace ``${VAR}`` in every string inside ``value``; ``on_missing(var, where)`` decides
    what an unset variable without a default becomes (or raises)."""
    if isinstance(value, str):
        if "$" not in value:
            return value

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:
                return "$"
            if used is not None:
                used.add(name)
            if name in environ:
                return environ[name]
            if match.group(2) is not None:
                return match.group(2)
            result: str = on_missing(name, where)
            return result

        # No ``${`` after the last ``}`` can be closed: matching only up to it keeps the work
        # linear (each ``${NAME:-`` would otherwise be tried up to the end of the text).
        end = value.rfind("}") + 1
        return _VAR.sub(replace, value[:end]) + value[end:].replace("$$", "$")
    if isinstance(value, dict):
        return {k: interpolate(v, environ, on_missing, (*where, k), used) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, environ, on_missing, (*where, i), used) for i, v in enumerate(value)]
    return value


# --- agents ---------------------------------------------------------------------------------


class AgentDefinition:
    """An agent as a suite or the config defines it, not yet validated against its adapter."""

    def __init__(
        self,
        name: str,
        raw: dict[str, Any],
        document: YamlDocument | None,
        at: tuple[PathPart, ...],
        base_dir: Path,
    ) -> None:
        self.name = name
        self.raw = raw
        self.document = document
        self.at = at
        self.base_dir = base_dir

    @property
    def type(self) -> str | None:
        value = self.raw.get("type")
        return value if isinstance(value, str) else None

    def error(self, message: str, key: str | None = None) -> ConfigError:
        if self.document is None:
            return ConfigError(f"agent {self.name!r}: {message}")
        return self.document.error(message, (*self.at, key) if key else self.at)


class ResolvedAgent:
    """An agent ready to run: its adapter class and validated settings."""

    def __init__(
        self,
        definition: AgentDefinition,
        adapter_cls: type[Adapter],
        settings: msgspec.Struct,
        timeout: float | None,
        secrets: list[str],
        rate_limit: "RateLimit | None" = None,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        self.definition = definition
        self.adapter_cls = adapter_cls
        self.settings = settings
        self.timeout = timeout
        self.secrets = secrets
        self.rate_limit = rate_limit
        """How fast runs may start against this agent (its ``rate_limit``)."""
        self.environment: dict[str, str] = dict(environment or {})
        """What every request's ``context.environment`` carries: the adapter's plain ``env``
        values and the secrets the definition names (:mod:`atp.core.agentenv`)."""

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def type(self) -> str:
        return self.adapter_cls.type

    def create_adapter(self) -> Adapter:
        return self.adapter_cls(self.settings, name=self.name, base_dir=self.definition.base_dir)


def agent_definitions(config: Config, suite: Suite | None = None) -> dict[str, AgentDefinition]:
    """Every agent the config and the suite define, by name; the suite's entries win, and a
    suite entry with only a name refers to the config's agent."""
    found: dict[str, AgentDefinition] = {}
    for name, raw in config.spec.agents.items():
        found[name] = AgentDefinition(name, raw or {}, config.document, ("agents", name), config.base_dir)
    if suite is not None and suite.path is not None:
        for index, raw in enumerate(suite.agents):
            name = raw["name"]
            if set(raw) == {"name"}:
                if name not in found:
                    raise _suite_error(
                        suite, f"agent {name!r} is not defined in the config; {config.origin}", index
                    )
                continue
            found[name] = AgentDefinition(name, raw, suite.document, ("agents", index), suite.path.parent)
    return found


def _suite_error(suite: Suite, message: str, index: int) -> ConfigError:
    if suite.document is not None:
        return suite.document.error(message, ("agents", index, "name"))
    return ConfigError(message)


def choose_agent(
    definitions: Mapping[str, AgentDefinition], name: str | None, config: Config | None = None
) -> AgentDefinition:
    """The agent ``name`` (the only one defined when ``None``); an error names the agents
    defined and, given the ``config``, which config file was used or where none was found."""
    where = f"; {config.origin}" if config is not None else ""
    if name is not None:
        if name not in definitions:
            known = ", ".join(sorted(definitions)) or "none are defined"
            raise ConfigError(
                f"no agent named {name!r} (defined: {known}); define agents in the suite's "
                f"'agents' list or in atp.config.yaml{where}"
            )
        return definitions[name]
    if len(definitions) == 1:
        return next(iter(definitions.values()))
    if not definitions:
        raise ConfigError(
            f"no agent is defined: add one to the suite's 'agents' list or to atp.config.yaml{where}"
        )
    raise ConfigError(f"choose an agent with --agent: {', '.join(sorted(definitions))}")


def resolve_agent(
    definition: AgentDefinition,
    adapters: Mapping[str, type[Adapter]],
    environ: Mapping[str, str] | None = None,
) -> ResolvedAgent:
    """Interpolate ``${VAR}`` in the settings and validate them against the adapter."""
    env = os.environ if environ is None else environ
    type_ = definition.type
    if type_ is None:
        raise definition.error("the agent has no 'type' (like 'type: cli')", "type")
    adapter_cls = adapters.get(type_)
    if adapter_cls is None and definition.document is not None:
        unavailable(definition.document, adapters, type_, "agent type", (*definition.at, "type"))
    if adapter_cls is None:
        known = ", ".join(sorted(adapters)) or "none are installed"
        raise definition.error(
            f"unknown agent type {type_!r} (installed adapters: {known}); is the plugin that "
            f"provides it installed? The built-in ones come with: pip install atp-adapters",
            "type",
        )
    env = with_builtin_variables(env)
    used: set[str] = set()

    def missing(variable: str, where: Sequence[PathPart]) -> str:
        raise definition.error(
            f"environment variable {variable} is not set (used as ${{{variable}}})",
            str(where[0]) if where else None,
        )

    raw = {k: v for k, v in definition.raw.items() if k not in COMMON_AGENT_KEYS}
    settings_data = interpolate(raw, env, missing, (), used)
    timeout = definition.raw.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or (isinstance(timeout, float) and not math.isfinite(timeout))
        or not 0 < timeout <= MAX_AGENT_TIMEOUT
    ):
        raise definition.error(
            f"'timeout' must be a number of seconds above 0 and at most {MAX_AGENT_TIMEOUT}, not {timeout!r}",
            "timeout",
        )
    settings: msgspec.Struct
    if definition.document is not None:
        settings = definition.document.convert(settings_data, adapter_cls.Settings, definition.at)
    else:
        try:
            settings = msgspec.convert(settings_data, adapter_cls.Settings)
        except msgspec.ValidationError as exc:
            raise definition.error(str(exc)) from None
    secrets = [env[v] for v in used if v in env and looks_secret(v)]
    secrets.extend(value for value in adapter_cls.secret_values(settings) if value)
    rate_limit = None
    if definition.raw.get("rate_limit") is not None:
        from atp.core.limits import parse_rate_limit

        try:
            rate_limit = parse_rate_limit(definition.raw["rate_limit"])
        except ConfigError as exc:
            raise definition.error(str(exc), "rate_limit") from None
    secret_env, environment = agent_environment(definition, adapter_cls, settings, env)
    secrets.extend(secret_env.values())
    return ResolvedAgent(definition, adapter_cls, settings, timeout, secrets, rate_limit, environment)


def agent_environment(
    definition: AgentDefinition,
    adapter_cls: type[Adapter],
    settings: msgspec.Struct,
    environ: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str]]:
    """The definition's ``secrets:`` read from ``environ`` (``{name sent: value}``), and all
    that its requests carry in ``context.environment`` (the adapter's plain values too); a
    problem is an error located at ``secrets`` (or ``env``) naming the agent."""
    from atp.core.agentenv import EnvironmentProblem, read_secrets, request_environment

    try:
        secrets = read_secrets(definition.raw.get("secrets"), environ)
        return secrets, request_environment(adapter_cls.request_environment(settings), secrets)
    except EnvironmentProblem as exc:
        message = str(exc) if definition.document is None else f"agent {definition.name!r}: {exc}"
        raise definition.error(message, "secrets" if "secrets" in definition.raw else "env") from None


def masker_for(
    config: Config, agent: ResolvedAgent | None = None, evaluators: Iterable[type["Evaluator"]] = ()
) -> Masker:
    """Everything ATP writes is masked with the config's secrets, the secret-looking
    variables used by the agent's and the evaluators' settings, and the values the run's
    evaluators say they use (:meth:`Evaluator.secret_values`)."""
    values = list(config.secrets.values()) + config.evaluator_secrets()
    if agent is not None:
        values.extend(agent.secrets)
    for evaluator in evaluators:
        values.extend(evaluator.secret_values(config.evaluator_settings(evaluator.settings_name())))
    return Masker(values)
