"""``ccpo-lab rehearse``: the sweep's own configuration through verl-agent's real trainer,
in minutes, on what the machine has.

A rehearsal is a sweep of its own (``<results>/<sweep>-rehearsal/``, its own run ids, read
by ``status``, ``verify``, ``report`` and ``sync`` like any sweep) derived from the user's
sweep by :func:`rehearsal_overrides`:

- every arm, the sweep's first :attr:`RehearsalSettings.seeds` seeds, through the sweep's
  own launcher (or the one the overrides select);
- the model: a tiny one built on the spot from the sweep model's architecture
  (:mod:`.tiny_model`; the sweep's ``config.json`` when ``model_path`` is a local folder),
  fitted for a few seconds so it writes valid and invalid actions;
- the games: generated ones (:mod:`ccpo_lab.backends.local.games`, short plans, so the tiny
  model wins some episodes), ALFWorld's data layout, as ``ALFWORLD_DATA``;
- the protocol: the sweep's, shrunk only where it must be (steps, tasks per step, group
  size, held-out episodes, turns, prompt and answer lengths, mini-batches), with a
  checkpoint and an evaluation at every step;
- the machine: ``device: cpu`` where the trainer environment sees no GPU (the CPU adapter,
  :mod:`ccpo_lab.backends.verl.agent.cpu`); on a GPU node the sweep's engine on at most
  the GPUs there are (one GPU: vLLM with tensor parallel 1, where the per-request seed patch
  is exercised for real).

Then :mod:`.rehearsal_checks` checks the outcome, one line each (the resume check kills a
copy of one run after its first checkpoint and relaunches it: :func:`resume_check_runs`).
Nothing here imports torch or verl: the trainer environment (``backend.verl.python``) does
the heavy work in subprocesses.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.backends.verl import rehearsal_checks as C
from ccpo_lab.backends.verl.checkout import inspect_checkout
from ccpo_lab.backends.verl.command import hydra_value
from ccpo_lab.backends.verl.tiny_model import INFO_FILE
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.config.yamlio import atomic_write_text
from ccpo_lab.errors import UserError
from ccpo_lab.launch.submit import launch_sweep

SUFFIX = "-rehearsal"
"""The rehearsal's sweep name is the sweep's plus this."""
RESUME_SUFFIX = "-rehearsal-resume"
"""Sweep name of the resume check's copy of one run."""
ASSETS = ".rehearsal"
"""Folder (inside the rehearsal's sweep directory) of its games and tiny model."""


REHEARSABLE = ("alfworld", "sokoban")
"""Environments a rehearsal runs (on what a CPU trainer environment has)."""


@dataclass(frozen=True)
class RehearsalSettings:
    """How much a rehearsal runs (everything else is the sweep's)."""

    steps: int = 2
    """Training steps per run (``protocol.total_steps``); >= 2 (the resume check kills a
    run after step 1's checkpoint and compares what follows)."""
    seeds: int = 2
    """How many of the sweep's seeds (its first ones)."""
    tasks: int = 2
    """Tasks per training step (``protocol.train_batch_size``), per GPU."""
    group_size: int = 4
    """Rollouts per task (at most the sweep's)."""
    val_episodes: int = 4
    """Held-out episodes per evaluation."""
    turns: int = 6
    """Environment steps per episode (at most the sweep's)."""
    response_length: int = 48
    """Tokens per answer (the tiny model's answers are about 12)."""
    device: str = "auto"
    """``auto`` (``cuda`` when the trainer environment sees a GPU here, else ``cpu``),
    ``cpu`` or ``cuda``."""
    resume_check: bool = True
    """Run the kill-and-resume check."""

    def validate(self) -> None:
        """Refuse counts the rehearsal cannot run."""
        limits = {"steps": (2, 20), "seeds": (1, 8), "tasks": (1, 16), "group_size": (2, 16),
                  "val_episodes": (1, 64), "turns": (1, 50), "response_length": (16, 4096)}
        for key, (low, high) in limits.items():
            v = getattr(self, key)
            if not low <= v <= high:
                raise UserError(f"must be in {low}..{high}", key=f"--{key.replace('_', '-')}",
                                value=v)
        if self.device not in ("auto", "cpu", "cuda"):
            raise UserError("unknown device", key="--device", value=self.device,
                            valid=["auto", "cpu", "cuda"])


@dataclass(frozen=True)
class Machine:
    """What the trainer environment sees where ``rehearse`` runs."""

    python: str
    """``backend.verl.python``."""
    gpus: int
    """CUDA devices torch sees (0 on a CPU machine)."""
    torch: str
    """torch's version there."""
    transformers: str
    """transformers' version there."""


# ----------------------------------------------------------------------- input checks
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _looks_local(path: str) -> bool:
    """Whether a model path names a local folder (else a hub id such as ``org/name``)."""
    return not _HUB_ID.fullmatch(path) or Path(os.path.expanduser(path)).exists()


def check_inputs(sw: Any) -> None:
    """Bad input before anything is written: a local-backend sweep, a missing checkout or
    trainer interpreter, a local model path that does not exist (one line each)."""
    cfg = sw.config
    if cfg.backend.kind != "verl":
        raise UserError("rehearse runs verl-agent's trainer: the sweep's backend must be verl "
                        "(the local backend runs whole on a laptop already: ccpo-lab sweep)",
                        file=sw.source, key="backend.kind", value=cfg.backend.kind,
                        valid=["verl"])
    s = cfg.backend.verl
    env = cfg.environments[0] if cfg.environments else "alfworld"
    if env not in REHEARSABLE:
        raise UserError("rehearse runs ALFWorld and Sokoban (WebShop needs its own "
                        "environment: Java, pyserini, its index; docs/env-webshop.md)",
                        file=sw.source, key="environments", value=env,
                        valid=list(REHEARSABLE))
    if not inspect_checkout(s.verl_agent_path).exists:
        raise UserError("verl-agent checkout not found (no verl/trainer/main_ppo.py)",
                        file=sw.source, key="backend.verl.verl_agent_path",
                        value=s.verl_agent_path)
    if shutil.which(s.python) is None:
        raise UserError("trainer interpreter not found (scripts/verl-agent-contract.sh "
                        "builds a CPU one)", file=sw.source, key="backend.verl.python",
                        value=s.python)
    model = os.path.expanduser(s.model_path)
    if _looks_local(s.model_path) and not Path(model).is_dir():
        raise UserError("model path does not exist (a local folder with config.json, or a "
                        "hub id such as Qwen/Qwen2.5-7B-Instruct)", file=sw.source,
                        key="backend.verl.model_path", value=s.model_path)


def probe_machine(python: str) -> Machine:
    """Ask the trainer environment what it sees (CUDA devices, versions)."""
    code = ("import json, torch, transformers; print(json.dumps({'gpus': "
            "torch.cuda.device_count() if torch.cuda.is_available() else 0, 'torch': "
            "torch.__version__, 'transformers': transformers.__version__}))")
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False,
                       timeout=300)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        raise UserError(f"the trainer interpreter cannot import torch and transformers: "
                        f"{tail[0]}", key="backend.verl.python", value=python)
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return Machine(python=python, gpus=int(d["gpus"]), torch=str(d["torch"]),
                   transformers=str(d["transformers"]))


def choose_device(settings: RehearsalSettings, machine: Machine) -> str:
    """``cpu`` or ``cuda`` for this rehearsal."""
    if settings.device == "cuda" and machine.gpus == 0:
        raise UserError("the trainer environment sees no CUDA device here", key="--device",
                        value="cuda", valid=["auto", "cpu"])
    if settings.device == "auto":
        return "cuda" if machine.gpus else "cpu"
    return settings.device


# ----------------------------------------------------------------------- assets
GAME_SPEC = {"n_train": 12, "n_eval": 8, "seed": 0,
             "config": {"n_receptacles": 3, "n_distractors": 0, "closed_fraction": 0.0,
                        "task_types": ["pick_and_place_simple", "look_at_obj_in_light"],
                        "max_plan_len": 4}}
"""The rehearsal's games: small rooms, open receptacles, plans of at most 4 steps (the
tiny model, sampling, wins some episodes within :attr:`RehearsalSettings.turns`)."""


OOD_GAMES = 8
"""Games of the rehearsal's out-of-distribution split (``ccpo-lab evaluate --split out``)."""


def ensure_rehearsal_games(assets: Path) -> Path:
    """The generated games (``ALFWORLD_DATA``): training, held-out (``valid_seen``) and
    out-of-distribution (``valid_unseen``, :mod:`ccpo_lab.backends.local.ood`) games with
    ALFWorld's logic files beside them."""
    from importlib import resources

    from ccpo_lab.backends.local.games import DATA_DIR, GameSpec, ensure_games
    from ccpo_lab.backends.local.ood import SPLIT, ensure_ood_games

    gs = ensure_games(assets / "games", GameSpec.from_json(GAME_SPEC))
    unseen = gs.root / DATA_DIR / SPLIT
    if not unseen.exists():
        ood = ensure_ood_games(gs, OOD_GAMES)
        with contextlib.suppress(FileExistsError):
            os.symlink(os.path.relpath(ood.root / DATA_DIR / SPLIT, unseen.parent), unseen)
    logic = gs.root / "logic"
    logic.mkdir(exist_ok=True)
    data = resources.files("alfworld") / "data"
    for name in ("alfred.pddl", "alfred.twl2"):
        if not (logic / name).is_file():
            shutil.copyfile(Path(str(data / name)), logic / name)
    return gs.root


def _source_digest() -> str:
    return hashlib.sha256(Path(__file__).with_name("tiny_model.py").read_bytes()).hexdigest()


def ensure_sokoban_rooms(assets: Path, sw: Any, device: str, machine: Machine,
                         settings: RehearsalSettings) -> Path:
    """On Sokoban: the JSON file of the rooms the rehearsal will deal (settings and room
    seeds, :func:`~ccpo_lab.backends.verl.tiny_sokoban.room_seeds`), the tiny model's
    demonstrations; it stands where ALFWorld's games do."""
    from ccpo_lab.backends.verl.agent import seeds
    from ccpo_lab.backends.verl.tiny_sokoban import room_seeds

    cfg = sw.config
    p, st = cfg.protocol, cfg.env.sokoban
    n_gpus = _fit_layout(cfg.backend.verl, device, machine.gpus)["n_gpus_per_node"]
    env_seeds = [seeds.env_seed(p.env_seed, k) for k in cfg.seeds[:settings.seeds]]
    rooms = {"dim_room": list(st.dim_room), "num_boxes": st.num_boxes,
             "search_depth": st.search_depth, "max_steps": min(p.max_steps, settings.turns),
             "room_seeds": room_seeds(env_seeds, settings.steps, settings.tasks * n_gpus,
                                      settings.val_episodes)}
    path = assets / "sokoban-rooms.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(rooms, sort_keys=True) + "\n")
    return path


def _games_key(games: Path) -> Any:
    """What the tiny model's demonstrations come from: ALFWorld's game set's key, or the
    Sokoban rooms file's content."""
    if games.is_file():
        return json.loads(games.read_text(encoding="utf-8"))
    from ccpo_lab.backends.local.games import load_game_set

    return load_game_set(games).spec.key()


def model_key(games: Path, base_config: Path | None, history_length: int,
              machine: Machine) -> str:
    """Names the tiny model's folder: everything it is built from."""
    blob = json.dumps({"games": _games_key(games),
                       "base": base_config.read_text(encoding="utf-8") if base_config else None,
                       "history": history_length, "source": _source_digest(),
                       "torch": machine.torch, "transformers": machine.transformers},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_tiny_model(assets: Path, games: Path, checkout: Path, model_path: str,
                      history_length: int, machine: Machine,
                      say: Any = print) -> tuple[Path, dict[str, Any]]:
    """The tiny model's folder (built once per key, in the trainer environment) and its
    build record (:data:`~ccpo_lab.backends.verl.tiny_model.INFO_FILE`)."""
    cfg = Path(os.path.expanduser(model_path)) / "config.json"
    base = cfg if cfg.is_file() else None
    final = assets / f"model-{model_key(games, base, history_length, machine)}"
    if not (final / INFO_FILE).is_file():
        say(f"building the tiny model in {final} (from "
            f"{base if base else 'a default Qwen2'}; fitted to the games' expert plans)")
        tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        argv = [machine.python, "-m", "ccpo_lab.backends.verl.tiny_model", str(tmp),
                "--sokoban" if games.is_file() else "--games", str(games),
                "--verl-agent", str(checkout),
                "--history-length", str(history_length)]
        if base is not None:
            argv += ["--base-config", str(base)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false",
               "PYTHONPATH": os.pathsep.join(p for p in (_repo_root(), os.environ.get(
                   "PYTHONPATH", "")) if p)}
        r = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
        if r.returncode != 0 or not (tmp / INFO_FILE).is_file():
            shutil.rmtree(tmp, ignore_errors=True)
            tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
            raise RuntimeError(f"building the tiny model failed (exit {r.returncode}):\n{tail}")
        with contextlib.suppress(OSError):
            os.rename(tmp, final)
        shutil.rmtree(tmp, ignore_errors=True)
    info = json.loads((final / INFO_FILE).read_text(encoding="utf-8"))
    return final, info


def _repo_root() -> str:
    """The folder holding the ``ccpo_lab`` package (for the trainer's ``PYTHONPATH`` when
    ccpo-lab is not installed there)."""
    return str(Path(__file__).resolve().parents[3])


# ----------------------------------------------------------------------- the sweep
def _fit_layout(s: Any, device: str, gpus: int) -> dict[str, Any]:
    """``backend.verl`` values of the rehearsal's layout."""
    if device == "cpu":
        return {"device": "cpu", "rollout_name": "hf", "rollout_tp": 1, "n_gpus_per_node": 1,
                "nnodes": 1}
    n = max(1, min(s.n_gpus_per_node, gpus))
    tp = max(t for t in range(1, min(s.rollout_tp, n) + 1) if n % t == 0)
    return {"n_gpus_per_node": n, "nnodes": 1, "rollout_tp": tp}


def rehearsal_overrides(sw: Any, device: str, machine: Machine, games: Path, model: Path,
                        info: dict[str, Any], settings: RehearsalSettings) -> list[str]:
    """The overrides that turn the loaded sweep ``sw`` into its rehearsal (appended after
    the user's own, so they win)."""
    cfg = sw.config
    s, p = cfg.backend.verl, cfg.protocol
    layout = _fit_layout(s, device, machine.gpus)
    n_gpus = layout["n_gpus_per_node"]
    tasks = settings.tasks * n_gpus
    group = min(p.group_size, settings.group_size)
    mini = max(n_gpus * 4, 4)
    prompt = _prompt_length(info, p.max_prompt_length)
    ov = [f"name={cfg.name}{SUFFIX}",
          f"seeds=[{','.join(str(k) for k in cfg.seeds[:settings.seeds])}]",
          f"backend.verl.model_path={model}",
          *(f"backend.verl.{k}={hydra_value(v) if isinstance(v, str) else v}"
            for k, v in layout.items()),
          "backend.verl.ppo_micro_batch_size_per_gpu=4",
          "backend.verl.log_prob_micro_batch_size_per_gpu=4",
          f"backend.verl.ray_num_cpus={max(8, os.cpu_count() or 1)}",
          "++backend.verl.env.CCPO_LAB_DUMP_ROLLOUTS=all",
          "++backend.verl.env.HF_HUB_OFFLINE=1",
          f"protocol.total_steps={settings.steps}",
          f"protocol.train_batch_size={tasks}",
          f"protocol.group_size={group}",
          f"protocol.val_batch_size={settings.val_episodes}",
          f"protocol.max_steps={min(p.max_steps, settings.turns)}",
          f"protocol.max_prompt_length={prompt}",
          f"protocol.max_response_length={min(p.max_response_length, settings.response_length)}",
          f"protocol.ppo_mini_batch_size={mini}",
          "protocol.save_freq=1", "protocol.test_freq=1",
          "analysis.window_start=0", "analysis.adaptive.max_seeds=null"]
    if not games.is_file():   # ALFWorld's generated games (Sokoban's rooms need no file)
        ov.append(f"++backend.verl.env.ALFWORLD_DATA={games}")
    if device == "cpu":
        ov.append("backend.verl.vllm_attention_backend=null")
    return ov


def _prompt_length(info: dict[str, Any], sweep_max: int) -> int:
    """Prompt tokens: twice the longest demonstration prompt (histories grow with the
    turns), rounded up to 128, at most the sweep's."""
    longest = int(info.get("longest_prompt_tokens") or 512)
    want = -(-2 * longest // 128) * 128
    return max(256, min(sweep_max, want))


@dataclass(frozen=True)
class Rehearsal:
    """A prepared rehearsal: everything :func:`run_rehearsal` needs."""

    sweep_file: str
    """The user's sweep file."""
    overrides: tuple[str, ...]
    """The user's overrides, then the rehearsal's."""
    results: Path
    """Results root."""
    sweep: Any
    """The rehearsal sweep (loaded and validated)."""
    machine: Machine
    """What the trainer environment sees."""
    device: str
    """``cpu`` or ``cuda``."""
    settings: RehearsalSettings
    """How much it runs."""
    model_info: dict[str, Any]
    """The tiny model's build record."""

    @property
    def sweep_dir(self) -> Path:
        """``<results>/<sweep>-rehearsal``."""
        return Path(self.sweep.sweep_dir(self.results))

    @property
    def resume_dir(self) -> Path:
        """``<results>/<sweep>-rehearsal-resume``."""
        return self.results / (self.sweep.name[:-len(SUFFIX)] + RESUME_SUFFIX)

    def resume_overrides(self) -> list[str]:
        """The overrides of the resume check's copy of the first arm's first seed, inline.

        The rehearsal's own ``name``/``arms``/``seeds`` are replaced (each key may be given
        once), the analysis made to fit one arm (it is its own reference, no pairs), and
        its launcher overrides dropped (``launcher.partition=...`` names no key of the
        inline launcher)."""
        sw = self.sweep
        replaced = ("name", "arms", "seeds", "analysis.reference", "analysis.pairs")
        kept = [o for o in self.overrides if not _sets(o, replaced)]
        return [*kept, f"name={self.resume_dir.name}", f"arms=[{sw.arms[0].name}]",
                f"seeds=[{sw.config.seeds[0]}]", f"analysis.reference={sw.arms[0].name}",
                "analysis.pairs=[]", "launcher=inline"]


def _sets(override: str, keys: tuple[str, ...]) -> bool:
    """Whether a Hydra override sets one of ``keys`` or the launcher (group or key)."""
    key = override.lstrip("+~").split("=", 1)[0].strip()
    return key in keys or key == "launcher" or key.startswith("launcher.")


def prepare(sweep_file: str | Path, overrides: Sequence[str], results: str | Path,
            settings: RehearsalSettings, say: Any = print) -> Rehearsal:
    """Check the input (nothing written before), then build the games and the tiny model
    and load the rehearsal sweep."""
    settings.validate()
    user = load_sweep(sweep_file, list(overrides))
    check_inputs(user)
    s = user.config.backend.verl
    machine = probe_machine(s.python)
    device = choose_device(settings, machine)
    sweep_dir = Path(results) / f"{user.name}{SUFFIX}"
    assets = sweep_dir / ASSETS
    env = user.config.environments[0]
    games = ensure_sokoban_rooms(assets, user, device, machine, settings) \
        if env == "sokoban" else ensure_rehearsal_games(assets)
    model, info = ensure_tiny_model(assets, games, Path(s.verl_agent_path), s.model_path,
                                    user.config.protocol.history_length, machine, say=say)
    extra = rehearsal_overrides(user, device, machine, games, model, info, settings)
    every = (*overrides, *extra)
    sw = load_sweep(sweep_file, list(every))
    return Rehearsal(sweep_file=str(sweep_file), overrides=tuple(every), results=Path(results),
                     sweep=sw, machine=machine, device=device, settings=settings,
                     model_info=info)


# ----------------------------------------------------------------------- running
def cli_argv(sweep_file: str, overrides: Sequence[str], results: Path) -> list[str]:
    """``ccpo-lab sweep SWEEP OVERRIDES --results R --wait`` as this interpreter runs it."""
    return [sys.executable, "-m", "ccpo_lab.cli.main", "sweep", sweep_file, *overrides,
            "--results", str(results), "--wait"]


def resume_check_runs(reh: Rehearsal, say: Any = print, timeout: float = 3600.0
                      ) -> dict[str, Any]:
    """Run a copy of the first arm's first seed, stop it (SIGTERM, as a scheduler's
    preemption) once its step-1 checkpoint is complete, then relaunch it to the end.

    Returns what happened (exit codes, the step it was stopped at, the state between).
    """
    argv = cli_argv(reh.sweep_file, reh.resume_overrides(), reh.results)
    sw = reh.sweep
    run_dir = reh.resume_dir / sw.arms[0].name / f"seed-{sw.config.seeds[0]}"
    log = reh.resume_dir.parent / f"{reh.resume_dir.name}.log"
    reh.resume_dir.parent.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"run_dir": str(run_dir), "log": str(log)}
    say(f"resume check: {sw.arms[0].name} seed {sw.config.seeds[0]} in {reh.resume_dir}, "
        "stopped after its first checkpoint, then relaunched")
    with log.open("ab") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        stopped_at = _stop_after_checkpoint(proc, run_dir, timeout)
        out["first_exit"] = proc.wait()
        out["stopped_at_step"] = stopped_at
        state = _read_json(run_dir / "state.json")
        out["state_between"] = state.get("state")
        out["metrics_rows_between"] = _count_rows(run_dir / "metrics.jsonl")
        r = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           check=False, timeout=timeout)
        out["second_exit"] = r.returncode
    return out


def _stop_after_checkpoint(proc: subprocess.Popen[bytes], run_dir: Path,
                           timeout: float) -> int | None:
    """SIGTERM ``proc``'s group once the run's step-1 checkpoint is complete; the step the
    trainer had reached (None if the run ended first)."""
    marker = run_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            done = int(marker.read_text().strip()) >= 1
        except (OSError, ValueError):
            done = False
        if done:
            step = int(_read_json(run_dir / "state.json").get("step") or 0)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            return step
        time.sleep(0.5)
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def _count_rows(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except OSError:
        return 0


def record(reh: Rehearsal, extra: dict[str, Any]) -> Path:
    """``rehearsal.json`` in the rehearsal's sweep directory: the settings, the machine,
    the model and what ran."""
    path = reh.sweep_dir / "rehearsal.json"
    doc = {"sweep_file": reh.sweep_file, "overrides": list(reh.overrides),
           "device": reh.device, "machine": asdict(reh.machine),
           "settings": asdict(reh.settings), "model": reh.model_info, **extra}
    atomic_write_text(path, json.dumps(doc, indent=1, default=str) + "\n")
    return path


def run_rehearsal(reh: Rehearsal, say: Any = print) -> list[Any]:
    """Run the rehearsal's sweep through its launcher, the resume check, then every check
    of :mod:`.rehearsal_checks`; returns the checks (``rehearsal.json`` records them)."""
    sw, times = reh.sweep, {}
    t0 = time.monotonic()
    launch_code = launch_sweep(sw, reh.results, wait=True)
    times["runs_s"] = round(time.monotonic() - t0, 1)
    resume: dict[str, Any] = {}
    if reh.settings.resume_check:
        t1 = time.monotonic()
        shutil.rmtree(reh.resume_dir, ignore_errors=True)   # the check's own scratch copy
        resume = resume_check_runs(reh, say)
        times["resume_s"] = round(time.monotonic() - t1, 1)
    runs = C.load_runs(reh.sweep_dir)
    arms = [a.name for a in sw.arms]
    seeds = list(sw.config.seeds)
    estimators = {a.name: (a.estimator.name, sorted(a.estimator.params.items()))
                  for a in sw.arms}
    original = next((r for r in runs if r.arm == arms[0] and r.seed == seeds[0]), None)
    d = reh.sweep_dir
    report = d / "report"
    t2 = time.monotonic()
    checks = [C.check_trainer(runs, arms, seeds), C.check_metrics(runs, reh.settings.steps),
              C.check_advantages(runs, estimators), C.check_verify(d, runs)]
    if reh.settings.resume_check:
        checks.append(C.check_resume(resume, original, reh.settings.steps))
    checks += [
        C.check_weights(runs, reh.machine.python, str(sw.config.backend.verl.model_path)),
        C.check_command("report", ["report", str(d), "--out", str(report)],
                        lambda: None if (report / "report.md").is_file() else
                        f"{report / 'report.md'} was not written"),
        C.check_command("sync", ["sync", str(d)], lambda: None),
    ]
    times["checks_s"] = round(time.monotonic() - t2, 1)
    record(reh, {"launch_exit": launch_code, "resume": resume, "times": times,
                 "checks": [asdict(c) for c in checks]})
    return checks
