#!/usr/bin/env bash
# GPU smoke test of the verl backend's device-side code, offline, in about a minute.
#
#   scripts/gpu-smoke.sh [--device cuda] [--out DIR] [--verl-agent CHECKOUT]
#
# Needs python3 with torch (CUDA) and transformers (>= 4.45; tokenizers comes with it),
# numpy and pyyaml; nothing is downloaded: a tiny random Qwen2 and its tokenizer are built
# and saved locally. Run from anywhere; results go to $OUT (or ./gpu-smoke-out):
# gpu-smoke.json and gpu-smoke.log. Exit 0 iff every check passed.
#
# Checks: CUDA visible; tiny model builds/saves/reloads; last-prompt-token feature capture
# (final-norm hook == the model's last hidden state, left-padded and packed layouts, the
# reference-worker patch with out-of-order micro-batches); GRPO/GiGPO/CCPO on device ==
# CPU; the verl-agent advantage hook == the pure estimator; two arms x two steps of a toy
# policy-gradient loop with seeded sampling whose step-1 rollout fingerprints agree; with
# vLLM installed, per-request seeds give a group distinct samples (one shared seed, the
# old defect, gives identical ones) and fresh engines replay them; with --verl-agent, an
# FSDP checkpoint saved by verl-agent's checkpoint manager, kept by ccpo-lab and merged by
# verl-agent's model_merger equals the model (the hf_model path of a run).
# Not checked: verl-agent's trainer, Ray, ALFWorld, 7B models, several GPUs.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUTDIR="${OUT:-$PWD/gpu-smoke-out}"
mkdir -p "$OUTDIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false CUBLAS_WORKSPACE_CONFIG=:4096:8
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export TRANSFORMERS_VERBOSITY=error
"$PY" -m ccpo_lab.backends.verl.smoke --out "$OUTDIR" "$@" 2>&1 | tee "$OUTDIR/gpu-smoke.log"
exit "${PIPESTATUS[0]}"
