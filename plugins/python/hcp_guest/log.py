"""The task's log: always granted, bounded by the manifest's
``limits.log_bytes`` (lines past the bound are dropped and counted).
Writing a line never fails and never blocks; the host escapes control
characters. ``print`` goes to the same log (as stdout)."""

from wit_world.imports import log as _wit

__all__ = ["write", "trace", "debug", "info", "warn", "error"]

_LEVELS = {
    "trace": _wit.Level.TRACE,
    "debug": _wit.Level.DEBUG,
    "info": _wit.Level.INFO,
    "warn": _wit.Level.WARN,
    "error": _wit.Level.ERROR,
}


def write(level: str, message: str, /, **fields: object) -> None:
    """Writes one line at ``level`` (``"trace"``, ``"debug"``, ``"info"``,
    ``"warn"`` or ``"error"``) with ``fields`` as key/value pairs, in the
    order given; values are written as ``str(value)``."""
    try:
        wit_level = _LEVELS[level]
    except KeyError:
        raise ValueError(f"{level!r} is not one of {', '.join(_LEVELS)}") from None
    pairs = [_wit.Field(key=k, value=str(v)) for k, v in fields.items()]
    _wit.write(wit_level, str(message), pairs)


def trace(message: str, /, **fields: object) -> None:
    """A ``trace`` line."""
    write("trace", message, **fields)


def debug(message: str, /, **fields: object) -> None:
    """A ``debug`` line."""
    write("debug", message, **fields)


def info(message: str, /, **fields: object) -> None:
    """An ``info`` line."""
    write("info", message, **fields)


def warn(message: str, /, **fields: object) -> None:
    """A ``warn`` line."""
    write("warn", message, **fields)


def error(message: str, /, **fields: object) -> None:
    """An ``error`` line."""
    write("error", message, **fields)
