# ruff: noqa
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ExecuteRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: bytes
    def __init__(self, request: _Optional[bytes] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ("response", "events")
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    response: bytes
    events: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, response: _Optional[bytes] = ..., events: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ExecuteStreamItem(_message.Message):
    __slots__ = ("event", "response")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    event: bytes
    response: bytes
    def __init__(self, event: _Optional[bytes] = ..., response: _Optional[bytes] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthResponse(_message.Message):
    __slots__ = ("serving", "protocol_version")
    SERVING_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    serving: bool
    protocol_version: str
    def __init__(self, serving: _Optional[bool] = ..., protocol_version: _Optional[str] = ...) -> None: ...
