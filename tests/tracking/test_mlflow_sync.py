"""MLflow sync against a real sqlite tracking store (slow: MLflow's start-up and schema)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.metrics import append_metrics
from tests.report.builders import episodes, init_sweep, log_evals, sweep_file, write_step1

pytestmark = pytest.mark.slow


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:  # type: ignore[no-untyped-def]
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_sync_idempotent_incremental_with_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow.tracking import MlflowClient

    from ccpo_lab.tracking.mlflow_sync import sync_sweep

    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    for rd in rds.values():
        log_evals(rd, {0: 0.25, 5: 0.5, 10: 0.75}, train_steps=range(1, 11))
    fp = write_step1(rds[("grpo", 0)], episodes())

    # a tracking server that is down: the sync fails, says so, and nothing is lost
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    assert main(["sync", str(sweep_dir), "--uri", "http://127.0.0.1:9"]) == 1
    assert "nothing was lost" in capsys.readouterr().err

    first = sync_sweep(sweep_dir)
    assert first.uri == f"sqlite:///{sweep_dir.resolve()}/mlflow.db"
    assert (first.created, first.updated, first.up_to_date) == (2, 0, 0)
    client = MlflowClient(first.uri)
    exp = client.get_experiment_by_name("study")
    children = client.search_runs([exp.experiment_id], "tags.`ccpo_lab.kind` = 'run'")
    assert len(children) == 2
    by_arm = {r.data.tags["ccpo_lab.arm"]: r for r in children}
    grpo = by_arm["grpo"]
    assert grpo.data.tags["mlflow.parentRunId"] == first.parent_run_id
    assert grpo.data.tags["ccpo_lab.run_id"] == rds[("grpo", 0)].read_run()["run_id"]
    assert grpo.data.tags["ccpo_lab.step1_fingerprint"] == fp
    assert grpo.data.tags["ccpo_lab.seed"] == "0" and grpo.data.tags["ccpo_lab.backend"] == "local"
    assert grpo.data.tags["ccpo_lab.estimator"] == "grpo"
    assert grpo.data.tags["ccpo_lab.semantics"] == "described"  # issue 30
    assert "ccpo_lab.git_commit" in grpo.data.tags
    assert grpo.data.params["protocol.total_steps"] == "30"
    assert grpo.data.params["estimator.params.gamma"] == "0.95"
    gid = grpo.info.run_id
    assert _history(client, gid, "val/success_rate") == [(0, 0.25), (5, 0.5), (10, 0.75)]
    assert len(_history(client, gid, "episode/success_rate")) == 10
    assert first.values == 2 * (3 + 2 * 10)

    again = sync_sweep(sweep_dir)  # idempotent
    assert (again.created, again.updated, again.up_to_date, again.values) == (0, 0, 2, 0)
    assert again.parent_run_id == first.parent_run_id
    assert len(_history(client, gid, "episode/success_rate")) == 10

    append_metrics(rds[("grpo", 0)].metrics, 11, {"episode/success_rate": 0.5})
    append_metrics(rds[("grpo", 0)].metrics, 12, {"episode/success_rate": 0.625})
    rds[("grpo", 0)].write_state("completed")
    inc = sync_sweep(sweep_dir)  # incremental: the two new rows only
    assert (inc.updated, inc.up_to_date, inc.values) == (1, 1, 2)
    assert _history(client, gid, "episode/success_rate")[-2:] == [(11, 0.5), (12, 0.625)]
    assert len(_history(client, gid, "episode/success_rate")) == 12
    assert client.get_run(gid).info.status == "FINISHED"
    other = by_arm["gigpo"].info.run_id
    assert len(_history(client, other, "episode/success_rate")) == 10

    # report --out logs the tables and plots as artifacts of the parent
    assert main(["report", str(sweep_dir), "--window-start", "5", "--out",
                 str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out  # the closing note: --out alone prints no report
    assert "report numbers and the report files logged to the parent" in out
    monkeypatch.chdir(sweep_dir)  # artifact paths are relative to the sweep directory
    names = {a.path for a in client.list_artifacts(first.parent_run_id, "report")}
    assert {"report/report.json", "report/report.md", "report/curves.png",
            "report/curves.pdf"} <= names
    assert len(client.search_runs([exp.experiment_id], "tags.`ccpo_lab.kind` = 'run'")) == 2


def test_store_opens_ready_and_survives_a_move(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import shutil
    from datetime import datetime

    from mlflow.tracking import MlflowClient

    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.tracking.mlflow_sync import ARM_TAG, VIEW_TAG, headline_metrics, sync_sweep
    from tests.report.builders import demo_like_study

    sweep_dir = demo_like_study(tmp_path, tmp_path / "results")
    pending = next(p for p in sorted(sweep_dir.glob("grpo/seed-*")))
    (pending / "metrics.jsonl").unlink()  # grpo seed 0 not started: no metrics, no start
    (pending / "state.json").write_text(json.dumps({"state": "pending", "step": 0}))
    assert main(["report", str(sweep_dir), "--out", str(sweep_dir / "report")]) == 0
    out = capsys.readouterr().out
    assert "14 runs created" in out and "1 not started yet" in out
    assert "mlflow ui --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1" in out
    assert "/#/experiments/1/runs?viewStateShareKey=ccpo-lab-by-arm&workflowType=" \
           "machine_learning" in out

    client = MlflowClient(f"sqlite:///{sweep_dir}/mlflow.db")
    exp = client.get_experiment_by_name("demo")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # training view
    view = json.loads(exp.tags[VIEW_TAG])
    assert view["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": ARM_TAG}]
    assert exp.artifact_location == "mlartifacts"  # relative to the sweep directory
    runs = client.search_runs([exp.experiment_id], "tags.`ccpo_lab.kind` = 'run'")
    assert len(runs) == 14 and all(r.info.artifact_uri.startswith("mlartifacts/") for r in runs)
    # children carry the training's own start and end (state.json), not the sync's time
    gigpo1 = next(r for r in runs if r.info.run_name == "gigpo seed 1")
    state = json.loads((sweep_dir / "gigpo" / "seed-1" / "state.json").read_text())
    start = int(datetime.fromisoformat(state["started"]).timestamp() * 1000)
    end = int(datetime.fromisoformat(state["updated"]).timestamp() * 1000)
    assert (gigpo1.info.start_time, gigpo1.info.end_time) == (start, end)
    assert 240_000 <= end - start < 300_000 and gigpo1.info.status == "FINISHED"
    # the parent: the sweep's settings, the report's headline, a description
    (parent,) = client.search_runs([exp.experiment_id], "tags.`ccpo_lab.kind` = 'sweep'")
    assert parent.data.params["protocol.total_steps"] == "60"
    assert parent.data.params["analysis.window_start"] == "30"
    model = build_report(sweep_dir).model
    assert parent.data.metrics["report/gigpo/mean"] == pytest.approx(model.arm("gigpo").mean)
    assert set(headline_metrics(model)) <= set(parent.data.metrics)
    assert "| gigpo |" in parent.data.tags["mlflow.note.content"]
    assert parent.info.status == "RUNNING"  # grpo seed 0 has not run

    # grpo seed 0 starts: created at the next sync, with its real start time
    (pending / "state.json").write_text(json.dumps(
        {"state": "running", "step": 0, "started": "2025-11-30T12:00:00+00:00"}))
    again = sync_sweep(sweep_dir)
    assert (again.created, again.pending) == (1, 0)
    (seed0,) = client.search_runs([exp.experiment_id], "tags.`ccpo_lab.seed` = '0' and "
                                  "tags.`ccpo_lab.arm` = 'grpo'")
    assert seed0.info.start_time == int(datetime.fromisoformat(
        "2025-11-30T12:00:00+00:00").timestamp() * 1000) and seed0.info.status == "RUNNING"

    # move results/: the store still opens and its artifacts still read, from the sweep dir
    moved = tmp_path / "elsewhere"
    shutil.move(str(tmp_path / "results"), str(moved))
    monkeypatch.chdir(moved / "demo")
    client = MlflowClient("sqlite:///mlflow.db")
    local = client.download_artifacts(parent.info.run_id, "report/report.md", str(tmp_path))
    assert Path(local).read_text() == (moved / "demo" / "report" / "report.md").read_text()
    assert main(["sync", str(moved / "demo")]) == 0  # and syncs on, nothing duplicated
    assert "0 runs created" in capsys.readouterr().out


def test_what_sync_cannot_send_is_named_and_sent_once_mended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Items 1-5 for sync: a line cut in the middle stops that run's sync there (the rows
    before it are sent; the rest once the line is mended, exactly once); a value that is not
    a finite number is not sent and is counted; a directory copied in from elsewhere is not
    synced. Every one is named (file, line). A long run reports its progress."""
    import shutil

    from mlflow.tracking import MlflowClient

    from ccpo_lab.tracking import rows
    from ccpo_lab.tracking.mlflow_sync import sync_sweep

    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    for rd in rds.values():
        log_evals(rd, {0: 0.25, 5: 0.5, 10: 0.75}, train_steps=range(1, 11))
    cut = rds[("grpo", 0)].metrics
    lines = cut.read_bytes().splitlines(keepends=True)
    assert b'"step": 6}' in lines[6]
    original = lines[6]
    lines[6] = original[:30] + b"\n"
    cut.write_bytes(b"".join(lines))
    nan = rds[("gigpo", 0)].metrics
    text = nan.read_text().replace('"episode/success_rate": 0.5}, "step": 3}',
                                   '"episode/success_rate": NaN}, "step": 3}')
    assert "NaN" in text
    nan.write_text(text)
    shutil.copytree(rds[("grpo", 0)].path, sweep_dir / "gigpo" / "seed-7")
    said: list[str] = []
    monkeypatch.setattr(rows, "PROGRESS_EVERY_S", 0.0)

    res = sync_sweep(sweep_dir, say=said.append)
    # grpo: step 0's evaluation, steps 1-5 and step 5's evaluation; gigpo: all but the NaN
    assert (res.created, res.values) == (2, (1 + 2 * 5 + 1) + (3 + 2 * 10 - 1))
    warnings = "\n".join(res.warnings)
    assert f"grpo seed 0: stopped at {cut}: line 7: not JSON" in warnings
    assert f"gigpo seed 0: 1 value(s) not sent (not finite numbers, or proportions outside " \
           f"[0, 1]), the first at {nan}: line 4: episode/success_rate: not a finite number " \
           "(nan)" in warnings
    assert "gigpo/seed-7: left out: its run.json belongs elsewhere: arm grpo (here gigpo), " \
           "seed 0 (here 7)" in warnings
    assert any("metric values sent" in line for line in said)

    client = MlflowClient(res.uri)
    by_arm = {r.data.tags["ccpo_lab.arm"]: r for r in client.search_runs(
        [res.experiment_id], "tags.`ccpo_lab.kind` = 'run'")}
    assert len(by_arm) == 2
    grpo = by_arm["grpo"].info.run_id
    assert [s for s, _ in _history(client, grpo, "episode/success_rate")] == [1, 2, 3, 4, 5]

    lines[6] = original  # mended: the next sync sends the rest, once
    cut.write_bytes(b"".join(lines))
    again = sync_sweep(sweep_dir)
    assert again.values == 2 * 5 + 1  # steps 6-10 and the evaluation at step 10
    assert [s for s, _ in _history(client, grpo, "episode/success_rate")] == list(range(1, 11))
    assert _history(client, grpo, "val/success_rate") == [(0, 0.25), (5, 0.5), (10, 0.75)]
