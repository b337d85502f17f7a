"""Hydra override forms beyond ``key=value``: sweeps (``a,b``, ``choice``, ``range``, ...)
and deletes (``~key``).

ccpo-lab runs one sweep per command and expands arms x seeds itself, so Hydra's sweep forms
(which ask Hydra for one job per value, ``--multirun``) are read as lists: on a list-valued
key (``seeds``, ``arms``, any schema field typed ``list``) ``a,b``, ``choice(a,b)`` and
``range(start, stop[, step])`` give that list. Any other sweep form, and any sweep on a key
taking one value, is refused with what to write instead. ``~key`` (``~key=value``: only
when the sweep file sets it to that value) resets a key as if the sweep file did not set it.
"""

from __future__ import annotations

import itertools
import re
import types
import typing
from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from ccpo_lab.config.yamlio import MAX_YAML_VALUES
from ccpo_lab.errors import UserError, short_repr

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override

COMMAND_LINE = "command line"
LIST_FORMS = ("a,b", "choice", "range")
"""Sweep forms that give a list-valued key its list."""
_HEAD = re.compile(r"\s*([A-Za-z_]\w*)\s*\(")


def is_list_type(tp: Any) -> bool:
    """Whether schema type ``tp`` is a list (``list[int]``, ``list[str] | None``)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return any(is_list_type(a) for a in typing.get_args(tp) if a is not type(None))
    return tp is list or typing.get_origin(tp) is list


def sweep_form(ov: Override) -> str:
    """The sweep's outermost form: ``a,b`` (Hydra's comma sweep) or its function's name
    (``choice``, ``range``, ``sort``, ``shuffle``, ``tag``, ``glob``, ``interval``)."""
    head = _HEAD.match(ov.get_value_string())
    return head.group(1) if head else "a,b"


def as_element(key: str, ov: Override, text: str, field_type: Any) -> str:
    """The override to give Hydra for ``ov`` (``text`` as given, ``+`` stripped): itself
    when it sets one value; a list-giving sweep on a list-valued key as ``key=[...]``;
    anything else refused, saying what to write."""
    if not ov.is_sweep_override():
        return text
    form, values = sweep_form(ov), _values(key, ov)
    if is_list_type(field_type) and form in LIST_FORMS and values is not None:
        return f"{key}=[{','.join(values)}]"
    given = ov.input_line or text
    if is_list_type(field_type):
        raise UserError(_list_advice(key, form, values), file=COMMAND_LINE, key=key,
                        value=given)
    raise UserError(_scalar_advice(key, form, values, field_type), file=COMMAND_LINE,
                    key=key, value=given)


def _values(key: str, ov: Override) -> list[str] | None:
    """The sweep's values as override text, in the order written (None: ``glob`` and
    ``interval``, which Hydra cannot list without a config group or an optimizer)."""
    from hydra.core.override_parser.types import ChoiceSweep, RangeSweep, Transformer

    sweep = ov.value()
    items: Iterable[Any]
    if isinstance(sweep, ChoiceSweep):
        items = sweep.list
    elif isinstance(sweep, RangeSweep):
        items = itertools.islice(sweep.range(), MAX_YAML_VALUES + 1)
    else:
        return None
    out = [Transformer.str(x) for x in items]
    if len(out) > MAX_YAML_VALUES:
        raise UserError(f"gives more than {MAX_YAML_VALUES:,} values", file=COMMAND_LINE,
                        key=key, value=ov.input_line)
    return out


def _list_advice(key: str, form: str, values: list[str] | None) -> str:
    """Why sweep ``form`` cannot set list-valued ``key``, and what to write."""
    listed = f"{key}=[{','.join(values)}]" if values is not None else f"{key}=[A,B,...]"
    why = {
        "shuffle": "shuffle(...) asks Hydra for the jobs in random order",
        "glob": "glob(...) picks the options of a config group by name, and "
                f"{key} is not a group",
        "interval": "interval(...) is a continuous search space for an optimizing sweeper",
        "tag": "tag(...) labels a sweep for a sweeper",
    }.get(form, f"{form}(...) is a Hydra multirun sweep")
    return (f"{why}; ccpo-lab expands arms x seeds itself from lists: write {listed} "
            "(the values in the order wanted)")


def _scalar_advice(key: str, form: str, values: list[str] | None, field_type: Any) -> str:
    """Why sweep ``form`` cannot set ``key``, which takes one value, and what to write."""
    one = f"{key}={values[0]}" if values else f"{key}=VALUE"
    if form == "range":
        return f"range(...) gives several values; {key} takes one: write {one}"
    if form in ("interval", "glob"):
        return (f"{form}(...) is a search space of Hydra's sweepers; {key} takes one value: "
                f"write {one}")
    what = "a,b" if form == "a,b" else f"{form}(...)"
    hint = ""
    if key.startswith("protocol."):
        hint = (f"; to compare values, give each its own arm (training: "
                f"{{{key.removeprefix('protocol.')}: ...}}) and list the arms in arms=[...]")
    elif form == "a,b" and field_type is str:
        hint = f"; quote it ({key}='{','.join(values or [])}') for one string with commas"
    return (f"{what} is Hydra's multirun sweep (one job per value); ccpo-lab runs one sweep "
            f"per command and {key} takes one value: write {one}, one command per value{hint}")


def reset(raw: MutableMapping[str, Any], deletes: Iterable[tuple[str, Override]]) -> None:
    """Apply each ``~key`` to a sweep file's mapping: ``key`` is removed, as if the file
    did not set it (its schema default applies; ``~launcher.kind`` resets the whole
    launcher section, whose keys belong to its kind). ``~key=value`` is refused when the
    file sets ``key`` to another value."""
    for key, ov in deletes:
        parts = ["launcher"] if key in ("launcher", "launcher.kind") else key.split(".")
        node: Any = raw
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, MutableMapping) else None
        if not isinstance(node, MutableMapping) or parts[-1] not in node:
            continue  # the file does not set it: already its default
        if ov.value() is not None:
            _check_same(key, ov, node[parts[-1]])
        del node[parts[-1]]


def _check_same(key: str, ov: Override, current: Any) -> None:
    """Refuse ``~key=value`` when the file sets ``key`` to another value."""
    if ov.value() != current:
        raise UserError(f"~{key}=VALUE resets {key} only when the sweep file sets it to "
                        f"VALUE, and it sets {short_repr(current)}: write ~{key} to reset it",
                        file=COMMAND_LINE, key=key, value=ov.input_line)
