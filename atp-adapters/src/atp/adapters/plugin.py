"""The plugin of the atp-adapters distribution (entry point ``adapters`` in the ``atp`` group).

Light on purpose: the adapter modules are imported only when ATP asks for the registry.
"""

from typing import Any

from atp.core.hookspecs import hookimpl


@hookimpl
def atp_register_adapters(register: Any) -> None:
    from atp.adapters.cli import CliAdapter
    from atp.adapters.python import PythonAdapter

    register(CliAdapter)
    register(PythonAdapter)  # an agent that is a Python callable in the ATP process: type: python
    from atp.adapters.http import HttpAdapter
    from atp.adapters.websocket import WebSocketAdapter

    register(HttpAdapter)  # an agent behind HTTP: POST /execute, or Server-Sent Events: type: http
    register(WebSocketAdapter)  # an agent behind a WebSocket: type: websocket
    from atp.adapters.grpc import GrpcAdapter

    register(GrpcAdapter)  # an agent serving the gRPC service atp.v1.Agent: type: grpc
    from atp.adapters.container import ContainerAdapter

    register(ContainerAdapter)  # a Docker image, a container per run: type: container
    from atp.adapters.agent_interface import AgentInterfaceAdapter
    from atp.adapters.crewai import CrewAIAdapter
    from atp.adapters.langgraph import LangGraphAdapter
    from atp.adapters.term_sdk import TermSdkAdapter

    register(LangGraphAdapter)  # a LangGraph graph run in the ATP process: type: langgraph
    register(CrewAIAdapter)  # a CrewAI crew run in the ATP process: type: crewai
    register(TermSdkAdapter)  # a Term Challenge SDK 2.0 agent server: type: term-sdk
    register(AgentInterfaceAdapter)  # an Agent Interface Standard v1.0 agent: type: agent-interface


@hookimpl
def atp_register_services(register: Any) -> None:
    from atp.adapters.tools import ToolServer

    register(ToolServer)  # the mock tool server: tools: [...] on a test or the suite's defaults
