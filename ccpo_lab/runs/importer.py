"""``ccpo-lab import``: bring a finished run's metrics into a sweep directory.

Accepted logs:

* verl's file-logger JSONL: one ``{"step": N, "data": {...}}`` per line;
* verl's console log: lines ``step:N - key:value - key:value`` (``pprint`` values such
  as ``0.5``, ``nan``, ``np.float64(0.5)``), mixed with any other output (Ray's
  ``(TaskRunner pid=...)`` prefixes and terminal colours are ignored);
* a finished W&B run: an offline run directory (``wandb/offline-run-*/``) or
  ``wandb:ENTITY/PROJECT/RUN_ID`` through the API (:mod:`ccpo_lab.runs.wandb_import`):
  its history's verl-named metrics, W&B's step as the step.

Rows of the same step are merged (verl logs the first validation separately), so the
result has one row per step, as ``metrics.jsonl`` requires. The log is parsed completely
before anything is written; a bad or partial log raises :class:`UserError` naming the
line, and the sweep directory is left untouched. The run directory is assembled beside its
destination and renamed into place. Importing the same file again changes nothing; a
different file over an existing (arm, seed) needs ``replace``; a run launched by
ccpo-lab is never overwritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from ccpo_lab import __version__
from ccpo_lab.atomic import temp_dir
from ccpo_lab.config.identity import canonical_json
from ccpo_lab.config.yamlio import atomic_write_json, check_name
from ccpo_lab.errors import UserError, os_failure
from ccpo_lab.runs.files import Cut, read_lines
from ccpo_lab.runs.layout import MAX_SEED, RunDir, SweepDir, candidate_dirs, run_dir_name
from ccpo_lab.runs.metrics import MAX_STEP, fast_loads, format_row
from ccpo_lab.runs.provenance import now_iso
from ccpo_lab.runs.wandb_import import WandbLog, is_wandb_source, read_wandb

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CONSOLE = re.compile(r"(?:^|[\s)\]])step:(\d+)( - .*)$")
_WRAPPED = re.compile(r"^(?:np\.)?(?:float|int)(?:16|32|64)?\((.*)\)$|^tensor\((.*)\)$")
Rows = dict[int, dict[str, float | None]]
RowsOf = Callable[["_Stream"], Iterator[tuple[int, dict]]]
"""A log's rows, read into a stream's counts (a verl log file's, a W&B run's)."""


@dataclass(frozen=True)
class ParsedLog:
    """A parsed log: one merged row per step."""

    format: Literal["jsonl", "console", "wandb"]
    """Which format it was."""
    rows: Rows
    """step -> metrics (non-finite values as None)."""
    skipped: int
    """Non-numeric values left out (strings, lists)."""
    sha256: str
    """sha256 of the file's bytes."""


@dataclass(frozen=True)
class ImportResult:
    """What an import did."""

    status: Literal["imported", "unchanged", "replaced"]
    """``unchanged``: the same file was already imported there."""
    run_dir: Path
    """The run directory."""
    rows: int
    """Steps imported."""
    first_step: int
    """First step."""
    last_step: int
    """Last step."""
    format: str
    """Log format."""
    warnings: tuple[str, ...] = ()
    """Lines for standard error."""


@dataclass
class _Stream:
    """What a pass over a log saw besides its rows."""

    skipped: int = 0
    """Non-numeric values left out."""
    steps: list[int] = field(default_factory=list)
    """Steps written, in order."""
    has_val: bool = False
    """Some metric is held-out (``val/*``)."""
    long: int = 0
    """Lines longer than the line bound, skipped."""
    first_long: str = ""
    """The first of them, for a person."""


def _number(value: Any) -> tuple[bool, float | None]:
    """(is numeric, value or None when non-finite); JSON null is orjson's NaN."""
    if value is None:
        return True, None
    if isinstance(value, bool):
        return True, float(value)
    if isinstance(value, int | float):
        try:
            v = float(value)
        except OverflowError:  # an integer beyond float range
            return True, None
        return True, v if math.isfinite(v) else None
    return False, None


BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark some editors write first (dropped from a log's first line)."""


def _lines(f: IO[bytes], seen: _Stream) -> Iterator[tuple[int, bytes, bool]]:
    """``(line number, line without its end, whether it had one)`` of a binary file, read
    a chunk at a time (:func:`~ccpo_lab.runs.files.read_lines`: memory does not grow
    with the longest line). A line longer than :data:`~ccpo_lab.runs.files.MAX_LINE` is
    not a metrics line: it is skipped, counted and named in ``seen`` (the import warns)."""
    for i, raw in enumerate(read_lines(f), 1):
        if i == 1 and type(raw) is bytes and raw.startswith(BOM):
            raw = raw[len(BOM):]  # a UTF-8 byte-order mark, as YAML files get
        if type(raw) is bytes:
            yield i, raw[:-1] if raw.endswith(b"\r") else raw, True
        elif isinstance(raw, Cut) and raw.long:
            seen.long += 1
            seen.first_long = seen.first_long or f"line {i}: {raw.why()}"
        elif isinstance(raw, Cut):
            yield i, raw.head, False


def _utf8(path: Path, i: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"line {i}: invalid UTF-8 (byte {raw[e.start:e.start + 1]!r} at "
                        f"column {e.start + 1}); nothing imported", file=path) from None


def _check_step(path: Path, i: int, step: Any) -> int:
    if isinstance(step, float) and step.is_integer():  # orjson reads a huge integer so
        raise UserError(f"line {i}: step {step:.6g} out of range [0, {MAX_STEP}]; nothing "
                        "imported", file=path)
    if step < 0 or step > MAX_STEP:
        raise UserError(f"line {i}: step {step} out of range [0, {MAX_STEP}]; nothing "
                        "imported", file=path)
    return int(step)


def _jsonl_rows(path: Path, f: IO[bytes], seen: _Stream) -> Iterator[tuple[int, dict]]:
    """Rows of verl's file-logger JSONL, one per line, checked."""
    for i, raw, ended in _lines(f, seen):
        if not raw.strip():
            continue
        try:
            obj = fast_loads(raw)
        except ValueError:
            try:
                obj = json.loads(_utf8(path, i, raw))  # NaN and Infinity, which verl allows
            except ValueError:
                what = "cut off (partial write?)" if not ended else "not JSON"
                raise UserError(f"line {i} is {what}: {raw[:80].decode(errors='replace')!r}"
                                "; nothing imported", file=path) from None
        step = obj.get("step") if isinstance(obj, dict) else None
        if not (isinstance(obj, dict) and isinstance(obj.get("data"), dict)
                and isinstance(step, int | float) and not isinstance(step, bool)
                and (isinstance(step, int) or step.is_integer())):
            raise UserError(f"line {i}: expected {{\"step\": N, \"data\": {{...}}}} "
                            f"(verl's file logger), got {raw[:80].decode(errors='replace')!r}"
                            "; nothing imported", file=path)
        row = {}
        for k, v in obj["data"].items():
            ok, num = _number(v)
            if ok:
                row[str(k)] = num
            else:
                seen.skipped += 1
        yield _check_step(path, i, step), row


def _console_value(text: str) -> float | None:
    """A console value (``0.5``, ``nan``, ``np.float64(0.5)``, ``tensor(0.5, ...)``,
    ``True``) as a float, None when not finite; ValueError for anything else."""
    t = text.strip()
    try:  # the common forms first: a plain number, numpy 2's np.float64(...)
        v = float(t[11:-1] if t.startswith("np.float64(") and t.endswith(")") else t)
    except ValueError:
        m = _WRAPPED.match(t)
        if m:
            t = (m.group(1) or m.group(2) or "").split(",")[0].strip()
        if t in ("True", "False"):
            return float(t == "True")
        v = float(t)  # ValueError for anything else
    return v if math.isfinite(v) else None


def _console_rows(path: Path, f: IO[bytes], seen: _Stream) -> Iterator[tuple[int, dict]]:
    """Rows of verl's console log: ``step:N - key:value - ...`` lines among any others."""
    for i, raw, ended in _lines(f, seen):
        if b"step:" not in raw:
            continue
        line = _ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip("\r")
        m = _CONSOLE.search(line)
        if m is None:
            continue
        if not ended:
            raise UserError(f"line {i} (the last) has no line end: the log was cut off "
                            f"while it was written; nothing imported: {line[:80]!r}", file=path)
        _utf8(path, i, raw)
        row: dict[str, float | None] = {}
        for pair in m.group(2).split(" - ")[1:]:
            key, sep, value = pair.rpartition(":")
            try:
                if not sep or not key.strip():
                    raise ValueError
                row[key.strip()] = _console_value(value)
            except ValueError:
                raise UserError(f"line {i}: malformed 'key:value' pair {pair[:60]!r} "
                                "(log cut off?); nothing imported", file=path) from None
        yield _check_step(path, i, int(m.group(1))), row


def _open_log(path: str | Path) -> tuple[Path, Literal["jsonl", "console"], str]:
    """The log's path, format (from its first non-blank line) and sha256 (streamed)."""
    p = Path(path)
    if not p.exists():
        raise UserError("log file not found", file=p)
    if not p.is_file():
        raise UserError("not a file (expected a verl JSONL or console log)", file=p)
    digest = hashlib.sha256()
    first = b""
    with p.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            if not first.strip():
                first += chunk.removeprefix(BOM if not first else b"").lstrip()[:1]
    if not first.strip():
        raise UserError("log file is empty; nothing imported", file=p)
    return p, ("jsonl" if first.startswith(b"{") else "console"), digest.hexdigest()


def _rows(p: Path, fmt: str, f: IO[bytes], seen: _Stream) -> Iterator[tuple[int, dict]]:
    return (_jsonl_rows if fmt == "jsonl" else _console_rows)(p, f, seen)


def _no_rows(p: Path) -> UserError:
    return UserError("no metrics found: expected verl's file-logger JSONL "
                     "({\"step\": N, \"data\": {...}} per line) or console lines "
                     "'step:N - key:value - ...'; nothing imported", file=p)


def parse_log(path: str | Path) -> ParsedLog:
    """Parse a verl file-logger JSONL or console log (format detected from the content)
    into memory, rows of one step merged. :func:`import_run` streams instead."""
    p, fmt, sha = _open_log(path)
    seen = _Stream()
    rows: Rows = {}
    with p.open("rb") as f:
        for step, data in _rows(p, fmt, f, seen):
            rows.setdefault(step, {}).update(data)
    if not rows:
        raise _no_rows(p)
    return ParsedLog(fmt, dict(sorted(rows.items())), seen.skipped, sha)


def _write_merged(rows: Iterator[tuple[int, dict]], out: Path, seen: _Stream) -> None:
    """Write ``rows`` to ``out`` as ``metrics.jsonl``, one row per step, merging rows of a
    step. Steps in order (the normal log) stream with one row in memory; a step that goes
    back (a log resumed over itself) switches to merging the rest in memory."""
    step: int | None = None
    current: dict[str, Any] = {}
    with out.open("w", encoding="utf-8") as f:
        for s, data in rows:
            seen.has_val = seen.has_val or any(k.startswith("val/") for k in data)
            if s == step:
                current.update(data)
                continue
            if step is not None and s < step:
                _merge_in_memory(out, f, [(step, current), (s, data)], rows, seen)
                return
            if step is not None:
                f.write(format_row(step, current) + "\n")
                seen.steps.append(step)
            step, current = s, dict(data)
        if step is not None:
            f.write(format_row(step, current) + "\n")
            seen.steps.append(step)
        f.flush()
        os.fsync(f.fileno())


def _merge_in_memory(out: Path, f: IO[str], pending: list[tuple[int, dict]],
                     rows: Iterator[tuple[int, dict]], seen: _Stream) -> None:
    """Merge the rows written to ``out`` so far, ``pending`` and the rest of ``rows`` in
    memory, and rewrite ``out`` (open as ``f``) in step order."""
    f.flush()
    merged: Rows = {}
    with out.open("rb") as back:
        for raw in back:
            obj = fast_loads(raw)
            merged[int(obj["step"])] = obj["data"]
    for s, data in pending:
        merged.setdefault(s, {}).update(data)
    for s, data in rows:
        seen.has_val = seen.has_val or any(k.startswith("val/") for k in data)
        merged.setdefault(s, {}).update(data)
    seen.steps = sorted(merged)
    f.seek(0)
    f.truncate()
    for s in seen.steps:
        f.write(format_row(s, merged[s]) + "\n")
    f.flush()
    os.fsync(f.fileno())


def _record(sweep: str, arm: str, seed: int, source: str, fmt: str, sha256: str,
            steps: list[int], total_steps: int | None, val_episodes: int | None
            ) -> dict[str, Any]:
    key = {"arm": arm, "seed": seed, "source_sha256": sha256, "total_steps": total_steps,
           "val_episodes": val_episodes}
    return {
        "run_id": hashlib.sha256(canonical_json(key).encode()).hexdigest(),
        "sweep": sweep, "arm": arm, "seed": seed, "backend": "imported",
        "imported": {"source": source, "sha256": sha256,
                     "format": fmt, "rows": len(steps), "first_step": steps[0],
                     "last_step": steps[-1], "total_steps": total_steps,
                     "val_episodes": val_episodes, "imported_at": now_iso()},
        "ccpo_lab_version": __version__, "created": now_iso(),
    }


def _check_count(value: int | None, key: str, high: int) -> None:
    if value is not None and not 1 <= value <= high:
        raise UserError("out of range", key=key, value=value, valid=f"[1, {high}]")


def _check_args(arm: str, seed: int, total_steps: int | None, val_episodes: int | None,
                root: Path) -> None:
    check_name(arm, file=None, key="--arm")
    if not 0 <= seed <= MAX_SEED:
        raise UserError("out of range", key="--seed", value=seed, valid=f"[0, {MAX_SEED}]")
    _check_count(total_steps, "--total-steps", MAX_STEP)
    _check_count(val_episodes, "--val-episodes", 2**31 - 1)
    if root.exists() and not root.is_dir():
        raise UserError("not a directory (expected a sweep directory)", file=root)


def _file_rows(source: Path, fmt: str, seen: _Stream) -> Iterator[tuple[int, dict]]:
    """The rows of the log file ``source``, read as they are written."""
    with source.open("rb") as f:
        yield from _rows(source, fmt, f, seen)


def _wandb_rows(log: WandbLog, seen: _Stream) -> Iterator[tuple[int, dict]]:
    """The rows of a W&B run (its non-numeric values counted in ``seen``)."""
    seen.skipped += log.skipped
    yield from log.rows


def _stage(root: Path, rows: RowsOf, source: Path, seen: _Stream) -> Path:
    """Parse ``rows(seen)`` into ``metrics.jsonl`` of a new hidden directory beside where the
    run will go (in the nearest existing directory above it, so nothing is created in the
    sweep directory for a log that turns out bad); the caller removes it on failure."""
    base = root
    while not base.exists():
        base = base.parent
    stage = temp_dir(base, ".ccpo-import-")
    try:
        _write_merged(rows(seen), RunDir(stage).metrics, seen)
        if not seen.steps:
            raise _no_rows(source)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return stage


def import_run(sweep_dir: str | Path, arm: str, seed: int, source: str | Path, *,
               replace: bool = False, total_steps: int | None = None,
               val_episodes: int | None = None) -> ImportResult:
    """Import ``source`` as run (``arm``, ``seed``) of ``sweep_dir`` (created if missing).

    The log is streamed (memory does not grow with its size) into a directory beside the
    destination, which is renamed into place once everything is checked.

    Args:
        sweep_dir: ``<results>/<sweep>``.
        arm: arm name (a path component).
        seed: seed, in ``[0, MAX_SEED]``.
        source: verl JSONL or console log, or a finished W&B run (an offline run
            directory or ``wandb:ENTITY/PROJECT/RUN_ID``).
        replace: replace an earlier import of another file at (arm, seed).
        total_steps: the run's final step, for the interim flag (optional).
        val_episodes: held-out episodes per evaluation, for binomial errors (optional).

    Raises:
        UserError: bad arguments, a bad or partial log, a different import at (arm, seed)
            without ``replace``, or a ccpo-lab run there. Nothing is written then.
    """
    root = Path(sweep_dir)
    _check_args(arm, seed, total_steps, val_episodes, root)
    if is_wandb_source(source):
        log = read_wandb(source)
        src, fmt, sha, label = Path(log.source), "wandb", log.sha256, log.source
        rows: RowsOf = functools.partial(_wandb_rows, log)
    else:
        src, fmt, sha = _open_log(source)
        label, rows = str(Path(source).resolve()), functools.partial(_file_rows, src, fmt)
    try:
        return _import(root, arm, seed, label, src, fmt, sha, rows, replace, total_steps,
                       val_episodes)
    except UserError:
        raise
    except OSError as e:  # a read-only, full or failing disk: one line, nothing imported
        failure = os_failure(e, doing=f"importing {arm} seed {seed}",
                             outcome="nothing was imported", file=root)
        if failure is None:
            raise
        raise failure from None


def _import(root: Path, arm: str, seed: int, source: str, src: Path, fmt: str,
            sha: str, rows: RowsOf, replace: bool, total_steps: int | None,
            val_episodes: int | None) -> ImportResult:
    """:func:`import_run` once its arguments and log are checked."""
    seen = _Stream()
    stage = _stage(root, rows, src, seen)
    try:
        steps = seen.steps
        if total_steps is not None and steps and steps[-1] > total_steps:
            raise UserError(f"the log has steps up to {steps[-1]}, past --total-steps "
                            f"{total_steps} (the run's final step): pass --total-steps "
                            f"{steps[-1]} or more, or leave it out; nothing imported",
                            file=src, key="--total-steps", value=total_steps)
        name = SweepDir(root).sweep_name() or root.resolve().name
        record = _record(name, arm, seed, source, fmt, sha, steps, total_steps,
                         val_episodes)
        warnings = []
        if not seen.has_val:
            warnings.append("no val/* metric in this log: the report has no held-out result "
                            "for it")
        if seen.skipped:
            warnings.append(f"{seen.skipped} non-numeric values left out")
        if seen.long:
            warnings.append(f"{seen.long} line(s) too long to be a metrics row, not read "
                            f"(the first: {seen.first_long})")
        target, status = _target(root, arm, seed, record, replace)
        if status == "unchanged":
            return ImportResult("unchanged", target.path, len(steps), steps[0], steps[-1],
                                fmt, tuple(warnings))
        _install(stage, target, record)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return ImportResult(status, target.path, len(steps), steps[0], steps[-1], fmt,
                        tuple(warnings))


def _target(root: Path, arm: str, seed: int, record: dict[str, Any], replace: bool
            ) -> tuple[RunDir, Literal["imported", "unchanged", "replaced"]]:
    """Where the import goes, and whether it is new, the same again, or a replacement;
    :class:`UserError` when it may not go there."""
    dirs = candidate_dirs(root, arm, seed)
    target = RunDir(dirs[-1] if dirs else root / arm / run_dir_name(seed))
    if not dirs:
        return target, "imported"
    held = target.read_run()
    if target.config_yaml.exists() or (held and "imported" not in held):
        raise UserError(f"{arm} seed {seed} holds a run launched by ccpo-lab (run id "
                        f"{str(held.get('run_id', '?'))[:12]}); import never overwrites "
                        "it: import under another arm name", file=target.path)
    if held.get("run_id") == record["run_id"]:
        return target, "unchanged"
    if not replace:
        old = held.get("imported", {}) if isinstance(held.get("imported"), dict) else {}
        what = (f"an import of another file ({old.get('source', '?')})" if held
                else "a directory without a run")
        raise UserError(f"{arm} seed {seed} already holds {what}; pass --replace to "
                        "replace it", file=target.path)
    return target, "replaced"


def _install(stage: Path, target: RunDir, record: dict[str, Any]) -> None:
    """Complete the staged run directory and rename it into place (an earlier import
    there is moved aside first and removed once the new one is in place)."""
    parent = target.path.parent
    parent.mkdir(parents=True, exist_ok=True)
    rd = RunDir(stage)
    atomic_write_json(rd.run_json, record)
    last = record["imported"]["last_step"]
    rd.write_state("completed", step=last, total_steps=record["imported"]["total_steps"])
    old = None
    try:
        if target.path.exists():
            old = parent / f".replaced-{target.path.name}-{stage.name[-8:]}"
            target.path.rename(old)
        stage.rename(target.path)
    except BaseException:
        if old is not None and not target.path.exists():
            old.rename(target.path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
