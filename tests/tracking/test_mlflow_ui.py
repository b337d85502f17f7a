"""The link ``sync`` prints opens MLflow's own UI grouped by arm, with the summary column.

Optional: needs Chromium (``apt-get install chromium``); skipped with that reason
otherwise. A real ``mlflow ui`` serves the demo-like study's store from the sweep
directory (as the README says), headless Chromium renders the printed link, and the
rendered page must show the arm groups and the ``summary/window_mean`` column; a
screenshot is written beside it (``mlflow-by-arm.png``) for a person to look at. If MLflow
changes its URL scheme or view state, this fails instead of the link silently showing
another page.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.report.builders import demo_like_study

pytestmark = pytest.mark.slow

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser",
                                                       "google-chrome")) if p), None)
MLFLOW = str(Path(sys.executable).with_name("mlflow"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chromium(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                           "--disable-dev-shm-usage", "--window-size=1600,1000",
                           "--virtual-time-budget=30000", *args, url],
                          capture_output=True, text=True, timeout=240)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed (apt-get install "
                    "chromium): the MLflow UI is not rendered")
def test_the_group_by_arm_link_renders_with_the_summary_column(tmp_path: Path) -> None:
    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.tracking.mlflow_sync import sync_sweep, ui_command, ui_url

    sweep_dir = demo_like_study(tmp_path, tmp_path / "results")
    res = sync_sweep(sweep_dir, report=build_report(sweep_dir).model)
    assert res.local_store
    port = _free_port()
    cmd = ui_command(port).split()
    cmd[0] = MLFLOW
    log = (tmp_path / "ui.log").open("wb")
    ui = subprocess.Popen(cmd, cwd=sweep_dir, stdout=log, stderr=log, start_new_session=True)
    try:
        def up() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", port), timeout=1):
                return True
            assert ui.poll() is None, (tmp_path / "ui.log").read_text()[-2000:]
            return False

        wait_until(up, 180, "mlflow ui to listen")
        url = ui_url(res.experiment_id, port)
        assert url in res.summary().replace("5000", str(port))  # the link sync prints
        dom = _chromium(url, "--dump-dom")
        assert dom.returncode == 0, dom.stderr[-2000:]
        page = dom.stdout
        assert "summary/window_mean" in page, page[-3000:]
        for arm in ("grpo", "gigpo", "ccpo-return-hard-fbjw"):
            assert arm in page, arm
        shot = tmp_path / "mlflow-by-arm.png"
        png = _chromium(url, f"--screenshot={shot}")
        assert png.returncode == 0 and shot.is_file() and shot.stat().st_size > 20_000
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(ui.pid, signal.SIGKILL)
        ui.wait(30)
        log.close()
