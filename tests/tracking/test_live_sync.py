"""MLflow that shows the number to read, kept current while runs go (issue 26).

Real MLflow throughout: a sqlite store, and for the live sync a real ``mlflow server`` on
127.0.0.1 that is killed (SIGKILL) and started again on the same store mid-watch, while
real run directories grow under their ownership locks. Slow: MLflow's start-up.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.layout import RunDir
from tests.conftest import wait_until
from tests.report.builders import demo_like_study, init_sweep, sweep_file

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MLFLOW = str(Path(sys.executable).with_name("mlflow"))


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:  # type: ignore[no-untyped-def]
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_children_carry_the_reports_summary_and_the_view_shows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.tracking import mlflow_sync
    from ccpo_lab.tracking.mlflow_sync import VIEW_TAG, sync_sweep

    sweep_dir = demo_like_study(tmp_path, tmp_path / "results", arms=("grpo", "gigpo"))
    # a sync cut off between creating the children and logging their params
    real = mlflow_sync._log_new_params

    def cut(client, run, params):  # type: ignore[no-untyped-def]
        if run.data.tags.get(mlflow_sync.KIND) == "run":
            raise ConnectionError("the server went away")
        real(client, run, params)

    monkeypatch.setattr(mlflow_sync, "_log_new_params", cut)
    with pytest.raises(ConnectionError):
        sync_sweep(sweep_dir)
    monkeypatch.setattr(mlflow_sync, "_log_new_params", real)

    report = build_report(sweep_dir).model
    res = sync_sweep(sweep_dir, report=report)
    client = MlflowClient(res.uri)
    exp = client.get_experiment(res.experiment_id)
    view = json.loads(exp.tags[VIEW_TAG])
    assert view["selectedColumns"][0] == "metrics.`summary/window_mean`"
    children = client.search_runs([res.experiment_id], "tags.`ccpo_lab.kind` = 'run'")
    assert len(children) == 6  # none twice, though the first sync was cut off
    for child in children:
        arm, seed = child.data.tags["ccpo_lab.arm"], int(child.data.tags["ccpo_lab.seed"])
        row = report.arm(arm).per_seed[seed]
        m = child.data.metrics
        assert m["summary/window_mean"] == pytest.approx(row.mean)  # the report's number
        assert m["summary/window_sd"] == pytest.approx(row.sd)
        assert m["summary/n_evals"] == row.n_evals == 4
        assert m["summary/first"] == pytest.approx(row.start)
        assert m["summary/best"] == pytest.approx(row.best)
        assert m["summary/best_step"] == row.best_step
        assert m["summary/best_bias"] == pytest.approx(row.best_bias)
        assert m["cost/device_hours"] > 0
        assert child.data.params["protocol.total_steps"] == "60"  # logged after the cut
    # the arm's mean over its seeds' window means is the report's arm mean
    for a in report.arms:
        means = [c.data.metrics["summary/window_mean"] for c in children
                 if c.data.tags["ccpo_lab.arm"] == a.arm]
        assert sum(means) / len(means) == pytest.approx(a.mean)
    parent = client.get_run(res.parent_run_id)
    cost = report.cost
    assert cost is not None
    assert parent.data.metrics["cost/device_hours"] == pytest.approx(cost.total)
    assert parent.data.metrics["cost/grpo/per_run"] == pytest.approx(cost.arms[0].per_run)
    assert "CPU-hours over 6 runs" in parent.data.tags["mlflow.note.content"]

    again = sync_sweep(sweep_dir, report=report)  # nothing new: the summary is not doubled
    assert again.values == 0
    one = children[0].info.run_id
    assert len(client.get_metric_history(one, "summary/window_mean")) == 1
    assert len(client.get_metric_history(res.parent_run_id, "cost/device_hours")) == 1


# ----------------------------------------------------------------- a live sync
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _server(store: Path, port: int) -> Iterator[subprocess.Popen]:
    """A real ``mlflow server`` on 127.0.0.1:``port`` over the sqlite ``store``."""
    log = (store.parent / f"server-{time.monotonic_ns()}.log").open("wb")
    proc = subprocess.Popen([MLFLOW, "server", "--backend-store-uri", f"sqlite:///{store}",
                             "--default-artifact-root", str(store.parent / "art"),
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                            stdout=log, stderr=log, start_new_session=True,
                            cwd=store.parent)
    try:
        def up() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", port), timeout=1):
                return True
            assert proc.poll() is None, (store.parent / log.name).read_text()[-2000:]
            return False

        wait_until(up, 180, "the MLflow server to listen")
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        log.close()


_WRITER = """
import contextlib, sys, time
from pathlib import Path
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import append_metrics
from ccpo_lab.runs.owner import owning
from ccpo_lab.runs.provenance import now_iso
n, dt, go = int(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])
dirs = [RunDir(Path(p)) for p in sys.argv[4:]]
with contextlib.ExitStack() as stack:
    for rd in dirs:
        stack.enter_context(owning(rd))
        rd.write_state("running", started=now_iso(), step=0, total_steps=n)
    for step in range(n + 1):
        deadline = time.monotonic() + 600
        while step == n // 2 and not go.exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # halfway, the runs wait for the test's go
        for i, rd in enumerate(dirs):
            row = {"episode/success_rate": (step % 7) / 7}
            if step % 5 == 0:
                row["val/success_rate"] = min(1.0, 0.2 + 0.01 * step + 0.05 * i)
            append_metrics(rd.metrics, step, row)
            rd.write_state("running", step=step)
        print("STEP", step, flush=True)
        time.sleep(dt)
    for rd in dirs:
        rd.write_state("completed", step=n)
print("DONE", flush=True)
"""


def test_a_live_sync_survives_its_server_dying_and_ends_by_itself(tmp_path: Path) -> None:
    """``sync --watch`` against a real server killed and restarted mid-sync: every row
    arrives exactly once, the summary follows the window, and the watch stops by itself
    once the runs are done."""
    from mlflow.tracking import MlflowClient

    from ccpo_lab.report.analysis import build_report

    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,), protocol={
        "total_steps": 60, "test_freq": 5}), tmp_path / "results")
    store = tmp_path / "server" / "mlflow.db"
    store.parent.mkdir()
    steps = 120
    dirs = [str(rd.path) for rd in rds.values()]
    log_path = tmp_path / "watch.log"

    def rounds_ok() -> int:
        return len(re.findall(r"\] round \d+: ", log_path.read_text()))

    with _server(store, port) as server:
        go = tmp_path / "go"  # the runs go past halfway only once the server died
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(steps), "0.5", str(go),
                                   *dirs],
                                  cwd=REPO, stdout=subprocess.PIPE, text=True)
        wait_until(lambda: RunDir(Path(dirs[0])).read_state().get("state") == "running", 60,
                   "the runs to start")
        watch_log = log_path.open("w")
        watcher = subprocess.Popen([sys.executable, "-m", "ccpo_lab.cli.main", "sync",
                                    str(sweep_dir), "--watch", "--every", "1", "--uri", uri],
                                   cwd=REPO, stdout=watch_log, stderr=subprocess.STDOUT)
        client = MlflowClient(uri)

        def children() -> list:  # type: ignore[type-arg]
            with contextlib.suppress(Exception):
                exp = client.get_experiment_by_name("study")
                if exp is not None:
                    return client.search_runs([exp.experiment_id],
                                              "tags.`ccpo_lab.kind` = 'run'")
            return []

        # rows arrive while the runs go, round after round
        wait_until(lambda: rounds_ok() >= 2, 180, "two rounds of the watch")
        sent = [len(client.get_metric_history(c.info.run_id, "episode/success_rate"))
                for c in children()]
        assert len(sent) == 2 and all(0 < n < steps + 1 for n in sent), sent
        assert writer.poll() is None, "the runs ended before the server could be killed"
        os.killpg(server.pid, signal.SIGKILL)  # the server dies mid-sync
        server.wait(30)
        wait_until(lambda: "failed" in log_path.read_text(), 300, "a round to fail")
        go.write_text("")
    with _server(store, port):  # started again on the same store
        before = rounds_ok()
        assert writer.wait(300) == 0
        assert watcher.wait(300) == 0, log_path.read_text()[-3000:]
        watch_log.close()
        out = log_path.read_text()
        assert "watch ended after" in out and "the store is current" in out
        assert "nothing was lost" in out  # the failed rounds said so
        assert rounds_ok() > before  # it went on after the restart
        got = children()
        assert len(got) == 2  # no child twice
        report = build_report(sweep_dir).model  # with the sweep's settings, as the sync
        for c in got:
            rid = c.info.run_id
            hist = _history(client, rid, "episode/success_rate")
            assert [s for s, _ in hist] == list(range(steps + 1))  # each row once
            assert [s for s, _ in _history(client, rid, "val/success_rate")] == \
                list(range(0, steps + 1, 5))
            assert client.get_run(rid).info.status == "FINISHED"
            arm = c.data.tags["ccpo_lab.arm"]
            final = client.get_run(rid).data.metrics["summary/window_mean"]
            assert final == pytest.approx(report.arm(arm).per_seed[0].mean)
            # the summary followed the window as it filled: several values, the last final
            assert len(client.get_metric_history(rid, "summary/window_mean")) >= 2


def test_sweep_wait_starts_the_live_sync_with_tracking_live(workdir: Path) -> None:
    """``tracking.live: true``: ``sweep --wait`` keeps the store current while it trains
    (a real CPU-backend sweep), and the live sync ends with it."""
    from mlflow.tracking import MlflowClient

    from tests.backends.local.test_trainer import TINY

    path = workdir / "sweeps" / "tiny.yaml"
    path.write_text(TINY.format(cache=workdir / "games", steps=4, save_freq=2,
                                encoder="conv"))
    results = workdir / "results"
    assert main(["sweep", str(path), "seeds=[0]", "tracking.live=true",
                 "tracking.live_every=1", "--results", str(results), "--wait"]) == 0
    sweep_dir = results / "tiny"
    log = (sweep_dir / "_jobs" / "live-sync.log").read_text()
    assert "round 1:" in log and "the store is current" in log, log[-2000:]
    client = MlflowClient(f"sqlite:///{sweep_dir}/mlflow.db")
    exp = client.get_experiment_by_name("tiny")
    runs = client.search_runs([exp.experiment_id], "tags.`ccpo_lab.kind` = 'run'")
    assert len(runs) == 2
    for r in runs:
        assert [s for s, _ in _history(client, r.info.run_id, "val/success_rate")] == [0, 2, 4]
        assert r.info.status == "FINISHED" and "summary/window_mean" in r.data.metrics
        assert r.data.metrics["cost/device_hours"] > 0


def test_a_later_round_reads_only_the_bytes_appended(tmp_path: Path) -> None:
    """In one process (a watch), a sync after another starts reading where the last one
    ended: a line before that point is not read again (here: damaged in place, unseen),
    while a new process reads the whole file and names it."""
    from ccpo_lab.runs.metrics import append_metrics
    from ccpo_lab.tracking import rows
    from ccpo_lab.tracking.mlflow_sync import sync_sweep
    from tests.report.builders import log_evals

    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,), arms=("grpo",)),
                                   tmp_path / "results")
    rd = rds[("grpo", 0)]
    log_evals(rd, {0: 0.25, 5: 0.5}, train_steps=range(1, 6))
    first = sync_sweep(sweep_dir)
    assert first.values == 2 + 2 * 5
    with rd.metrics.open("r+b") as f:  # damage the first line in place (same file, size)
        line = f.readline()
        f.seek(0)
        f.write(b"x" * (len(line) - 1))
    append_metrics(rd.metrics, 6, {"episode/success_rate": 0.75})
    second = sync_sweep(sweep_dir)
    assert second.values == 1 and not second.warnings  # the damaged line was not read
    rows._READ.clear()  # a new process: reads the file from its start
    append_metrics(rd.metrics, 7, {"episode/success_rate": 0.5})
    third = sync_sweep(sweep_dir)
    assert third.values == 0 and "line 1: not JSON" in "\n".join(third.warnings)
