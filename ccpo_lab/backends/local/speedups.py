"""Output-preserving speed-ups inside the engine: the same text out, several times faster.

TextWorld's PDDL backend re-parses with TatSu every grammar snippet and every rule
condition each time it renders text (each admissible command, each feedback line, on every
step), re-parses the game's TWL2 grammar on every load, and re-runs fast-downward's Python
PDDL->SAS translator twice on every load and every reset. All of these are pure functions
of their input strings, so :func:`install` replaces four module attributes with caching
wrappers:

- ``_parse_and_convert`` of ``textworld.envs.pddl.textgen``, ``textworld.envs.pddl.logic``
  and ``textworld.logic``: the cache hands out a deep copy of the first result (the engine
  mutates what the parsers return);
- ``fast_downward.pddl2sas``: the cached (task, SAS text) pair is shared, which is safe
  because TextWorld only reads the task object (and the SAS text is a string).

It also replaces ``copy_context`` of ``textgen``: for every symbol it expands, TextWorld
``deepcopy``-s the context's ``variables`` and ``mapping`` dicts (about 70% of an ALFWorld
step here). The generator only *adds keys* to those dicts (``dict.update`` in ``query``) and
only reads their values (entity infos, logic variables), so copying the two dicts
themselves is equivalent (:func:`_shallow_copy_context`).

Nothing else in the engine changes. ``tests/backends/local/test_env.py`` checks that
transcripts (observations, admissible commands, rewards) are identical with and without
it. :func:`uninstall` restores the originals.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

_ORIGINALS: dict[str, tuple[Any, str, Callable[..., Any]]] = {}
MAX_ENTRIES = 20_000
"""Entries per cache before it is emptied (a bound on memory, never reached in practice)."""


def _memoised(fn: Callable[..., Any], copies: bool) -> Callable[..., Any]:
    cache: dict[Any, Any] = {}

    def cached(*args: Any, **kwargs: Any) -> Any:
        try:
            key = (args, tuple(sorted(kwargs.items())))
            hit = cache.get(key)
        except TypeError:  # an unhashable argument: no caching
            return fn(*args, **kwargs)
        if hit is None:
            hit = fn(*args, **kwargs)
            if len(cache) >= MAX_ENTRIES:
                cache.clear()
            cache[key] = hit
        return copy.deepcopy(hit) if copies else hit

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


def install() -> None:
    """Memoise the engine's parsers and PDDL translator and use the shallow context copy
    in this process (idempotent)."""
    import fast_downward
    import textworld.envs.pddl.logic as pddl_logic
    import textworld.envs.pddl.textgen as textgen
    import textworld.logic as logic

    targets = (("textgen", textgen, "_parse_and_convert", True),
               ("pddl_logic", pddl_logic, "_parse_and_convert", True),
               ("logic", logic, "_parse_and_convert", True),
               ("pddl2sas", fast_downward, "pddl2sas", False))
    for name, module, attr, copies in targets:
        if name not in _ORIGINALS:
            original = getattr(module, attr)
            _ORIGINALS[name] = (module, attr, original)
            setattr(module, attr, _memoised(original, copies))
    if "copy_context" not in _ORIGINALS:
        _ORIGINALS["copy_context"] = (textgen, "copy_context", textgen.copy_context)
        textgen.copy_context = _shallow_copy_context


def uninstall() -> None:
    """Restore the engine's own functions."""
    for name in list(_ORIGINALS):
        module, attr, original = _ORIGINALS.pop(name)
        setattr(module, attr, original)


def installed() -> bool:
    """Whether the caches are active."""
    return bool(_ORIGINALS)
