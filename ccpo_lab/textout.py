"""Text out to terminals and pipes that are not UTF-8: never a crash, readable ASCII.

ccpo-lab prints ``Δ``, ``≥``, ``—``, ``±`` in its reports and whatever an arm's description
holds. On a stream that cannot encode them (``PYTHONIOENCODING=latin-1``, a Latin-1 or
Windows-1252 locale) Python raises ``UnicodeEncodeError`` and the command would end with
an internal error. :func:`prepare_streams`, called once by the CLI, sets such streams to
write what they cannot encode as its ASCII spelling (``≥`` as ``>=``, ``é`` as ``e``, ``?``
for the rest). An ASCII stream is taken, as Python does for the C locale and click does
for every ASCII stream, to be a misconfigured UTF-8 one, and writes UTF-8. A UTF-8 stream
writes the bytes of a file name that is not UTF-8 as they are (``surrogateescape``, what
Python does in the C locale and ``ls`` does), instead of failing on them. Files ccpo-lab
writes are UTF-8 whatever the locale.
"""

from __future__ import annotations

import codecs
import re
import sys
import unicodedata
from typing import Any

ERRORS = "ccpo-lab-ascii"
"""The codec error handler :func:`prepare_streams` installs."""
SPELLINGS = {
    "≥": ">=", "≤": "<=", "≠": "!=", "±": "+/-", "×": "x", "−": "-", "–": "-", "—": "-",
    "…": "...", "→": "->", "←": "<-", "·": ".", "•": "*", "Δ": "d", "α": "alpha",
    "σ": "sd", "µ": "u", "μ": "u", "‘": "'", "’": "'", "“": '"', "”": '"', "✓": "ok",
    "✗": "x", "─": "-", "━": "-", "│": "|", "┃": "|", "╇": "+", "┼": "+", "€": "EUR",
}
"""ASCII spellings of the characters ccpo-lab prints (and a few common ones)."""


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: object) -> str:
    """``text`` fit for a terminal: every control character but newline and tab (ESC of
    a terminal escape sequence, BEL, carriage return, C1 codes) written as ``\\x..``, so
    no text taken from a file can set the title, the clipboard or the screen."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def spell(text: str) -> str:
    """``text`` in ASCII: :data:`SPELLINGS`, else the character without its accents, else
    ``?``."""
    out = []
    for ch in text:
        if ch.isascii():
            out.append(ch)
            continue
        sub = SPELLINGS.get(ch)
        if sub is None:
            sub = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or "?"
        out.append(sub)
    return "".join(out)


def _handler(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return spell(err.object[err.start:err.end]), err.end


codecs.register_error(ERRORS, _handler)


def prepare_streams(streams: tuple[Any, ...] | None = None) -> None:
    """Make standard output and error (or ``streams``) safe for any text (see the module
    docstring); a UTF-8 stream is left as it is."""
    for stream in streams if streams is not None else (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if not encoding or not hasattr(stream, "reconfigure"):
            continue
        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            continue
        if name.startswith("utf"):
            if getattr(stream, "errors", None) == "strict":  # a path in other bytes
                stream.reconfigure(errors="surrogateescape")
            continue
        if name == "ascii":
            stream.reconfigure(encoding="utf-8", errors=ERRORS)
        else:
            stream.reconfigure(errors=ERRORS)


def fmt_hours(h: float | None) -> str:
    """Hours for a table: 3 significant digits below 10 (``0.0712``, ``3.41``), one
    decimal below 1,000, whole hours above."""
    if h is None:
        return "—"
    if abs(h) < 10:
        return f"{h:.3g}" if h else "0"
    return f"{h:,.1f}" if abs(h) < 1000 else f"{h:,.0f}"
