"""``<results>/<sweep>/sweep.json``: what a sweep is, which runs it has, how it was launched.

Everything ``status``, ``cancel``, ``report`` and ``verify`` need lives in the results
directory, so a closed terminal loses nothing. A relaunch merges into the manifest: runs
are keyed by their directory, submissions are appended
(:meth:`~ccpo_lab.runs.layout.SweepDir.add_submission`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ccpo_lab.config.identity import to_plain
from ccpo_lab.config.schema import RunConfig
from ccpo_lab.config.sweep import Sweep
from ccpo_lab.runs.layout import RunDir, SweepDir
from ccpo_lab.runs.provenance import now_iso


def write_manifest(sw: Sweep, sweep_dir: Path,
                   runs: Sequence[tuple[RunConfig, RunDir]]) -> dict[str, Any]:
    """Create or merge the manifest for ``runs`` (``(RunConfig, RunDir)`` pairs).

    A manifest that would change only its ``updated`` time is not rewritten: a relaunch
    that changes nothing writes nothing (it works on a read-only results directory)."""
    sd = SweepDir(Path(sweep_dir))
    old = sd.read_manifest()
    entries = {e["dir"]: e for e in old.get("runs", []) if isinstance(e, dict) and "dir" in e}
    for run, rd in runs:
        rel = str(rd.path.resolve().relative_to(sd.path.resolve()))
        entries[rel] = {"arm": run.arm, "seed": run.seed, "run_id": run.run_id, "dir": rel}
    data = {
        "sweep": sw.name,
        "source": str(Path(sw.source).resolve()),
        "overrides": list(sw.overrides),
        "created": old.get("created") or now_iso(),
        "updated": now_iso(),
        "arms": list(sw.config.arms),
        "seeds": list(sw.config.seeds),
        "reference_arm": sw.reference_arm,
        "launcher": to_plain(sw.config.launcher),
        "config": to_plain(sw.config),
        "runs": sorted(entries.values(), key=lambda e: (e["arm"], e["seed"], e["dir"])),
        "warnings": sw.warnings,
        "submissions": list(old.get("submissions", [])),
    }
    if _same(old, data):
        return old
    sd.write_manifest(data)
    return data


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two manifests say the same (their ``updated`` times aside), as JSON."""
    import json

    def text(d: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in d.items() if k != "updated"}, sort_keys=True,
                          default=str)

    return bool(old) and text(old) == text(new)
