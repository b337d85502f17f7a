"""Issue 35: MLflow and W&B go where the team points (``MLFLOW_TRACKING_URI``,
``MLFLOW_EXPERIMENT_NAME``, ``WANDB_MODE``, ``WANDB_PROJECT``, ``WANDB_ENTITY``).

Precedence, highest first: the flag > the environment variable > the sweep's ``tracking``
> the default; an empty variable counts as unset; a line says when the environment
decides. Real MLflow throughout (sqlite stores, and a real ``mlflow server``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.errors import UserError
from tests.report.builders import init_sweep, log_evals, sweep_file

ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "WANDB_MODE", "WANDB_PROJECT",
       "WANDB_ENTITY")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """None of the variables leaks in from the shell; relative paths land in tmp_path."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def _sweep(tmp_path: Path, extra: str = "") -> Path:
    """A one-arm, two-seed sweep whose runs have metrics rows."""
    p = sweep_file(tmp_path, arms=("grpo",), seeds=(0, 1), extra=extra)
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results")
    for rd in rds.values():
        log_evals(rd, {0: 0.25, 5: 0.5}, train_steps=range(1, 6))
    return sweep_dir


def _children(uri: str) -> list[str]:
    """``ccpo_lab.run_id`` of every child run in the store at ``uri``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return sorted(r.data.tags["ccpo_lab.run_id"] for r in client.search_runs(
        ids, "tags.`ccpo_lab.kind` = 'run'"))


def _experiments(uri: str) -> list[str]:
    from mlflow.tracking import MlflowClient

    return sorted(e.name for e in MlflowClient(uri).search_experiments()
                  if e.name != "Default")


# --- the precedence, pure ---------------------------------------------------------------

def test_the_flag_beats_the_environment_beats_the_sweep_beats_the_default() -> None:
    from ccpo_lab.tracking.target import resolve_tracking_target as r

    assert r("f", "e", "s", "d") == ("f", "flag")
    assert r(None, "e", "s", "d") == ("e", "env")
    assert r(None, None, "s", "d") == ("s", "sweep")
    assert r(None, None, None, "d") == ("d", "default")
    assert r("", "", "s", "d") == ("s", "sweep")  # empty counts as unset
    assert r(None, "  ", None, "d") == ("d", "default")
    assert r(None, None, None, None) == (None, "default")


def test_a_line_says_when_the_environment_decides() -> None:
    from ccpo_lab.tracking.target import mlflow_target

    root = Path("/r/demo")
    env = {"MLFLOW_TRACKING_URI": "sqlite:///team.db"}
    t = mlflow_target(root, {"name": "demo", "tracking": {"uri": "sqlite:///s.db"}},
                      environ=env)
    assert (t.uri, t.uri_source, t.experiment, t.experiment_source) == \
        ("sqlite:///team.db", "env", "demo", "default")
    assert t.notes == ("MLflow store from MLFLOW_TRACKING_URI (sqlite:///team.db); the "
                       "sweep's tracking.uri (sqlite:///s.db) is not used",)
    t = mlflow_target(root, {"name": "demo"}, environ=env)
    assert t.notes == ("MLflow store from MLFLOW_TRACKING_URI (sqlite:///team.db); the "
                       "default (sqlite:////r/demo/mlflow.db) is not used",)
    same = mlflow_target(root, {"tracking": {"uri": "sqlite:///team.db"}}, environ=env)
    assert same.uri_source == "env" and same.notes == ()  # nothing to say
    flag = mlflow_target(root, {}, "sqlite:///x.db", "x", environ={
        **env, "MLFLOW_EXPERIMENT_NAME": "team"})
    assert (flag.uri, flag.experiment, flag.notes) == ("sqlite:///x.db", "x", ())
    exp = mlflow_target(root, {"tracking": {"experiment": "mine"}},
                        environ={"MLFLOW_EXPERIMENT_NAME": "team", "MLFLOW_TRACKING_URI": ""})
    assert (exp.uri, exp.uri_source) == ("sqlite:////r/demo/mlflow.db", "default")
    assert exp.notes == ("MLflow experiment from MLFLOW_EXPERIMENT_NAME (team); the sweep's "
                         "tracking.experiment (mine) is not used",)


def test_w_and_b_settings_follow_the_same_precedence() -> None:
    from ccpo_lab.tracking.target import wandb_target

    sweep = {"tracking": {"wandb": {"mode": "disabled", "project": "p", "tags": ["t"]}}}
    env = {"WANDB_MODE": "offline", "WANDB_PROJECT": "team-p", "WANDB_ENTITY": "team"}
    t = wandb_target(sweep, "demo", environ=env)
    s = t.settings
    assert (s.mode, s.project, s.entity, s.tags) == ("offline", "team-p", "team", ("t",))
    assert t.notes == (
        "W&B mode from WANDB_MODE (offline); the default (online) is not used",
        "W&B project from WANDB_PROJECT (team-p); the sweep's tracking.wandb.project (p) is "
        "not used",
        "W&B entity from WANDB_ENTITY (team); the default (the logged-in user's entity) is "
        "not used")
    flags = wandb_target(sweep, "demo", "online", "fp", "fe", environ=env)
    assert (flags.settings.mode, flags.settings.project, flags.settings.entity, flags.notes) \
        == ("online", "fp", "fe", ())
    plain = wandb_target({}, "demo", environ={"WANDB_PROJECT": ""}).settings
    assert (plain.mode, plain.project, plain.entity) == ("online", "demo", None)
    with pytest.raises(UserError, match="WANDB_MODE is not a mode"):
        wandb_target(sweep, "demo", environ={"WANDB_MODE": "disabled"})


# --- sync, against real stores ----------------------------------------------------------

@pytest.mark.slow
def test_sync_writes_to_mlflow_tracking_uri_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir = _sweep(tmp_path)
    team = f"sqlite:///{tmp_path}/team.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", team)
    assert main(["sync", str(sweep_dir)]) == 0
    out, err = capsys.readouterr()
    assert f"MLflow store from MLFLOW_TRACKING_URI ({team}); the default (sqlite:///" \
           f"{sweep_dir}/mlflow.db) is not used" in err
    assert err.count("MLFLOW_TRACKING_URI") == 1
    assert f"synced to {team}" in out
    assert len(_children(team)) == 2
    assert not (sweep_dir / "mlflow.db").exists()
    assert _experiments(team) == ["study"]


@pytest.mark.slow
def test_the_uri_flag_beats_the_environment_which_beats_the_sweep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    own = f"sqlite:///{tmp_path}/sweep-own.db"
    sweep_dir = _sweep(tmp_path, extra=f"tracking: {{uri: '{own}'}}\n")
    team, flag = f"sqlite:///{tmp_path}/team.db", f"sqlite:///{tmp_path}/flag.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", team)
    assert main(["sync", str(sweep_dir), "--uri", flag]) == 0
    assert "MLFLOW_TRACKING_URI" not in capsys.readouterr().err  # the flag decided
    assert len(_children(flag)) == 2
    assert not (tmp_path / "team.db").exists() and not (tmp_path / "sweep-own.db").exists()
    assert main(["sync", str(sweep_dir)]) == 0  # the environment over the sweep's own
    assert f"the sweep's tracking.uri ({own}) is not used" in capsys.readouterr().err
    assert len(_children(team)) == 2 and not (tmp_path / "sweep-own.db").exists()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")  # empty: unset
    assert main(["sync", str(sweep_dir)]) == 0
    assert "MLFLOW_TRACKING_URI" not in capsys.readouterr().err
    assert len(_children(own)) == 2 and not (sweep_dir / "mlflow.db").exists()


@pytest.mark.slow
def test_mlflow_experiment_name_names_the_experiment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir = _sweep(tmp_path, extra="tracking: {experiment: mine}\n")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "team-exp")
    assert main(["sync", str(sweep_dir)]) == 0
    out, err = capsys.readouterr()
    assert "MLflow experiment from MLFLOW_EXPERIMENT_NAME (team-exp); the sweep's " \
           "tracking.experiment (mine) is not used" in err
    assert "experiment 'team-exp'" in out
    own = f"sqlite:///{sweep_dir}/mlflow.db"  # the sweep's own store, still its own
    assert (sweep_dir / "mlflow.db").exists() and "MLflow UI: mlflow ui" in out
    assert _experiments(own) == ["team-exp"]
    assert main(["sync", str(sweep_dir), "--experiment", "flagged"]) == 0
    assert "MLFLOW_EXPERIMENT_NAME" not in capsys.readouterr().err
    assert _experiments(own) == ["flagged", "team-exp"]


@pytest.mark.slow
def test_the_live_watch_follows_the_environment_and_says_it_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sync --watch`` (what ``sweep --wait`` starts with ``tracking.live``): every round
    goes to ``MLFLOW_TRACKING_URI``; the line is said on the first round only."""
    import os

    from ccpo_lab.tracking import mlflow_sync
    from ccpo_lab.tracking.live import watch

    sweep_dir = _sweep(tmp_path)
    team = f"sqlite:///{tmp_path}/team.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", team)
    said: list[str] = []
    stop = threading.Event()
    rounds = 0
    inner = mlflow_sync.sync_sweep  # watch imports it on each call: count its rounds

    def counted(*a, **k):  # type: ignore[no-untyped-def]
        nonlocal rounds
        res = inner(*a, **k)
        rounds += 1
        if rounds >= 3:
            stop.set()
        return res

    monkeypatch.setattr(mlflow_sync, "sync_sweep", counted)
    end = watch(sweep_dir, every=0.2, follow_pid=os.getpid(), say=said.append, stop=stop)
    assert end.ok and end.rounds >= 3
    assert sum("MLflow store from MLFLOW_TRACKING_URI" in x for x in said) == 1, said
    assert end.last is not None and end.last.uri == team
    assert len(_children(team)) == 2 and not (sweep_dir / "mlflow.db").exists()


@pytest.mark.slow
def test_mlflow_tracking_uri_sends_the_runs_to_a_real_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow.tracking import MlflowClient

    from tests.tracking.test_live_sync import _free_port, _server

    sweep_dir = _sweep(tmp_path)
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    with _server(tmp_path / "server.db", port):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        assert main(["sync", str(sweep_dir)]) == 0
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("study")
        assert exp is not None  # the server has the sweep's runs
        runs = client.search_runs([exp.experiment_id], "tags.`ccpo_lab.kind` = 'run'")
        assert sorted(r.data.tags["ccpo_lab.arm"] for r in runs) == ["grpo", "grpo"]
        assert all(client.get_metric_history(r.info.run_id, "val/success_rate")
                   for r in runs)
        out, err = capsys.readouterr()
        assert f"MLflow store from MLFLOW_TRACKING_URI ({uri})" in err
    assert f"synced to {uri}" in out
    assert not (sweep_dir / "mlflow.db").exists()


@pytest.mark.slow
def test_w_and_b_project_and_mode_from_the_environment_offline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from ccpo_lab.runs.layout import RunDir
    from ccpo_lab.tracking.wandb_sync import sync_wandb

    p = sweep_file(tmp_path, arms=("grpo",), seeds=(0,),
                   extra="tracking:\n  enabled: false\n  wandb: {project: sweep-p}\n")
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results")
    (rd,) = rds.values()
    log_evals(rd, {0: 0.25}, train_steps=range(1, 3))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "team-p")
    assert main(["sync", str(sweep_dir), "--wandb"]) == 0
    out, err = capsys.readouterr()
    assert "W&B mode from WANDB_MODE (offline)" in err
    assert "W&B project from WANDB_PROJECT (team-p); the sweep's tracking.wandb.project " \
           "(sweep-p) is not used" in err
    assert "W&B (offline, project team-p): 1 runs sent" in out
    assert RunDir(rd.path).read_run()["wandb"]["project"] == "team-p"
    res = sync_wandb(sweep_dir, project="flag-p")  # the argument beats the environment
    assert (res.mode, res.project, res.opened) == ("offline", "flag-p", 1)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert main(["sync", str(sweep_dir), "--wandb"]) == 2
    assert "WANDB_MODE is not a mode" in capsys.readouterr().err
