"""The embedded CPU backend: generated ALFWorld games on the real engine, a small policy.

Games and engine: ``games`` (generator), ``env`` (the engine), ``speedups``
(output-preserving engine speed-ups). Training: ``prompts`` (verl-agent
shaped prompts, tokenizer), ``policy`` (the network), ``rollout`` (episodes), ``warmstart``
(behaviour-cloning start), ``ppo`` (update), ``trainer`` (one run's state and steps),
``checkpoint``, ``runner`` (``train(run, run_dir)``, the backend entry point).

Modules are imported on demand; importing this package imports nothing heavy.
"""

PUBLISHED_SETUP: str | None = ("the local CPU backend (generated games, small policy) is not "
                               "the published setup")
"""Why the report shows no published baselines beside local runs
(:func:`ccpo_lab.backends.published_setup`)."""
