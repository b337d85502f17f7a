"""``evals/<key>.jsonl``: written whole and checked, read strictly, every problem named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccpo_lab.runs.evals import (
    EvalFileError,
    EvalJobDir,
    eval_files,
    eval_path,
    is_eval_job,
    job_dir,
    read_eval_file,
    write_eval_file,
)
from ccpo_lab.runs.layout import RunDir

KEY = "in-step000060-n3-r2-t0.4-0123abcd"
GAMES = ["valid_seen/00000", "valid_seen/00001", "valid_seen/00002"]
TYPES = ["pick_and_place_simple", "look_at_obj_in_light", "pick_two_obj_and_place"]


def header(**extra: object) -> dict[str, object]:
    return {"eval": 1, "key": KEY, "run_id": "r" * 64, "arm": "grpo", "seed": 0,
            "backend": "local", "split": "in", "episodes": 3, "repeats": 2,
            "temperature": 0.4, "checkpoint": {"step": 60, "weights": "checkpoints/x.pt"},
            "draw": {"id": "0123abcd0123", "spec": {}, "games": GAMES}, **extra}


def episodes() -> list[dict[str, object]]:
    return [{"repeat": r, "i": i, "game": GAMES[i], "task_type": TYPES[i],
             "success": (r + i) % 2 == 0, "reward": 10.0 * ((r + i) % 2 == 0),
             "turns": 3 + i, "invalid": i % 2} for r in range(2) for i in range(3)]


def test_a_written_evaluation_reads_back_as_arrays_in_draw_order(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "grpo" / "seed-0")
    path = eval_path(rd, KEY)
    write_eval_file(path, header(), episodes())
    ev = read_eval_file(path)
    assert ev.key == KEY and ev.step == 60 and ev.split == "in" and ev.games == tuple(GAMES)
    assert ev.setting == ("in", 3, 2, 0.4) and ev.draw_id == "0123abcd0123"
    assert ev.success.tolist() == [[True, False, True], [False, True, False]]
    assert ev.reward.shape == (2, 3) and ev.turns.tolist() == [[3, 4, 5], [3, 4, 5]]
    assert ev.invalid.sum() == 2 and ev.task_types == tuple(TYPES)
    assert eval_files(rd) == [path]
    assert not list(path.parent.glob(".*"))  # no temporary file left


def _bad(tmp_path: Path, lines: list[str]) -> EvalFileError:
    path = tmp_path / f"{KEY}.jsonl"
    path.write_text("".join(x + "\n" for x in lines))
    with pytest.raises(EvalFileError) as e:
        read_eval_file(path)
    return e.value


@pytest.mark.parametrize(("edit", "line", "why"), [
    (lambda h, eps: (["[]"], eps), 1, "not an evaluation header"),
    (lambda h, eps: ([json.dumps({**h, "seed": "0"})], eps), 1, "'seed' is \"0\""),
    (lambda h, eps: ([json.dumps({**h, "eval": 2})], eps), 1, "format 2"),
    (lambda h, eps: ([json.dumps({**h, "episodes": 4})], eps), 1, "the draw lists 3"),
    (lambda h, eps: ([json.dumps(h)], eps[:-1]), 6, "5 episodes, the header says 3 games"),
    (lambda h, eps: ([json.dumps(h)], [eps[1], eps[0], *eps[2:]]), 2, "out of order"),
    (lambda h, eps: ([json.dumps(h)], [*eps[:3], {**eps[3], "game": "x"}, *eps[4:]]), 5,
     "the draw's game 0 is"),
    (lambda h, eps: ([json.dumps(h)], [{**eps[0], "success": 1}, *eps[1:]]), 2,
     "'success' is 1, not bool"),
    (lambda h, eps: ([json.dumps(h)], [{**eps[0], "invalid": 9}, *eps[1:]]), 2,
     "out of range"),
    (lambda h, eps: ([json.dumps(h)], [*eps[:4], {**eps[4], "i": True}, *eps[5:]]), 6,
     "'i' is true, not int"),
    (lambda h, eps: ([json.dumps(h)], [*eps[:5], {**eps[5], "extra": 1}]), 7,
     "unexpected field"),
    (lambda h, eps: ([json.dumps(h)], [*eps[:3], {**eps[3], "task_type": "x"}, *eps[4:]]), 5,
     "repeat 0 of the game said"),
    (lambda h, eps: ([json.dumps({**h, "key": "in-step000001-n3-r2-t0.4-0123abcd"})], eps), 1,
     "is not the file's name"),
])
def test_every_unusable_line_is_named(tmp_path: Path, edit: object, line: int,
                                      why: str) -> None:
    head, eps = edit(header(), episodes())  # type: ignore[operator]
    lines = [*head, *(x if isinstance(x, str) else json.dumps(x) for x in eps)]
    err = _bad(tmp_path, lines)
    assert err.problem.line == line and why in err.problem.why, str(err)
    assert str(tmp_path) in str(err)


def test_a_cut_off_file_and_a_line_that_is_not_json_are_named(tmp_path: Path) -> None:
    path = tmp_path / f"{KEY}.jsonl"
    text = "\n".join([json.dumps(header()), *map(json.dumps, episodes())]) + "\n"
    path.write_text(text[:-5])
    with pytest.raises(EvalFileError, match="no line end"):
        read_eval_file(path)
    path.write_text(text.replace('"i": 1', '"i": 1,,', 1))
    with pytest.raises(EvalFileError, match="line 3: not JSON"):
        read_eval_file(path)


def test_a_write_that_would_not_read_back_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / f"{KEY}.jsonl"
    with pytest.raises(EvalFileError):
        write_eval_file(path, header(), episodes()[:-1])
    assert not path.exists() and not list(tmp_path.iterdir())


def test_a_job_directory_is_a_run_directory_of_its_run(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "sweep" / "grpo" / "seed-3")
    rd.path.mkdir(parents=True)
    (rd.run_json).write_text(json.dumps({"arm": "grpo", "seed": 3, "run_id": "abc"}))
    job = job_dir(rd, "0123456789ab")
    assert isinstance(job, EvalJobDir) and job.run_dir == rd
    assert job.arm == "grpo" and job.seed == 3 and job.job_id == "0123456789ab"
    assert job.place_problem() == ({"arm": "grpo", "seed": 3, "run_id": "abc"}, None)
    assert not is_eval_job(job.path)
    job.path.mkdir(parents=True)
    job.request_json.write_text("{}")
    assert is_eval_job(job.path) and not is_eval_job(rd.path)
    job.write_state("pending", step=0, total_steps=6)
    assert RunDir(job.path).read_state()["total_steps"] == 6
    assert job.partial_file(KEY, 1).name == "repeat-0001.json"
