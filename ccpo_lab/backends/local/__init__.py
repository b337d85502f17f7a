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


def _alfworld_data() -> None:
    """``import alfworld`` creates its data folder (``$ALFWORLD_DATA``, else
    ``~/.cache/alfworld``) and fails where that cannot be made (a read-only home). This
    backend plays generated games and reads nothing from that folder, so where the
    default cannot be made it is pointed at a folder of this user's under
    ``$XDG_CACHE_HOME`` or the temporary directory instead (issue 36, item 11)."""
    import os
    import tempfile
    from pathlib import Path

    if os.environ.get("ALFWORLD_DATA"):
        return
    candidates = [Path.home() / ".cache" / "alfworld"]
    if os.environ.get("XDG_CACHE_HOME"):
        candidates.append(Path(os.environ["XDG_CACHE_HOME"]) / "alfworld")
    candidates.append(Path(tempfile.gettempdir()) / f"ccpo-lab-alfworld-{os.getuid()}")
    for i, folder in enumerate(candidates):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if i:
            os.environ["ALFWORLD_DATA"] = str(folder)
        return


_alfworld_data()
