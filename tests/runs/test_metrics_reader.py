"""The one metrics reader: every line a row or a named problem, streamed, followed
incrementally by ``status``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccpo_lab.runs.metrics import (
    MAX_STEP,
    MetricsFormatError,
    MetricsScan,
    append_metrics,
    read_metrics,
    series,
    tail_metrics,
    value_problem,
)


def _write(p: Path, *lines: bytes, end: bytes = b"\n") -> Path:
    p.write_bytes(b"\n".join(lines) + end)
    return p


GOOD = b'{"step": 1, "data": {"val/success_rate": 0.5}}'


@pytest.mark.parametrize(("line", "why"), [
    (b'{"step": 2, "data": {"val/succ', "not JSON"),
    (b'{"step": 2, "data": {"val/succ\xffess_rate": 0.5}}', "invalid UTF-8 (byte b'\\xff' at "
                                                           "column 31)"),
    (b'{"step": "2", "data": {}}', "step is not an integer"),
    (b'{"step": true, "data": {}}', "step is not an integer"),
    (b'{"step": -1, "data": {}}', "step -1 out of range"),
    (f'{{"step": {MAX_STEP + 1}, "data": {{}}}}'.encode(), f"step {MAX_STEP + 1} out of range"),
    (b'{"step": 100000000000000000000000, "data": {}}', "step 1e+23 out of range"),
    (b'{"step": 2, "data": [1]}', 'expected {"step": N, "data": {...}}'),
    (b"[1, 2]", 'expected {"step": N, "data": {...}}'),
])
def test_a_line_that_is_not_a_row_is_named(tmp_path: Path, line: bytes, why: str) -> None:
    p = _write(tmp_path / "m.jsonl", GOOD, line, b'{"step": 3, "data": {}}')
    scan = MetricsScan(p)
    assert [r.step for r in scan] == [1, 3]  # the rows around it are read
    (problem,) = scan.problems
    assert (problem.path, problem.line) == (p, 2) and why in problem.why
    assert str(problem).startswith(f"{p}: line 2: ")
    with pytest.raises(MetricsFormatError, match="line 2") as e:
        read_metrics(p)
    assert e.value.problem == problem


def test_nan_literals_are_rows_whose_values_are_not_usable(tmp_path: Path) -> None:
    """Python's json writes NaN and Infinity; they parse, and :func:`value_problem` says why
    the value cannot be used."""
    p = _write(tmp_path / "m.jsonl", b'{"step": 1, "data": {"a": NaN, "b": Infinity, "c": 1}}')
    (row,) = MetricsScan(p)
    assert [value_problem(row.data[k]) for k in "abc"] == [
        "not a finite number (nan)", "not a finite number (inf)", None]
    assert value_problem(None).startswith("no value (null")
    assert value_problem("0.5") == "not a number ('\"0.5\"')"
    assert value_problem(10**400) == f"not a finite number ({10**400!r})"
    assert value_problem(True) is None
    steps, values = series([{"step": 1, "data": row.data}], "c")
    assert steps.tolist() == [1] and values.tolist() == [1.0]
    assert series([{"step": 1, "data": row.data}], "a")[0].size == 0


def test_a_cut_last_line_is_partial_not_a_problem(tmp_path: Path) -> None:
    p = _write(tmp_path / "m.jsonl", GOOD, b'{"step": 2, "da', end=b"")
    scan = MetricsScan(p)
    assert [r.step for r in scan] == [1]
    assert not scan.problems and scan.partial is not None and scan.partial.line == 2
    assert read_metrics(p) == [{"step": 1, "data": {"val/success_rate": 0.5}}]
    assert read_metrics(tmp_path / "missing.jsonl") == []


def test_tail_reads_only_what_was_appended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    p = tmp_path / "metrics.jsonl"
    append_metrics(p, 0, {"val/success_rate": 0.25})
    append_metrics(p, 1, {"episode/x": 1.0})
    t = tail_metrics(p, "val/success_rate")
    assert (t.last_step, t.last_value, t.lines, t.note) == (1, 0.25, 2, "")
    size = p.stat().st_size
    assert t.offset == size

    opened: list[int] = []
    real = MetricsScan.__init__

    def spy(self: MetricsScan, path: Path, **kw: int) -> None:
        opened.append(kw.get("start", 0))
        real(self, path, **kw)

    monkeypatch.setattr(MetricsScan, "__init__", spy)
    append_metrics(p, 2, {"val/success_rate": 0.5})
    with p.open("ab") as f:
        f.write(b'{"step": 3, "data": {"val/success_rate": "x"}}\n{"step": 4, "da')
    t = tail_metrics(p, "val/success_rate")
    assert opened == [size]  # resumed where the last call stopped
    assert (t.last_step, t.last_value) == (3, 0.5)
    assert t.note == f"metrics line not used: {p}: line 4: val/success_rate: not a number " \
                     "('\"x\"')"
    assert t.partial is not None and t.partial.line == 5
    with p.open("ab") as f:  # the write in progress completes
        f.write(b'ta": {"val/success_rate": 0.75}}\n')
    t = tail_metrics(p, "val/success_rate")
    assert (t.last_step, t.last_value, t.partial, t.n_problems) == (4, 0.75, None, 1)
    p.write_text(json.dumps({"step": 0, "data": {}}) + "\n")  # rewritten (a resume): again
    t = tail_metrics(p, "val/success_rate")
    assert (t.last_step, t.last_value, t.n_problems, opened[-1]) == (0, None, 0, 0)


def test_an_append_after_a_cut_write_drops_the_cut_line(tmp_path: Path) -> None:
    """A writer killed mid-line leaves a last line without its end; the next append (a
    resumed run, verl's logger) must not run into it, making both one line that is not
    JSON."""
    p = tmp_path / "metrics.jsonl"
    append_metrics(p, 0, {"val/success_rate": 0.25})
    with p.open("ab") as f:
        f.write(b'{"data": {"val/success_rate": 0.')
    append_metrics(p, 1, {"val/success_rate": 0.5})
    assert read_metrics(p) == [{"step": 0, "data": {"val/success_rate": 0.25}},
                               {"step": 1, "data": {"val/success_rate": 0.5}}]
    p.write_bytes(b'{"step": 0, "da')  # a cut first line
    append_metrics(p, 0, {"x": 1.0})
    assert read_metrics(p) == [{"step": 0, "data": {"x": 1.0}}]
    assert not MetricsScan(p).problems
