"""GPU smoke test of the verl backend's device-side code (``scripts/gpu-smoke.sh``).

Runs offline on a bare CUDA machine with torch and transformers; builds its own tiny
random Qwen2 and tokenizer. Checks, each PASS / FAIL / SKIP:

- ``device``: CUDA is there (name, torch and transformers versions);
- ``tiny-model``: the model and tokenizer build, save, reload and run on the device;
- ``feature-capture``: the final-norm hook during a forward equals the model's own last
  hidden state at each row's last prompt token (left-padded prompts of different lengths),
  the packed-layout selection agrees, and the reference-worker patch returns the same
  features when micro-batches run out of order;
- ``estimators-on-device``: GRPO, GiGPO and CCPO on device tensors equal the CPU result;
- ``dataproto-path``: the verl-agent advantage hook (padding copies, invalid-action penalty,
  features) on a verl-agent-shaped batch equals the pure estimator (a real ``DataProto``
  when verl imports, else a stand-in with the same fields);
- ``two-arms-two-steps``: GRPO and CCPO arms each sample two steps of toy two-turn episodes
  with a seeded ``torch.Generator`` on the device, compute advantages through the hook and
  take a policy-gradient step; their step-1 rollout fingerprints must be equal.

- ``vllm-request-seeds`` (SKIP without vLLM): on the tiny model with vLLM, ccpo-lab's
  patched ``LLM``/``generate`` path (``patch_vllm_rollout`` on a rollout reduced to the
  pinned commit's ``generate`` call) gives the 8 identical prompts of a group 8 distinct
  samples; fresh engines replay them exactly (sampling depends only on the request seeds);
  and the defect it replaces shows: one ``SamplingParams(seed=k)`` for every request
  samples 8 identical answers;
- ``hf-merge`` (SKIP without ``--verl-agent CHECKOUT``): the tiny model wrapped in FSDP on
  one GPU is saved by verl-agent's ``FSDPCheckpointManager``, kept by ccpo-lab's
  ``keep_best`` (hard links), merged by verl-agent's ``scripts/model_merger.py``, and the
  merged Hugging Face model's weights equal the original ones.

NOT checked (needs what a bare GPU box lacks): verl-agent's trainer and Ray workers, real
ALFWorld, a 7B model, multi-GPU layouts.

``python -m ccpo_lab.backends.verl.smoke [--device cuda] [--out DIR]``; writes
``gpu-smoke.json`` to ``--out`` (default ``$OUT`` or ``./gpu-smoke-out``); exit 0 iff no
check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ccpo_lab.backends.verl import smoke_env as E
from ccpo_lab.backends.verl.agent.env import ENV_CAPTURE_PHI, ENV_RUN_DIR, ENV_VLLM_SEED

CCPO_PARAMS = {"gate": "hard", "target": "return", "backoff_task": True, "jweight_c": 1.0}
ARMS: tuple[tuple[str, dict[str, Any]], ...] = (("grpo", {}), ("ccpo", CCPO_PARAMS))


@dataclass
class Ctx:
    """What the checks share."""

    device: str
    out: Path
    work: Path
    model_dir: Path | None = None
    results: list[dict[str, Any]] = field(default_factory=list)


class Skip(Exception):  # noqa: N818 - a check outcome, not an error
    """Raised by a check that cannot run here."""


def ensure_verl_registry() -> str:
    """Import verl's core_algos, or install a stand-in module with a registry."""
    try:
        import verl
        import verl.trainer.ppo.core_algos  # noqa: F401

        return f"verl {getattr(verl, '__version__', '?')}"
    except ImportError:
        pass
    names = ("verl", "verl.trainer", "verl.trainer.ppo", "verl.trainer.ppo.core_algos")
    for n in names:
        if sys.modules.get(n) is None:
            sys.modules[n] = types.ModuleType(n)
    algos = sys.modules["verl.trainer.ppo.core_algos"]
    registry: dict[str, Any] = {}

    def register_adv_est(name: str) -> Callable[[Any], Any]:
        def deco(fn: Any) -> Any:
            registry[name] = fn
            return fn
        return deco

    algos.register_adv_est = register_adv_est  # type: ignore[attr-defined]
    algos.ADV_ESTIMATOR_REGISTRY = registry  # type: ignore[attr-defined]
    return "stand-in (verl not installed)"


def _config() -> Any:
    actor = {"use_invalid_action_penalty": True, "invalid_action_penalty_coef": 0.1}
    return types.SimpleNamespace(actor_rollout_ref=types.SimpleNamespace(actor=actor))


# ----------------------------------------------------------------------------- checks
def check_device(ctx: Ctx) -> str:
    import transformers

    if ctx.device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    name = torch.cuda.get_device_name(0) if ctx.device.startswith("cuda") else "cpu"
    return f"{name}; torch {torch.__version__}; transformers {transformers.__version__}"


def check_model(ctx: Ctx) -> str:
    ctx.model_dir = E.build_tiny_model(ctx.work / "tiny-qwen2")
    model, tok = E.load_tiny_model(ctx.model_dir, ctx.device)
    enc = tok(["task 1 : find the key .", "go north"], return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**{k: v.to(ctx.device) for k, v in enc.items()}).logits
    if not bool(torch.isfinite(logits).all()):
        raise RuntimeError("non-finite logits")
    n = sum(p.numel() for p in model.parameters())
    return f"{n} parameters, vocab {len(tok)}, logits {tuple(logits.shape)} on {logits.device}"


def _fake_worker_modules() -> tuple[Any, Any]:
    """verl-agent's reference worker and actor, reduced to what the patches touch."""
    from ccpo_lab.backends.verl.agent import patches as P

    dp: Any = types.ModuleType("smoke_dp_actor")
    fw: Any = types.ModuleType("smoke_fsdp_workers")

    class DataParallelPPOActor:
        use_remove_padding = False

        def __init__(self, module: Any) -> None:
            self.actor_module = module

        def _forward_micro_batch(self, micro_batch: Any, temperature: float) -> Any:
            mask = micro_batch["attention_mask"]
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = self.actor_module(input_ids=micro_batch["input_ids"], attention_mask=mask,
                                       position_ids=pos).logits
            r = micro_batch["responses"].shape[1]
            logp = torch.log_softmax(logits[:, -r - 1:-1].float(), -1)
            return None, logp.gather(-1, micro_batch["responses"][..., None])[..., 0]

    class ActorRolloutRefWorker:
        def __init__(self, module: Any) -> None:
            self.ref_policy = DataParallelPPOActor(module)

        def compute_ref_log_prob(self, data: Any) -> Any:
            n = len(data)
            chunks = [list(range(i, min(i + 5, n))) for i in range(0, n, 5)][::-1]
            outs: dict[int, torch.Tensor] = {}
            with torch.no_grad():
                for idx in chunks:
                    mb = {k: v[idx] for k, v in data.batch.items()}
                    _, lp = self.ref_policy._forward_micro_batch(mb, temperature=1.0)
                    outs.update(zip(idx, lp, strict=True))
            return E.StandInProto({"ref_log_prob": torch.stack([outs[i] for i in range(n)])},
                                  {"i": list(range(n))})

    dp.DataParallelPPOActor = DataParallelPPOActor
    fw.ActorRolloutRefWorker = ActorRolloutRefWorker
    P.patch_dp_actor(dp)
    P.patch_fsdp_workers(fw)
    return fw, dp


def reference_features(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(N, H)`` features through the patched reference-worker path."""
    from ccpo_lab.backends.verl.agent.phi import PHI_KEY

    os.environ[ENV_CAPTURE_PHI] = "1"
    fw, _ = _fake_worker_modules()
    n = batch["input_ids"].shape[0]
    out = fw.ActorRolloutRefWorker(model).compute_ref_log_prob(
        E.StandInProto(batch, {"i": list(range(n))}))
    return out.batch[PHI_KEY]


def check_features(ctx: Ctx) -> str:
    from ccpo_lab.backends.verl.agent.phi import forward_capturing, last_prompt_hidden

    assert ctx.model_dir is not None
    model, tok = E.load_tiny_model(ctx.model_dir, ctx.device)
    rows = E.rollouts(model, tok, 2, 3, torch.Generator(device=ctx.device).manual_seed(7))
    b = E.tensors(rows, tok.pad_token_id, ctx.device)
    mask, r = b["attention_mask"], b["responses"].shape[1]
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        ref = model(input_ids=b["input_ids"], attention_mask=mask, position_ids=pos,
                    output_hidden_states=True).hidden_states[-1]
        _, hidden = forward_capturing(model, lambda: model(
            input_ids=b["input_ids"], attention_mask=mask, position_ids=pos))
    got = last_prompt_hidden(hidden, mask, r, packed=False)
    col = b["prompts"].shape[1] - 1
    want = ref[:, col].float()
    lens = sorted({len(p) for p in rows.prompt_ids})
    if len(lens) < 2:
        raise RuntimeError("the prompts all have one length: left padding not exercised")
    if not torch.equal(got, want):
        raise RuntimeError(f"hook != last hidden state (max diff {(got - want).abs().max()})")
    packed = hidden.reshape(-1, hidden.shape[-1])[mask.reshape(-1).bool()][None]
    if not torch.equal(last_prompt_hidden(packed, mask, r, packed=True), got):
        raise RuntimeError("packed-layout selection differs from the padded one")
    via_worker = reference_features(model, b)
    if not torch.allclose(via_worker, got.cpu(), atol=1e-5):
        raise RuntimeError("reference-worker features differ from the direct capture")
    return (f"{len(rows.task)} rows, prompt lengths {lens[0]}..{lens[-1]} (left-padded), "
            f"hidden {got.shape[1]}; padded == packed == worker path (micro-batches reversed)")


def _step_batch(rows: E.Rows, phi: torch.Tensor | None, device: str) -> Any:
    from ccpo_lab.estimators import StepBatch

    return StepBatch(task_uid=rows.task, traj_uid=rows.traj, step=rows.turn,
                     anchor_obs=rows.obs,
                     reward=torch.tensor(rows.reward, dtype=torch.float32, device=device),
                     valid=rows.valid, phi=None if phi is None else phi.to(device))


def check_estimators(ctx: Ctx) -> str:
    from ccpo_lab.estimators import get_estimator

    assert ctx.model_dir is not None
    model, tok = E.load_tiny_model(ctx.model_dir, ctx.device)
    rows = E.rollouts(model, tok, 4, 4, torch.Generator(device=ctx.device).manual_seed(3))
    phi = reference_features(model, E.tensors(rows, tok.pad_token_id, ctx.device))
    worst = 0.0
    for name, params in (("grpo", {}), ("gigpo", {}), ("ccpo", CCPO_PARAMS)):
        est = get_estimator(name, **params)
        f = phi if name == "ccpo" else None
        dev = est(_step_batch(rows, f, ctx.device)).advantages
        cpu = est(_step_batch(rows, f, "cpu")).advantages
        if dev.device.type != torch.device(ctx.device).type:
            raise RuntimeError(f"{name}: advantages left the device ({dev.device})")
        worst = max(worst, float((dev.cpu() - cpu).abs().max()))
        if not torch.allclose(dev.cpu(), cpu, atol=1e-4):
            raise RuntimeError(f"{name}: device and CPU advantages differ by {worst:.3g}")
    return f"grpo, gigpo, ccpo on {len(rows.task)} rows: max |device - cpu| = {worst:.2e}"


def advantage_batch(rows: E.Rows, phi: torch.Tensor, pad_id: int, device: str) -> Any:
    """A verl-agent-shaped batch of ``rows`` plus two padding copies (as adjust_batch)."""
    from ccpo_lab.backends.verl.agent.patches import STEP_KEY
    from ccpo_lab.backends.verl.agent.phi import PHI_KEY

    t = E.tensors(rows, pad_id, device)
    n = len(rows.task)
    t["token_level_rewards"] = torch.zeros(n, t["responses"].shape[1], device=device)
    t[PHI_KEY] = phi.to(device)
    nt = E.non_tensors(rows, STEP_KEY)
    order = [*range(n), 1, n - 1]
    ix = torch.tensor(order, device=device)
    return E.make_proto({k: v[ix] for k, v in t.items()}, {k: v[order] for k, v in nt.items()})


def check_dataproto(ctx: Ctx) -> str:
    from ccpo_lab.backends.verl.agent import patches as P
    from ccpo_lab.estimators import get_estimator

    kind = ensure_verl_registry()
    assert ctx.model_dir is not None
    model, tok = E.load_tiny_model(ctx.model_dir, ctx.device)
    rows = E.rollouts(model, tok, 4, 4, torch.Generator(device=ctx.device).manual_seed(5))
    phi = reference_features(model, E.tensors(rows, tok.pad_token_id, ctx.device))
    for name, params in (("gigpo", {}), ("ccpo", CCPO_PARAMS)):
        data = advantage_batch(rows, phi, tok.pad_token_id, ctx.device)
        data = P.ccpo_lab_advantage(data, name, params, _config())
        pure = get_estimator(name, **params)(
            _step_batch(rows, phi if name == "ccpo" else None, "cpu")).advantages
        mask = data.batch["response_mask"].float().cpu()
        want = torch.cat([pure, pure[[1, len(pure) - 1]]])[:, None] * mask
        if not torch.allclose(data.batch["advantages"].float().cpu(), want, atol=1e-4):
            raise RuntimeError(f"{name}: hook advantages differ from the pure estimator")
    return f"{kind}; gigpo and ccpo hook == pure estimator on {len(rows.task)} rows + 2 copies"


def _pg_loss(model: Any, batch: Any, adv: torch.Tensor) -> torch.Tensor:
    ids, mask = batch.batch["input_ids"], batch.batch["attention_mask"]
    resp = batch.batch["responses"]
    rmask = batch.batch["response_mask"].float()
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    r = resp.shape[1]
    logp = torch.log_softmax(logits[:, -r - 1:-1].float(), -1).gather(-1, resp[..., None])[..., 0]
    return -(adv.float() * logp * rmask).sum() / rmask.sum()


def train_arm(ctx: Ctx, arm: str, params: dict[str, Any], steps: int = 2) -> dict[str, Any]:
    """Two toy PPO-free policy-gradient steps; step-1 rollouts recorded as a backend does."""
    from ccpo_lab.backends.verl.agent import patches as P
    from ccpo_lab.backends.verl.agent.io import record_step1, step1_episodes
    from ccpo_lab.runs.rollouts import fingerprint

    assert ctx.model_dir is not None
    P.STATE = P.HookState()          # one run per process in production; two arms here
    model, tok = E.load_tiny_model(ctx.model_dir, ctx.device)
    ref, _ = E.load_tiny_model(ctx.model_dir, ctx.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rd = ctx.work / "runs" / arm
    rd.mkdir(parents=True, exist_ok=True)
    (rd / "run.json").write_text("{}")
    os.environ[ENV_RUN_DIR] = str(rd)
    out: dict[str, Any] = {"fingerprints": [], "loss": [], "adv_abs_mean": []}
    for step in range(1, steps + 1):
        model.eval()
        rows = E.rollouts(model, tok, 4, 4,
                          torch.Generator(device=ctx.device).manual_seed(1000 + step))
        eps = step1_episodes(traj_uid=rows.traj, turn=rows.turn, anchor_obs=rows.obs,
                             actions=rows.action, prompt_ids=rows.prompt_ids,
                             valid=rows.valid, rewards=rows.reward, group_size=4)
        out["fingerprints"].append(record_step1(rd, eps) if step == 1 else fingerprint(eps))
        phi = reference_features(ref, E.tensors(rows, tok.pad_token_id, ctx.device))
        data = P.ccpo_lab_advantage(advantage_batch(rows, phi, tok.pad_token_id, ctx.device),
                                    arm, params, _config())
        model.train()
        loss = _pg_loss(model, data, data.batch["advantages"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["loss"].append(float(loss.detach()))
        out["adv_abs_mean"].append(float(data.batch["advantages"].abs().mean()))
    out["run_json"] = json.loads((rd / "run.json").read_text())
    return out


def check_training(ctx: Ctx) -> str:
    from ccpo_lab.runs.rollouts import first_divergence, read_rollouts

    ensure_verl_registry()
    res = {arm: train_arm(ctx, arm, params) for arm, params in ARMS}
    ctx.results.append({"name": "two-arms-two-steps/details", "status": "INFO",
                        "detail": {a: {k: v for k, v in r.items() if k != "run_json"}
                                   for a, r in res.items()}})
    (g, c) = (res[a] for a, _ in ARMS)
    if not all(all(torch.isfinite(torch.tensor(r["loss"]))) for r in (g, c)):
        raise RuntimeError("non-finite loss")
    if g["fingerprints"][0] != c["fingerprints"][0]:
        div = first_divergence(read_rollouts(ctx.work / "runs" / "grpo" / "rollouts"),
                               read_rollouts(ctx.work / "runs" / "ccpo" / "rollouts"))
        raise RuntimeError(f"step-1 fingerprints differ; first divergence: {div}")
    for arm, r in res.items():
        if r["run_json"].get("step1", {}).get("fingerprint") != r["fingerprints"][0]:
            raise RuntimeError(f"{arm}: run.json step1 not recorded")
        if r["run_json"].get("estimator_instantiated", {}).get("name") != arm:
            raise RuntimeError(f"{arm}: run.json estimator_instantiated not recorded")
    step2 = "differ" if g["fingerprints"][1] != c["fingerprints"][1] else "are equal"
    return (f"step-1 fingerprints equal ({g['fingerprints'][0][:12]}); step-2 fingerprints "
            f"{step2} after one update; losses grpo {g['loss']}, ccpo {c['loss']}")


def check_vllm_seeds(ctx: Ctx) -> str:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise Skip("vllm is not installed")
    if ctx.model_dir is None:
        raise Skip("no tiny model")
    from vllm import LLM, SamplingParams

    from ccpo_lab.backends.verl.agent import patches as P
    from ccpo_lab.backends.verl.agent import seeds as S

    group = 8
    mod: Any = types.ModuleType("vllm_rollout_spmd")

    class vLLMRollout:  # noqa: N801 - the pinned commit's generate call, reduced
        def __init__(self) -> None:
            self.inference_engine = mod.LLM(model=str(ctx.model_dir), seed=0,
                                            gpu_memory_utilization=0.2, enforce_eager=True)
            self.sampling_params = SamplingParams(temperature=1.0, max_tokens=12)

        def generate_sequences(self, prompts: Any) -> list[tuple[int, ...]]:
            outs = self.inference_engine.generate(prompts=prompts.prompts,
                                                  sampling_params=self.sampling_params,
                                                  use_tqdm=False)
            return [tuple(o.outputs[0].token_ids) for o in outs]

    mod.LLM, mod.vLLMRollout = LLM, vLLMRollout
    os.environ[ENV_VLLM_SEED] = "1"
    P.patch_vllm_rollout(mod)
    seeds = S.request_seeds(1, "train", 1, 0, group)

    def batch() -> Any:
        return types.SimpleNamespace(prompts=["task 1 : find the key ."] * group,
                                     non_tensor_batch={S.SEED_KEY: list(seeds)})

    roll = mod.vLLMRollout()
    first = roll.generate_sequences(batch())
    again = roll.generate_sequences(batch())
    shared = roll.inference_engine.generate(
        ["task 1 : find the key ."] * group,
        sampling_params=SamplingParams(temperature=1.0, max_tokens=12, seed=1),
        use_tqdm=False)
    shared_ids = {tuple(o.outputs[0].token_ids) for o in shared}
    if len(set(first)) < group:
        raise RuntimeError(f"only {len(set(first))} distinct samples of {group}")
    if again != first:
        raise RuntimeError("the same request seeds sampled different tokens")
    if len(shared_ids) != 1:
        raise RuntimeError("one shared seed did not collapse the group: the defect check "
                           "itself is wrong")
    return (f"{group} distinct samples per group with request seeds, replayed exactly; one "
            "shared SamplingParams.seed gives 1 distinct sample (the defect)")


def check_merge(ctx: Ctx) -> str:
    checkout = os.environ.get("CCPO_LAB_VERL_AGENT")
    if not checkout:
        raise Skip("no --verl-agent CHECKOUT (CCPO_LAB_VERL_AGENT)")
    if ctx.model_dir is None:
        raise Skip("no tiny model")
    if not str(ctx.device).startswith("cuda"):
        raise Skip("the merge check shards with FSDP over NCCL: it needs a GPU")
    import subprocess

    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    if checkout not in sys.path:
        sys.path.insert(0, checkout)
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

    from ccpo_lab.backends.verl.agent.weights import keep_best, merge_commands

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    if not dist.is_initialized():
        dist.init_process_group("nccl", rank=0, world_size=1)
    model, tok = E.load_tiny_model(ctx.model_dir, ctx.device)
    want = {k: v.detach().float().cpu().clone() for k, v in model.state_dict().items()}
    fsdp = FSDP(model, device_id=torch.cuda.current_device(), use_orig_params=True)
    opt = torch.optim.AdamW(fsdp.parameters(), lr=1e-5)
    mgr = FSDPCheckpointManager(model=fsdp, optimizer=opt, lr_scheduler=None,
                                processing_class=tok)
    ckpt = ctx.work / "merge" / "checkpoints"
    mgr.save_checkpoint(str(ckpt / "global_step_3" / "actor"), global_step=3)
    keep_best(ckpt, 3, 0.5)
    cmds = merge_commands(sys.executable, Path(checkout), ckpt, ctx.work / "merge", 3)
    for name, argv in cmds.items():
        r = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, check=False,
                           env={**os.environ, "PYTHONPATH": checkout})
        if r.returncode != 0:
            raise RuntimeError(f"{name}: model_merger failed: {r.stderr[-400:]}")
        merged, _ = E.load_tiny_model(ctx.work / "merge" / "hf_model" / name, "cpu")
        got = {k: v.float() for k, v in merged.state_dict().items()}
        worst = max((got[k] - want[k]).abs().max().item() for k in want)
        if worst > 1e-2:      # the merger writes bf16
            raise RuntimeError(f"{name}: merged weights differ by {worst:.3g}")
    return f"hf_model/{{{','.join(cmds)}}} merged by verl-agent's merger equal the weights"


CHECKS: tuple[tuple[str, Callable[[Ctx], str]], ...] = (
    ("device", check_device), ("tiny-model", check_model),
    ("feature-capture", check_features), ("estimators-on-device", check_estimators),
    ("dataproto-path", check_dataproto), ("two-arms-two-steps", check_training),
    ("vllm-request-seeds", check_vllm_seeds), ("hf-merge", check_merge))


def main(argv: list[str] | None = None) -> int:
    """Run every check; print a summary; write ``gpu-smoke.json``. 0 iff none failed."""
    ap = argparse.ArgumentParser(prog="python -m ccpo_lab.backends.verl.smoke")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path,
                    default=Path(os.environ.get("OUT") or "gpu-smoke-out"))
    ap.add_argument("--work", type=Path, default=None,
                    help="scratch directory (model, run dirs); default: a new temporary one")
    ap.add_argument("--verl-agent", type=Path, default=None,
                    help="verl-agent checkout: also merge a checkpoint with its merger")
    a = ap.parse_args(argv)
    if a.verl_agent is not None:
        os.environ["CCPO_LAB_VERL_AGENT"] = str(a.verl_agent.resolve())
    a.out.mkdir(parents=True, exist_ok=True)
    import tempfile

    work = a.work or Path(tempfile.mkdtemp(prefix="ccpo-gpu-smoke-"))
    ctx = Ctx(device=a.device, out=a.out, work=work)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    for name, fn in CHECKS:
        t0 = time.monotonic()
        try:
            status, detail = "PASS", fn(ctx)
        except Skip as e:
            status, detail = "SKIP", str(e)
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the next
            status, detail = "FAIL", f"{type(e).__name__}: {e}"
            traceback.print_exc()
        sec = time.monotonic() - t0
        ctx.results.append({"name": name, "status": status, "detail": detail,
                            "seconds": round(sec, 2)})
        print(f"[{status}] {name} ({sec:.1f} s): {detail}", flush=True)
    checks = [r for r in ctx.results if r["status"] != "INFO"]
    failed = [r["name"] for r in checks if r["status"] == "FAIL"]
    summary = {"device": a.device, "passed": not failed, "failed": failed,
               "work": str(work), "checks": ctx.results}
    (a.out / "gpu-smoke.json").write_text(json.dumps(summary, indent=2, default=str))
    print("\n==== gpu-smoke summary ====")
    for r in checks:
        print(f"  {r['status']:<4}  {r['name']}")
    print(f"RESULT: {'PASS' if not failed else 'FAIL (' + ', '.join(failed) + ')'}")
    print(f"details: {a.out / 'gpu-smoke.json'}")
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
