"""Checkpoints: saved progress a resubmitted task resumes from (its
``Task.resume_from``). Always granted, within the manifest's
``limits.checkpoints`` and ``limits.checkpoint_bytes``."""

import json
from typing import Any

from wit_world.imports import checkpoints as _wit

from ._errors import HostError, _call

__all__ = ["save", "load"]


def save(label: str, state: Any) -> str:
    """Saves ``state`` (anything ``json.dumps`` takes) under phase ``label``
    (1 to 64 characters of ``[A-Za-z0-9._-]``); returns the checkpoint's
    id (``ckpt-001``, ``ckpt-002``, ...).

    Raises :class:`hcp_guest.HostError`: ``invalid_argument`` for a bad
    label or state that is not JSON, ``denied`` (``BUDGET_EXCEEDED``) past
    the budget.
    """
    try:
        data = json.dumps(state).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise HostError("invalid_argument", f"checkpoint state: {e}") from None
    return _call(_wit.save, label, data)


def load(checkpoint_id: str) -> Any:
    """Loads the JSON state of checkpoint ``checkpoint_id``: one of this
    task's, or the one named by ``Task.resume_from``.

    Raises :class:`hcp_guest.HostError` (``invalid_argument``) when there
    is no such checkpoint or its state is not JSON.
    """
    data = _call(_wit.load, checkpoint_id)
    try:
        return json.loads(data)
    except ValueError as e:
        raise HostError("invalid_argument", f"checkpoint {checkpoint_id}: {e}") from None
