#!/usr/bin/env bash
# Contract test of the verl backend against a real verl-agent checkout, on CPU.
#
#   scripts/verl-agent-contract.sh CHECKOUT [--venv DIR] [--from-git GITDIR] [PYTEST ARGS...]
#
# From nothing, idempotent and cached:
#  1. CHECKOUT: a verl-agent source tree. When it is missing and --from-git names a git
#     directory holding the pinned commit, the tree is extracted there file by file
#     (`git ls-tree` + `git cat-file`, skipping blobs the snapshot lacks, such as webshop's
#     chromedriver) and marked complete with `.extracted-ok`.
#  2. --venv DIR (default $CCPO_LAB_TRAINER_VENV, else ~/.cache/ccpo-lab/verl-agent-cpu): a
#     trainer environment built the documented way (README, "The trainer environment"):
#     CPU torch through constraints.txt, verl-agent's own dependencies (its setup.py's
#     install_requires, without the GPU-only vLLM / flash-attn / liger-kernel and the unused
#     wandb / qwen-vl-utils), openai, fastapi and uvicorn (from its requirements.txt: the
#     trainer module imports them), cachetools (vLLM brings it on a GPU), pillow and ALFWorld
#     (its environment needs it), then
#     `pip install --no-deps` of ccpo-lab plus what `ccpo_lab.backends.verl.trainer_env`
#     lists, and its check. Rebuilt only when those inputs change; an environment made from
#     another work tree (another clone sharing ~/.cache) is re-pointed at this one.
#  3. the patch check: `python -m ccpo_lab.backends.verl.agent.trainer --verl-agent CHECKOUT
#     --check` (every patched attribute must print `ok`);
#  4. `pytest -m "verl_agent and not rehearsal"` in that environment, over every test file
#     that carries the verl_agent mark (tests/backends/verl/test_contract.py,
#     tests/estimators/test_verl_reference.py, ...), with CCPO_LAB_VERL_AGENT=CHECKOUT and
#     CCPO_LAB_IN_TRAINER_ENV=1. The rehearsal end-to-end test runs in ccpo-lab's own
#     environment instead (make test, with CCPO_LAB_TRAINER_PYTHON pointing here).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PINNED=796ed310287fa605c9292a0fce07a86d79fde05e

usage() { echo "usage: $0 CHECKOUT [--venv DIR] [--from-git GITDIR] [PYTEST ARGS...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
CHECKOUT="$1"; shift
VENV="${CCPO_LAB_TRAINER_VENV:-$HOME/.cache/ccpo-lab/verl-agent-cpu}"
FROM_GIT=""
PYTEST_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) VENV="$2"; shift 2 ;;
    --from-git) FROM_GIT="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) PYTEST_ARGS+=("$1"); shift ;;
  esac
done

# ---------------------------------------------------------------- 1. the checkout
if [ ! -f "$CHECKOUT/verl/trainer/main_ppo.py" ]; then
  [ -n "$FROM_GIT" ] || { echo "error: $CHECKOUT is not a verl-agent checkout (no verl/trainer/main_ppo.py); pass --from-git GITDIR to extract commit $PINNED" >&2; exit 2; }
  echo "== extracting verl-agent $PINNED from $FROM_GIT into $CHECKOUT"
  tmp="$CHECKOUT.partial.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  git -C "$FROM_GIT" ls-tree -r "$PINNED" | while read -r mode type obj path; do
    [ "$type" = blob ] || continue
    mkdir -p "$tmp/$(dirname "$path")"
    if ! git -C "$FROM_GIT" cat-file blob "$obj" > "$tmp/$path" 2>/dev/null; then
      rm -f "$tmp/$path"; echo "   skipped (not in the snapshot): $path"
    fi
  done
  echo "$PINNED" > "$tmp/.extracted-ok"
  mkdir -p "$(dirname "$CHECKOUT")"; rm -rf "$CHECKOUT"; mv "$tmp" "$CHECKOUT"
fi
CHECKOUT="$(cd "$CHECKOUT" && pwd)"

# ---------------------------------------------------------------- 2. the trainer environment
PY=python3
# verl-agent's install_requires, read from its setup.py (no import of it)
mapfile -t VA_REQS < <("$PY" - "$CHECKOUT/setup.py" <<'EOF'
import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
skip = ("wandb", "qwen-vl-utils", "flash-attn", "liger-kernel", "vllm")
for node in ast.walk(tree):
    if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "install_requires"
                                            for t in node.targets):
        for r in ast.literal_eval(node.value):
            if not r.split("[")[0].split("<")[0].split(">")[0].split("=")[0].startswith(skip):
                print(r)
EOF
)
# pillow: agent_system.multi_turn_rollout.utils imports PIL (it used to arrive with
# torchvision, which an index without torchvision's wheel does not bring)
# gym, gym_sokoban, matplotlib: verl-agent's Sokoban (its envs.py imports gym, its
# room_utils matplotlib, its rooms come from gym_sokoban's generator), gym and gym_sokoban
# at the versions verl-agent's README installs; the constraints file keeps torch where it
# is. gym_sokoban imports pkg_resources, which setuptools 81+ lacks: the hooks put a
# stand-in on sys.path where it is missing (ccpo_lab/backends/verl/standins/pkg/).
EXTRA=("openai" "fastapi" "uvicorn" "cachetools" "pillow" "alfworld==0.4.2" "gymnasium" "pytest>=8"
       "hypothesis>=6" "gym==0.26.2" "gym_sokoban==0.0.6" "matplotlib")
# torchvision is left out: PyPI's Linux wheels need torch's CUDA libraries (with the CPU
# torch its import fails, and transformers' ProcessorMixin with it). verl-agent's ALFWorld
# module imports torchvision.transforms only for AlfredThorEnv images; the tests put a
# stand-in for that import on PYTHONPATH (ccpo_lab/backends/verl/standins/).
mapfile -t HOOK_REQS < <(PYTHONPATH="$REPO" "$PY" -m ccpo_lab.backends.verl.trainer_env --requirements)
KEY="$(printf '%s\n' "$PINNED" "${VA_REQS[@]}" "${EXTRA[@]}" "${HOOK_REQS[@]}" \
        "$(sha256sum "$REPO/constraints.txt" | cut -c1-16)" | sha256sum | cut -c1-16)"
STAMP="$VENV/.ccpo-lab-contract-$KEY"
if [ ! -f "$STAMP" ]; then
  echo "== building the trainer environment $VENV"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  PIP=("$VENV/bin/python" -m pip install -q -c "$REPO/constraints.txt")
  "${PIP[@]}" --upgrade pip wheel setuptools
  "${PIP[@]}" torch                                   # the CPU build the constraint pins
  "${PIP[@]}" "${VA_REQS[@]}" "${EXTRA[@]}"
  # ccpo-lab the supported way: no dependencies of its own, then what its job side needs
  "${PIP[@]}" --no-deps -e "$REPO"
  "${PIP[@]}" --no-deps "${HOOK_REQS[@]}"
  "$VENV/bin/python" -m pip uninstall -q -y torchvision 2>/dev/null || true
  rm -f "$VENV"/.ccpo-lab-contract-*
  touch "$STAMP"
else
  echo "== trainer environment $VENV is up to date"
  # The editable install follows the work tree it was made from; another clone (CI's, a
  # second checkout) sharing this environment re-points it at its own tree, so the trainer
  # and its Ray workers import the code under test.
  here="$(cd / && "$VENV/bin/python" -c 'import ccpo_lab, os; print(os.path.dirname(os.path.dirname(os.path.realpath(ccpo_lab.__file__))))' 2>/dev/null || true)"
  if [ "$here" != "$(realpath "$REPO")" ]; then
    echo "== the trainer environment's ccpo-lab was ${here:-missing}: installing $REPO (editable, no dependencies)"
    "$VENV/bin/python" -m pip install -q -c "$REPO/constraints.txt" --no-deps -e "$REPO"
  fi
fi
"$VENV/bin/python" -m ccpo_lab.backends.verl.trainer_env --check

# ---------------------------------------------------------------- 3. the patch check
echo "== patch check"
PYTHONPATH="$REPO/ccpo_lab/backends/verl/standins" \
  "$VENV/bin/python" -m ccpo_lab.backends.verl.agent.trainer --verl-agent "$CHECKOUT" --check

# ---------------------------------------------------------------- 4. the contract tests
cd "$REPO"
mapfile -t FILES < <(grep -rl --include='test_*.py' 'mark.verl_agent' tests | sort)
echo "== pytest -m 'verl_agent and not rehearsal' ${FILES[*]}"
export CCPO_LAB_VERL_AGENT="$CHECKOUT" CCPO_LAB_IN_TRAINER_ENV=1 RAY_AUTH_MODE=disabled
export CCPO_LAB_CONTRACT_OUT="${CCPO_LAB_CONTRACT_OUT:-$(mktemp)}"
: > "$CCPO_LAB_CONTRACT_OUT"
status=0
"$VENV/bin/python" -m pytest -q -m "verl_agent and not rehearsal" -p no:cacheprovider \
  "${FILES[@]}" "${PYTEST_ARGS[@]}" || status=$?
echo "== measured (largest |ccpo-lab hook - reference| per estimator)"
cat "$CCPO_LAB_CONTRACT_OUT"
exit $status
