"""``ccpo-lab doctor``: is this machine ready for a verl sweep? One line per check.

Each check gives ``ok`` (with what it found), ``FIX`` (with what to do) or ``skip`` (not
needed here). Two kinds of checks:

- submit-side (:data:`SUBMIT_CHECKS`, where ``ccpo-lab sweep`` runs): the verl-agent
  checkout and its hook targets, the trainer environment (``backend.verl.python``: what
  ccpo-lab's job side needs, installed ``--no-deps``), its package versions, MLflow, the
  sweep's launcher (its own checks: Slurm answers, the local GPU slots...) and free disk
  for checkpoints;
- node-side (:data:`NODE_CHECKS`, where the runs execute): GPUs, flash-attn and the vLLM
  attention backend the sweep names, ALFWorld's data and the model as the node sees them.

Where the runs do not execute here (the launcher says so: a Slurm login node) the
node-side checks are ``skip``, pointing at ``--on-node``: :func:`run_on_node` runs them
inside a one-node job of the sweep's own launcher (:meth:`Launcher.call_in_job
<ccpo_lab.launch.base.Launcher.call_in_job>`: a Slurm job with the sweep's partition,
account and GPUs, a local job with a run's GPU slice, each run by ``backend.verl.python``;
here for ``inline``) and returns their lines. Nothing heavy is imported here: the
trainer's Python is asked in a subprocess (it may be another interpreter than this one).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.backends.verl.checkout import REFERENCE_COMMIT, inspect_checkout
from ccpo_lab.backends.verl.settings import VerlBackendConfig
from ccpo_lab.launch.plan import launcher_for
from ccpo_lab.launch.slurm import SlurmLauncher, SlurmSettings
from ccpo_lab.placement import Needs

if TYPE_CHECKING:
    from ccpo_lab.config.sweep import Sweep
    from ccpo_lab.launch.base import Launcher

PACKAGES = ("torch", "verl", "vllm", "ray", "transformers", "ccpo-lab")
BYTES_PER_PARAM_CKPT = 12
"""Actor checkpoint size per parameter: fp32 weights (4) + Adam moments (8), sharded."""


@dataclass(frozen=True)
class Check:
    """The outcome of one check."""

    name: str
    """What was checked."""
    status: str
    """``ok``, ``FIX`` or ``skip``."""
    detail: str
    """What was found, or what to do."""

    def line(self) -> str:
        """``ok    name: detail``."""
        return f"{self.status:<5} {self.name}: {self.detail}"


@dataclass(frozen=True)
class Context:
    """What the checks look at."""

    settings: VerlBackendConfig
    """The verl backend settings (the sweep's, or the defaults)."""
    results: Path
    """Results root (checkpoints go below it)."""
    launcher: Launcher | None = None
    """The sweep's launcher (:func:`context` sets it: without a sweep, Slurm with its
    defaults; None inside :func:`run_on_node`'s job, which runs node-side checks only)."""
    parallel_runs: int = 1
    """Runs that may hold checkpoints at once."""
    tracking_uri: str | None = None
    """MLflow tracking URI (None: the sweep's default SQLite file)."""
    environment: str = "alfworld"
    """The environment the sweep's runs play (one per :func:`run_doctor` call)."""
    env_settings: Any = None
    """Its settings (``env.<environment>``; None: the defaults)."""

    def env(self, name: str) -> str | None:
        """A variable as the trainer will see it (backend ``env`` first)."""
        return self.settings.env.get(name) or os.environ.get(name)


def _run(cmd: list[str], timeout: float, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              check=False, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None


def check_checkout(ctx: Context) -> list[Check]:
    """The verl-agent checkout exists; its hook targets import (``--check``)."""
    info = inspect_checkout(ctx.settings.verl_agent_path)
    if not info.exists:
        return [Check("verl-agent checkout", "FIX", f"{info.path} has no verl/trainer/"
                      "main_ppo.py: clone langfengQ/verl-agent there or set "
                      "backend.verl.verl_agent_path"),
                Check("verl-agent hooks", "skip", "no checkout")]
    commit = info.commit or "unknown commit"
    note = "" if info.commit == REFERENCE_COMMIT else \
        f" (hooks written for {REFERENCE_COMMIT[:12]}: the next line checks them)"
    out = [Check("verl-agent checkout", "ok", f"{info.path} at {commit[:12]}{note}")]
    env = {**os.environ, **ctx.settings.env}
    r = _run([ctx.settings.python, "-m", "ccpo_lab.backends.verl.agent.trainer", "--verl-agent",
              str(info.path), "--check"], timeout=600, env=env)
    if r is None:
        out.append(Check("verl-agent hooks", "FIX", f"could not run {ctx.settings.python} "
                         "(backend.verl.python) or it took over 10 minutes"))
    elif r.returncode != 0:
        fails = [ln for ln in (r.stdout + r.stderr).splitlines()
                 if ln.startswith(("FAIL", "error"))]
        first = fails[0] if fails else (r.stderr.strip().splitlines() or ["?"])[-1]
        out.append(Check("verl-agent hooks", "FIX", f"{len(fails) or 1} problem(s); first: "
                         f"{first[:200]} (python -m ccpo_lab.backends.verl.agent.trainer "
                         f"--verl-agent {info.path} --check shows all)"))
    else:
        out.append(Check("verl-agent hooks", "ok", "every patched attribute is present"))
    return out


_VERSIONS = ("import json, importlib.metadata as m\nout = {}\nfor n in %r:\n    try:\n"
             "        out[n] = m.version(n)\n    except m.PackageNotFoundError:\n"
             "        out[n] = None\nprint(json.dumps(out))")


def check_packages(ctx: Context) -> list[Check]:
    """Versions of the trainer's packages (one line each)."""
    env = {**os.environ, **ctx.settings.env}
    r = _run([ctx.settings.python, "-c", _VERSIONS % (PACKAGES,)], timeout=60, env=env)
    if r is None or r.returncode != 0:
        return [Check("python", "FIX", f"cannot run {ctx.settings.python} "
                      "(backend.verl.python)")]
    found = json.loads(r.stdout.strip().splitlines()[-1])
    return [Check(name, "ok", v) if v else
            Check(name, "FIX", f"not installed in {ctx.settings.python}")
            for name, v in found.items()]


def check_trainer_env(ctx: Context) -> list[Check]:
    """ccpo-lab in the trainer environment: ``python -m ccpo_lab.backends.verl.trainer_env
    --check`` with ``backend.verl.python`` (what the jobs run)."""
    env = {**os.environ, **ctx.settings.env}
    r = _run([ctx.settings.python, "-m", "ccpo_lab.backends.verl.trainer_env", "--check"],
             timeout=300, env=env)
    if r is None:
        return [Check("trainer environment", "FIX", f"cannot run {ctx.settings.python} "
                      "(backend.verl.python)")]
    fails = [ln[6:] for ln in r.stdout.splitlines() if ln.startswith("FAIL")]
    if r.returncode != 0 or fails:
        first = fails[0] if fails else (r.stderr.strip().splitlines() or ["?"])[-1]
        return [Check("trainer environment", "FIX", f"{len(fails) or 1} problem(s); first: "
                      f"{first[:160]} (install ccpo-lab with `ccpo-lab install-into "
                      f"{ctx.settings.python}`: docs/installing.md)")]
    return [Check("trainer environment", "ok", f"{ctx.settings.python}: ccpo-lab's job side "
                  "imports (its torch, vLLM and verl untouched)")]


_ATTENTION = r"""
import importlib, importlib.util, json, sys
name = sys.argv[1] if len(sys.argv) > 1 else ""
out = {"flash_attn": None, "vllm": None, "backend": name, "valid": None, "needs": None,
       "needs_ok": None}
def ver(mod):
    try:
        m = importlib.import_module(mod)
        return getattr(m, "__version__", "?")
    except Exception as e:
        return None
out["flash_attn"] = ver("flash_attn")
out["vllm"] = ver("vllm")
if out["vllm"] and name:
    for where in ("vllm.attention.backends.registry", "vllm.platforms.interface"):
        try:
            mod = importlib.import_module(where)
            enum = getattr(mod, "_Backend", None) or getattr(mod, "AttentionBackendEnum")
            out["valid"] = sorted(b.name for b in enum)
            break
        except Exception:
            continue
needs = {"XFORMERS": "xformers", "FLASHINFER": "flashinfer",
         "FLASH_ATTN": "vllm.vllm_flash_attn"}.get(name)
if needs:
    out["needs"] = needs
    try:
        out["needs_ok"] = importlib.util.find_spec(needs) is not None
    except Exception:
        out["needs_ok"] = False
print(json.dumps(out))
"""


def check_attention(ctx: Context) -> list[Check]:
    """flash-attn (the actor's attention) and the vLLM attention backend the sweep names
    (``backend.verl.vllm_attention_backend``), in the trainer's Python; neither is used
    with ``backend.verl.device: cpu`` (SDPA attention, the ``hf`` rollout)."""
    if ctx.settings.device == "cpu":
        why = "backend.verl.device is cpu: SDPA attention and the hf rollout"
        return [Check("flash-attn", "skip", why), Check("vLLM attention", "skip", why)]
    env = {**os.environ, **ctx.settings.env}
    name = ctx.settings.vllm_attention_backend or ""
    r = _run([ctx.settings.python, "-c", _ATTENTION, name], timeout=300, env=env)
    if r is None or r.returncode != 0:
        return [Check("flash-attn", "FIX", f"cannot run {ctx.settings.python}"),
                Check("vLLM attention", "FIX", f"cannot run {ctx.settings.python}")]
    found = json.loads(r.stdout.strip().splitlines()[-1])
    out = [Check("flash-attn", "ok", found["flash_attn"]) if found["flash_attn"] else
           Check("flash-attn", "FIX", f"flash_attn does not import in {ctx.settings.python} "
                 "(the actor's attention; build it against this torch)")]
    if not name:
        out.append(Check("vLLM attention", "skip", "backend.verl.vllm_attention_backend is "
                         "null: vLLM chooses"))
    elif not found["vllm"]:
        out.append(Check("vLLM attention", "FIX", f"vllm does not import in "
                         f"{ctx.settings.python}"))
    elif found["valid"] is not None and name not in found["valid"]:
        out.append(Check("vLLM attention", "FIX", f"{name} is not a backend of vLLM "
                         f"{found['vllm']} (valid: {', '.join(found['valid'])}); set "
                         "backend.verl.vllm_attention_backend"))
    elif found["needs"] and not found["needs_ok"]:
        out.append(Check("vLLM attention", "FIX", f"{name} needs {found['needs']}, which is "
                         f"not installed in {ctx.settings.python}"))
    else:
        out.append(Check("vLLM attention", "ok", f"{name} (vLLM {found['vllm']})"))
    return out


def check_gpus(ctx: Context) -> list[Check]:
    """GPUs visible here (count and model) against ``n_gpus_per_node``."""
    if ctx.settings.device == "cpu":
        return [Check("GPUs", "skip", "backend.verl.device is cpu: one logical Ray GPU (the "
                      "CPU adapter)")]
    want = ctx.settings.n_gpus_per_node
    if shutil.which("nvidia-smi") is None:
        return [Check("GPUs", "FIX", f"nvidia-smi not found: no GPU visible here (a run needs "
                      f"{want} per node; run doctor on a GPU node)")]
    r = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"], 30)
    if r is None or r.returncode != 0:
        return [Check("GPUs", "FIX", "nvidia-smi failed: " + (r.stderr.strip() if r else "?"))]
    gpus = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    models = sorted({g.split(",")[0] for g in gpus})
    detail = f"{len(gpus)} x {', '.join(models)}"
    if len(gpus) < want:
        return [Check("GPUs", "FIX", f"{detail}; the sweep needs {want} per node")]
    return [Check("GPUs", "ok", detail)]


def check_alfworld(ctx: Context) -> list[Check]:
    """ALFWorld's game files under ``ALFWORLD_DATA`` (ALFWorld sweeps only)."""
    if ctx.environment != "alfworld":
        return []
    root = Path(ctx.env("ALFWORLD_DATA") or "~/.cache/alfworld").expanduser()
    need = ["json_2.1.1/train", "json_2.1.1/valid_seen", "logic"]
    missing = [n for n in need if not (root / n).is_dir()]
    if missing:
        return [Check("ALFWorld data", "FIX", f"{root} lacks {', '.join(missing)}: run "
                      "`alfworld-download` or set ALFWORLD_DATA (backend.verl.env)")]
    games = sum(1 for _ in (root / "json_2.1.1" / "train").glob("*/*"))
    return [Check("ALFWorld data", "ok", f"{root} ({games} training games)")]


def check_model(ctx: Context) -> list[Check]:
    """The model: a readable local directory, or a hub id in the local HF cache."""
    path = ctx.settings.model_path
    local = Path(path).expanduser()
    if local.exists():
        cfg = local / "config.json"
        weights = list(local.glob("*.safetensors")) + list(local.glob("*.bin"))
        if not cfg.is_file() or not os.access(cfg, os.R_OK) or not weights:
            return [Check("model", "FIX", f"{local} needs a readable config.json and weights")]
        return [Check("model", "ok", f"{local} ({len(weights)} weight file(s))")]
    hf_home = Path(ctx.env("HF_HOME") or "~/.cache/huggingface").expanduser()
    snap = hf_home / "hub" / ("models--" + path.replace("/", "--")) / "snapshots"
    if any(snap.glob("*/config.json")):
        return [Check("model", "ok", f"{path} in the HF cache ({snap.parent})")]
    return [Check("model", "FIX", f"{path} is neither a local directory nor in {hf_home}/hub: "
                  f"`huggingface-cli download {path}` first, or set backend.verl.model_path")]


def check_mlflow(ctx: Context) -> list[Check]:
    """MLflow: an HTTP server answering ``/health``, or a writable local store."""
    uri = ctx.tracking_uri
    if uri and uri.startswith(("http://", "https://")):
        import urllib.request

        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=5) as resp:
                return [Check("MLflow", "ok", f"{uri} answers ({resp.status})")]
        except OSError as e:
            return [Check("MLflow", "FIX", f"{uri} unreachable: {e}")]
    target = Path(uri.split(":///", 1)[-1]).parent if uri else ctx.results
    base = _existing_parent(target)
    if not os.access(base, os.W_OK):
        return [Check("MLflow", "FIX", f"{base} is not writable (local tracking store)")]
    return [Check("MLflow", "ok", f"local store under {target}")]


def check_launcher(ctx: Context) -> list[Check]:
    """The launcher's own checks of this machine (Slurm answers, local GPU slots...)."""
    if ctx.launcher is None:
        return [Check("launcher", "skip", "no launcher in this context")]
    return [Check(name, status, detail)
            for name, status, detail in ctx.launcher.machine_checks()]


def _existing_parent(p: Path) -> Path:
    p = p.expanduser().absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def model_params(model_path: str) -> float:
    """Parameter count guessed from the model's name (``7B``) or its ``config.json``."""
    m = re.search(r"(\d+(?:\.\d+)?)\s*[bB]\b", Path(model_path).name)
    if m:
        return float(m.group(1)) * 1e9
    cfg = Path(model_path).expanduser() / "config.json"
    try:
        c = json.loads(cfg.read_text())
        h, layers, vocab = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
        inter = c.get("intermediate_size", 4 * h)
        return float(layers * (4 * h * h + 3 * h * inter) + 2 * vocab * h)
    except (OSError, KeyError, ValueError, TypeError):
        return 7e9


def check_disk(ctx: Context) -> list[Check]:
    """Free space under the results root against the checkpoints the sweep keeps."""
    base = _existing_parent(ctx.results)
    free = shutil.disk_usage(base).free
    per = model_params(ctx.settings.model_path) * BYTES_PER_PARAM_CKPT
    need = per * (ctx.settings.max_ckpt_to_keep + 1) * max(ctx.parallel_runs, 1)
    detail = (f"{free / 1e9:,.0f} GB free at {base}; ~{need / 1e9:,.0f} GB needed "
              f"({ctx.parallel_runs} run(s) x {ctx.settings.max_ckpt_to_keep + 1} checkpoints "
              f"x ~{per / 1e9:,.0f} GB)")
    return [Check("disk", "ok" if free >= need else "FIX", detail)]


_FIND = ("import importlib.util, json, sys\nout = {}\nfor n in sys.argv[1:]:\n    try:\n"
         "        out[n] = importlib.util.find_spec(n) is not None\n    except Exception:\n"
         "        out[n] = False\nprint(json.dumps(out))")


def check_sokoban(ctx: Context) -> list[Check]:
    """Sokoban: the trainer's interpreter finds gym, gym_sokoban and matplotlib (verl-agent's
    Sokoban imports them)."""
    mods = ("gym", "gym_sokoban", "matplotlib")
    env = {**os.environ, **ctx.settings.env}
    r = _run([ctx.settings.python, "-c", _FIND, *mods], timeout=60, env=env)
    if r is None or r.returncode != 0:
        return [Check("Sokoban modules", "FIX", f"cannot run {ctx.settings.python} "
                      "(backend.verl.python)")]
    found = json.loads(r.stdout.strip().splitlines()[-1])
    missing = [m for m in mods if not found.get(m)]
    if missing:
        return [Check("Sokoban modules", "FIX", f"{', '.join(missing)} not in "
                      f"{ctx.settings.python}: pip install gym==0.26.2 gym_sokoban==0.0.6 "
                      "matplotlib (verl-agent's README; keep its torch: ccpo-lab's "
                      "constraints)")]
    return [Check("Sokoban modules", "ok", f"{', '.join(mods)} in {ctx.settings.python}")]


def check_webshop(ctx: Context) -> list[Check]:
    """WebShop: one line per missing part (its modules in the trainer's interpreter, the
    spaCy model, Java for pyserini, the product files and the search index), each saying
    what to do (:mod:`ccpo_lab.backends.verl.webshop`)."""
    from ccpo_lab.backends.verl import webshop as W
    from ccpo_lab.config.environments import WebshopSettings

    st = ctx.env_settings or WebshopSettings()
    pkg = W.package_dir(ctx.settings.verl_agent_path)
    py = ctx.settings.python
    r = _run([py, "-c", W.PROBE, str(pkg), ",".join(W.MODULES), W.SPACY_MODEL], timeout=120,
             env={**os.environ, **ctx.settings.env})
    if r is None or r.returncode != 0:
        out = [Check("WebShop interpreter", "FIX", f"cannot run {py} (backend.verl.python): "
                     "the interpreter of verl-agent's WebShop environment (its README: "
                     "Python 3.10, setup.sh, then verl-agent)")]
    else:
        out = _webshop_probe_lines(json.loads(r.stdout.strip().splitlines()[-1]), py, pkg)
    for _key, what, path in W.missing_data(st, ctx.settings.verl_agent_path):
        out.append(Check("WebShop data", "FIX", f"{what} missing at {path}: {W.SETUP} "
                         "(gdown's downloads; the index by run_indexing.sh)"))
    if not any(c.name == "WebShop data" for c in out):
        out.append(Check("WebShop data", "ok", f"products and search index under {pkg}"))
    return out


def _webshop_probe_lines(found: dict[str, Any], py: str, pkg: Path) -> list[Check]:
    """The probe's findings as check lines (ok, or what to do)."""
    from ccpo_lab.backends.verl import webshop as W

    ver = ".".join(str(v) for v in found.get("python", []))
    mods = found.get("modules", {})
    missing = [m for m in W.MODULES if not mods.get(m)]
    out = []
    if "web_agent_site" in missing:
        out.append(Check("WebShop package", "FIX", f"{pkg} has no web_agent_site: the "
                         "verl-agent checkout lacks WebShop (backend.verl.verl_agent_path)"))
        missing.remove("web_agent_site")
    if missing:
        out.append(Check("WebShop modules", "FIX", f"{', '.join(missing)} not importable by "
                         f"{py} (Python {ver}): pip install -r {pkg}/requirements.txt there "
                         "(verl-agent's README: a Python 3.10 environment, setup.sh)"))
    else:
        out.append(Check("WebShop modules", "ok", f"{py} (Python {ver})"))
    out.append(Check("spaCy model", "ok", W.SPACY_MODEL) if found.get("spacy_model") else
               Check("spaCy model", "FIX", f"{W.SPACY_MODEL} not in {py}: {py} -m spacy "
                     f"download {W.SPACY_MODEL}"))
    out.append(Check("Java", "ok", str(found["java"])) if found.get("java") else
               Check("Java", "FIX", "no java on the trainer's PATH nor under JAVA_HOME "
                     "(pyserini's Lucene index needs Java 11): conda install -c conda-forge "
                     "openjdk=11, or set JAVA_HOME in backend.verl.env"))
    return out


def check_environment(ctx: Context) -> list[Check]:
    """What the sweep's environment needs beyond ALFWorld's (whose data is a node-side
    check): Sokoban's modules, WebShop's whole environment."""
    if ctx.environment == "sokoban":
        return check_sokoban(ctx)
    if ctx.environment == "webshop":
        return check_webshop(ctx)
    return []


SUBMIT_CHECKS: tuple[Callable[[Context], list[Check]], ...] = (
    check_checkout, check_trainer_env, check_packages, check_environment, check_mlflow,
    check_launcher, check_disk)
"""Checks of the machine that submits (the login node under Slurm)."""
NODE_CHECKS: tuple[Callable[[Context], list[Check]], ...] = (
    check_gpus, check_attention, check_alfworld, check_model)
"""Checks of the machine a run executes on."""
CHECKS = SUBMIT_CHECKS + NODE_CHECKS
NODE_NAMES = ("GPUs", "flash-attn", "vLLM attention", "ALFWorld data", "model")
"""The lines :data:`NODE_CHECKS` print (for ``skip`` lines where the runs do not
execute)."""


def context(sweep: Sweep | None, results: Path) -> Context:
    """The checks' context for ``sweep`` (None: the verl defaults, Slurm assumed)."""
    if sweep is None:

        settings = VerlBackendConfig()
        default = SlurmLauncher(SlurmSettings(), results, name="doctor",
                                needs=Needs(gpus_per_node=settings.n_gpus_per_node,
                                            python=settings.python))
        return Context(settings=settings, results=results, launcher=default)

    cfg = sweep.config
    launcher = launcher_for(sweep, results)
    env = cfg.environments[0] if cfg.environments else "alfworld"
    return Context(settings=cfg.backend.verl, results=sweep.sweep_dir(results),
                   launcher=launcher,
                   parallel_runs=min(launcher.parallel_runs(), len(sweep.runs)),
                   tracking_uri=cfg.tracking.uri, environment=env,
                   env_settings=cfg.env.of(env))


def node_checks(ctx: Context) -> list[Check]:
    """The node-side checks, here (what :func:`run_on_node`'s job calls)."""
    out: list[Check] = []
    for fn in NODE_CHECKS:
        out += fn(ctx)
    return out


def run_doctor(sweep: Sweep | None, results: Path) -> list[Check]:
    """The submit-side checks, then the node-side ones (``skip`` where the runs do not
    execute, as the sweep's launcher says: a Slurm login node)."""
    ctx = context(sweep, results)
    out: list[Check] = []
    for fn in SUBMIT_CHECKS:
        out += fn(ctx)
    if ctx.launcher is not None and not ctx.launcher.runs_execute_here():
        how = "ccpo-lab doctor SWEEP --on-node" if sweep is not None else \
            "ccpo-lab doctor SWEEP.yaml --on-node"
        out += [Check(name, "skip", f"the runs execute elsewhere ({ctx.launcher.kind} "
                      f"launcher, e.g. from a login node): `{how}` checks it where they run")
                for name in NODE_NAMES
                if name != "ALFWorld data" or ctx.environment == "alfworld"]
    else:
        out += node_checks(ctx)
    return out


def run_on_node(sweep: Sweep, results: Path, timeout_min: int = 20) -> tuple[str, list[Check]]:
    """Run :func:`node_checks` inside a one-node job of the sweep's own launcher
    (:meth:`Launcher.call_in_job <ccpo_lab.launch.base.Launcher.call_in_job>`: its
    settings, a run's GPUs and interpreter, at most ``timeout_min`` minutes; job files in
    ``<results>/<sweep>/_jobs/doctor``). Waits for the job; returns (where it ran, its
    checks)."""
    import dataclasses

    ctx = context(sweep, results)
    assert ctx.launcher is not None
    where, checks = ctx.launcher.call_in_job(node_checks, dataclasses.replace(ctx, launcher=None),
                                             name="doctor", timeout_min=timeout_min)
    return where, list(checks)
