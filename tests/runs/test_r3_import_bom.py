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


def test_total_steps_short_of_the_log_is_refused(tmp_path: Path) -> None:
    """Item 11: ``import --total-steps 10`` of a log that reaches step 30 imported 31
    steps silently; it is refused, naming the option, and nothing is imported."""
    from ccpo_lab.cli.main import main

    log = tmp_path / "run.jsonl"
    log.write_text("".join(f'{{"step":{k},"data":{{"val/success_rate":0.5}}}}\n'
                           for k in range(31)), encoding="utf-8")
    sweep = tmp_path / "old"
    args = ["import", str(sweep), str(log), "--arm", "grpo", "--seed", "0"]
    assert main([*args, "--total-steps", "10"]) == 2
    assert not (sweep / "grpo" / "seed-0" / "metrics.jsonl").exists()
    assert main([*args, "--total-steps", "30"]) == 0
