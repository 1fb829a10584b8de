"""``atp judge``: commands of the LLM judge (added to ``atp`` by atp-evaluators' plugin).

Light on purpose: Click only; the judge is imported when a command runs. Its float options are
``atp.cli.app.BoundedFloat``, as every ``atp`` command's (this module is imported only by
``atp_register_commands``, when ``atp`` builds its command line).
"""

from __future__ import annotations

from pathlib import Path

import click

from atp.cli.app import BoundedFloat


@click.group("judge")
def judge_group() -> None:
    """The LLM judge (llm_eval): measure how well it agrees with people."""


@judge_group.command("calibrate")
@click.option(
    "--labels",
    "labels_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="A YAML file of examples labelled by people (docs/llm-judge.md).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Config file (default: atp.config.yaml in the working directory, if any); its evaluators.llm_judge and secrets are used.",
)
@click.option(
    "--threshold",
    type=BoundedFloat(0.0, 1.0),
    help="The pass mark (default: the labels file's, else evaluators.llm_judge.threshold, 0.7).",
)
@click.option(
    "--samples",
    type=click.IntRange(1, 20),
    help="Judgements per example (default: evaluators.llm_judge.samples).",
)
@click.option(
    "--output",
    type=click.Choice(["console", "json"]),
    default="console",
    show_default=True,
    help="The report as text or as JSON.",
)
@click.option(
    "--show",
    type=click.IntRange(0, 1000),
    default=5,
    show_default=True,
    help="How many of the largest disagreements to list.",
)
@click.option(
    "--min-kappa",
    type=BoundedFloat(-1.0, 1.0),
    help="Exit 1 when Cohen's kappa is below this (or undefined).",
)
@click.option(
    "--no-judge-cache", is_flag=True, help="Ask the judge again instead of reusing cached judgements."
)
def calibrate_command(
    labels_path: Path,
    config_path: Path | None,
    threshold: float | None,
    samples: int | None,
    output: str,
    show: int,
    min_kappa: float | None,
    no_judge_cache: bool,
) -> int:
    """Judge the labelled examples and report agreement with people: Cohen's kappa on
    pass/fail at the threshold, Spearman's correlation on scores, confusion counts and the
    largest disagreements. Exit 0, or 1 when --min-kappa is not met; 2 for a usage, labels or
    config error."""
    import os

    import anyio

    from atp.core.config import load_config
    from atp.core.errors import ConfigError
    from atp.evaluators.judge.backend import find_key
    from atp.evaluators.judge.calibrate import calibrate, load_labels, render_text, report_json
    from atp.evaluators.judge.evaluator import SETTINGS_KEY
    from atp.evaluators.judge.judge import Judge, JudgeSettings, backend_of, read_settings

    config = load_config(config_path)
    config.check_evaluator_settings(SETTINGS_KEY, JudgeSettings)
    settings = config.evaluator_settings(SETTINGS_KEY)
    if no_judge_cache:
        settings["cache"] = False
    judge_settings = read_settings(settings)
    backend = backend_of(judge_settings)
    key = find_key(backend, judge_settings.api_key, config.secrets, os.environ) if backend.needs_key else None
    if backend.needs_key and not key:
        raise ConfigError(
            f"calibration asks the judge, which needs an API key: set {backend.key_variable or 'one'}, "
            f"secrets.{backend.key_secret or 'anthropic_api_key'} or evaluators.{SETTINGS_KEY}.api_key"
        )
    labels = load_labels(labels_path)
    report = anyio.run(
        lambda: calibrate(
            labels, Judge(judge_settings, backend, key), threshold=threshold, samples=samples, show=show
        )
    )
    if output == "json":
        click.echo(report_json(report).decode(), nl=False)
    else:
        click.echo(render_text(report))
    if min_kappa is not None and report.errors:
        click.echo(
            f"atp: {len(report.errors)} of {report.examples} examples could not be judged; --min-kappa needs them all",
            err=True,
        )
        return 1
    if min_kappa is not None:
        kappa = report.overall.kappa
        if kappa is None or kappa < min_kappa:
            found = "is undefined (one answer throughout)" if kappa is None else f"{kappa:.2f} is below"
            click.echo(
                f"atp: Cohen's kappa {found}; --min-kappa={min_kappa:g} asks for at least {min_kappa:g}",
                err=True,
            )
            return 1
    return 0
