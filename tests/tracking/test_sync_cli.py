"""``ccpo-lab sync`` argument handling (no MLflow store needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.tracking.mlflow_sync import default_uri, flatten, safe_key
from tests.report.builders import init_sweep, sweep_file


def test_disabled_tracking_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = sweep_file(tmp_path, seeds=(0,), extra="tracking: {enabled: false}\n")
    _, sweep_dir, _ = init_sweep(p, tmp_path / "results")
    assert main(["sync", str(sweep_dir)]) == 2
    assert "tracking is disabled for this sweep" in capsys.readouterr().err
    assert not (sweep_dir / "mlflow.db").exists()
    assert main(["sync", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: not a directory" in capsys.readouterr().err


def test_keys_params_and_uri(tmp_path: Path) -> None:
    assert safe_key("val/success_rate") == "val/success_rate"
    assert safe_key("a//b/../c?d") == "a/b/__/c_d"
    assert safe_key("/x/") == "x"
    assert flatten({"protocol": {"lr": 1e-06, "steps": [1, 2]}, "name": "g", "empty": {}}) == {
        "protocol.lr": "1e-06", "protocol.steps": "[1, 2]", "name": "g", "empty": "{}"}
    assert default_uri(tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"


def test_an_unreachable_server_fails_at_once(tmp_path: Path) -> None:
    """Item 17: ``sync --uri http://127.0.0.1:9`` hung 248 s without a word (MLflow's
    retries); it fails at once, saying what to check. A subprocess, bounded in time."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    _, sweep_dir, _ = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP")}
    proc = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", "sync", str(sweep_dir),
                           "--uri", "http://127.0.0.1:9"], capture_output=True, text=True,
                          timeout=120, env={**env, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 1
    assert "cannot reach the MLflow tracking server at http://127.0.0.1:9 (connection " \
           "refused)" in proc.stderr
    assert "nothing was lost" in proc.stderr


def test_the_sync_lock_waits_for_its_holder(tmp_path: Path) -> None:
    """One sync per store: a second waits for the first (the kernel's flock), saying who
    holds it, and goes on once it is released."""
    import fcntl
    import os
    import threading

    from ccpo_lab.tracking.store import lock_path, store_lock

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert lock_path(uri, tmp_path) == tmp_path / "mlflow.db.lock"
    assert lock_path("http://h:5000", tmp_path).parent == tmp_path
    said: list[str] = []
    waiting, entered = threading.Event(), threading.Event()

    def second() -> None:
        with store_lock(uri, tmp_path, lambda line: (said.append(line), waiting.set())):
            entered.set()

    with store_lock(uri, tmp_path):
        holder = (tmp_path / "mlflow.db.lock").read_text()
        assert holder.startswith(f"pid {os.getpid()} on ")
        t = threading.Thread(target=second)
        t.start()
        assert waiting.wait(30)
        assert not entered.is_set()
    t.join(30)
    assert entered.is_set()
    assert said == [f"waiting for another sync of this store to finish ({holder}; lock "
                    f"{tmp_path / 'mlflow.db.lock'})"]
    fd = os.open(tmp_path / "mlflow.db.lock", os.O_RDWR)  # released: free to take
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)
