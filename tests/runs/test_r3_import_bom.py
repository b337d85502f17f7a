"""Reliability round 3 (issue 36), item 12: a metrics log with a UTF-8 byte-order mark is
imported as the same log without it (as YAML files are read)."""

from __future__ import annotations

from pathlib import Path

from ccpo_lab.runs.importer import parse_log

from .test_import import CONSOLE, JSONL


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    for name, text in (("run.jsonl", JSONL), ("console.log", CONSOLE)):
        plain, marked = tmp_path / f"plain-{name}", tmp_path / f"bom-{name}"
        plain.write_text(text, encoding="utf-8")
        marked.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
        a, b = parse_log(plain), parse_log(marked)
        assert (b.format, b.rows) == (a.format, a.rows) and b.rows
