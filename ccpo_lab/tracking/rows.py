"""Sending a run's ``metrics.jsonl`` to its MLflow run: streamed, incremental, said.

The file is read once, line by line (:class:`~ccpo_lab.runs.metrics.MetricsScan`), and
sent in batches of at most :data:`MAX_METRICS` values, so memory does not grow with the
file (a verl run's 5 million values included). Each batch carries the child's tag
``ccpo_lab.synced_step``: the last step whose values are all in MLflow; the next sync
starts after it.

Nothing is dropped without a word: a line that is not a row, or a step that is not after
the previous one (rows out of order or written twice), stops the run's sync there (the
rows before it are sent; once the file is mended, the next sync goes on from there); a
value that is not usable (not a finite number, which MLflow's charts cannot show, or a
success rate outside [0, 1]) is not sent and is counted. A line longer than the bound of
:mod:`ccpo_lab.runs.files` is a line that is not a row (memory stays bounded by the
chunk). :class:`Sent` carries both, with file and line, for the sync to print.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.runs.metrics import LineProblem, MetricsScan, Row, value_problem

MAX_METRICS = 900
"""Metrics per ``log_batch`` (MLflow allows 1,000 entities, tags included)."""
KEY_LEN = 250
"""Longest metric or param key MLflow accepts."""
PROGRESS_EVERY_S = 5.0
"""Seconds between two progress lines of one run."""


@dataclass(frozen=True)
class Sent:
    """What sending one run's metrics did."""

    values: int
    """Values sent."""
    last_step: int | None
    """Largest step in the file (None: no row)."""
    stopped: LineProblem | None = None
    """The line the sync stopped at (rows after it not sent), if any."""
    skipped: int = 0
    """Values not sent (not finite numbers) among the rows sent."""
    first_skipped: LineProblem | None = None
    """The first of them."""


@dataclass(frozen=True)
class _Read:
    """Where a pass over a metrics file ended: its first ``offset`` bytes (``lines``
    complete lines) hold rows in order, the last at step ``last_step``."""

    identity: tuple[int, int]
    offset: int
    lines: int
    last_step: int


_READ: dict[tuple[Path, str], _Read] = {}
"""The end of the last clean pass over each (file, MLflow run) in this process: a live sync
(``sync --watch``) reads only what was appended since, when MLflow holds every row before
it."""


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _Rows:
    """The rows of a metrics file after step ``after``, in order; stops at the first line
    that is not a row or a step that does not follow the previous one. ``resume``: a
    previous pass over the same file, whose rows are all at or before ``after``: this one
    starts where it ended."""

    def __init__(self, path: Path, after: int, resume: _Read | None = None,
                 root: Path | None = None) -> None:
        self.scan = MetricsScan(path, keep=1, start=resume.offset if resume else 0,
                                line=resume.lines if resume else 0, root=root)
        self.after = after
        self.last_step: int | None = resume.last_step if resume else None
        self.stopped: LineProblem | None = None

    def __iter__(self) -> Iterator[Row]:
        prev = self.last_step
        for row in self.scan:
            if self.scan.n_problems:
                break
            if prev is not None and row.step <= prev:
                self.stopped = LineProblem(self.scan.path, row.line, f"step {row.step} after "
                                           f"step {prev} (rows out of order, or written twice)")
                return
            prev = row.step
            self.last_step = row.step
            if row.step > self.after:
                yield row
        if self.scan.problems and self.stopped is None:
            self.stopped = self.scan.problems[0]


def safe_key(key: str) -> str:
    """A metric/param key MLflow accepts (bad characters and path tricks become '_')."""
    k = re.sub(r"[^/\w.\- ]", "_", str(key))
    k = re.sub(r"/+", "/", k).strip("/").replace("..", "__")
    k = "/".join(p if p not in ("", ".") else "_" for p in k.split("/")) or "_"
    return k[:KEY_LEN]


def batches(rows: _Rows, base_ms: int, skip: Callable[[LineProblem], None]
            ) -> Iterator[tuple[list[Any], int]]:
    """MLflow metric batches of ``rows``: ``(metrics, last step whose values are all in this
    or an earlier batch)``. Values that are not finite numbers are passed to ``skip``."""
    from mlflow.entities import Metric

    batch: list[Any] = []
    last = after = rows.after
    for row in rows:
        values = []
        for k, v in row.data.items():
            why = value_problem(v, k)
            if why is None:
                values.append(Metric(safe_key(k), float(v), base_ms + row.step, row.step))
            else:
                skip(LineProblem(rows.scan.path, row.line, f"{k}: {why}"))
        if batch and len(batch) + len(values) > MAX_METRICS:
            yield batch, last
            batch = []
        while len(values) > MAX_METRICS:  # a step with more values than a batch holds
            yield values[:MAX_METRICS], after
            values = values[MAX_METRICS:]
        batch.extend(values)
        last = after = row.step
    if batch:
        yield batch, last


def send_metrics(client: Any, run_id: str, path: Path, after: int, base_ms: int,
                 synced_tag: str, progress: Callable[[int, float], None] | None = None,
                 root: Path | None = None) -> Sent:
    """Send the rows of ``path`` after step ``after`` to MLflow run ``run_id``.

    ``progress(values sent, fraction of the file read)`` is called at most every
    :data:`PROGRESS_EVERY_S` seconds. ``root``: the sweep directory the file must stay
    inside (the run-file gateway; default: its own directory).
    """
    from mlflow.entities import RunTag

    key = (Path(path), run_id)
    ident = _identity(Path(path))
    known = _READ.pop(key, None)
    usable = known is not None and known.identity == ident and known.last_step <= after \
        and ident is not None and Path(path).stat().st_size >= known.offset
    rows = _Rows(path, after, known if usable else None, root)
    size = path.stat().st_size if path.exists() else 0
    skipped: list[LineProblem] = []

    def skip(problem: LineProblem) -> None:
        if not skipped:
            skipped.append(problem)
        counts[0] += 1

    counts = [0]
    sent = 0
    shown = time.monotonic()
    for metrics, last in batches(rows, base_ms, skip):
        client.log_batch(run_id, metrics=metrics, tags=[RunTag(synced_tag, str(last))])
        sent += len(metrics)
        if progress is not None and time.monotonic() - shown >= PROGRESS_EVERY_S:
            progress(sent, rows.scan.offset / size if size else 1.0)
            shown = time.monotonic()
    if rows.stopped is None and ident is not None and rows.last_step is not None \
            and rows.scan.n_problems == 0:
        _READ[key] = _Read(ident, rows.scan.offset, rows.scan.lines, rows.last_step)
    return Sent(sent, rows.last_step, rows.stopped, counts[0], skipped[0] if skipped else None)
