"""Weights & Biases beside MLflow (issue 26): ids, names, settings, and runs read back.

W&B runs in offline mode here (no network): the runs are read back with W&B's own
transaction-log reader (``wandb leet inspect``, :func:`ccpo_lab.runs.wandb_run.inspect`),
never by grepping its files. The slow tests train real CPU-backend runs, run verl-agent's
own ``Tracking`` (the pinned checkout) with ccpo-lab's hooks, and sync a sweep.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import read_metrics
from ccpo_lab.runs.wandb_run import (
    WandbSettings,
    clean,
    identity,
    inspect,
    offline_runs,
    verl_logging,
    wandb_env,
    wandb_id,
)
from tests.report.builders import init_sweep, sweep_file

REPO = Path(__file__).resolve().parents[2]
VERL_AGENT = Path("/work/shared/verl-agent-796ed31")
W_KEYS = ("_runtime", "_step", "_timestamp", "_wandb")


# ------------------------------------------------------------------ names and settings
def test_the_wandb_id_is_derived_from_the_run_id_and_stable() -> None:
    rid = "0123456789abcdef" + "f" * 48
    a = wandb_id(rid, "demo", "grpo", "2026-12-01T10:00:00+00:00")
    assert a.startswith("0123456789abcdef-") and len(a) == 25
    assert a == wandb_id(rid, "demo", "grpo", "2026-12-01T10:00:00+00:00")  # a requeue
    assert a != wandb_id(rid, "other-sweep", "grpo", "2026-12-01T10:00:00+00:00")
    assert a != wandb_id(rid, "demo", "grpo", "2026-12-02T10:00:00+00:00")  # run again


def test_identity_env_and_verl_loggers(tmp_path: Path) -> None:
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(3,), backend="verl",
                                              extra="tracking:\n  wandb: {mode: offline, "
                                              "project: p1, entity: team, tags: [a, b]}\n"),
                                   tmp_path / "results")
    rd = rds[("gigpo", 3)]
    run = rd.read_run()
    ident = identity(rd)
    assert (ident.name, ident.group, ident.job_type) == ("gigpo-seed3", "study", "gigpo")
    assert ident.id == wandb_id(run["run_id"], "study", "gigpo", run["created"])
    beside = RunDir(rd.path.with_name("seed-3.2"))
    assert identity(beside, run).name == "gigpo-seed3.2"
    settings = WandbSettings("offline", "p1", "team", ("a", "b"))
    env = wandb_env(settings, ident, rd)
    assert env == {"WANDB_RUN_ID": ident.id, "WANDB_RESUME": "allow",
                   "WANDB_RUN_GROUP": "study", "WANDB_JOB_TYPE": "gigpo",
                   "WANDB_NAME": "gigpo-seed3", "WANDB_MODE": "offline",
                   "WANDB_PROJECT": "p1", "WANDB_DIR": str(rd.path), "WANDB_ENTITY": "team",
                   "WANDB_TAGS": "a,b"}
    gigpo = next(r for r in load_sweep(tmp_path / "study.yaml").runs if r.arm == "gigpo")
    logging = verl_logging(gigpo, rd.path)
    assert logging.loggers == ("console", "file", "wandb") and logging.project == "p1"
    assert logging.env == env

    from ccpo_lab.backends.verl.command import build_command

    cmd = build_command(gigpo, rd.path)
    assert "trainer.logger=[console,file,wandb]" in cmd.overrides
    assert "trainer.project_name=p1" in cmd.overrides
    assert f"++ray_init.runtime_env.env_vars.WANDB_RUN_ID='{ident.id}'" in cmd.overrides
    assert "++ray_init.runtime_env.env_vars.WANDB_RESUME='allow'" in cmd.overrides
    assert cmd.env["WANDB_JOB_TYPE"] == "gigpo" and cmd.env["WANDB_DIR"] == str(rd.path)


def test_wandb_off_leaves_the_verl_command_as_it_was(tmp_path: Path) -> None:
    _, _, rds = init_sweep(sweep_file(tmp_path, seeds=(0,), backend="verl"),
                           tmp_path / "results")
    sw = load_sweep(tmp_path / "study.yaml")
    logging = verl_logging(sw.runs[0], rds[("grpo", 0)].path)
    assert logging.loggers == ("console", "file") and logging.env == {}
    assert logging.project is None


@pytest.mark.parametrize("override,key", [
    ("tracking.wandb.mode=sometimes", "tracking.wandb.mode"),
    ("tracking.wandb.project=a/b", "tracking.wandb.project"),
    ("tracking.wandb.tags=[x,'y,z']", "tracking.wandb.tags[1]"),
    ("tracking.live_every=0.5", "tracking.live_every"),
])
def test_bad_tracking_settings_are_refused_naming_the_key(tmp_path: Path, override: str,
                                                          key: str) -> None:
    with pytest.raises(UserError) as e:
        load_sweep(sweep_file(tmp_path), [override])
    assert key in str(e.value)


def test_sync_refuses_w_and_b_options_without_wandb_or_with_a_bad_mode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, sweep_dir, _ = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    assert main(["sync", str(sweep_dir), "--wandb", "--wandb-mode", "sometimes"]) == 2
    assert "--wandb-mode" in capsys.readouterr().err
    assert main(["sync", str(sweep_dir), "--wandb-mode", "offline"]) == 2
    assert "go with --wandb" in capsys.readouterr().err


def test_live_sync_needs_tracking_on(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="tracking.live"):
        load_sweep(sweep_file(tmp_path), ["tracking.live=true", "tracking.enabled=false"])


def test_a_missing_wandb_package_is_refused_at_load(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from ccpo_lab.config import tracking

    monkeypatch.setattr(tracking, "wandb_installed", lambda: False)
    with pytest.raises(UserError, match="pip install 'ccpo-lab\\[wandb\\]'"):
        load_sweep(sweep_file(tmp_path), ["tracking.wandb.mode=offline"])
    load_sweep(sweep_file(tmp_path), ["tracking.wandb.mode=disabled"])  # costs nothing


def test_w_and_b_on_imports_nothing_until_a_run_logs(tmp_path: Path) -> None:
    """Loading and planning a sweep with W&B on, and ``--help``, never import wandb."""
    code = ("import sys\nfrom ccpo_lab.cli.main import main\n"
            f"main(['sweep', {str(REPO / 'sweeps' / 'demo.yaml')!r}, "
            "'tracking.wandb.mode=offline', 'tracking.live=true', '--dry-run', '--results', "
            f"{str(tmp_path / 'r')!r}])\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('LOADED', [m for m in ('wandb', 'mlflow') if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert "LOADED []" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


# ------------------------------------------------------------------ reading runs back
def history(run_dirs: list[Path]) -> dict[int, dict[str, float]]:
    """Step -> values of W&B run directories (oldest first; a later one's step wins), read
    with W&B's reader."""
    out: dict[int, dict[str, float]] = {}
    for d in run_dirs:
        for rec in inspect(d):
            if rec["type"] == "history":
                item = {k: v for k, v in rec["history"]["item"].items()
                        if not k.startswith(W_KEYS)}
                out[int(rec["history"]["step"]["num"])] = item
    return out


def run_record(d: Path) -> dict[str, Any]:
    return next(r["run"] for r in inspect(d) if r["type"] == "run")


def metrics_rows(rd: RunDir) -> dict[int, dict[str, float]]:
    return {r["step"]: clean(r["data"]) for r in read_metrics(rd.metrics)}


def _same(a: dict[int, dict[str, float]], b: dict[int, dict[str, float]]) -> None:
    assert sorted(a) == sorted(b)
    for step in a:
        assert a[step].keys() == b[step].keys(), step
        assert all(a[step][k] == pytest.approx(b[step][k], rel=1e-9) for k in a[step]), step


def _tiny(workdir: Path, steps: int = 4) -> Path:
    from tests.backends.local.test_trainer import TINY

    path = workdir / "sweeps" / "tiny.yaml"
    path.write_text(TINY.format(cache=workdir / "games", steps=steps, save_freq=2,
                                encoder="conv"))
    return path


@pytest.mark.slow
def test_cpu_runs_log_live_to_offline_wandb_and_a_requeue_continues_the_run(
        workdir: Path) -> None:
    sweep = _tiny(workdir)
    args = ["sweep", str(sweep), "seeds=[0]", "tracking.wandb.mode=offline",
            "tracking.wandb.tags=[cpu-test]", "--results", str(workdir / "results"), "--wait"]
    assert main(args) == 0
    sweep_dir = workdir / "results" / "tiny"
    for arm in ("grpo", "gigpo"):
        rd = RunDir(sweep_dir / arm / "seed-0")
        run = rd.read_run()
        ident = identity(rd)
        assert run["wandb"]["id"] == ident.id and run["wandb"]["mode"] == "offline"
        dirs = offline_runs(rd, ident.id)
        assert len(dirs) == 1
        rec = run_record(dirs[0])
        assert (rec["run_id"], rec["run_group"], rec["job_type"], rec["display_name"],
                rec["project"]) == (ident.id, "tiny", arm, f"{arm}-seed0", "tiny")
        assert rec["tags"] == ["cpu-test"]
        summary = inspect(dirs[0], summary=True)
        assert summary["state"] == "finished" and summary["step"] == 4
        assert summary["config"]["run_id"] == run["run_id"]
        assert summary["config"]["estimator"]["name"] == arm
        assert summary["summary"]["summary/n_evals"] == 3  # steps 0, 2, 4: window >= 0
        assert summary["summary"]["cost/device_hours"] > 0
        _same(history(dirs), metrics_rows(rd))

    # a requeue: the run resumes from its step-2 checkpoint and continues the same W&B run
    rd = RunDir(sweep_dir / "grpo" / "seed-0")
    (rd.checkpoints / "step-000004.pt").unlink()
    rd.write_state("interrupted", step=4)
    assert main(args) == 0
    ident = identity(rd)
    dirs = offline_runs(rd, ident.id)
    assert len(dirs) == 2  # a second offline directory of the same W&B run
    assert run_record(dirs[1])["run_id"] == ident.id and run_record(dirs[1])["resume"]
    assert sorted(history(dirs[1:])) == [3, 4]  # the steps after the checkpoint
    _same(history(dirs), metrics_rows(rd))
    assert len(rd.read_run()["cost"]["attempts"]) == 2


@pytest.mark.slow
def test_sync_pushes_a_sweep_once_and_then_only_what_is_new(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.runs.metrics import append_metrics
    from ccpo_lab.tracking.wandb_sync import sync_wandb
    from tests.report.builders import demo_like_study

    sweep_dir = demo_like_study(tmp_path, tmp_path / "results", arms=("grpo", "gigpo"))
    report = build_report(sweep_dir).model
    first = sync_wandb(sweep_dir, mode="offline", report=report)
    assert (first.opened, first.up_to_date, first.report) == (6, 0, True)
    assert first.rows == 6 * 61
    for (arm, seed), row in [((a.arm, k), e) for a in report.arms
                             for k, e in a.per_seed.items()]:
        rd = RunDir(sweep_dir / arm / f"seed-{seed}")
        dirs = offline_runs(rd, identity(rd).id)
        assert len(dirs) == 1
        rec = run_record(dirs[0])
        assert (rec["run_group"], rec["job_type"], rec["display_name"]) == \
            ("demo", arm, f"{arm}-seed{seed}")
        _same(history(dirs), metrics_rows(rd))
        summary = inspect(dirs[0], summary=True)["summary"]
        assert summary["summary/window_mean"] == pytest.approx(row.mean)  # the report's
        assert summary["summary/best_step"] == row.best_step
    # the group's summary: the report's numbers
    holder = sweep_dir / "_wandb"
    (report_dir,) = [p for p in (holder / "wandb").glob("offline-run-*") if p.is_dir()]
    s = inspect(report_dir, summary=True)
    assert s["name"] == "demo-report"
    assert s["summary"]["report/grpo/mean"] == pytest.approx(report.arm("grpo").mean)
    assert s["summary"]["cost/device_hours"] > 0

    again = sync_wandb(sweep_dir, mode="offline", report=report)  # idempotent: nothing new
    assert (again.opened, again.up_to_date, again.rows, again.report) == (0, 6, 0, False)
    assert len(list(sweep_dir.glob("*/seed-*/wandb/offline-run-*"))) == 6

    rd = RunDir(sweep_dir / "gigpo" / "seed-1")
    append_metrics(rd.metrics, 61, {"episode/success_rate": 0.75})
    more = sync_wandb(sweep_dir, mode="offline")
    assert (more.opened, more.rows) == (1, 1)
    dirs = offline_runs(rd, identity(rd).id)
    assert len(dirs) == 2 and sorted(history(dirs[1:])) == [61]
    _same(history(dirs), metrics_rows(rd))
    # the command: MLflow as usual, then W&B, where nothing is new any more
    assert main(["sync", str(sweep_dir), "--wandb", "--wandb-mode", "offline"]) == 0
    out = capsys.readouterr().out
    assert "6 runs created" in out  # MLflow
    assert "W&B (offline, project demo): 0 runs sent, 6 up to date, 0 metrics rows" in out


_VERL_CHILD = """
import json, sys
from ccpo_lab.backends.verl.agent import hooks as h
h.setup()
from verl.utils.tracking import Tracking          # verl-agent's own, patched on import
assert "verl-agent" in sys.modules["verl"].__file__, sys.modules["verl"].__file__
t = Tracking(project_name=sys.argv[1], experiment_name=sys.argv[2],
             default_backend=["console", "file", "wandb"],
             config={"trainer": {"total_epochs": 2}, "algorithm": {"adv_estimator": "gigpo"}})
start = int(sys.argv[3])
for step in range(start, start + 2):
    t.log({"val/success_rate": 0.25 * step, "timing_s/gen": 1.5}, step=step)
del t
"""


@pytest.mark.slow
@pytest.mark.skipif(not (VERL_AGENT / "verl" / "utils" / "tracking.py").is_file(),
                    reason=f"the pinned verl-agent checkout is not at {VERL_AGENT}")
def test_verl_agents_wandb_logger_gets_ccpo_labs_names_ids_and_config(tmp_path: Path) -> None:
    """verl-agent's ``Tracking`` (pinned checkout) calls ``wandb.init(project, name,
    config)``; the variables of the run's command name, group and resume it, and the hooks
    add ccpo-lab's configuration. Started twice, as a requeue does: one W&B run."""
    _, _, rds = init_sweep(sweep_file(tmp_path, seeds=(0,), backend="verl",
                                      extra="tracking:\n  wandb: {mode: offline}\n"),
                           tmp_path / "results")
    rd = rds[("gigpo", 0)]
    sw = load_sweep(tmp_path / "study.yaml")
    run = next(r for r in sw.runs if r.arm == "gigpo")
    from ccpo_lab.backends.verl.command import build_command, experiment_name

    cmd = build_command(run, rd.path)
    project = next(o.split("=", 1)[1] for o in cmd.overrides
                   if o.startswith("trainer.project_name="))
    env = {**os.environ, **cmd.env, "PYTHONPATH": f"{VERL_AGENT}{os.pathsep}{REPO}"}
    for start in (0, 2):  # the first attempt, then the requeued one
        out = subprocess.run([sys.executable, "-c", _VERL_CHILD, project,
                              experiment_name(run), str(start)], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
    ident = identity(rd)
    dirs = offline_runs(rd, ident.id)
    assert len(dirs) == 2
    rec = run_record(dirs[0])
    assert (rec["run_id"], rec["run_group"], rec["job_type"], rec["display_name"],
            rec["project"]) == (ident.id, "study", "gigpo", "gigpo-seed0", "study")
    summary = inspect(dirs[1], summary=True)
    assert summary["run_id"] == ident.id
    config = summary["config"]
    assert config["algorithm"]["adv_estimator"] == "gigpo"  # verl's own config
    assert config["ccpo_lab"]["run_id"] == run.run_id  # and ccpo-lab's
    assert config["ccpo_lab"]["estimator"]["name"] == "gigpo"
    assert sorted(history(dirs)) == [0, 1, 2, 3]
    _same(history(dirs), metrics_rows(rd))  # the file logger wrote the same rows
    assert json.loads(rd.run_json.read_text())["run_id"] == run.run_id


@pytest.mark.slow
def test_an_imported_sweep_goes_to_wandb_too(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A run made before ccpo-lab (``ccpo-lab import``: no configuration, no attempt) is
    pushed with its import record as config and its rows as history."""
    src = tmp_path / "run.jsonl"
    src.write_text('{"step":0,"data":{"val/success_rate":0.25}}\n'
                   '{"step":1,"data":{"episode/success_rate":0.125}}\n'
                   '{"step":5,"data":{"val/success_rate":0.5}}\n', encoding="utf-8")
    sweep = tmp_path / "old"
    assert main(["import", str(sweep), str(src), "--arm", "grpo", "--seed", "0"]) == 0
    assert main(["sync", str(sweep), "--wandb", "--wandb-mode", "offline",
                 "--wandb-project", "legacy"]) == 0
    out = capsys.readouterr().out
    assert "W&B (offline, project legacy): 1 runs sent, 0 up to date, 3 metrics rows" in out
    rd = RunDir(sweep / "grpo" / "seed-0")
    (d,) = offline_runs(rd, identity(rd).id)
    s = inspect(d, summary=True)
    assert (s["project"], s["name"]) == ("legacy", "grpo-seed0")
    assert s["config"]["imported"]["source"] == str(src)
    assert run_record(d)["run_group"] == "old"
    _same(history([d]), metrics_rows(rd))
