"""Reading user YAML files with one-line errors; writing YAML and JSON atomically.

User files are read as a person means them: a key given twice in one mapping is an error
naming both lines (PyYAML would keep the last one silently), and ``1e-6`` is a number as
in YAML 1.2 (YAML 1.1, PyYAML's default, wants ``1.0e-6`` and reads ``1e-6`` as a string).
"""

from __future__ import annotations

import functools
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ccpo_lab.errors import UserError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
"""Arm, sweep and directory-forming names: no ``/``, no leading dot, no shell metacharacters
(matched whole: ``fullmatch``, so no trailing newline slips through as ``$`` would let it)."""


def check_name(value: Any, *, file: str | None, key: str) -> str:
    """Validate a name that becomes a path component; return it."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value) or ".." in value:
        raise UserError("invalid name", file=file, key=key, value=value,
                        valid="letters, digits, '_', '-', '.' (not first, no '..'), "
                              "at most 100 characters")
    return value


def read_yaml_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping.

    ``what`` names the kind of file in errors ("sweep file", "arm file"). Raises
    :class:`UserError` for a missing file, a directory, non-UTF-8 bytes, malformed YAML,
    or a top level that is not a mapping.
    """
    import yaml

    p = Path(path)
    if not p.exists():
        raise UserError(f"{what} not found", file=p)
    if p.is_dir():
        raise UserError(f"{what} is a directory, expected a YAML file", file=p)
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        bad = e.object[e.start:e.start + 1]
        raise UserError(f"{what} is not UTF-8 text (byte {e.start}: {bad!r})", file=p) from None
    except OSError as e:
        raise UserError(f"cannot read {what}: {e.strerror}", file=p) from None
    try:
        data = yaml.load(text, Loader=_user_loader())  # noqa: S506 - a SafeLoader subclass
    except DuplicateKeyError as e:
        raise UserError(str(e), file=p) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UserError(f"malformed YAML{where}: {problem}", file=p) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{what} must be a mapping at the top level", file=p,
                        value=type(data).__name__)
    for k in data:
        if not isinstance(k, str):
            raise UserError("keys must be strings", file=p, key=str(k), value=k)
    return data


class DuplicateKeyError(ValueError):
    """A key given twice in one mapping of a user file."""


_FLOAT_12 = re.compile(r"""^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                           |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                           |[0-9][0-9_]*[eE][-+]?[0-9]+
                           |\.(?:inf|Inf|INF)
                           |\.(?:nan|NaN|NAN))$""", re.X)
"""YAML 1.1's float pattern (PyYAML's) plus YAML 1.2's exponent without a dot (``1e-6``)."""


@functools.cache
def _user_loader() -> Any:
    """A ``yaml.SafeLoader`` subclass: duplicate keys refused, ``1e-6`` read as a float."""
    import yaml

    class UserLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class says so
                    break
                if first is not None:
                    raise DuplicateKeyError(f"duplicate key {key!r} at line {line} (first "
                                            f"at line {first}); each key may appear once")
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    # copy the resolvers before changing them: SafeLoader's are shared class state
    UserLoader.yaml_implicit_resolvers = {
        ch: [(tag, rx) for tag, rx in rules if tag != "tag:yaml.org,2002:float"]
        for ch, rules in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    UserLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12,
                                     list("-+0123456789."))
    return UserLoader


def read_json_object(path: str | Path) -> dict[str, Any]:
    """A JSON file holding an object, as a dict; {} when absent, unreadable or not an object.

    For files this program writes atomically (state, job and manifest files).
    """
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | Path, value: Any) -> None:
    """Write ``value`` as indented JSON atomically."""
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def dump_yaml(value: Any) -> str:
    """YAML text of a plain value (block style, keys in insertion order)."""
    import yaml

    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)
