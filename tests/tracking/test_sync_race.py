"""Syncs that race, and a sync killed while it builds the store (issue 15, items 15-16).

Real processes (``python -m ccpo_lab.cli.main sync``) on a real sqlite MLflow store. The
race is made deterministic by holding the store's sync lock from the test while both
syncs start: each must say it waits, and once the lock is released they run one after the
other. The kill happens at a fixed point: a SQLAlchemy hook in the syncing process exits
(``os._exit``, no clean-up, like ``kill -9``) right after MLflow's migrations create their
first ``_alembic_tmp_*`` table.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.report.builders import init_sweep, log_evals, sweep_file

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EVALS = {0: 0.25, 5: 0.5, 10: 0.75}
TRAIN = range(1, 11)
VALUES_PER_RUN = len(EVALS) + 2 * len(TRAIN)  # val/success_rate + 2 training metrics/step
KILL_IN_MIGRATION = """
import os, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine

@event.listens_for(Engine, "after_cursor_execute")
def _die(conn, cursor, statement, parameters, context, executemany):
    if statement.lstrip().upper().startswith("CREATE TABLE _ALEMBIC_TMP_"):
        os._exit(9)

sys.argv[0] = "ccpo-lab"
if sys.argv[1] == "sync":
    from ccpo_lab.cli.main import main
    sys.exit(main(sys.argv[1:]))
from mlflow.tracking import MlflowClient  # what an older ccpo-lab did: open the store in place
MlflowClient(sys.argv[2]).search_experiments()
"""


def _sweep(tmp_path: Path) -> Path:
    """2 arms x 2 seeds, each with 3 evaluations and 10 training rows."""
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0, 1)), tmp_path / "results")
    for rd in rds.values():
        log_evals(rd, EVALS, train_steps=TRAIN)
    return sweep_dir


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}


class _Proc:
    """A ``ccpo-lab`` subprocess whose standard error is collected as it comes."""

    def __init__(self, args: list[str], script: str | None = None) -> None:
        cmd = [sys.executable, "-c", script, *args] if script else \
            [sys.executable, "-m", "ccpo_lab.cli.main", *args]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=_env(), cwd=REPO)
        self.err: list[str] = []
        self.out: list[str] = []
        assert self.p.stderr is not None and self.p.stdout is not None
        err, out = self.p.stderr, self.p.stdout
        # Each stream has its own reader (communicate() would read stderr too and race
        # this reader for its lines).
        self.reader = threading.Thread(target=lambda: self.err.extend(err), daemon=True)
        self.out_reader = threading.Thread(target=lambda: self.out.extend(out), daemon=True)
        self.reader.start()
        self.out_reader.start()

    def wait_for(self, text: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(text in line for line in self.err):
                return True
            if self.p.poll() is not None:
                self.reader.join(5)
                return any(text in line for line in self.err)
            time.sleep(0.2)
        return False

    def finish(self, timeout: float = 300) -> tuple[int, str, str]:
        try:
            self.p.wait(timeout=timeout)
        finally:
            if self.p.poll() is None:
                self.p.kill()
        self.reader.join(30)
        self.out_reader.join(30)
        return self.p.returncode, "".join(self.out), "".join(self.err)


@contextlib.contextmanager
def _holding(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, b"pid of the test", 0)
        yield
    finally:
        os.close(fd)


def _store(sweep_dir: Path) -> tuple[int, dict[str, int], int]:
    """(parent runs, child runs per run id, metric rows) in the sweep's store."""
    with contextlib.closing(sqlite3.connect(sweep_dir / "mlflow.db")) as con:
        kinds = con.execute("SELECT value, COUNT(*) FROM tags WHERE key = 'ccpo_lab.kind' "
                            "GROUP BY value").fetchall()
        ids = con.execute("SELECT value, COUNT(*) FROM tags WHERE key = 'ccpo_lab.run_id' "
                          "GROUP BY value").fetchall()
        rows = con.execute("SELECT COUNT(*) FROM metrics WHERE key NOT LIKE 'summary/%' "
                           "AND key NOT LIKE 'cost/%'").fetchone()[0]
        # the per-run summary: logged once per run and key (again only when it changes)
        twice = con.execute("SELECT run_uuid, key, COUNT(*) FROM metrics WHERE key LIKE "
                            "'summary/%' GROUP BY run_uuid, key HAVING COUNT(*) > 1").fetchall()
        summaries = con.execute("SELECT COUNT(DISTINCT run_uuid) FROM metrics WHERE key = "
                                "'summary/n_evals'").fetchone()[0]
    assert not twice, twice
    assert summaries == len(dict(ids))
    return dict(kinds).get("sweep", 0), dict(ids), int(rows)


def _exactly_once(sweep_dir: Path) -> None:
    parents, children, rows = _store(sweep_dir)
    assert parents == 1
    assert len(children) == 4 and set(children.values()) == {1}, children
    assert rows == 4 * VALUES_PER_RUN


def _race(sweep_dir: Path) -> None:
    """Two syncs started while the test holds the lock: both wait, then both succeed."""
    with _holding(sweep_dir.resolve() / "mlflow.db.lock"):  # the lock beside the store
        procs = [_Proc(["sync", str(sweep_dir)]) for _ in range(2)]
        for p in procs:
            assert p.wait_for("waiting for another sync", timeout=180), p.err
            assert p.p.poll() is None  # still waiting, nothing written
        assert "pid of the test" in procs[0].err[-1]
    results = [p.finish() for p in procs]
    assert [rc for rc, _, _ in results] == [0, 0], results
    created = sorted(out.split(" runs created")[0].rsplit(" ", 1)[-1] for _, out, _ in results)
    assert created == ["0", "4"]  # the second found every run the first created


def test_two_syncs_on_an_initialised_store(tmp_path: Path) -> None:
    """Item 15: on a store whose schema exists, two syncs at once created every run twice."""
    from mlflow.tracking import MlflowClient

    sweep_dir = _sweep(tmp_path)
    MlflowClient(f"sqlite:///{sweep_dir.resolve()}/mlflow.db").search_experiments()
    _race(sweep_dir)
    _exactly_once(sweep_dir)


def test_two_syncs_on_a_fresh_store(tmp_path: Path) -> None:
    """Item 15: on a store that does not exist yet, one of two syncs failed with
    'duplicate column name: step'."""
    sweep_dir = _sweep(tmp_path)
    _race(sweep_dir)
    _exactly_once(sweep_dir)


def test_two_syncs_started_together(tmp_path: Path) -> None:
    """No lock held by the test: whatever the interleaving, one run per run directory."""
    sweep_dir = _sweep(tmp_path)
    procs = [_Proc(["sync", str(sweep_dir)]) for _ in range(2)]
    assert [p.finish()[0] for p in procs] == [0, 0]
    _exactly_once(sweep_dir)


def test_a_sync_killed_while_it_builds_the_store(tmp_path: Path) -> None:
    """Item 16: a sync killed during schema creation left a store every later sync failed
    on ('table _alembic_tmp_experiments already exists ... run sync again later')."""
    sweep_dir = _sweep(tmp_path)
    rc, _, err = _Proc(["sync", str(sweep_dir)], KILL_IN_MIGRATION).finish()
    assert rc == 9, err  # killed in the middle of MLflow's migrations
    rc, out, err = _Proc(["sync", str(sweep_dir)]).finish()
    assert rc == 0, err
    assert "4 runs created" in out
    _exactly_once(sweep_dir)
    assert sorted(p.name for p in sweep_dir.iterdir() if "mlflow.db" in p.name) == [
        "mlflow.db", "mlflow.db.lock"]


def test_a_store_left_half_built_is_rebuilt(tmp_path: Path) -> None:
    """A store an older version left half-built (it holds no run) is moved aside and built
    again, and the sync says so."""
    sweep_dir = _sweep(tmp_path)
    db = sweep_dir.resolve() / "mlflow.db"
    rc, _, err = _Proc(["open", f"sqlite:///{db}"], KILL_IN_MIGRATION).finish()
    assert rc == 9 and db.exists(), err
    rc, out, err = _Proc(["sync", str(sweep_dir)]).finish()
    assert rc == 0, err
    assert "left half-built by an interrupted sync" in err and "moved aside" in err
    _exactly_once(sweep_dir)
    assert len(list(sweep_dir.glob("mlflow.db.interrupted-*"))) == 1


def test_a_store_with_runs_that_cannot_be_opened_is_refused(tmp_path: Path) -> None:
    """A store that holds runs but cannot be opened is not touched: the error says what to
    do."""
    sweep_dir = _sweep(tmp_path)
    assert _Proc(["sync", str(sweep_dir)]).finish()[0] == 0
    db = sweep_dir.resolve() / "mlflow.db"
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE alembic_version SET version_num = 'f00dfeedbeef'")
    before = db.read_bytes()
    rc, _, err = _Proc(["sync", str(sweep_dir)]).finish()
    assert rc == 2, err
    assert "holds 5 runs" in err and f"mv {db} {db}.old" in err
    assert db.read_bytes() == before
