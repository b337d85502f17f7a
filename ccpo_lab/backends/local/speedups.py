"""Output-preserving speed-ups inside the engine: the same text out, several times faster.

TextWorld's PDDL backend re-parses with TatSu every grammar snippet and every rule
condition each time it renders text (each admissible command, each feedback line, on every
step), re-parses the game's TWL2 grammar on every load, and re-runs fast-downward's Python
PDDL->SAS translator twice on every load and every reset. All of these are pure functions
of their input strings, so :func:`install` replaces four module attributes with caching
wrappers:

- ``_parse_and_convert`` of ``textworld.envs.pddl.textgen``, ``textworld.envs.pddl.logic``
  and ``textworld.logic``: the engine mutates what the parsers return, so the cache keeps
  the first result pickled and hands out a fresh unpickled copy on every call (a deep copy
  of the same objects, about ten times cheaper than ``copy.deepcopy``);
- ``fast_downward.pddl2sas``: the cached (task, SAS text) pair is shared, which is safe
  because TextWorld only reads the task object (and the SAS text is a string).

With :func:`use_disk_cache`, the two load-time results (a game's grammar parse and its
PDDL translation, about 80% of loading an engine) are also kept as pickle files keyed by a
hash of their input and of the library versions, so the other runs of a sweep, which load
the same games in other processes, read them instead of recomputing them. Unpickling runs
code, and the cache folder lies under the results folder, which others may be able to
write to: every cache file is signed with an HMAC-SHA256 under a secret key of this user's,
kept outside the results (``$XDG_CONFIG_HOME/ccpo-lab/cache-key``, else
``~/.config/ccpo-lab/cache-key``, created 0600; refused unless it is a regular file of this
user's that nobody else can read). A file whose signature does not verify (planted, or
written by another user) is never unpickled: it is recomputed and rewritten, with one
warning line. Without a usable key (a read-only home, say) the cache stays in memory.

It also replaces ``copy_context`` of ``textgen``: for every symbol it expands, TextWorld
``deepcopy``-s the context's ``variables`` and ``mapping`` dicts (about 70% of an ALFWorld
step here). The generator only *adds keys* to those dicts (``dict.update`` in ``query``) and
only reads their values (entity infos, logic variables), so copying the two dicts
themselves is equivalent (:func:`_shallow_copy_context`). ``ContextSensitiveGrammar.derive``
(the text of a command, a feedback line, the intro) is memoised per loaded grammar: what it
derives depends only on the symbol, the state's facts (through the grammar's conditions and
queries) and the action's mapping, the entity names being fixed when the game is loaded,
and tiny rooms revisit the same states all the time. And ``textgen``'s ``check_flag``,
which reads a debugging environment variable twice for every symbol it expands, reads each
variable once per process.

Every engine loads its own copy of fast-downward's shared library (TextWorld copies the
34 MB file to a temporary directory and loads it: the library keeps the game's state in
globals). An engine only needs one while an episode runs on it: the game is loaded into the
library again on every reset. So :class:`~ccpo_lab.backends.local.env.AlfworldEnv` borrows
one (:func:`acquire_lib`) at reset and returns it when the episode ends
(:func:`release_lib`), and a process holds as many copies as episodes ever run at once (48
for the demo's evaluations instead of 144, one per engine), which saves the copying on
load and freeing them at exit.

Nothing else in the engine changes. ``tests/backends/local/test_env.py`` checks that
transcripts (observations, admissible commands, rewards) are identical with and without
it, with the disk cache read from another process. :func:`uninstall` restores the
originals.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ccpo_lab.atomic import temp_file

_ORIGINALS: dict[str, tuple[Any, str, Callable[..., Any]]] = {}
MAX_ENTRIES = 20_000
"""Entries per cache before it is emptied (a bound on memory, never reached in practice)."""
DISK_FORMAT = 1
"""Part of every disk-cache key: bump it when what a cached file holds changes."""
_DISK: list[Path] = []
"""The directory of :func:`use_disk_cache` (empty: memory only)."""


def use_disk_cache(directory: Path | None) -> None:
    """Keep the load-time results in ``directory`` as well (None: in memory only).

    Files are written atomically, so runs sharing the directory never read a partial one;
    an unreadable file is recomputed and rewritten.
    """
    _DISK.clear()
    if directory is not None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        _DISK.append(Path(directory))


@functools.cache
def engine_versions() -> tuple[str, ...]:
    """Versions of the engine's libraries (TextWorld, fast-downward, TatSu)."""
    from importlib.metadata import version

    return tuple(version(d) for d in ("textworld", "fast-downward-textworld", "tatsu"))


def _versions() -> tuple[str, ...]:
    return (str(DISK_FORMAT), *engine_versions())


SIGNED = b"ccpo-lab signed cache 1\n"
"""First bytes of a signed cache file; the HMAC-SHA256 of the pickle follows, then it."""
KEY_BYTES = 32


def key_file() -> Path:
    """Where this user's cache-signing key lives (outside any results folder)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ccpo-lab" / "cache-key"


@functools.cache
def signing_key() -> bytes | None:
    """This user's secret key (created on first use, 0600); None when none can be had or
    the file is not a regular file of this user's that only they can read."""
    import secrets

    path = key_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(KEY_BYTES))
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            import stat as _stat

            if (not _stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid()
                    or st.st_mode & 0o077):
                return None
            key = f.read(KEY_BYTES + 1)
    except OSError:
        return None
    return key if len(key) == KEY_BYTES else None


def _sign(blob: bytes, key: bytes) -> bytes:
    import hmac

    return hmac.new(key, blob, hashlib.sha256).digest()


def _disk_path(name: str, key: Any) -> Path | None:
    if not _DISK or signing_key() is None:
        return None
    digest = hashlib.sha256(pickle.dumps((name, _versions(), key), protocol=4)).hexdigest()
    return _DISK[0] / f"{name}-{digest[:32]}.pickle"


_WARNED: list[Path] = []


def _read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` (None when there is none); a link or anything but a regular
    file (a planted FIFO would block the run for ever, a link to ``/dev/zero`` fill its
    memory) reads as no bytes, so it is refused as unsigned and replaced."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:  # ELOOP: a link
        return b""
    with os.fdopen(fd, "rb") as f:
        return f.read() if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else b""


def _disk_read(path: Path | None) -> tuple[Any, bytes | None]:
    """``(value, its pickle)`` stored at ``path``, or ``(None, None)``: only a file whose
    signature verifies under this user's key is unpickled."""
    import hmac

    key = signing_key()
    if path is None or key is None:
        return None, None
    data = _read_regular(path)
    if data is None:
        return None, None
    head = len(SIGNED) + hashlib.sha256().digest_size
    sig, blob = data[len(SIGNED):head], data[head:]
    if not (data.startswith(SIGNED) and hmac.compare_digest(sig, _sign(blob, key))):
        if path.parent not in _WARNED:
            _WARNED.append(path.parent)
            print(f"warning: {path}: not signed by this user's key (planted, damaged or "
                  "another user's): not loaded; recomputed", file=sys.stderr, flush=True)
        return None, None
    try:
        return pickle.loads(blob), blob
    except Exception:  # noqa: BLE001 - signed but stale (library change): recompute
        return None, None


def write_cache_file(path: Path | None, blob: bytes, *, sign: bool = True) -> None:
    """Write a cache file atomically, signed (None, or no key: nothing); ``sign=False``
    for a format whose reader runs no code (``torch.load(weights_only=True)``). A
    read-only or full disk only costs the caching."""
    if path is None:
        return
    if sign:
        key = signing_key()
        if key is None:
            return
        blob = SIGNED + _sign(blob, key) + blob
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temp_file(path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except OSError:  # a read-only or full disk only costs the speed-up
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _memoised(fn: Callable[..., Any], copies: bool, name: str, persist: bool
              ) -> Callable[..., Any]:
    cache: dict[Any, Any] = {}

    def cached(*args: Any, **kwargs: Any) -> Any:
        try:
            key = (args, tuple(sorted(kwargs.items())))
            hit = cache.get(key)
        except TypeError:  # an unhashable argument: no caching
            return fn(*args, **kwargs)
        if hit is not None:
            return pickle.loads(hit) if copies else hit
        path = _disk_path(name, key) if persist else None
        value, blob = _disk_read(path)
        if blob is None:
            value = fn(*args, **kwargs)
            if copies or path is not None:
                blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                write_cache_file(path, blob)
        if len(cache) >= MAX_ENTRIES:
            cache.clear()
        if not copies:
            cache[key] = value
            return value
        assert blob is not None
        cache[key] = blob  # kept pickled: each call unpickles a fresh deep copy
        return pickle.loads(blob)

    cached.__wrapped__ = fn  # type: ignore[attr-defined]
    return cached


def _shallow_copy_context(context: dict[str, Any]) -> dict[str, Any]:
    return {
        "state": context["state"],
        "facts": context["facts"],
        "variables": dict(context["variables"]),
        "mapping": dict(context["mapping"]),
        "entity_infos": context["entity_infos"],
    }


_DERIVED: weakref.WeakKeyDictionary[Any, tuple[dict[Any, int], dict[Any, str]]] = (
    weakref.WeakKeyDictionary())
"""Per loaded grammar: ``(number of each distinct fact set and mapping, derived text by
(start symbol, fact-set number, mapping number))``: a state's facts are held once, as a
tuple in hash order."""


def _memoised_derive(derive: Callable[..., str]) -> Callable[..., str]:
    def cached(grammar: Any, start: str, context: Any = None) -> str:
        if context is None:
            return derive(grammar, start)
        try:  # sorted by hash: equal keys are equal sets (a tie in order only misses)
            facts = tuple(sorted(context["facts"], key=hash))
            mapping = tuple(sorted(context["mapping"].items(), key=hash))
        except (KeyError, TypeError):  # not the engine's usual context: no caching
            return derive(grammar, start, context)
        memo = _DERIVED.get(grammar)
        if memo is None:
            memo = _DERIVED[grammar] = ({}, {})
        numbers, texts = memo
        key = (start, numbers.setdefault(facts, len(numbers)),
               numbers.setdefault(mapping, len(numbers)))
        hit = texts.get(key)
        if hit is None:
            hit = sys.intern(derive(grammar, start, context))
            if len(texts) >= MAX_ENTRIES:
                numbers.clear()
                texts.clear()
            texts[key] = hit
        return hit

    cached.__wrapped__ = derive  # type: ignore[attr-defined]
    return cached


_FREE_LIBS: list[Any] = []
"""fast-downward library copies no running episode uses (see :func:`acquire_lib`)."""
_LENDING: list[Any] = []
"""The copy a new engine gets instead of a fresh one, while :func:`lending` is open."""
LIB_COPIES = [0]
"""Library copies loaded by :func:`acquire_lib` in this process (for tests)."""


def acquire_lib() -> Any:
    """A fast-downward library copy for one episode: a returned one, else a new copy."""
    if _FREE_LIBS:
        return _FREE_LIBS.pop()
    install()
    LIB_COPIES[0] += 1
    return _ORIGINALS["load_lib"][2]()


def release_lib(lib: Any) -> None:
    """Give back a copy from :func:`acquire_lib` once its episode is over."""
    _FREE_LIBS.append(lib)


@contextlib.contextmanager
def lending(lib: Any) -> Any:
    """Within the block, an engine being built gets ``lib`` instead of its own copy."""
    _LENDING.append(lib)
    try:
        yield
    finally:
        _LENDING.pop()


def _lent_load_lib() -> Any:
    if _LENDING:
        return _LENDING[-1]
    return _ORIGINALS["load_lib"][2]()


def install() -> None:
    """Memoise the engine's parsers and PDDL translator and use the shallow context copy
    in this process (idempotent)."""
    import fast_downward
    import textworld.envs.pddl.logic as pddl_logic
    import textworld.envs.pddl.textgen as textgen
    import textworld.logic as logic

    targets = (("textgen", textgen, "_parse_and_convert", True, False),
               ("pddl_logic", pddl_logic, "_parse_and_convert", True, True),
               ("logic", logic, "_parse_and_convert", True, False),
               ("pddl2sas", fast_downward, "pddl2sas", False, True))
    for name, module, attr, copies, persist in targets:
        if name not in _ORIGINALS:
            original = getattr(module, attr)
            _ORIGINALS[name] = (module, attr, original)
            setattr(module, attr, _memoised(original, copies, name, persist))
    if "copy_context" not in _ORIGINALS:
        _ORIGINALS["copy_context"] = (textgen, "copy_context", textgen.copy_context)
        textgen.copy_context = _shallow_copy_context
    if "derive" not in _ORIGINALS:
        grammar_cls = textgen.ContextSensitiveGrammar
        _ORIGINALS["derive"] = (grammar_cls, "derive", grammar_cls.derive)
        grammar_cls.derive = _memoised_derive(grammar_cls.derive)
    if "load_lib" not in _ORIGINALS:
        _ORIGINALS["load_lib"] = (fast_downward, "load_lib", fast_downward.load_lib)
        fast_downward.load_lib = _lent_load_lib
    if "check_flag" not in _ORIGINALS:
        _ORIGINALS["check_flag"] = (textgen, "check_flag", textgen.check_flag)
        textgen.check_flag = functools.lru_cache(maxsize=None)(textgen.check_flag)


def uninstall() -> None:
    """Restore the engine's own functions."""
    for name in list(_ORIGINALS):
        module, attr, original = _ORIGINALS.pop(name)
        setattr(module, attr, original)


def installed() -> bool:
    """Whether the caches are active."""
    return bool(_ORIGINALS)
