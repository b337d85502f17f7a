"""Write a synthetic verl console log of a given size (the input of ``bench_big_log.py``).

The lines are what verl's console logger prints (``verl.utils.logger.aggregate_logger.
concat_dict_to_str``: ``step:N - key:np.float64(value) - ...``) behind Ray's
``(TaskRunner pid=...)`` prefix, mixed with the progress and worker lines a real log has:
``KEYS`` metrics per training step, the held-out metrics (overall, six task types, turns)
every ``test_freq`` steps, until the file reaches the requested size (at the defaults,
200 MB hold about 4.2 million values over 37,000 steps; the log of issue 15 had
5.4 million). The first metric line
is checked against verl's own function when verl is installed.

Run: ``.venv/bin/python benchmarks/make_verl_log.py OUT.log [--mb 200]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

TASKS = ("pick_and_place", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
         "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
         "pick_two_obj_and_place")
BASE_KEYS = (
    "actor/entropy", "actor/kl_loss", "actor/kl_coef", "actor/pg_loss", "actor/pg_clipfrac",
    "actor/ppo_kl", "actor/pg_clipfrac_lower", "actor/grad_norm", "actor/lr",
    "critic/score/mean", "critic/score/max", "critic/score/min", "critic/rewards/mean",
    "critic/rewards/max", "critic/rewards/min", "critic/advantages/mean",
    "critic/advantages/max", "critic/advantages/min", "critic/returns/mean",
    "critic/returns/max", "critic/returns/min", "response_length/mean", "response_length/max",
    "response_length/min", "response_length/clip_ratio", "prompt_length/mean",
    "prompt_length/max", "prompt_length/min", "prompt_length/clip_ratio",
    "episode/success_rate", "episode/length/mean", "episode/length/max",
    "episode/length/min", "episode/reward/mean", "episode/valid_action_ratio",
    "timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/ref",
    "timing_s/adv", "timing_s/update_actor", "timing_s/step", "perf/total_num_tokens",
    "perf/time_per_step", "perf/throughput", "perf/max_memory_allocated_gb",
    "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb",
    *(f"episode/{t}_success_rate" for t in TASKS),
)
VAL_KEYS = ("val/success_rate", *(f"val/{t}_success_rate" for t in TASKS),
            "val/length/mean")


def metric_line(step: int, data: dict[str, float], pid: int = 48213) -> str:
    """One console line as verl prints it (numpy 2's repr of np.float64, as pprint gives)."""
    pairs = " - ".join(f"{k}:{np.float64(v)!r}" for k, v in data.items())
    return f"(TaskRunner pid={pid}) step:{step} - {pairs}\n"


def write_log(path: Path, mb: float = 200.0, keys: int = 110, test_freq: int = 5,
              seed: int = 0) -> dict[str, int]:
    """Write the log; return its size, steps, metric lines and values."""
    rng = np.random.default_rng(seed)
    names = list(BASE_KEYS) + [f"timing_per_token_ms/stage_{i:02d}"
                               for i in range(max(0, keys - len(BASE_KEYS)))]
    names = names[:keys]
    target = int(mb * 1e6)
    size = steps = values = lines = 0
    with path.open("w", encoding="utf-8") as f:
        f.write("Creating file logger at /tmp/verl/alfworld.jsonl\n")
        step = 0
        while size < target:
            data = {k: round(float(v), 4)  # verl's values are often short (counts, rates)
                    for k, v in zip(names, rng.random(len(names)), strict=True)}
            if step == 0:
                data = {}
            if step % test_freq == 0:
                data.update({k: float(v) for k, v in zip(VAL_KEYS, rng.random(len(VAL_KEYS)),
                                                         strict=True)})
            text = metric_line(step, data)
            text += (f"(TaskRunner pid=48213) Training Progress: {step}it [00:{step % 60:02d}, "
                     "1.2s/it]\n(WorkerDict pid=48377) INFO: gen batch done\n")
            f.write(text)
            size += len(text)
            steps, values, lines = step, values + len(data), lines + 1
            step += 1
    return {"bytes": path.stat().st_size, "last_step": steps, "metric_lines": lines,
            "values": values}


def check_format() -> bool | None:
    """Whether :func:`metric_line` matches verl's own formatter (None: verl missing)."""
    try:
        from verl.utils.logger.aggregate_logger import concat_dict_to_str
    except ImportError:
        return None
    data = {"actor/entropy": np.float64(0.123456789), "val/success_rate": np.float64(0.25)}
    return metric_line(3, {k: float(v) for k, v in data.items()}) == \
        f"(TaskRunner pid=48213) {concat_dict_to_str(data, 3)}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--keys", type=int, default=110)
    args = ap.parse_args()
    print(f"verl's formatter agrees: {check_format()}")
    print(write_log(args.out, args.mb, args.keys))


if __name__ == "__main__":
    main()
