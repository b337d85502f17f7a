"""The GPU-cluster backend: verl-agent's trainer on real ALFWorld, with ccpo-lab's estimators.

- :mod:`.command` builds the trainer invocation (Hydra overrides, environment);
- :mod:`.runner` is the backend entry (``train``, ``describe``);
- :mod:`.layout` checks that every arm of a sweep shares one GPU / parallel layout;
- :mod:`.checkout` inspects a verl-agent checkout (commit, optional features);
- :mod:`.ray_cluster` starts a Ray cluster across a multi-node Slurm allocation;
- :mod:`.smoke` is the GPU smoke test behind ``scripts/gpu-smoke.sh``.

The hooks that put ccpo-lab's estimators into the trainer live in
:mod:`ccpo_lab.backends.verl.agent.hooks`.
"""
