"""``analysis.adaptive``: validated when the sweep is loaded, and no part of run identity."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.config.sweep import Sweep, load_sweep
from ccpo_lab.errors import UserError
from tests.conftest import REPO
from tests.report.builders import sweep_file

SHIPPED = sorted((REPO / "sweeps").glob("*.yaml"))


def _study(tmp: Path, **adaptive: object) -> Path:
    return sweep_file(tmp, arms=("grpo", "gigpo", "ccpo-return-hard"), seeds=(0, 1, 2),
                      analysis={"reference": "grpo", "alpha": 0.1, "adaptive": adaptive})


def test_the_design_comes_from_the_analysis_section(tmp_path: Path) -> None:
    sw = load_sweep(_study(tmp_path, max_seeds=12, spending="pocock"))
    d = sw.design
    assert d is not None
    assert d.comparisons == (("gigpo", "grpo"), ("ccpo-return-hard", "grpo"))
    assert d.initial_seeds == (0, 1, 2) and d.max_seeds == 12 and d.seeds_per_look == 3
    assert d.alpha == 0.1 and d.power == 0.8 and d.spending == "pocock"
    # off by default; on from the command line
    plain = load_sweep(_study(tmp_path))
    assert plain.design is None
    on = load_sweep(_study(tmp_path), ["analysis.adaptive.max_seeds=9",
                                       "analysis.adaptive.comparisons=[[gigpo,grpo]]"])
    assert on.design is not None and on.design.comparisons == (("gigpo", "grpo"),)


@pytest.mark.parametrize(("adaptive", "key", "why"), [
    ({"max_seeds": 2}, "analysis.adaptive.max_seeds", "at least the 3 initial seeds"),
    ({"max_seeds": "twelve"}, "analysis.adaptive.max_seeds", "wrong type"),
    ({"max_seeds": 12, "spending": "linear"}, "analysis.adaptive.spending",
     "unknown spending function"),
    ({"max_seeds": 12, "futility_confidence": 0.3},
     "analysis.adaptive.futility_confidence", "[0.5, 1)"),
    ({"max_seeds": 12, "seeds_per_look": 0}, "analysis.adaptive.seeds_per_look",
     "positive integer"),
    ({"max_seeds": 12, "comparisons": [["gigpo", "sac"]]}, "analysis.adaptive.comparisons[0]",
     "not in the sweep"),
    ({"max_seeds": 12, "comparisons": [["gigpo"]]}, "analysis.adaptive.comparisons[0]",
     "a pair"),
    ({"max_seeds": 12, "comparisons": [["gigpo", "gigpo"]]}, "analysis.adaptive.comparisons",
     "compared with itself"),
    ({"seeds_per_look": 2}, "analysis.adaptive.seeds_per_look", "without analysis.adaptive"),
    ({"max_seed": 12}, "analysis.adaptive.max_seed", "unknown key"),
])
def test_a_bad_design_names_file_key_and_value(tmp_path: Path, adaptive: dict[str, object],
                                               key: str, why: str) -> None:
    path = _study(tmp_path, **adaptive)
    with pytest.raises(UserError) as e:
        load_sweep(path)
    assert e.value.key == key and why in str(e.value), str(e.value)
    assert e.value.file == str(path)


def test_a_bad_override_names_the_command_line(tmp_path: Path) -> None:
    with pytest.raises(UserError) as e:
        load_sweep(_study(tmp_path), ["analysis.adaptive.max_seeds=1"])
    assert e.value.file == "command line" and e.value.key == "analysis.adaptive.max_seeds"
    assert e.value.value == 1


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_run_ids_do_not_depend_on_the_design(path: Path) -> None:
    plain = load_sweep(path)
    n = len(plain.config.seeds)
    # (a design compares every arm with the reference: a sweep's explicit pairs go)
    designed = load_sweep(path, [f"analysis.adaptive.max_seeds={n + 3}",
                                 "analysis.adaptive.seeds_per_look=2",
                                 "analysis.adaptive.spending=pocock", "analysis.pairs=[]"])
    assert designed.design is not None
    def ids(sw: Sweep) -> list[str]:
        return [r.run_id for part in sw.per_environment() for r in part.runs]
    assert ids(designed) == ids(plain)
