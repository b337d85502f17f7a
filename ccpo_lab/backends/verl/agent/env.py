"""The environment variables between the verl backend's trainer command and the hooks.

:mod:`ccpo_lab.backends.verl.command` sets them for the trainer and every Ray worker
(``ray_init.runtime_env.env_vars``); the hooks (:mod:`.io`,
:mod:`.patches`) read them. Their names are defined here only.
"""

from __future__ import annotations

ENV_RUN_DIR = "CCPO_LAB_RUN_DIR"
"""Run directory, read by the hooks (step-1 rollouts, ``run.json``, ``state.json``)."""
ENV_METRICS = "VERL_FILE_LOGGER_PATH"
"""verl's file-logger path variable; ccpo-lab's logger writes the same file."""
ENV_CAPTURE_PHI = "CCPO_LAB_CAPTURE_PHI"
"""``1``: the reference workers capture the last-prompt-token hidden state."""
ENV_RUN_SEED = "CCPO_LAB_SEED"
"""The run seed, as the hooks read it in every Ray worker."""
ENV_VLLM_SEED = "CCPO_LAB_VLLM_SEED"
"""vLLM's engine seed, set by the hook on ``LLM(...)`` in the rollout workers."""
ENV_DEVICE = "CCPO_LAB_DEVICE"
"""``cpu``: the trainer runs under the CPU adapter (:mod:`.cpu`)."""
ENV_DUMP_ROLLOUTS = "CCPO_LAB_DUMP_ROLLOUTS"
"""``all``: the hooks write every training step's rollouts, not only step 1's (rehearsals
compare a resumed run's actions with an uninterrupted one's)."""
