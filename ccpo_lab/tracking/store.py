"""The MLflow store a sync writes to: one sync at a time, created whole, reachable.

* **One sync per store at a time.** Two syncs of one sweep at once each create the sweep's
  parent and child runs (duplicates that later syncs keep), and two syncs creating a fresh
  sqlite store race on its schema. :func:`store_lock` takes an exclusive ``flock`` on a file
  beside the sqlite store (``mlflow.db.lock``) or, for a server or another store, in the
  sweep directory (``.sync-<hash of the URI>.lock``); the kernel frees it when its holder
  dies, so a killed sync never blocks the next one. A sync that has to wait says who holds
  the lock.
* **A store created whole or not at all.** MLflow builds a new sqlite store with a series
  of migrations that are not one transaction: a sync killed while it ran left a store every
  later sync failed on (``table _alembic_tmp_experiments already exists``).
  :func:`prepare_store` builds a new store in a temporary file and renames it into place;
  a store left half-built by an older version (it holds no run) is moved aside and built
  again; a store that holds runs but cannot be opened is refused with what to do.
* **A server that does not answer is refused at once** (:func:`check_reachable`), instead of
  MLflow's retries for minutes without a word; :data:`HTTP_ENV` bounds MLflow's own retries.
* **A store that cannot be written is said in one line** (:func:`store_failure`): a full
  disk, a read-only one, with what to do (not "run again later" where that cannot help);
  MLflow's own log of the failure (a traceback of 40 lines from its database layer) is
  silenced while a sync runs (:func:`quiet_mlflow`; ``CCPO_LAB_DEBUG=1`` keeps it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

from ccpo_lab.errors import EnvironmentFailure, UserError, os_failure

PROBE_TIMEOUT_S = 3.0
"""How long :func:`check_reachable` waits for a tracking server to accept a connection."""
HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
"""MLflow's HTTP retry settings for commands (unless set): a sync or a report fails in
seconds, not minutes, when the server stops answering (a sync is incremental: nothing is
lost, the next one goes on)."""


class StoreUnreachable(ConnectionError):
    """The tracking server does not accept connections."""


def http_defaults() -> None:
    """Apply :data:`HTTP_ENV` where the environment does not set it."""
    for key, value in HTTP_ENV.items():
        os.environ.setdefault(key, value)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for any other store)."""
    if not uri.startswith("sqlite:///"):
        return None
    from urllib.parse import unquote

    return Path(unquote(uri[len("sqlite:///"):].split("?", 1)[0]))


def lock_path(uri: str, sweep_dir: Path) -> Path:
    """The file whose lock serialises syncs to ``uri``: beside a sqlite store, else in
    the sweep directory, named after the URI."""
    db = sqlite_path(uri)
    if db is not None:
        return db.with_name(db.name + ".lock")
    return Path(sweep_dir) / f".sync-{hashlib.sha256(uri.encode()).hexdigest()[:12]}.lock"


@contextlib.contextmanager
def store_lock(uri: str, sweep_dir: Path, waiting: Callable[[str], None] | None = None
               ) -> Iterator[Path]:
    """Hold the sync lock of ``uri`` (:func:`lock_path`) for the block; wait for it when
    another sync holds it, calling ``waiting`` once with a line that names the holder."""
    path = lock_path(uri, sweep_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
                waiting(f"waiting for another sync of this store to finish ({holder}; lock "
                        f"{path})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                      f"{time.strftime('%H:%M:%S')}".encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def check_reachable(uri: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`StoreUnreachable` when an ``http(s)`` tracking server does not accept
    a connection within ``timeout`` seconds (other stores: nothing to check)."""
    u = urlparse(uri)
    if u.scheme not in ("http", "https") or not u.hostname:
        return
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        with socket.create_connection((u.hostname, port), timeout=timeout):
            return
    except OSError as e:
        why = (f"no answer within {timeout:g} s" if isinstance(e, TimeoutError)
               else (e.strerror or str(e)).lower())
        raise StoreUnreachable(f"cannot reach the MLflow tracking server at {uri} ({why}): is "
                               "it running? Start it, or check --uri, MLFLOW_TRACKING_URI "
                               "or the sweep's tracking.uri") from None


def _open(uri: str) -> None:
    """Open the store at ``uri`` as MLflow does (building its schema if it has none)."""
    from mlflow.tracking import MlflowClient

    MlflowClient(tracking_uri=uri).search_experiments(max_results=1)


def _forget(uri: str) -> None:
    """Close MLflow's cached database engine of ``uri`` (it keeps connections to the file
    it opened, which must not outlive a rename of that file)."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    except ImportError:  # pragma: no cover - MLflow always has it
        return
    engines = getattr(SqlAlchemyStore, "_engine_map", None)
    engine = engines.pop(uri, None) if isinstance(engines, dict) else None
    if engine is not None:
        engine.dispose()


def _create(db: Path) -> None:
    """Build a new sqlite store at ``db`` in a temporary file and rename it into place."""
    from urllib.parse import quote

    tmp = db.with_name(f".{db.name}.creating-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    uri = "sqlite:///" + quote(str(tmp), safe="/")  # a "?" or "#" in the path: a name
    try:
        _open(uri)
        _forget(uri)
        os.replace(tmp, db)
    finally:
        tmp.unlink(missing_ok=True)


def _runs_held(db: Path) -> int | None:
    """How many runs the sqlite store holds (None: it has no readable runs table)."""
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=30.0)) as con:
            return int(con.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    except sqlite3.Error:
        return None


def prepare_store(uri: str, say: Callable[[str], None] | None = None) -> None:
    """Make the store at ``uri`` ready for a sync (call it holding :func:`store_lock`).

    A sqlite store that does not exist is built whole (:func:`_create`); one that cannot be
    opened and holds no run (left half-built by an interrupted sync of an older version) is
    moved aside to ``<name>.interrupted-<time>`` and built again, and ``say`` is told; one
    that holds runs is refused (:class:`UserError` saying what to do). Other stores are
    MLflow's business.
    """
    db = sqlite_path(uri)
    if db is None:
        return
    for stale in db.parent.glob(f".{db.name}.creating-*"):  # left by a killed sync
        stale.unlink(missing_ok=True)
    if not db.exists():
        _create(db)
        return
    try:
        _open(uri)
    except Exception as e:  # noqa: BLE001 - MLflow raises SQLAlchemy's and its own errors
        _forget(uri)
        why = (str(e).splitlines() or [type(e).__name__])[0][:300]
        held = _runs_held(db)
        if held:
            raise UserError(
                f"the MLflow store cannot be opened ({why}); it holds {held} runs. Everything "
                "ccpo-lab put there is rebuilt from the run files: move it aside (mv "
                f"{db} {db}.old) and run `ccpo-lab sync` again (then `ccpo-lab report --out "
                "DIR` to log the report again)", file=db) from None
        aside = db.with_name(f"{db.name}.interrupted-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(db, aside)
        if say is not None:
            say(f"the MLflow store {db} was left half-built by an interrupted sync ({why}); "
                f"it held no run: moved aside to {aside.name} and built again")
        _create(db)


QUIET_LOGGERS = ("mlflow.store.db.utils", "mlflow.store.db", "sqlalchemy", "alembic")
"""Loggers that report a failed store write with a traceback before MLflow raises it."""


@contextlib.contextmanager
def quiet_mlflow() -> Iterator[None]:
    """Silence :data:`QUIET_LOGGERS` for the block (the command says what failed in one
    line); ``CCPO_LAB_DEBUG=1`` leaves them as they are."""
    if os.environ.get("CCPO_LAB_DEBUG", "") not in ("", "0", "false", "no"):
        yield
        return
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


_SQLITE_FULL = ("database or disk is full", "disk i/o error")
_SQLITE_READONLY = ("attempt to write a readonly database", "readonly database",
                    "unable to open database file")


def store_failure(e: BaseException, uri: str, sweep_dir: Path) -> UserError | None:
    """One line for a sync that failed because the store or the sweep directory cannot be
    written (a full or read-only disk, a permission), naming the path and what to do:
    :class:`EnvironmentFailure` (exit 1: free space, then sync again; nothing is lost,
    a sync is incremental) or :class:`UserError` (exit 2: a location that cannot be
    written: ``--uri``). None for anything else (a server that stopped answering...)."""
    where = sqlite_path(uri) or lock_path(uri, sweep_dir)
    doing = f"syncing to the MLflow store {uri}"
    cur: BaseException | None = e
    seen: set[int] = set()
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return os_failure(cur, "--uri", doing=doing, outcome="nothing was lost",
                              file=cur.filename or where)
        if isinstance(cur, OSError) and cur.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO,
                                                      errno.EFBIG):
            return os_failure(cur, doing=doing, outcome="nothing was lost (a sync is "
                              "incremental)", file=cur.filename or where)
        text = str(cur).lower()
        if any(x in text for x in _SQLITE_FULL):
            return EnvironmentFailure(f"{doing}: the disk is full (sqlite: database or disk "
                                      "is full); nothing was lost (a sync is incremental): "
                                      "free some space, then run `ccpo-lab sync` again",
                                      file=where)
        if any(x in text for x in _SQLITE_READONLY):
            return UserError(f"{doing}: the store cannot be written (sqlite: "
                             f"{next(x for x in _SQLITE_READONLY if x in text)}); nothing was "
                             "lost: make it writable, or sync to another store with --uri "
                             "(e.g. sqlite:////a/writable/place/mlflow.db)", file=where)
        cur = cur.__cause__ or cur.__context__
    return None
