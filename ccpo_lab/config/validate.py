"""Turn plain user values into frozen schema dataclasses, with one-line errors.

Unknown keys list the valid keys; wrong types name the expected type. Error key paths are
dotted (``protocol.lr``) and name the file the value came from.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ccpo_lab.errors import UserError

T = TypeVar("T")


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def field_names(cls: Any) -> list[str]:
    """Names of a dataclass's fields, in declaration order."""
    return [f.name for f in dataclasses.fields(cls)]


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(tp))
        return f"{origin.__name__}[{args}]"
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    return getattr(tp, "__name__", str(tp))


def build(cls: type[T], data: Any, *, key: str = "", where: Callable[[str], str | None]) -> T:
    """Validate ``data`` (a mapping) against dataclass ``cls`` and construct it.

    ``where(key_path)`` returns the file (or "command line") that a key came from.
    """
    if not isinstance(data, Mapping):
        raise UserError("expected a mapping", file=where(key), key=key or None,
                        value=data, valid=field_names(cls))
    valid = field_names(cls)
    for k in data:
        if k not in valid:
            path = f"{key}.{k}" if key else str(k)
            raise UserError("unknown key", file=where(path), key=path, valid=valid)
    kwargs = {}
    schema: Any = cls  # a dataclass type
    hints = _hints(schema)
    for f in dataclasses.fields(schema):
        if f.name in data:
            path = f"{key}.{f.name}" if key else f.name
            if not f.init:  # fixed by the class (a launcher's ``kind``): only its own value
                if data[f.name] != f.default:
                    raise UserError("fixed by the schema", file=where(path), key=path,
                                    value=data[f.name], valid=[f.default])
                continue
            kwargs[f.name] = coerce(data[f.name], hints[f.name], key=path, where=where)
    return cls(**kwargs)


def coerce(value: Any, tp: Any, *, key: str, where: Callable[[str], str | None]) -> Any:
    """Check ``value`` against type annotation ``tp``; return it normalised."""

    def bad(msg: str = "wrong type") -> UserError:
        return UserError(f"{msg}, expected {_type_name(tp)}", file=where(key), key=key,
                         value=value)

    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return coerce(value, a, key=key, where=where)
            except UserError:
                continue
        raise bad()
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build(tp, value, key=key, where=where)
    if tp is Any:
        return value
    if origin is list:
        if not isinstance(value, list | tuple):
            raise bad()
        (inner,) = typing.get_args(tp) or (Any,)
        return [coerce(v, inner, key=f"{key}[{i}]", where=where) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise bad()
        return {str(k): v for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise bad()
        return value
    if tp is int:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, int):
            raise bad()
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad()
        if not math.isfinite(float(value)):
            raise bad("not a finite number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise bad()
        return value
    raise TypeError(f"unsupported schema type {tp!r} at {key}")


def check_range(value: float, *, low: float | None = None, high: float | None = None,
                low_open: bool = False, high_open: bool = False, key: str,
                file: str | None) -> None:
    """Raise :class:`UserError` unless ``value`` lies in the given range."""
    ok = True
    if low is not None:
        ok &= value > low if low_open else value >= low
    if high is not None:
        ok &= value < high if high_open else value <= high
    if not ok:
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        left = "(" if low_open or low is None else "["
        right = ")" if high_open or high is None else "]"
        valid = f"{left}{lo}, {hi}{right}"
        raise UserError("out of range", file=file, key=key, value=value, valid=valid)
