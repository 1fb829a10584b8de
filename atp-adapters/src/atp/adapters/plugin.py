"""The plugin of the atp-adapters distribution (entry point ``adapters`` in the ``atp`` group).

Light on purpose: the adapter modules are imported only when ATP asks for the registry.
"""

from typing import Any

from atp.core.hookspecs import hookimpl


@hookimpl
def atp_register_adapters(register: Any) -> None:
    from atp.adapters.cli import CliAdapter
    from atp.core.testing import FunctionAdapter

    register(CliAdapter)
    register(FunctionAdapter)  # an agent that is a Python callable: type: function
