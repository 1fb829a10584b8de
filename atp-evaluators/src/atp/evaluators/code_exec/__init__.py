"""Evaluators that run code: ``pytest``, ``lint`` and ``custom_command``.

Each runs one command over what the agent produced and checks what it reports::

    - type: pytest
      config:
        path: solution.py                      # the agent's files to take (a glob; default: all)
        files: {test_solution.py: "from solution import add\\n..."}   # the suite's own files
        min_pass_rate: 1.0
    - type: lint
      config: {path: "*.py", select: [E, F], max_findings: 0}
    - type: custom_command
      config: {command: [python, -m, solution, --selftest], expect_exit: 0, regex: "^ok$"}

The package, one job a module:

- :mod:`.config`: what an assertion accepts (the config Structs and their checks) and the
  settings of ``pytest`` and ``lint``;
- :mod:`.folder`: **where a command runs**: a fresh temporary folder, what is copied into it
  (the workspace, the agent's artifacts, the suite's ``files``) within bounds, the checks of
  its paths, and its removal afterwards (without recursion, without following links);
- :mod:`.command`: **how it runs** and its **isolation**: the ``unshare`` probe (network and
  PID namespaces on Linux, else its process group only), the trampoline that sets its resource
  limits, its minimal environment, its record in the process ledger, killing it at its time
  limit, capturing its output;
- :mod:`.reports`: reading pytest's JUnit XML report and ruff's JSON report;
- :mod:`.evaluators`: the three evaluators, and the **time** a command may take (a share of the
  evaluator's own limit).

Nothing here is imported until ATP asks for the registry (atp-evaluators' plugin imports it
then).
"""

from atp.evaluators.code_exec.evaluators import CustomCommand, Lint, Pytest

__all__ = ["CustomCommand", "Lint", "Pytest"]
