"""Narrow terminals: below the width a table fits, one block per row, every value whole.

At 40-60 columns rich shrank the status table until the arm column was dropped or two
characters wide and values were cropped (``comple…``). Every table the CLI prints (run
status, the dry-run plan, ``arms list``, ``games``) now renders whole where it fits and as
blocks where it does not (:mod:`ccpo_lab.fitted`).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.fitted import fitted
from ccpo_lab.launch.display import print_status
from tests.launch.test_watch import _init, _row

ROWS = [
    dict(),
    dict(arm="ccpo-return-hard", seed=10, step=7, total=150, state="pending", live=True,
         eta_s=None, steps_per_s=None, elapsed_s=None),
    dict(arm="ccpo-return-hard-fbjw", seed=3, state="completed", live=False, eta_s=None),
    dict(arm="grpo", state="interrupted", live=False, note="Slurm: NODE_FAIL", eta_s=None),
]


def _render(width: int) -> str:
    from rich.console import Console

    buf = io.StringIO()
    print_status(Console(file=buf, width=width, color_system=None),
                 [_row(**kw) for kw in ROWS], "sweep s")  # type: ignore[arg-type]
    return buf.getvalue()


@pytest.mark.parametrize("width", [40, 50, 60])
def test_status_keeps_every_value_at_a_narrow_terminal(width: int) -> None:
    text = _render(width)
    lines = text.split("\n--- ")[0].splitlines()  # failure details: the terminal wraps them
    assert "…" not in text and max(len(x.rstrip()) for x in lines) <= width, text
    # one block per run: its arm whole on a line of its own, then its values whole
    heads = [x for x in lines if x.startswith(("ccpo", "grpo")) and " " not in x]
    assert heads == ["ccpo-return-hard-fbjw", "ccpo-return-hard", "ccpo-return-hard-fbjw",
                     "grpo"], text
    blocks = text.split("\nccpo-return-hard\n")
    assert "seed 10" in blocks[1] and "state pending" in blocks[1] and "step 7/150" in blocks[1]
    for value in ("state running", "step 60/60", "held-out 0.458", "s/step 1.33",
                  "ETA 1:06:40", "elapsed 0:01:55", "state completed", "state interrupted*"):
        assert value in text, value


def test_status_is_a_table_where_it_fits() -> None:
    text = _render(100)
    assert " arm " in text and " held-out " in text and "…" not in text
    assert "state running" not in text


def test_the_dry_run_plan_keeps_every_value_at_40_columns(
        workdir: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    one = ["arms=[ccpo-return-hard-fbjw]", "seeds=[0,1]", "analysis.reference=null"]
    dirs = _init(workdir, *one)
    dirs[("ccpo-return-hard-fbjw", 0)].write_state("failed", error="RuntimeError: boom")
    assert main(["sweep", str(workdir / "sweeps" / "smoke.yaml"),
                 *one, "--dry-run",
                 "--results", str(workdir / "results")]) == 0
    text = capsys.readouterr().out
    assert "…" not in text
    block = text[text.index("\nccpo-return-hard-fbjw\n"):]
    assert "seed 0" in block and "plan skip: failed (resubmit with --retry-failed)" in \
        " ".join(block.split())
    assert "seed 1" in block and "plan resume: pending, not queued" in block
    assert "\n  --retry-failed)" in block          # a value's continuation stays indented


def test_arms_list_keeps_every_value_at_40_columns(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    assert main(["arms", "list", "--arms-dir", str(repo / "arms")]) == 0
    text = capsys.readouterr().out
    assert "…" not in text
    for arm in ("ccpo-global-successor", "ccpo-return-hard-fbjw", "gigpo", "grpo"):
        assert f"\n{arm}\n" in f"\n{text}", arm
    assert "flags backoff_task=True jweight_c=1.0" in " ".join(text.split())


def test_a_value_longer_than_the_line_is_folded_not_cut() -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table()
    table.add_column("name", no_wrap=True)
    table.add_column("path", no_wrap=True)
    table.add_row("x" * 30, "/a/" + "p" * 50)
    buf = io.StringIO()
    Console(file=buf, width=24, color_system=None).print(fitted(table))
    text = buf.getvalue()
    assert "".join(text.split()).count("x") == 30 and "p" * 50 in "".join(text.split())
