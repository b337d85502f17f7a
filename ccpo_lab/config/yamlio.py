"""Reading user YAML files with one-line errors; writing YAML and JSON atomically.

User files are read as a person means them, and as the YAML readers used beside
ccpo-lab read them (PyYAML and Hydra/OmegaConf, which follow YAML 1.1; ruamel.yaml, which
follows YAML 1.2):

- a key given twice in one mapping is an error naming both lines (PyYAML would keep the
  last one silently); merge keys (``<<: *base``) merge, and a key given beside them
  replaces the merged one, as in every reader;
- ``1e-6`` is a number, as in YAML 1.2 and OmegaConf (PyYAML alone reads it as text);
- a plain value that YAML 1.1 and 1.2 readers read differently is refused with both
  readings and the way to write it (:func:`_ambiguous`): ``yes``/``no``/``on``/``off``
  (booleans to 1.1, text to 1.2), a number with a leading zero (``010``: octal 8 to 1.1,
  10 to 1.2) and base-60 numbers (``1:30:00``: 5400 to 1.1, text to 1.2);
- the encoding is found as the YAML spec says (a byte-order mark, else the pattern of
  NUL bytes): UTF-8 (with or without a BOM), UTF-16 and UTF-32 (what Windows tools
  write); other bytes (Latin-1, Windows-1252) are refused naming the line and column;
- one document per file (a second ``---`` document is refused); tabs in indentation and
  non-breaking spaces in keys (pasted text) are named as such.

Every YAML document this program reads (user files, and a run's ``config.yaml``) is
bounded before it becomes Python values: at most :data:`MAX_YAML_BYTES` bytes,
:data:`MAX_YAML_VALUES` values and :data:`MAX_YAML_DEPTH` levels of nesting, counted with
its aliases expanded, and no alias inside the collection it names. Aliases in reasonable
use (a block given once and reused) pass; an alias bomb ("billion laughs": each level
nine aliases of the one before) is refused in milliseconds, before anything walks it.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from ccpo_lab.errors import UserError, short_repr

MAX_YAML_BYTES = 4 * 2**20
"""Largest YAML file read (a configuration file is a few kB)."""
MAX_YAML_VALUES = 100_000
"""Most values (scalars, sequences, mappings, keys) in one YAML document, aliases expanded."""
MAX_YAML_DEPTH = 64
"""Deepest nesting of one YAML document, aliases expanded."""

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
        raw = _read_bounded(p)
    except YamlLimitError as e:
        raise UserError(f"{what} {e.problem}", file=p) from None
    except OSError as e:
        raise UserError(f"cannot read {what}: {e.strerror}", file=p) from None
    text = _decode(raw, what, p)
    try:
        data = yaml.load(text, Loader=_user_loader())  # noqa: S506 - a SafeLoader subclass
    except (DuplicateKeyError, AmbiguousValueError) as e:
        raise UserError(str(e), file=p) from None
    except YamlLimitError as e:
        raise UserError(f"{what} {e}", file=p) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if getattr(e, "context", None) == "expected a single document in the stream":
            raise UserError(f"{what} holds more than one YAML document (the second starts"
                            f"{where}); it must be one: remove that '---' or split the file",
                            file=p) from None
        if "'\\t'" in problem:
            problem += " (YAML indents with spaces, never tabs)"
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


class AmbiguousValueError(ValueError):
    """A plain value YAML 1.1 and YAML 1.2 readers read differently, or a key holding a
    non-breaking or zero-width space."""


_BOMS = ((b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe\x00\x00", "utf-32-le"),
         (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"), (b"\xef\xbb\xbf", "utf-8"))


def _encoding(raw: bytes) -> tuple[str, int]:
    """The encoding of a YAML stream and the length of its byte-order mark, as YAML 1.2
    (5.2) detects them: the mark, else the NUL bytes of an ASCII first character."""
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return name, len(bom)
    head = raw[:4]
    if len(head) == 4 and head[:3] == b"\x00\x00\x00":
        return "utf-32-be", 0
    if len(head) == 4 and head[1:] == b"\x00\x00\x00":
        return "utf-32-le", 0
    if len(head) >= 2 and head[0] == 0:
        return "utf-16-be", 0
    if len(head) >= 2 and head[1] == 0:
        return "utf-16-le", 0
    return "utf-8", 0


def _decode(raw: bytes, what: str, p: Path) -> str:
    """The text of a user YAML file (see the module docstring), or a :class:`UserError`
    naming the line and column of the first byte that is not text in its encoding."""
    name, skip = _encoding(raw)
    try:
        return raw[skip:].decode(name)
    except UnicodeDecodeError as e:
        start = skip + e.start
        line = raw[:start].count(b"\n") + 1
        column = start - (raw.rfind(b"\n", 0, start) + 1) + 1
        bad = raw[start:start + 1]
        if name != "utf-8":
            raise UserError(f"{what} is not {name.upper()} text although it starts like it "
                            f"(byte {bad!r} at offset {start})", file=p) from None
        raise UserError(f"{what} is not UTF-8 text (byte {bad!r} at line {line}, column "
                        f"{column}: Latin-1 or Windows-1252?); save it as UTF-8", file=p) \
            from None


_AMBIGUOUS = re.compile(r"""^(?:yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF
                            |[-+]?0[0-9_]+
                            |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$""", re.X)
"""Plain values YAML 1.1 readers (PyYAML, Hydra) and YAML 1.2 readers (ruamel.yaml) read
differently (see :func:`_ambiguous`)."""
_AMBIGUOUS_TAG = "tag:ccpo-lab,2026:ambiguous"
_BOOL_12 = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
"""Booleans both YAML 1.1 and 1.2 read as such."""
_ODD_SPACES = "\u00a0\u202f\u200b\ufeff"
"""Non-breaking and zero-width spaces (and a stray byte-order mark): never meant in a key."""


def _ambiguous(text: str, line: int, column: int) -> AmbiguousValueError:
    """The refusal of plain value ``text``: what each YAML version reads, how to write it."""
    at = f"line {line}, column {column}: {text!r}"
    if text.lower() in ("yes", "no", "on", "off"):
        value = text.lower() in ("yes", "on")
        return AmbiguousValueError(
            f"{at} is the boolean {str(value).lower()} to YAML 1.1 readers (PyYAML, Hydra) "
            f"and text to YAML 1.2 readers (ruamel.yaml): write {str(value).lower()}, or "
            f"quote it ('{text}') for the text")
    digits = text.lstrip("+-").replace("_", "")
    if ":" not in text:
        octal = f"octal {int(digits, 8)}" if set(digits) <= set("01234567") else "text"
        return AmbiguousValueError(
            f"{at} is {octal} to YAML 1.1 readers (PyYAML, Hydra) and {int(digits)} to YAML "
            f"1.2 readers (ruamel.yaml): write it without the leading zero, or quote it for "
            "the text")
    number = 0
    for part in digits.split(":"):
        number = number * 60 + int(part)
    return AmbiguousValueError(
        f"{at} is the number {number} (base 60) to YAML 1.1 readers (PyYAML, Hydra) and text "
        f"to YAML 1.2 readers (ruamel.yaml): quote it ('{text}') for the text, or write "
        f"{number}")


def _read_bounded(p: Path) -> bytes:
    """The bytes of ``p``, at most :data:`MAX_YAML_BYTES` (:class:`YamlLimitError` if
    longer: a FIFO or ``/dev/zero`` is read that far, not forever)."""
    with p.open("rb") as f:
        data = f.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        raise YamlLimitError(f"is larger than {MAX_YAML_BYTES // 2**20} MiB")
    return data


class YamlLimitError(ValueError):
    """A YAML document beyond the bounds of this module (see its docstring).

    Also a ``yaml.YAMLError`` where it is raised while loading (:func:`yaml_limit_error`
    makes that subclass), so callers that catch YAML errors catch it.
    """

    def __init__(self, problem: str, line: int | None = None) -> None:
        self.problem = problem
        self.line = line
        super().__init__(problem if line is None else f"{problem} (line {line})")


@functools.cache
def yaml_limit_error() -> type[YamlLimitError]:
    """:class:`YamlLimitError` that is also a ``yaml.YAMLError``."""
    import yaml

    class YamlLimit(YamlLimitError, yaml.YAMLError):
        pass

    return YamlLimit


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, list):
        return [x for pair in value for x in (pair if isinstance(pair, tuple) else (pair,))]
    return []


def check_expansion(root: Any) -> None:
    """Raise :class:`YamlLimitError` (a ``yaml.YAMLError``) when the composed document
    ``root`` (a ``yaml.Node``), aliases expanded, holds more than
    :data:`MAX_YAML_VALUES` values, nests deeper than :data:`MAX_YAML_DEPTH`, or has an
    alias inside the collection it names. Linear in the distinct nodes (each is sized
    once), never in the expanded size."""
    err = yaml_limit_error()
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        k = id(node)
        kids = _children(node)
        line = node.start_mark.line + 1 if node.start_mark is not None else None
        if done:
            on_path.discard(k)
            size[k] = 1 + sum(size[id(c)] for c in kids)
            depth[k] = 1 + max((depth[id(c)] for c in kids), default=0)
            if size[k] > MAX_YAML_VALUES:
                raise err(f"expands to more than {MAX_YAML_VALUES:,} values once its "
                          "aliases are expanded", line)
            if depth[k] > MAX_YAML_DEPTH:
                raise err(f"nests more than {MAX_YAML_DEPTH} levels deep once its aliases "
                          "are expanded", line)
            continue
        if k in size:
            continue
        if k in on_path:
            raise err("has an alias inside the collection it names", line)
        on_path.add(k)
        stack.append((node, True))
        stack.extend((c, False) for c in kids if id(c) not in size)


@functools.cache
def bounded_loader(base: type) -> type:
    """``base`` (a PyYAML loader class) whose documents are bounded (see the module
    docstring): the document is checked once composed, before any value is built; the
    pure-Python composer also stops at the bounds while composing (the C one has its own
    nesting limit, and builds no more nodes than the bounded text has tokens)."""
    err = yaml_limit_error()
    import yaml

    pure = issubclass(base, yaml.composer.Composer)

    class Bounded(base):
        _depth = 0
        _count = 0

        def get_single_node(self) -> Any:
            node = super().get_single_node()
            if node is not None:
                check_expansion(node)
            return node

        if pure:
            def compose_node(self, parent: Any, index: Any) -> Any:
                self._depth += 1
                self._count += 1
                try:
                    if self._depth > MAX_YAML_DEPTH or self._count > MAX_YAML_VALUES:
                        line = self.peek_event().start_mark.line + 1
                        raise err(f"nests more than {MAX_YAML_DEPTH} levels deep"
                                  if self._depth > MAX_YAML_DEPTH else
                                  f"holds more than {MAX_YAML_VALUES:,} values", line)
                    return super().compose_node(parent, index)
                finally:
                    self._depth -= 1

    Bounded.__name__ = f"Bounded{base.__name__}"
    return Bounded


def safe_load_bounded(text: str) -> Any:
    """``yaml.safe_load(text)`` (libyaml's parser when present), bounded (see the module
    docstring; a ``yaml.YAMLError`` beyond the bounds)."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=bounded_loader(base))  # noqa: S506 - a safe loader


def load_yaml_file(path: str | Path) -> Any:
    """A YAML file this program wrote (a run's ``config.yaml``), read as
    :func:`safe_load_bounded` reads text. Raises ``OSError``, ``UnicodeDecodeError`` or a
    ``yaml.YAMLError`` (beyond the bounds: :class:`YamlLimitError`, naming the file)."""
    text = read_yaml_text(path)
    try:
        return safe_load_bounded(text)
    except YamlLimitError as e:
        raise yaml_limit_error()(f"{path}: YAML {e.problem}", e.line) from None


def read_yaml_text(path: str | Path) -> str:
    """The UTF-8 text of a YAML file this program wrote, at most :data:`MAX_YAML_BYTES`.
    Raises ``OSError``, ``UnicodeDecodeError`` or :class:`YamlLimitError` (a
    ``yaml.YAMLError`` naming the file)."""
    p = Path(path)
    try:
        return _read_bounded(p).decode("utf-8")
    except YamlLimitError as e:
        raise yaml_limit_error()(f"{p}: {e.problem}") from None


_FLOAT_12 = re.compile(r"""^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                           |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                           |[0-9][0-9_]*[eE][-+]?[0-9]+
                           |\.(?:inf|Inf|INF)
                           |\.(?:nan|NaN|NAN))$""", re.X)
"""YAML 1.1's float pattern (PyYAML's) plus YAML 1.2's exponent without a dot (``1e-6``)."""


@functools.cache
def _user_loader() -> Any:
    """A ``yaml.SafeLoader`` subclass reading user files as the module docstring says:
    duplicate keys refused, merge keys merged, ``1e-6`` a float, values that YAML 1.1 and
    1.2 read differently refused."""
    import yaml

    merge = "tag:yaml.org,2002:merge"

    class UserLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                line = key_node.start_mark.line + 1
                if key_node.tag == merge:       # ``<<``: merged by the base class
                    key: Any = ("<<",)
                else:
                    key = self.construct_object(key_node, deep=True)
                if isinstance(key, str) and any(c in key for c in _ODD_SPACES):
                    raise AmbiguousValueError(
                        f"line {line}: key {short_repr(key)} holds a non-breaking or "
                        "zero-width space (pasted from a web page or a document?); YAML "
                        "indents and separates with plain spaces")
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class says so
                    break
                if first is not None:
                    shown = "'<<'" if key == ("<<",) else short_repr(key)
                    raise DuplicateKeyError(f"duplicate key {shown} at line {line} (first "
                                            f"at line {first}); each key may appear once")
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    def refuse(loader: Any, node: Any) -> Any:
        raise _ambiguous(str(node.value), node.start_mark.line + 1, node.start_mark.column + 1)

    # copy the resolvers before changing them: SafeLoader's are shared class state
    replaced = ("tag:yaml.org,2002:float", "tag:yaml.org,2002:bool")
    UserLoader.yaml_implicit_resolvers = {
        ch: [(tag, rx) for tag, rx in rules if tag not in replaced]
        for ch, rules in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    for ch in "yYnNoO+-0123456789":  # first, before the integers of YAML 1.1
        UserLoader.yaml_implicit_resolvers.setdefault(ch, []).insert(
            0, (_AMBIGUOUS_TAG, _AMBIGUOUS))
    UserLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL_12, list("tTfF"))
    UserLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12,
                                     list("-+0123456789."))
    UserLoader.add_constructor(_AMBIGUOUS_TAG, refuse)
    return bounded_loader(UserLoader)


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
    """Write ``text`` to ``path`` through a temporary file and a rename, with the umask's
    mode (:func:`ccpo_lab.atomic.atomic_write_text`)."""
    from ccpo_lab.atomic import atomic_write_text as write

    write(path, text)


def atomic_write_json(path: str | Path, value: Any) -> None:
    """Write ``value`` as indented JSON atomically."""
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def dump_yaml(value: Any) -> str:
    """YAML text of a plain value (block style, keys in insertion order)."""
    import yaml

    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)
