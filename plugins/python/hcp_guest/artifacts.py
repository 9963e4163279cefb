"""Artifacts: files a task produces, referenced by ``hcp://`` URI in its
answer. Always granted, within the manifest's ``limits.artifacts`` and
``limits.artifact_bytes``."""

from typing import Union

from wit_world.imports import artifacts as _wit

from ._errors import _call

__all__ = ["create"]


def create(name: str, mime_type: str, content: Union[bytes, str]) -> str:
    """Creates artifact ``name`` (1 to 128 characters of ``[A-Za-z0-9._-]``,
    not starting with ``.``) of media type ``mime_type`` and returns its
    URI. ``str`` content is stored as UTF-8.

    Raises :class:`hcp_guest.HostError`: ``invalid_argument`` for a bad
    name or media type or a duplicate, ``denied`` (``BUDGET_EXCEEDED``)
    past the budget.
    """
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    return _call(_wit.create, name, mime_type, data)
