"""The plugin of the atp-evaluators distribution (entry point ``evaluators`` in the ``atp`` group).

Light on purpose: the evaluator modules are imported only when ATP asks for the registry.
"""

from typing import Any

from atp.core.hookspecs import hookimpl


@hookimpl
def atp_register_evaluators(register: Any) -> None:
    from atp.evaluators import artifact, behavior, code_exec, equals, inline, limits, tools
    from atp.evaluators.judge import evaluator as llm_eval

    for evaluator in (
        artifact.ArtifactExists,
        artifact.Contains,
        artifact.Schema,
        artifact.Sections,
        equals.Equals,
        inline.PythonCheck,
        behavior.MustUseTools,
        behavior.ForbiddenTools,
        behavior.MinToolCalls,
        behavior.MaxToolCalls,
        behavior.MaxSteps,
        behavior.NoErrors,
        behavior.Behavior,
        limits.Latency,
        limits.Cost,
        tools.ToolCalledWith,
        tools.ToolSequence,
        code_exec.Pytest,
        code_exec.Lint,
        code_exec.CustomCommand,
        llm_eval.LlmEval,
    ):
        register(evaluator)


@hookimpl
def atp_register_commands(cli: Any) -> None:
    from atp.evaluators.judge.command import judge_group

    cli.add_command(judge_group)
