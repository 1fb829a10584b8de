"""One way to prepare a run: the config's plugins, the suite, the tests selected, the agent, the
evaluators' settings checked, and the run's options resolved once.

Every command that runs a suite (``atp test``, ``atp compare``, ``atp baseline save``), the
commands that only need an agent (``atp validate``) and a cluster worker start here, so they
load the same things the same way: a wrong evaluator setting (an unset ``${VAR}``) fails before
any run wherever the runs are made. :func:`resolve_options` turns what was asked on the command
line (:class:`Asked`) into the run's :class:`~atp.core.options.RunOptions`: the command line
over the suite over the config.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from atp.core.config import Config, ResolvedAgent, agent_definitions, choose_agent, masker_for, resolve_agent
from atp.core.errors import ConfigError
from atp.core.options import RunOptions, RunParts
from atp.core.plan import RunPlan
from atp.core.plugins import Plugins
from atp.core.results import BaselineRef, Budget, Shard
from atp.core.retry import DEFAULT_BACKOFF_SECONDS
from atp.core.selection import TagFilter, select_tests
from atp.core.suite import Fallback, Suite, Test, load_suite

if TYPE_CHECKING:
    from atp.core.evaluator import Evaluator

__all__ = ["Asked", "Prepared", "load_plugins", "prepare", "resolve_options", "suite_of"]


class Asked(msgspec.Struct, frozen=True, kw_only=True):
    """What the command line asked of a run (``None``: not given; the suite's or the config's
    setting holds)."""

    runs: int | Literal["auto"] | None = None
    parallel: int | None = None
    fail_fast: bool = False
    retries: int | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    shard: str | None = None
    run_dir: str | None = None
    resume: str | None = None
    """A run directory to go on with (already found: see :func:`atp.core.resume.latest_unfinished`)."""
    force: bool = False
    baseline: BaselineRef | None = None
    parallel_from_workers: bool = False
    keep_workspaces: bool = False


class Prepared:
    """A suite ready to run against one agent."""

    def __init__(
        self,
        config: Config,
        plugins: Plugins,
        suite: Suite,
        tests: tuple[list[Test], int],
        agent: ResolvedAgent,
    ) -> None:
        """``tests``: the tests selected and how many the selection left out."""
        self.config = config
        self.plugins = plugins
        self.suite = suite
        self.selected, self.deselected = tests
        self.agent = agent
        self.evaluators = checked_evaluators(config, plugins, self.selected)
        """The evaluators the selected tests use, their settings checked."""
        self.masker = masker_for(config, agent, self.evaluators)

    def parts(self) -> RunParts:
        """What the run is made with: the masker, the evaluators' settings, the secrets."""
        return RunParts(
            masker=self.masker, evaluator_settings=self.config.evaluator_settings, secrets=self.config.secrets
        )

    def unknown_settings(self) -> list[str]:
        """Warnings for the config's evaluator settings that no installed evaluator reads."""
        loaded = self.plugins.evaluators
        known = set(loaded) | {cls.settings_name() for cls in loaded.values()}
        unknown = sorted(set(self.config.spec.evaluators) - known)
        if not unknown:
            return []
        return [
            f"the config has settings for {', '.join(map(repr, unknown))}, which no installed "
            f"evaluator checks (installed: {', '.join(sorted(loaded))})"
        ]


def load_plugins(config: Config, plugins: Plugins | None = None) -> Plugins:
    """The installed plugins (or ``plugins``) with the config's own (its ``plugins:``) loaded."""
    loaded = plugins if plugins is not None else Plugins()
    entries = config.plugin_entries()
    if entries:
        loaded.load_local(entries)
    return loaded


def suite_of(config: Config, plugins: Plugins, path: Path) -> Suite:
    """The suite at ``path``, with the config's defaults for what it does not say."""
    defaults = config.spec.defaults
    return load_suite(
        path,
        plugins.evaluators,
        Fallback(runs_per_test=defaults.runs_per_test, timeout_seconds=defaults.timeout_seconds),
        plugins.services,
    )


def checked_evaluators(config: Config, plugins: Plugins, tests: Iterable[Test]) -> list[type[Evaluator]]:
    """The evaluators ``tests`` use, each one's settings checked (an unset ``${VAR}`` or a wrong
    setting fails before any run)."""
    used = [plugins.evaluator(t) for t in sorted({a.type for test in tests for a in test.assertions})]
    for evaluator_cls in used:
        config.check_evaluator_settings(evaluator_cls.settings_name(), evaluator_cls.Settings)
    return used


def prepare(
    config: Config,
    plugins: Plugins,
    suite: Suite,
    agent_name: str | None,
    selection: tuple[Sequence[str], Sequence[str]] | None = None,
) -> Prepared:
    """``suite`` ready to run against the agent ``agent_name`` (the only one when ``None``):
    the tests ``selection`` picks (tag expressions and test ids; every test when ``None``)."""
    if selection is None:
        tests: tuple[list[Test], int] = (list(suite.tests), 0)
    else:
        tags, test_ids = selection
        tests = select_tests(suite.tests, TagFilter.parse(tags) if tags else None, list(test_ids))
        if not tests[0]:
            known = sorted({tag for t in suite.tests for tag in t.tags})
            raise ConfigError(
                f"no test in {suite.path} matches the selection (tags in the suite: {', '.join(known) or 'none'})"
            )
    agent = resolve_agent(
        choose_agent(agent_definitions(config, suite), agent_name, config), plugins.adapters
    )
    return Prepared(config, plugins, suite, tests, agent)


def resolve_options(prepared: Prepared, asked: Asked) -> RunOptions:
    """The run's options: the command line over the suite over the config."""
    config, suite = prepared.config, prepared.suite
    defaults, limits = config.spec.defaults, config.spec.limits
    run_root = Path(asked.run_dir) if asked.run_dir is not None else config.run_dir
    options = RunOptions(
        run_root=str(run_root),
        parallel=asked.parallel or defaults.parallel_workers or 1,
        parallel_from_workers=asked.parallel_from_workers,
        runs=asked.runs,
        deselected=prepared.deselected,
        fail_fast=asked.fail_fast,
        max_events=limits.max_events,
        max_event_bytes=limits.max_event_bytes,
        max_log_bytes=limits.max_log_bytes,
        retries=next((v for v in (asked.retries, suite.retries, defaults.retries) if v is not None), 0),
        retry_backoff=defaults.retry_backoff_seconds or DEFAULT_BACKOFF_SECONDS,
        budget=_budget(config, asked),
        rate_limit=prepared.agent.rate_limit,
        quarantine=frozenset(suite.quarantine)
        | frozenset(config.quarantined() & {t.id for t in suite.tests}),
        resume=asked.resume,
        force=asked.force,
        baseline_ref=asked.baseline,
        keep_workspaces=asked.keep_workspaces,
    )
    if asked.shard is not None:
        options = _sharded(options, prepared.selected, asked.shard, run_root, suite.name)
    return options


def _budget(config: Config, asked: Asked) -> Budget | None:
    cost = asked.max_cost_usd if asked.max_cost_usd is not None else config.spec.budget.max_cost_usd
    tokens = asked.max_tokens if asked.max_tokens is not None else config.spec.budget.max_tokens
    if cost is None and tokens is None:
        return None
    return Budget(max_cost_usd=cost, max_tokens=tokens)


def _sharded(options: RunOptions, selected: list[Test], value: str, run_root: Path, suite: str) -> RunOptions:
    """``options`` for the share ``value`` (``K/N``) of the runs, balanced by the durations of
    the suite's last whole run (by count without one)."""
    from atp.core.shard import durations_basis, parse_shard, partition

    index, count = parse_shard(value)
    basis, durations = durations_basis(run_root, suite)
    plan = RunPlan(options.runs)
    shares = partition(selected, count, plan.runs_of, plan.plan_of, durations)
    shard = Shard(index=index, count=count, basis=basis, order=[t.id for t in selected])
    return msgspec.structs.replace(options, shard=shard, shares=shares[index - 1])
