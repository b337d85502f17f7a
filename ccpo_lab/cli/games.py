"""``ccpo-lab games make DIR --train N --eval M --seed S``: generate ALFWorld games."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Generated ALFWorld games for the local CPU backend.",
                  no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add the ``games`` command group to ``root``."""
    root.add_typer(app, name="games")


@app.command("make")
def make(
    out_dir: Path = typer.Argument(..., help="Output folder (created; must be empty)."),
    train: int = typer.Option(24, "--train", help="Training games."),
    eval_: int = typer.Option(24, "--eval", help="Held-out games (ALFWorld's "
                              "eval_in_distribution split, folder valid_seen)."),
    seed: int = typer.Option(0, "--seed", help="Generator seed (same seed, same files)."),
    receptacles: int = typer.Option(4, "--receptacles", help="Receptacles per room."),
    distractors: int = typer.Option(2, "--distractors", help="Distractor objects per room."),
    closed_fraction: float = typer.Option(0.3, "--closed-fraction",
                                          help="Chance a receptacle is an openable one."),
    max_plan_len: int = typer.Option(12, "--max-plan-len",
                                     help="Redraw games whose expert plan is longer."),
) -> None:
    """Generate games in ALFWorld's data layout, each solved by the planner expert."""
    from rich.console import Console
    from rich.table import Table

    from ccpo_lab.backends.local.games import GameGenConfig, make_games
    from ccpo_lab.cli.paths import output_dir
    from ccpo_lab.fitted import fitted

    output_dir(out_dir, "OUT_DIR")
    config = GameGenConfig(n_receptacles=receptacles, n_distractors=distractors,
                           closed_fraction=closed_fraction, max_plan_len=max_plan_len)
    game_set, summary = make_games(out_dir, train, eval_, seed, config)
    console = Console()
    table = Table(title=f"{len(game_set.train)} training + {len(game_set.eval)} held-out "
                  f"games in {game_set.root}")
    table.add_column("split")
    table.add_column("games", justify="right")
    table.add_column("mean plan", justify="right")
    table.add_column("max plan", justify="right")
    table.add_column("per task type")
    for split in ("train", "eval"):
        s = summary[split]
        per = ", ".join(f"{k}={v}" for k, v in s["per_task_type"].items() if v)
        table.add_row(split, str(s["n_games"]), f"{s['mean_plan_len']:.1f}",
                      str(s["max_plan_len"]), per)
    console.print(fitted(table))
