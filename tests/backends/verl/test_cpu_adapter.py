"""The CPU adapter, the Hugging Face rollout's per-request seeds, held-back checkpoint saves
and the trainer's process group: each on the real library it patches (torch, gloo, FSDP,
transformers), in a child process where it changes torch's globals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import pytest

from ccpo_lab.config.sweep import load_sweep

REPO = Path(__file__).resolve().parents[3]


def _child(code: str, env: dict[str, str] | None = None, timeout: int = 240,
           python: str = sys.executable) -> str:
    r = subprocess.run([python, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=timeout, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


_TORCH_ON_CPU = """
import json, os, socket, torch, torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from ccpo_lab.backends.verl.agent.cpu import patch_torch_for_cpu
out = {"before": {n: hasattr(torch.cpu, n) for n in ("empty_cache", "max_memory_allocated")}}
patch_torch_for_cpu(None)
patch_torch_for_cpu(None)                       # idempotent
torch.cpu.empty_cache()
out["rss"] = torch.cpu.memory_allocated()
out["peak"] = torch.cpu.max_memory_allocated()
out["free_total"] = list(torch.cpu.mem_get_info())
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
# verl-agent's fsdp_workers.py:114 on a machine without CUDA
dist.init_process_group(backend="cpu:gloo,npu:hccl", rank=0, world_size=1)
out["backend"] = dist.get_backend()
from torch.distributed.fsdp import CPUOffload
out["offload"] = CPUOffload(offload_params=True).offload_params
m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
w = m[0].weight.detach().clone()
f = FSDP(m, device_id=torch.cpu.current_device(), sync_module_states=True,
         cpu_offload=CPUOffload(offload_params=True), use_orig_params=False)
with FSDP.summon_full_params(f):
    out["same_weights"] = bool(torch.equal(f.module[0].weight, w))
out["forward"] = list(f(torch.ones(3, 4)).shape)
dist.destroy_process_group()
print(json.dumps(out))
"""


def test_cpu_adapter_lets_verl_agents_calls_run_on_torch_cpu() -> None:
    """What verl-agent's workers call on a GPU-less machine, after the adapter's patches:
    the memory queries, a process group named ``cpu:gloo,npu:hccl``, the reference's
    ``CPUOffload(offload_params=True)`` and FSDP with ``sync_module_states=True``."""
    out = json.loads(_child(_TORCH_ON_CPU).strip().splitlines()[-1])
    assert out["before"] == {"empty_cache": False, "max_memory_allocated": False}
    assert out["rss"] > 10 * 2**20 and out["peak"] >= out["rss"] * 0.5
    assert out["free_total"][1] > out["free_total"][0] > 0
    assert out["backend"] == "gloo"
    assert out["offload"] is False
    assert out["same_weights"] and out["forward"] == [3, 2]


def test_without_the_adapter_fsdp_refuses_cpu_modules() -> None:
    """The check the adapter skips is real (so the patch is needed)."""
    code = """
    import os, socket, torch, torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend="gloo", rank=0, world_size=1)
    try:
        FSDP(torch.nn.Linear(4, 4), device_id=torch.cpu.current_device(),
             sync_module_states=True)
        print("accepted")
    except ValueError as e:
        print("refused", "requires them to be on GPU" in str(e))
    """
    assert _child(code).strip().splitlines()[-1] == "refused True"


def test_hooks_watch_the_cpu_targets_only_when_the_device_is_cpu() -> None:
    code = """
    from ccpo_lab.backends.verl.agent import hooks as h
    print(h._watched("verl.utils.device"), h._watched("verl.utils.tracking"))
    """
    assert _child(code, {"CCPO_LAB_DEVICE": "cpu"}).split() == ["True", "True"]
    assert _child(code, {"CCPO_LAB_DEVICE": ""}).split() == ["False", "True"]


def test_adapter_puts_the_torchvision_stand_in_last_where_torchvision_is_missing() -> None:
    code = """
    import importlib.util, sys
    from ccpo_lab.backends.verl.agent import cpu as verl_agent_cpu
    real = importlib.util.find_spec("torchvision") is not None
    verl_agent_cpu.install()
    import torchvision.transforms as T
    print(real, str(verl_agent_cpu.STANDINS) in sys.path, hasattr(T, "Compose"))
    """
    real, added, compose = _child(code).split()
    assert compose == "True"
    assert added == ("False" if real == "True" else "True")


# ----------------------------------------------------------------------- the layout
def _verl_sweep(*overrides: str) -> Any:
    return load_sweep(REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml", list(overrides))


def test_cpu_device_needs_the_one_process_hf_layout() -> None:
    from ccpo_lab.errors import UserError

    with pytest.raises(UserError,
                       match="backend.verl.rollout_name: the CPU device.*got 'vllm'"):
        _verl_sweep("backend.verl.device=cpu")
    with pytest.raises(UserError,
                       match="backend.verl.device: unknown value .got 'tpu'.; valid: cuda, cpu"):
        _verl_sweep("backend.verl.device=tpu")
    with pytest.raises(UserError,
                       match="backend.verl.rollout_name: unknown value .got 'sglang'"):
        _verl_sweep("backend.verl.rollout_name=sglang")
    sw = _verl_sweep("backend.verl.device=cpu", "backend.verl.rollout_name=hf",
                     "backend.verl.rollout_tp=1", "backend.verl.n_gpus_per_node=1",
                     "protocol.ppo_mini_batch_size=32")
    run = sw.runs[0]
    from ccpo_lab.backends.verl.command import build_command
    from ccpo_lab.backends.verl.runner import needs

    assert needs(run).gpus_per_node == 0                    # Ray's GPU is a logical one
    cmd = build_command(run, Path("/r/x/seed-0"))
    ov = list(cmd.overrides)
    assert "actor_rollout_ref.model.use_remove_padding=False" in ov
    assert "++ray_init.num_gpus=1" in ov and "++data.dataloader_num_workers=0" in ov
    assert "++actor_rollout_ref.model.override_config._attn_implementation=sdpa" in ov
    assert len([o for o in ov if "use_remove_padding" in o]) == 1
    assert cmd.env["CCPO_LAB_DEVICE"] == "cpu"
    assert cmd.determinism["device"] == "cpu"


def test_the_default_device_leaves_run_ids_and_commands_as_they_were() -> None:
    """``device`` enters the identity only when set (existing verl run ids unchanged)."""
    from ccpo_lab.config.identity import identity_dict

    run = _verl_sweep().runs[0]
    assert "device" not in identity_dict(run)["backend"]["verl"]
    cpu = _verl_sweep("backend.verl.device=cpu", "backend.verl.rollout_name=hf",
                      "backend.verl.rollout_tp=1", "backend.verl.n_gpus_per_node=1",
                      "protocol.ppo_mini_batch_size=32").runs[0]
    assert identity_dict(cpu)["backend"]["verl"]["device"] == "cpu"


# ----------------------------------------------------------------------- HF rollout
_HF = """
import json, types, sys, torch, numpy as np
sys.path.insert(0, {repo!r})
from pathlib import Path
from ccpo_lab.backends.verl.smoke_env import build_tiny_model, load_tiny_model
from ccpo_lab.backends.verl.agent import patches as P
from ccpo_lab.backends.verl.agent.seeds import SEED_KEY

d = build_tiny_model(Path({work!r}) / "tiny")
model, tok = load_tiny_model(d, "cpu")


class Proto:
    # the DataProto calls HFRollout and the patch make (pinned commit)
    def __init__(self, batch, non_tensor_batch, meta_info):
        self.batch, self.non_tensor_batch, self.meta_info = batch, non_tensor_batch, meta_info
    def slice(self, a, b):
        return Proto({{k: v[a:b] for k, v in self.batch.items()}},
                     {{k: v[a:b] for k, v in self.non_tensor_batch.items()}}, self.meta_info)
    @staticmethod
    def concat(parts):
        return Proto({{k: torch.cat([p.batch[k] for p in parts]) for k in parts[0].batch}},
                     {{}}, {{}})


seen = []
real_generate = model.generate
def recording_generate(*a, **k):
    seen.append(sorted(k))
    return real_generate(*a, **k)
model.generate = recording_generate


class HFRollout:
    # verl-agent's HFRollout (796ed31): a batch sampled from the global generator, the
    # prompt's position_ids handed to generate
    def __init__(self):
        self.module = model
    def generate_sequences(self, prompts):
        return self._generate_minibatch(prompts)
    def _generate_minibatch(self, prompts):
        ids, mask = prompts.batch["input_ids"], prompts.batch["attention_mask"]
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.module.generate(input_ids=ids, attention_mask=mask, position_ids=pos,
                                   do_sample=True, max_new_tokens=6, min_new_tokens=6,
                                   pad_token_id=0, eos_token_id=None)
        return Proto({{"responses": out[:, ids.shape[1]:]}}, {{}}, {{}})


mod = types.SimpleNamespace(HFRollout=HFRollout)
enc = tok(["task 1 : find the key ."] * 4 + ["go north"] * 2, return_tensors="pt",
          padding="max_length", max_length=12)
def batch(seeds):
    return Proto({{"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}},
                 {{SEED_KEY: np.array(seeds, dtype=object)}}, {{}})
r = HFRollout()
torch.manual_seed(0); plain_a = r.generate_sequences(batch([1]*6)).batch["responses"]
torch.manual_seed(1); plain_b = r.generate_sequences(batch([1]*6)).batch["responses"]
plain_kwargs = seen[-1]
P.patch_hf_rollout(mod)
r = HFRollout()
torch.manual_seed(123)
state = torch.get_rng_state()
a = r.generate_sequences(batch([11, 12, 13, 14, 15, 16])).batch["responses"]
untouched = bool(torch.equal(state, torch.get_rng_state()))
torch.manual_seed(999)
b = r.generate_sequences(batch([11, 12, 13, 14, 15, 16])).batch["responses"]
c = r.generate_sequences(batch([14, 12, 13, 11, 15, 16])).batch["responses"]
print(json.dumps({{"plain_depends_on_global": plain_a.tolist() != plain_b.tolist(),
                  "a": a.tolist(), "b": b.tolist(), "c": c.tolist(),
                  "global_untouched": untouched, "plain_kwargs": plain_kwargs,
                  "patched_kwargs": seen[-1], "restored": "generate" not in vars(model)
                  or vars(model)["generate"] is recording_generate}}))
"""


def test_hf_rollout_samples_each_request_under_its_own_seed(tmp_path: Path) -> None:
    """The defects the patch fixes: verl-agent's HF rollout samples from torch's global
    generator (the arms of a seed would not sample the same step-1 rollouts), and hands
    ``generate`` the prompt's ``position_ids`` (not extended while decoding). Patched: a
    row's answer depends on its prompt and seed only (not on the global state, not on the
    other rows), the rows of a group (same prompt, distinct seeds) differ, and ``generate``
    derives positions from the attention mask."""
    out = json.loads(_child(_HF.format(repo=str(REPO), work=str(tmp_path))).splitlines()[-1])
    a, b, c = out["a"], out["b"], out["c"]
    assert out["plain_depends_on_global"]
    assert a == b                                   # global generator state irrelevant
    assert c[0] == a[3] and c[3] == a[0] and c[1:3] == a[1:3]   # a row follows its seed
    assert len({tuple(x) for x in a[:4]}) > 1       # one prompt, distinct seeds
    assert out["global_untouched"]
    assert "position_ids" in out["plain_kwargs"]
    assert "position_ids" not in out["patched_kwargs"] and "attention_mask" in \
        out["patched_kwargs"]
    assert out["restored"]


_POSITIONS = """
import json, sys, torch
from pathlib import Path
from ccpo_lab.backends.verl.smoke_env import build_tiny_model, load_tiny_model
model, tok = load_tiny_model(build_tiny_model(Path({work!r}) / "tiny"), "cpu")
enc = tok(["task 1 : find the key ."], return_tensors="pt", padding="max_length", max_length=16)
ids, mask = enc["input_ids"], enc["attention_mask"]
pos = (mask.cumsum(-1) - 1).clamp(min=0)
kw = dict(do_sample=False, max_new_tokens=8, min_new_tokens=8, pad_token_id=0,
          eos_token_id=None, output_scores=True, return_dict_in_generate=True)
given = model.generate(input_ids=ids, attention_mask=mask, position_ids=pos, **kw)
derived = model.generate(input_ids=ids, attention_mask=mask, **kw)
# the true next-token logits of the greedy continuation, one full forward at true positions
seq = derived.sequences
full_mask = torch.cat([mask, torch.ones(1, 8, dtype=mask.dtype)], 1)
true = model(input_ids=seq, attention_mask=full_mask,
             position_ids=(full_mask.cumsum(-1) - 1).clamp(min=0)).logits[0, 15:-1]
d_derived = max(float((s[0] - t).abs().max()) for s, t in zip(derived.scores, true))
import transformers
print(json.dumps({{"transformers": transformers.__version__, "d_derived": d_derived,
                  "same_tokens":
                   given.sequences.tolist() == derived.sequences.tolist(),
                   "d_given": max(float((a[0] - b[0]).abs().max())
                                  for a, b in zip(given.scores, derived.scores))}}))
"""


def test_generate_misplaces_tokens_when_handed_the_prompts_position_ids(
        tmp_path: Path) -> None:
    """Why the HF rollout patch drops ``position_ids``: in the trainer environment's
    transformers (4.57; ``CCPO_LAB_TRAINER_PYTHON`` when set), ``generate`` handed them
    decodes every new token at the last prompt position, so its steps differ from a
    forward at the true positions; without them they agree. (transformers 5, ccpo-lab's
    own environment, extends them: there both agree.)"""
    python = os.environ.get("CCPO_LAB_TRAINER_PYTHON") or sys.executable
    out = json.loads(_child(_POSITIONS.format(work=str(tmp_path)),
                            python=python).splitlines()[-1])
    assert out["d_derived"] < 1e-3
    if int(out["transformers"].split(".")[0]) < 5:
        assert out["d_given"] > 1e-2 and not out["same_tokens"], out
    else:
        assert out["d_given"] < 1e-3, out


# ----------------------------------------------------------------------- held-back saves
def test_checkpoint_save_waits_for_its_steps_row(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """verl-agent saves step N's checkpoint before it logs step N; the patch holds the save
    back until the row is appended, so a stop in between cannot lose the row."""
    from ccpo_lab.backends.verl.agent import patches as P

    events: list[str] = []

    class Trainer:
        global_steps = 0

        def _validate(self) -> dict[str, float]:
            return {}

        def _save_checkpoint(self) -> None:
            events.append(f"save {self.global_steps}")

    class Tracking:
        def __init__(self, project: str, experiment: str, default_backend: Any = "console",
                     **_: Any) -> None:
            self.logger: dict[str, Any] = {}

        def log(self, data: dict[str, Any], step: int) -> None:
            events.append(f"log {step}")

    monkeypatch.setenv("CCPO_LAB_RUN_DIR", str(tmp_path))
    (tmp_path / "run.json").write_text("{}")
    monkeypatch.setattr(P, "STATE", P.HookState())
    P._patch_validate_and_save(Trainer)
    P.patch_tracking(types.SimpleNamespace(Tracking=Tracking))
    t = Trainer()
    t._save_checkpoint()                     # before fit's Tracking: immediate
    log = Tracking("p", "e", ["console", "file"])
    for step in (1, 2):
        t.global_steps = step
        t._save_checkpoint()
        assert events[-1] != f"save {step}"  # held back
        log.log({"x": 1.0}, step=step)
    assert events == ["save 0", "log 1", "save 1", "log 2", "save 2"]


# ----------------------------------------------------------------------- process group
def test_the_trainers_process_group_is_gone_when_the_executor_returns() -> None:
    """A trainer that ignores SIGTERM, with a child of its own: both are ended (SIGKILL
    after the grace period), so a relaunch never runs beside a dying trainer."""
    from ccpo_lab.backends.verl.runner import end_process_group, group_members

    script = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, "
              "signal.SIG_IGN); subprocess.Popen([sys.executable, '-c', 'import signal, time; "
              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)']); "
              "print('up', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"up"
    t0 = time.monotonic()
    end_process_group(proc, grace=1.0)
    assert time.monotonic() - t0 < 20
    assert group_members(proc.pid) == []        # none left running (zombies aside)
