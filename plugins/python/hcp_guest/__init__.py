"""hcp_guest: the guest SDK for HCP capabilities written in Python.

A capability is one plain function from the task and its `inputs` (a dict)
to its `outputs` (anything `json.dumps` takes), exported with
:func:`capability` under the name componentize-py looks for::

    import hcp_guest
    from hcp_guest import Failure, Task, log

    def greet(task: Task, inputs: dict) -> dict:
        name = inputs.get("name")
        if not name:
            raise Failure.input("inputs.name is empty")
        log.info("greeting", name=name)
        return {"greeting": f"hello, {name}"}

    WitWorld = hcp_guest.capability(greet)

Build it with componentize-py against the world ``basic`` of the WIT
package this host runs (``wit/``), from the directory holding ``app.py``
and ``hcp_guest/``::

    componentize-py -d wit -w basic componentize app -o app.wasm

What the SDK gives: the task (:class:`Task`, its ``inputs`` already
parsed), the host interfaces every capability is granted (:mod:`.log`,
:mod:`.artifacts`, :mod:`.checkpoints`), :func:`warning`, and the
translation of what the function returns or raises into the WIT result:
a returned value is ``task_completed`` (once the host checked it against
the manifest's ``output_schema``), a raised :class:`Failure` is
``task_failed`` with its code, a :class:`HostError` left uncaught is
``task_failed`` as well (a denial as ``execution_error`` naming its
reason). Any other exception is not caught: the component traps, its
traceback goes to the task log, and the host answers ``task_failed`` with
``internal_error``, as for a Rust panic.

What the SDK must never do: reach for anything the manifest did not grant.
It wraps the ``hcp:capability`` interfaces only. Files and sockets are the
author's explicit choice through Python's own ``open`` and ``socket``; the
host links them inert when the manifest grants no directory or destination
(no directory to open, every socket denied by its policy and recorded).
"""

import json
from typing import Any, Callable, List, Optional

from componentize_py_types import Err

import wit_world
from wit_world.imports import types as _wit

from ._errors import Failure, HostError
from . import artifacts, checkpoints, log

__all__ = [
    "Failure",
    "HostError",
    "Task",
    "artifacts",
    "capability",
    "checkpoints",
    "log",
    "warning",
]


class Task:
    """The admitted task, as the host handed it to the capability.

    Everything here has passed the admission gate: the caller was
    authenticated, ``inputs`` matched the manifest's ``input_schema``.
    """

    def __init__(self, wit: "_wit.Task") -> None:
        #: Host-assigned task identifier.
        self.task_id: str = wit.task_id
        #: Session opened by the admission gate.
        self.session_id: str = wit.session_id
        #: Capability name (the manifest's ``name``).
        self.capability: str = wit.capability
        #: Capability version being run.
        self.capability_version: str = wit.capability_version
        #: Authenticated caller.
        self.caller_id: str = wit.caller_id
        #: The caller's natural-language intent. Untrusted text: never
        #: treat it as instructions.
        self.intent: str = wit.intent
        #: The task's ``inputs`` object, parsed.
        self.inputs: dict = _object(wit.inputs, "inputs")
        #: The task's ``constraints`` object, parsed (may be empty).
        self.constraints: dict = _object(wit.constraints, "constraints")
        #: The task's ``context``, parsed, if the caller sent one (never
        #: validated by the host).
        self.context: Optional[Any] = (
            None if wit.context is None else json.loads(wit.context)
        )
        #: The checkpoint to resume from when the task was resubmitted
        #: (load it with :func:`hcp_guest.checkpoints.load`).
        self.resume_from: Optional[str] = wit.resume_from
        #: Approved risk level, ``"R1"`` to ``"R5"``.
        self.risk_level: str = wit.risk_level.name
        #: Approved data classification, ``"T1"`` to ``"T4"``.
        self.data_classification: str = wit.data_classification.name
        #: Milliseconds left before the host stops the task.
        self.deadline_ms: int = wit.deadline_ms

    def __repr__(self) -> str:
        return f"Task({self.task_id!r}, {self.capability}@{self.capability_version})"


def _object(text: str, what: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise Failure.input(f"{what} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise Failure.input(f"{what} is not a JSON object")
    return value


_WARNINGS: List[str] = []


def warning(message: str) -> None:
    """Records a condition that did not stop the task; the host reports it
    in ``execution_summary.warnings`` of ``task_completed``."""
    _WARNINGS.append(str(message))


def _run(function: Callable[[Task, dict], Any], wit_task: "_wit.Task") -> "_wit.Outcome":
    _WARNINGS.clear()
    try:
        task = Task(wit_task)
        outputs = function(task, task.inputs)
    except Failure as failure:
        raise Err(failure._to_wit())
    except HostError as error:
        raise Err(Failure.from_host_error(error)._to_wit())
    try:
        text = json.dumps(outputs)
    except (TypeError, ValueError) as e:
        raise Err(Failure.internal(f"the outputs are not JSON: {e}")._to_wit())
    return _wit.Outcome(outputs=text, warnings=list(_WARNINGS))


def capability(function: Callable[[Task, dict], Any]) -> type:
    """Makes ``function(task, inputs) -> outputs`` the capability's ``run``.

    Returns the class componentize-py exports: bind it to the name
    ``WitWorld`` in the module you build (``WitWorld = capability(f)``).
    """

    class WitWorld(wit_world.WitWorld):
        def run(self, task: "_wit.Task") -> "_wit.Outcome":
            return _run(function, task)

    WitWorld.__doc__ = f"The capability world, running {function.__name__}."
    return WitWorld
