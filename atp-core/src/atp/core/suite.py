"""Test suites: the YAML format, its validation with located errors (every mistake at once), defaults.

A suite file (design section 4.1)::

    test_suite: "competitor_analysis"
    version: "1.0"
    defaults: {runs_per_test: 1, timeout_seconds: 300, scoring: {...}}
    agents: [{name: my-agent, type: cli, command: [python3, agent.py]}]
    tests:
      - id: basic
        name: Basic search
        tags: [smoke]
        task: {description: "..."}
        constraints: {max_steps: 50, timeout_seconds: 180}
        assertions:
          - type: artifact_exists
            config: {path: report.md}

:func:`load_suite` checks the structure, that test ids are unique and that every assertion type
has an evaluator whose ``Config`` accepts the assertion's ``config``, before anything runs.

Services: a test, and the suite's ``defaults``, also take the key of every installed service
(:mod:`atp.core.service`; ``tools`` for the mock tool server), whose value is checked against the
service's ``Config`` when the suite loads. A test's value replaces the default's whole (they are
not merged); ``null`` on a test does without the default's service. Any other unknown key is an
error, as it is everywhere in a suite.

Shorthands accepted for suites written for other implementations of the design (docs/suites.md,
"Accepted shorthands"): ``expected_artifacts`` entries given as plain file names, ``critical``
on an assertion and ``workspace_fixture`` (a folder, relative to the suite file) on a task.
"""

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from atp.core.adaptive import Adaptive
from atp.core.error_codes import Expectation
from atp.core.errors import PluginFailed, SuiteError
from atp.core.evaluator import Evaluator
from atp.core.mistakes import Mistakes
from atp.core.protocol import (
    DEFAULT_TIMEOUT_SECONDS,
    Constraints,
    Description,
    ExpectedArtifact,
    Task,
    TimeoutSeconds,
)
from atp.core.results import ALL_RUNS, MAX_RUNS_PER_TEST, PassRule
from atp.core.service import Service, ServiceConfigError, ServiceUse
from atp.core.spelling import closest, mend
from atp.core.yamlfile import PathPart, YamlDocument

SUITE_FORMAT_MAJOR = 1
MAX_WEIGHT = 1000.0
"""The largest scoring weight. Weights are relative, and msgspec's bounds refuse ``.nan``
(no comparison holds for it) and, with an upper bound, ``.inf``."""
MAX_BUDGET_USD = 1_000_000.0

Weight = Annotated[float, msgspec.Meta(ge=0, le=MAX_WEIGHT)]
WEIGHT_FIELDS = ("quality_weight", "completeness_weight", "efficiency_weight", "cost_weight")
RunsCount = Annotated[int, msgspec.Meta(ge=1, le=MAX_RUNS_PER_TEST)]
RunsSpec = RunsCount | Literal["auto"]
"""``runs_per_test``: a number of runs, or ``auto`` (run until the score is known well enough)."""
AdaptiveRuns = Annotated[int, msgspec.Meta(ge=2, le=MAX_RUNS_PER_TEST)]
Points = Annotated[float, msgspec.Meta(gt=0, le=100)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class StrictSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    """Suite and config Structs: an unknown key is a typo, and an error."""


class ScoringSpec(StrictSpec, kw_only=True):
    aliases: ClassVar[dict[str, str]] = {name.removesuffix("_weight"): name for name in WEIGHT_FIELDS}
    """``quality: 0.4`` (the requirements' spelling) is ``quality_weight: 0.4``."""

    quality_weight: Weight | None = None
    completeness_weight: Weight | None = None
    efficiency_weight: Weight | None = None
    cost_weight: Weight | None = None
    optimal_steps: Annotated[int, msgspec.Meta(ge=1)] | None = None


class ConstraintsSpec(Constraints, forbid_unknown_fields=True, kw_only=True):
    """The protocol's constraints, strict about unknown keys as suites are, and with a finite
    budget."""

    spellings: ClassVar[dict[str, str]] = dict.fromkeys(
        ("runs", "runs_per_test"),
        "'runs_per_test', a key of the test (or of the suite's defaults) beside 'constraints'",
    )

    budget_usd: Annotated[float, msgspec.Meta(ge=0, le=MAX_BUDGET_USD)] | None = None


class ExpectedArtifactSpec(ExpectedArtifact, forbid_unknown_fields=True, kw_only=True):
    """The protocol's expected artifact, strict about unknown keys as suites are."""


FORMATS_BY_EXTENSION = {"md": "markdown", "txt": "text", "yml": "yaml", "htm": "html"}
"""The ``format`` of an expected artifact given as a file name, by the name's extension (in
lower case); any other extension is the format as it is (``data.json``: ``json``)."""


def expected_artifact(name: str) -> ExpectedArtifact:
    """An expected artifact given as a plain file name (``report.md``): a file of that name,
    its format from the extension (``markdown``), none without one."""
    suffix = PurePosixPath(name.replace("\\", "/")).suffix.lower().lstrip(".")
    return ExpectedArtifact(type="file", name=name, format=FORMATS_BY_EXTENSION.get(suffix, suffix) or None)


class TaskSpec(StrictSpec, kw_only=True):
    description: Description
    input_data: dict[str, Any] | None = None
    expected_artifacts: list[ExpectedArtifactSpec | NonEmpty] | None = None
    workspace_fixture: NonEmpty | None = None
    """A folder, relative to the suite file, copied into a fresh workspace for every run."""


class PassRuleSpec(StrictSpec, kw_only=True):
    """``pass_rule: {pass_rate: 0.8}`` or ``pass_rule: {min_score: 70}``."""

    pass_rate: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    min_score: Annotated[float, msgspec.Meta(ge=0, le=100)] | None = None


class RunsSettings(StrictSpec, kw_only=True):
    """How many times tests run, and when several runs pass: keys of a test and of the
    suite's defaults (a test's own value wins)."""

    aliases: ClassVar[dict[str, str]] = {"runs": "runs_per_test"}
    spellings: ClassVar[dict[str, str]] = {
        key: f"'constraints: {{{key}: ...}}'"
        for key in ("max_steps", "max_tokens", "budget_usd", "allowed_tools", "timeout_seconds")
    } | {"timeout": "'constraints: {timeout_seconds: ...}'", "weights": "'scoring'"}

    runs_per_test: RunsSpec | None = None
    min_runs: AdaptiveRuns | None = None
    """With ``runs_per_test: auto``: the runs before the first decision (default 3)."""
    max_runs: AdaptiveRuns | None = None
    """With ``runs_per_test: auto``: the most runs (default 20)."""
    ci_width: Points | None = None
    """With ``runs_per_test: auto``: stop once the score's 95% interval is within this many
    points either side of the mean (default 5)."""
    min_effect: Points | None = None
    """With ``runs_per_test: auto`` and a baseline: the smallest change (points) worth finding
    (default 5)."""
    pass_rule: Literal["all"] | PassRuleSpec | None = None


class AssertionSpec(StrictSpec, kw_only=True):
    elsewhere: ClassVar[str] = "an assertion's own settings go under 'config:' (config: {{{key}: ...}})"
    """The hint of an unknown key (:mod:`atp.core.spelling`): ``pattern:`` written beside ``type``."""

    type: NonEmpty
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    name: str | None = None
    critical: bool = False
    """When the assertion's checks fail, the run fails, whatever its score."""
    negate: bool = False
    """Its checks' verdicts are reversed: it passes where it would fail (docs/suites.md)."""


class TestSpec(RunsSettings, kw_only=True):
    __test__ = False

    id: NonEmpty
    name: str | None = None
    description: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    task: TaskSpec
    constraints: ConstraintsSpec | None = None
    assertions: list[AssertionSpec] = msgspec.field(default_factory=list)
    scoring: ScoringSpec | None = None
    expect: Expectation | None = None
    skip: bool | str | None = None


Retries = Annotated[int, msgspec.Meta(ge=0, le=100)]
"""How many times a run that met a fault of the infrastructure is tried again."""


class DefaultsSpec(RunsSettings, kw_only=True):
    timeout_seconds: TimeoutSeconds | None = None
    constraints: ConstraintsSpec | None = None
    scoring: ScoringSpec | None = None
    retries: Retries | None = None


class SuiteSpec(StrictSpec, kw_only=True):
    spellings: ClassVar[dict[str, str]] = {
        key: f"'defaults: {{{name}: ...}}' (or the key on a test)"
        for key, name in (
            ("runs", "runs_per_test"),
            ("runs_per_test", "runs_per_test"),
            ("scoring", "scoring"),
        )
    } | {"name": "'test_suite' (the suite's name)"}
    examples: ClassVar[dict[str, str]] = {
        "agents": "agents: [{name: my-agent, type: cli, command: [python3, agent.py]}] (a list in a "
        "suite; in atp.config.yaml, agents is a mapping by name)"
    }

    test_suite: NonEmpty
    version: str = "1.0"
    description: str | None = None
    defaults: DefaultsSpec = msgspec.field(default_factory=DefaultsSpec)
    agents: list[dict[str, Any]] = msgspec.field(default_factory=list)
    quarantine: list[NonEmpty] = msgspec.field(default_factory=list)
    """Ids of tests whose failures are reported but do not fail the run."""
    tests: list[TestSpec]


# --- the resolved suite, as the runner uses it ----------------------------------------------


class ScoringWeights(msgspec.Struct, frozen=True, kw_only=True):
    """The composite score's weights (design 7.3), after defaults."""

    quality_weight: float = 0.4
    completeness_weight: float = 0.3
    efficiency_weight: float = 0.2
    cost_weight: float = 0.1
    optimal_steps: int | None = None


class Assertion(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    config: Any
    name: str | None = None
    index: int = 0
    critical: bool = False
    """When its checks fail, the run fails, whatever its score."""
    negate: bool = False
    """Its checks' verdicts are reversed (:func:`atp.core.evaluation.negated`)."""


class Test(msgspec.Struct, frozen=True, kw_only=True):
    """A test with the suite's defaults applied."""

    __test__ = False

    id: str
    name: str
    description: str | None = None
    tags: tuple[str, ...] = ()
    task: Task
    constraints: Constraints
    assertions: tuple[Assertion, ...] = ()
    scoring: ScoringWeights = ScoringWeights()
    runs: int = 1
    """The runs of a fixed count (under ``auto``, the plan's ``max_runs``)."""
    auto: bool = False
    """``runs_per_test: auto``: run by :attr:`adaptive` rather than a fixed count."""
    adaptive: Adaptive = Adaptive()
    """The adaptive plan's settings, used when the test (or ``--runs=auto``) asks for it."""
    pass_rule: PassRule = ALL_RUNS
    skip: str | None = None
    workspace_fixture: Path | None = None
    """The folder (an absolute path) whose contents are copied into a fresh workspace for every
    run: the task's ``workspace_fixture``."""
    services: tuple[ServiceUse, ...] = ()
    """The services ATP runs next to the agent for this test's runs (the defaults' applied), in
    the order the suite names them."""
    expect: Expectation | None = None
    """The answer the test expects instead of ``completed`` (:mod:`atp.core.error_codes`)."""

    @property
    def timeout_seconds(self) -> int:
        return self.constraints.timeout_seconds or DEFAULT_TIMEOUT_SECONDS


class Suite(msgspec.Struct, kw_only=True):
    name: str
    version: str
    description: str | None = None
    path: Path | None = None
    tests: list[Test]
    agents: list[dict[str, Any]] = msgspec.field(default_factory=list)
    retries: int | None = None
    """The suite's ``defaults.retries``."""
    quarantine: tuple[str, ...] = ()
    """The ids of the tests whose failures do not fail the run (``quarantine:``)."""
    document: YamlDocument | None = None
    """The file, to locate errors in its ``agents`` (the nodes of the rest are not kept)."""


class Fallback(msgspec.Struct, kw_only=True):
    """Defaults from outside the suite (the config file), below the suite's own."""

    runs_per_test: int | Literal["auto"] | None = None
    timeout_seconds: int | None = None


def normalize_version(data: Any) -> None:
    """``version: 1.0`` (a YAML float) means ``"1.0"``."""
    if isinstance(data, dict) and isinstance(data.get("version"), (int, float)):
        data["version"] = str(data["version"])


def check_format_version(doc: YamlDocument, version: str, what: str) -> None:
    major = version.split(".", 1)[0]
    if not (major.isascii() and major.isdigit()) or major.lstrip("0") != str(SUITE_FORMAT_MAJOR):
        raise doc.error(
            f"{what} version {version!r} is not supported; ATP reads version {SUITE_FORMAT_MAJOR}.x",
            ("version",),
        )


def load_suite(
    path: Path,
    evaluators: Mapping[str, type[Evaluator]],
    fallback: Fallback | None = None,
    services: Mapping[str, type[Service]] | None = None,
) -> Suite:
    """Load and validate a suite file; every error names the file, the path and the line.

    ``services`` are the installed services whose keys tests may use; by default, those of the
    plugin manager ``evaluators`` comes from (a :class:`~atp.core.plugins.Registry`), else none.
    """
    # Memory: each test's YAML nodes are let go as soon as the test is read (``items_of``), and
    # the file's data once it is validated; a loaded suite keeps its Test Structs only.
    doc = YamlDocument.load(path, items_of=("tests",))
    return _suite(doc, _take_data(doc), evaluators, fallback, services)


def suite_from_document(
    doc: YamlDocument,
    evaluators: Mapping[str, type[Evaluator]],
    fallback: Fallback | None = None,
    services: Mapping[str, type[Service]] | None = None,
) -> Suite:
    return _suite(doc, doc.data, evaluators, fallback, services)


def services_of(evaluators: Mapping[str, Any]) -> Mapping[str, type[Service]]:
    """The services of the plugin manager a registry belongs to (none for a plain mapping)."""
    plugins = getattr(evaluators, "plugins", None)
    found = getattr(plugins, "services", None)
    return found if isinstance(found, Mapping) else {}


def reserved_test_keys() -> set[str]:
    """The keys a test or the suite's defaults has of its own: no service may use them."""
    return {*TestSpec.__struct_fields__, *DefaultsSpec.__struct_fields__}


def _take_data(doc: YamlDocument) -> Any:
    data, doc.data = doc.data, None
    return data


def _suite(
    doc: YamlDocument,
    data: Any,
    evaluators: Mapping[str, type[Evaluator]],
    fallback: Fallback | None,
    services: Mapping[str, type[Service]] | None = None,
) -> Suite:
    if not isinstance(data, dict):
        raise doc.error("a suite file must be a mapping with 'test_suite' and 'tests'")
    normalize_version(data)
    if services is None:
        services = services_of(evaluators)
    taken = _take_services(data, services) if services or getattr(services, "conflicts", None) else {}
    mistakes = Mistakes()
    try:
        spec = doc.convert(data, SuiteSpec)
    except SuiteError as exc:
        for each in exc.each():
            mistakes.add(_with_service_keys(doc, each, services))
        _raw_assertion_mistakes(doc, data.get("tests"), evaluators, mistakes)
        raise mistakes.error() from None
    del data  # load_suite's was the last reference: the data goes now
    check_format_version(doc, spec.version, "suite format")
    if not spec.tests:
        raise doc.error("the suite has no tests", ("tests",))
    fallback = fallback or Fallback()
    seen: dict[str, int] = {}
    tests: list[Test] = []
    weights: dict[tuple[tuple[str, Any], ...], ScoringWeights] = {}  # tests share equal weights
    default_uses = _service_uses(doc, ("defaults",), taken.pop(None, {}), services, {})
    for index, test in enumerate(spec.tests):
        if mistakes.full:
            break
        with mistakes.collecting():
            if test.id in seen:
                first = doc.line_of(("tests", seen[test.id], "id"))
                raise doc.error(
                    f"duplicate test id {test.id!r} (first used at line {first})", ("tests", index, "id")
                )
            seen[test.id] = index
            uses = _service_uses(doc, ("tests", index), taken.pop(index, {}), services, default_uses)
            try:
                resolved = _resolve_test(doc, index, test, spec.defaults, fallback, evaluators, weights)
            except SuiteError:  # each assertion's mistake, when they are what is wrong
                if not _assertion_mistakes(doc, ("tests", index), test.assertions, evaluators, mistakes):
                    raise
                continue
            if uses:
                resolved = msgspec.structs.replace(
                    resolved, services=tuple(u for u in uses.values() if u is not None)
                )
            tests.append(resolved)
    with mistakes.collecting():
        _check_agents(doc, spec.agents)
    for index, test_id in enumerate(spec.quarantine):
        if test_id not in seen:
            mistakes.add(
                doc.error(
                    f"the quarantine names test {test_id!r}, which the suite does not have",
                    ("quarantine", index),
                )
            )
    mistakes.raise_any()
    return Suite(
        name=spec.test_suite,
        version=spec.version,
        description=spec.description,
        path=doc.path,
        tests=tests,
        agents=spec.agents,
        retries=spec.defaults.retries,
        quarantine=tuple(dict.fromkeys(spec.quarantine)),
        # Errors found after loading are about the suite's agents: the rest of the file's
        # nodes and data are not kept (they took most of a loaded suite's memory).
        document=doc.keeping(("agents",)),
    )


def _check_agents(doc: YamlDocument, agents: list[dict[str, Any]]) -> None:
    """Each of a suite's agents has a name of its own."""
    agent_names: dict[str, int] = {}
    for index, agent in enumerate(agents):
        name = agent.get("name")
        if not isinstance(name, str) or not name:
            raise doc.error("an agent needs a 'name'", ("agents", index))
        if name in agent_names:
            first = doc.line_of(("agents", agent_names[name], "name"))
            raise doc.error(
                f"duplicate agent name {name!r} (first used at line {first})", ("agents", index, "name")
            )
        agent_names[name] = index


def _assertion_mistakes(
    doc: YamlDocument,
    at: tuple[PathPart, ...],
    assertions: Sequence[AssertionSpec | None],
    evaluators: Mapping[str, type[Evaluator]],
    mistakes: Mistakes,
) -> int:
    """Add the mistake of each of a test's assertions (its type, its ``config``) to
    ``mistakes`` (``None``: one whose structure is wrong, a mistake of the suite's); how many
    were added."""
    before = len(mistakes)
    for number, spec in enumerate(assertions):
        if spec is None:
            continue
        where = (*at, "assertions", number)
        with mistakes.collecting():
            evaluator = evaluators.get(spec.type)
            if evaluator is None:
                raise unknown_assertion_type(doc, evaluators, spec.type, (*where, "type"))
            doc.convert(spec.config, evaluator.Config, at=(*where, "config"))
    return len(mistakes) - before


def _raw_assertion_mistakes(
    doc: YamlDocument, tests: Any, evaluators: Mapping[str, type[Evaluator]], mistakes: Mistakes
) -> None:
    """The mistakes of the assertions of a suite that does not convert: those of each
    assertion written as one (the others are mistakes of the suite's structure)."""
    for index, test in enumerate(tests if isinstance(tests, list) else ()):
        found = test.get("assertions") if isinstance(test, dict) else None
        specs: list[AssertionSpec | None] = []
        for item in found if isinstance(found, list) else ():
            try:
                specs.append(msgspec.convert(mend(item, AssertionSpec, {}), AssertionSpec))
            except msgspec.ValidationError:
                specs.append(None)
        if mistakes.full:
            return
        _assertion_mistakes(doc, ("tests", index), specs, evaluators, mistakes)


def unknown_assertion_type(
    doc: YamlDocument, evaluators: Mapping[str, type[Evaluator]], name: str, at: tuple[PathPart, ...]
) -> SuiteError:
    """The error of an assertion type no evaluator has (raised at once when the plugins explain
    it: see :func:`unavailable`), with the closest known type."""
    unavailable(doc, evaluators, name, "assertion type", at)
    close = closest(name, list(evaluators))
    if close:
        return doc.error(f"unknown assertion type {name!r}; did you mean {close!r}?", at)
    known = ", ".join(sorted(evaluators)) or "none are installed"
    return doc.error(
        f"unknown assertion type {name!r}; no evaluator is registered for it (known: {known}). Is the "
        f"plugin that provides it installed? The built-in ones come with: pip install atp-evaluators",
        at,
    )


def _take_services(
    data: dict[Any, Any], services: Mapping[str, type[Service]]
) -> dict[int | None, dict[str, Any]]:
    """Take the service keys out of the suite's ``defaults`` (under ``None``) and out of each
    test (under its index), before the rest is checked against the suite's Structs; keys two
    plugins claim are taken too (their error is the plugins')."""
    keys = {*services, *getattr(services, "conflicts", {})}
    taken: dict[int | None, dict[str, Any]] = {}
    defaults = data.get("defaults")
    places: list[tuple[int | None, Any]] = [(None, defaults)]
    tests = data.get("tests")
    if isinstance(tests, list):
        places.extend(enumerate(tests))
    for where, mapping in places:
        if isinstance(mapping, dict):
            found = {key: mapping.pop(key) for key in keys if key in mapping}
            if found:
                taken[where] = found
    return taken


def _service_uses(
    doc: YamlDocument,
    at: tuple[PathPart, ...],
    values: dict[str, Any],
    services: Mapping[str, type[Service]],
    defaults: dict[str, ServiceUse | None],
) -> dict[str, ServiceUse | None]:
    """The services of a test (or of the defaults), each config validated where it is written:
    the defaults' with the test's values replacing them (``None``: the test does without)."""
    if not values:
        return defaults
    uses = dict(defaults)
    for key, value in values.items():
        where = (*at, key)
        if value is None:
            uses[key] = None
            continue
        service = services.get(key)
        if service is None:
            unavailable(doc, services, key, "service", where)
            raise doc.error(f"unknown service {key!r}", where)
        config = doc.convert(value, service.Config, at=where)
        try:
            service.check(config)
        except ServiceConfigError as exc:
            raise doc.error(exc.message, (*where, *exc.at)) from None
        except Exception as exc:
            raise PluginFailed(
                str(
                    doc.error(
                        f"service {key!r} could not check its configuration: {type(exc).__name__}: {exc}",
                        where,
                    )
                )
            ) from exc
        uses[key] = ServiceUse(key, config)
    return uses


def _with_service_keys(
    doc: YamlDocument, exc: SuiteError, services: Mapping[str, type[Service]]
) -> SuiteError:
    """An unknown key of a test or of the defaults that looks like a service's key (a typo of
    ``tools``) and like none of their own keys: the error names the service keys."""
    head, _, key = (exc.path or "").rpartition(".")
    if not exc.reason.startswith("unknown field") or not (head == "defaults" or _is_test_path(head)):
        return exc
    if exc.reason.endswith(("?", "keep one of them")):  # a hint already (atp.core.spelling)
        return exc
    meant = closest(key, list(services))
    if meant is None:
        return exc
    where = "the suite's defaults take" if head == "defaults" else "a test takes"
    return doc.error_cls(
        f"{exc.reason}; did you mean {meant!r}? Besides its own keys, {where} the keys of the "
        f"installed services ({', '.join(sorted(services))})",
        file=exc.file,
        path=exc.path,
        line=exc.line,
    )


def _is_test_path(path: str) -> bool:
    """Whether ``path`` is ``tests[N]``."""
    return path.startswith("tests[") and path.endswith("]") and path[6:-1].isdigit()


def unavailable(
    doc: YamlDocument, registry: Mapping[str, Any], key: str, what: str, at: tuple[PathPart, ...]
) -> None:
    """Raise the located error for a name the plugins explain (two claim it: a plugin error;
    the plugin that may provide it failed to load), or return for a plainly unknown name."""
    explain = getattr(registry, "missing", None)
    why = explain(key) if callable(explain) else None
    if why is None:
        return
    if key in getattr(registry, "conflicts", {}):
        raise PluginFailed(str(doc.error(f"{what} {key!r} cannot be used: {why}", at)))
    raise doc.error(f"unknown {what} {key!r}; {why}", at)


def _merge(base: msgspec.Struct | None, over: msgspec.Struct | None) -> dict[str, Any]:
    merged: dict[str, Any] = msgspec.structs.asdict(base) if base is not None else {}
    if over is not None:
        merged.update({k: v for k, v in msgspec.structs.asdict(over).items() if v is not None})
    return {k: v for k, v in merged.items() if v is not None}


def _resolve_test(
    doc: YamlDocument,
    index: int,
    test: TestSpec,
    defaults: DefaultsSpec,
    fallback: Fallback,
    evaluators: Mapping[str, type[Evaluator]],
    weights: dict[tuple[tuple[str, Any], ...], ScoringWeights],
) -> Test:
    constraints = _merge(defaults.constraints, test.constraints)
    if "timeout_seconds" not in constraints:
        timeout = defaults.timeout_seconds or fallback.timeout_seconds or DEFAULT_TIMEOUT_SECONDS
        constraints["timeout_seconds"] = timeout
    assertions = []
    for number, spec in enumerate(test.assertions):
        at = ("tests", index, "assertions", number)
        evaluator = evaluators.get(spec.type)
        if evaluator is None:
            raise unknown_assertion_type(doc, evaluators, spec.type, (*at, "type"))
        config = doc.convert(spec.config, evaluator.Config, at=(*at, "config"))
        given: dict[str, Any] = {"name": spec.name, "critical": spec.critical, "negate": spec.negate}
        assertions.append(Assertion(type=spec.type, config=config, index=number, **given))
    merged = _merge(defaults.scoring, test.scoring)
    key = tuple(merged.items())
    scoring = weights.get(key)
    if scoring is None:
        scoring = weights[key] = ScoringWeights(**merged)
    if not any(getattr(scoring, name) > 0 for name in WEIGHT_FIELDS):
        own = test.scoring is not None and any(
            getattr(test.scoring, name) is not None for name in WEIGHT_FIELDS
        )
        raise doc.error(
            "the scoring weights are all 0 (with the defaults applied); at least one must be above 0",
            ("tests", index, "scoring") if own else ("defaults", "scoring"),
        )
    task = test.task
    skip = test.skip
    fixture = None
    if task.workspace_fixture is not None:
        at_fixture: tuple[PathPart, ...] = ("tests", index, "task", "workspace_fixture")
        fixture = _workspace_fixture(doc, at_fixture, task.workspace_fixture)
    return Test(
        id=test.id,
        name=test.name or test.id,
        description=test.description,
        tags=tuple(test.tags),
        task=Task(
            description=task.description,
            input_data=task.input_data,
            expected_artifacts=[
                expected_artifact(e)
                if isinstance(e, str)
                else ExpectedArtifact(type=e.type, format=e.format, name=e.name)
                for e in task.expected_artifacts
            ]
            if task.expected_artifacts is not None
            else None,
        ),
        constraints=Constraints(**constraints),
        assertions=tuple(assertions),
        scoring=scoring,
        **_runs(doc, index, test, defaults, fallback),
        skip=(skip if isinstance(skip, str) else "skipped in the suite") if skip else None,
        workspace_fixture=fixture,
        expect=test.expect,
    )


def _runs(
    doc: YamlDocument, index: int, test: TestSpec, defaults: DefaultsSpec, fallback: Fallback
) -> dict[str, Any]:
    """A test's run count, adaptive plan and pass rule, its own values over the defaults'."""

    def pick(name: str) -> Any:
        own = getattr(test, name)
        return own if own is not None else getattr(defaults, name)

    runs = pick("runs_per_test") or fallback.runs_per_test or 1
    settings = {name: pick(name) for name in ("min_runs", "max_runs", "ci_width", "min_effect")}
    plan = Adaptive(**{name: value for name, value in settings.items() if value is not None})
    if plan.min_runs > plan.max_runs:
        at: tuple[PathPart, ...] = (
            ("tests", index, "min_runs") if test.min_runs is not None else ("defaults", "min_runs")
        )
        raise doc.error(f"min_runs ({plan.min_runs}) is more than max_runs ({plan.max_runs})", at)
    rule = pick("pass_rule")
    pass_rule = ALL_RUNS
    if isinstance(rule, PassRuleSpec):
        at = ("tests", index, "pass_rule") if test.pass_rule is not None else ("defaults", "pass_rule")
        given: dict[Literal["pass_rate", "min_score"], float] = {}
        if rule.pass_rate is not None:
            given["pass_rate"] = rule.pass_rate
        if rule.min_score is not None:
            given["min_score"] = rule.min_score
        if len(given) != 1:
            raise doc.error(
                "pass_rule takes 'all', {pass_rate: 0-1} or {min_score: 0-100}: exactly one of them",
                at,
            )
        ((kind, threshold),) = given.items()
        pass_rule = PassRule(rule=kind, threshold=threshold)
    auto = runs == "auto"
    return {"runs": plan.max_runs if auto else runs, "auto": auto, "adaptive": plan, "pass_rule": pass_rule}


def test_fingerprint(test: Test) -> str:
    """What a test asks and checks, hashed: its task, constraints, assertions and scoring (not
    its name, tags, run count or pass rule). A baseline keeps it, so a comparison can say that
    the test changed since."""
    import hashlib

    content = [
        test.task,
        test.constraints,
        [(a.type, a.config, a.name, a.critical, *(["negate"] if a.negate else [])) for a in test.assertions],
        test.scoring,
    ]
    if test.expect is not None:  # (only when set: the fingerprints of other tests stay as they were)
        content.append(test.expect)
    return hashlib.sha256(msgspec.json.encode(content)).hexdigest()[:16]


test_fingerprint.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def suite_fingerprint(tests: Iterable[Test]) -> str:
    """The tests' fingerprints, with their ids, hashed in id order."""
    import hashlib

    content = sorted((t.id, test_fingerprint(t)) for t in tests)
    return hashlib.sha256(msgspec.json.encode(content)).hexdigest()[:16]


def _workspace_fixture(doc: YamlDocument, at: tuple[PathPart, ...], value: str) -> Path:
    """The folder ``value`` names (relative to the suite file), as an absolute path."""
    if "\0" in value:
        raise doc.error("'workspace_fixture' holds a NUL byte (\\0), which no path can", at)
    path = Path(value)
    if not path.is_absolute():
        path = doc.path.parent / path
    try:
        path = path.resolve()
        is_dir = path.is_dir()
        exists = is_dir or path.exists()
    except (OSError, RuntimeError) as exc:  # a loop of symbolic links, a name too long
        raise doc.error(f"workspace_fixture {value!r} cannot be read: {exc}", at) from None
    if not is_dir:
        what = "is not a folder" if exists else "does not exist"
        raise doc.error(
            f"workspace_fixture {value!r} {what} (looked for {path}); it names a folder, relative "
            f"to the suite file, whose contents are copied into each run's workspace",
            at,
        )
    return path
