"""The two errors of a capability: :class:`HostError`, what a host call
raises when it did not do what was asked, and :class:`Failure`, what the
capability raises to end its task with ``task_failed``."""

import json
from typing import Any, Optional

from componentize_py_types import Err
from wit_world.imports import types as _wit

#: The receipt's name of each WIT reason code.
_REASONS = {
    _wit.ReasonCode.TOOL_NOT_FOUND: "DENY_TOOL_NOT_FOUND",
    _wit.ReasonCode.ARGS_INVALID: "DENY_ARGS_INVALID",
    _wit.ReasonCode.BUDGET_EXCEEDED: "BUDGET_EXCEEDED",
    _wit.ReasonCode.SESSION_INVALID: "DELEGATION_INVALID",
    _wit.ReasonCode.ENVELOPE_HARD_LIMIT: "DENY_ENVELOPE_HARD_LIMIT",
    _wit.ReasonCode.PROHIBITED_ACTION: "DENY_PROHIBITED_ACTION",
    _wit.ReasonCode.THREAT_SIGNAL_DETECTED: "THREAT_SIGNAL_DETECTED",
    _wit.ReasonCode.IDENTITY_UNAUTHORIZED: "DENY_IDENTITY_UNAUTHORIZED",
    _wit.ReasonCode.FAIL_CLOSED_ERROR: "FAIL_CLOSED_ERROR",
}


class HostError(Exception):
    """A host call did not do what was asked.

    ``kind`` is ``"denied"`` (the host's policy refused the call; ``reason``
    is the code its receipt records, e.g. ``"DENY_TOOL_NOT_FOUND"``),
    ``"invalid_argument"`` (the arguments are malformed) or
    ``"unavailable"`` (the host could not complete an allowed call).
    """

    def __init__(self, kind: str, message: str, reason: Optional[str] = None) -> None:
        super().__init__(f"{kind} ({reason}): {message}" if reason else f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.reason = reason

    @classmethod
    def _from_wit(cls, error: Any) -> "HostError":
        if isinstance(error, _wit.HostError_Denied):
            return cls("denied", error.value.message, _REASONS[error.value.reason])
        if isinstance(error, _wit.HostError_InvalidArgument):
            return cls("invalid_argument", error.value)
        return cls("unavailable", error.value)


def _call(function: Any, *args: Any) -> Any:
    """Calls a WIT import, raising its error as a :class:`HostError`."""
    try:
        return function(*args)
    except Err as e:
        raise HostError._from_wit(e.value) from None


#: The L4 error codes a capability may fail with.
CODES = (
    "execution_error",
    "timeout",
    "safety_violation",
    "resource_unavailable",
    "internal_error",
    "input_error",
)


class Failure(Exception):
    """Ends the task with ``task_failed``: raise it from the capability.

    ``code`` is one of :data:`CODES`; ``phase`` and ``step`` say where it
    failed, ``recoverable`` whether resubmitting (from the last checkpoint)
    may succeed, ``partial_outputs`` (a dict) what was produced before.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        phase: Optional[str] = None,
        step: Optional[int] = None,
        recoverable: bool = False,
        partial_outputs: Optional[dict] = None,
    ) -> None:
        if code not in CODES:
            raise ValueError(f"{code!r} is not one of {', '.join(CODES)}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.phase = phase
        self.step = step
        self.recoverable = recoverable
        self.partial_outputs = partial_outputs

    @classmethod
    def execution(cls, message: str, **details: Any) -> "Failure":
        """``execution_error``."""
        return cls("execution_error", message, **details)

    @classmethod
    def input(cls, message: str, **details: Any) -> "Failure":
        """``input_error``: the inputs cannot be worked with."""
        return cls("input_error", message, **details)

    @classmethod
    def unavailable(cls, message: str, **details: Any) -> "Failure":
        """``resource_unavailable``: something needed is not there."""
        return cls("resource_unavailable", message, **details)

    @classmethod
    def internal(cls, message: str, **details: Any) -> "Failure":
        """``internal_error``: a bug of the capability."""
        return cls("internal_error", message, **details)

    @classmethod
    def from_host_error(cls, error: HostError) -> "Failure":
        """The failure a host error left uncaught ends the task with."""
        if error.kind == "denied":
            return cls.execution(f"host denied the call ({error.reason}): {error.message}")
        if error.kind == "invalid_argument":
            return cls.internal(error.message)
        return cls.unavailable(error.message)

    def _to_wit(self) -> "_wit.Failure":
        details = None
        if self.phase is not None or self.step is not None or self.recoverable:
            details = _wit.FailureDetails(
                phase=self.phase, step=self.step, recoverable=self.recoverable
            )
        partial = None if self.partial_outputs is None else json.dumps(self.partial_outputs)
        return _wit.Failure(
            code=_wit.ErrorCode[self.code.upper()],
            message=self.message,
            details=details,
            partial_outputs=partial,
        )
