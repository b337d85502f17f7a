"""Published ALFWorld numbers (GiGPO paper, Table 1) and when they may be shown.

They are comparable only with runs of the same backbone under the same protocol
(``shared/reference/protocol.md``): numbers from another backbone (1.5B vs 7B) or another
protocol (max steps 50 vs 40, evaluation temperature 0.4 vs 0.7) are not. The report shows
them beside its results only when every run matches; otherwise one line says why not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ccpo_lab.backends import published_setup
from ccpo_lab.report.collect import RunData
from ccpo_lab.report.model import BaselineRow, Baselines
from ccpo_lab.runs.tasks import TASK_TYPES

SOURCE = "GiGPO paper, Table 1 (mean over 3 seeds)"
COLUMNS = (*(t.column for t in TASK_TYPES), "All")
"""The published numbers' columns: ALFWorld's six task types (the task-type table's
columns, :mod:`ccpo_lab.runs.tasks`), then All."""

PUBLISHED: dict[str, dict[str, tuple[float, ...]]] = {
    "Qwen2.5-1.5B-Instruct": {
        "PPO": (64.8, 40.5, 57.1, 60.6, 46.4, 47.4, 54.4),
        "RLOO": (88.3, 52.8, 71.0, 62.8, 66.4, 56.9, 69.7),
        "GRPO": (85.3, 53.7, 84.5, 78.2, 59.7, 53.5, 72.8),
        "GiGPO": (94.4, 67.5, 94.8, 94.4, 79.8, 76.4, 86.7),
    },
    "Qwen2.5-7B-Instruct": {
        "PPO": (92.3, 64.0, 92.5, 89.5, 80.3, 68.8, 80.4),
        "RLOO": (87.6, 78.2, 87.3, 81.3, 71.9, 48.9, 75.5),
        "GRPO": (90.8, 66.1, 89.3, 74.7, 72.5, 64.7, 77.6),
        "GiGPO": (97.7, 82.7, 98.8, 83.7, 89.3, 79.2, 90.8),
    },
}
"""Success in percent, per backbone and method, in :data:`COLUMNS` order."""

REFERENCE_PROTOCOL: dict[str, Any] = {
    "max_steps": 50,
    "history_length": 2,
    "val_temperature": 0.4,
    "val_batch_size": 128,
    "train_batch_size": 16,
    "group_size": 8,
    "total_steps": 150,
}
"""Protocol keys that decide whether published numbers are comparable."""

_BACKBONES = {"qwen2.5-7b": "Qwen2.5-7B-Instruct", "qwen2.5-1.5b": "Qwen2.5-1.5B-Instruct"}


def backbone_of(model_path: str | None) -> str | None:
    """The published backbone a model path names (case-insensitive), or None."""
    if not model_path:
        return None
    low = model_path.lower()
    return next((name for key, name in _BACKBONES.items() if key in low), None)


def _protocol_mismatch(protocol: dict[str, Any]) -> list[str]:
    return [f"{k} {protocol.get(k)!r} vs {v!r}" for k, v in REFERENCE_PROTOCOL.items()
            if protocol.get(k) != v]


def _left_out(note: str) -> Baselines:
    return Baselines(shown=False, note=f"published baselines left out: {note}", backbone=None,
                     source=SOURCE, rows=())


def published_baselines(runs: Sequence[RunData]) -> Baselines:
    """The published rows to show beside the runs, or a one-line note saying why not.

    Returns:
        :class:`Baselines`; values are fractions (the metric's units), columns Pick..Pick2
        and All.
    """
    if not runs:
        return _left_out("no runs")
    kinds = sorted({r.backend or "unknown" for r in runs})
    why = {k: "imported runs carry no backbone or protocol to check" if k == "imported"
           else published_setup(k) for k in kinds}
    other = next((k for k in kinds if why[k] is not None), None)
    if other is not None:
        return _left_out(str(why[other]))
    backbones = {backbone_of(r.model_path) for r in runs}
    if len(backbones) != 1 or None in backbones:
        models = sorted({str(r.model_path) for r in runs})
        return _left_out(f"backbone {', '.join(models)} has no published numbers "
                         "(Qwen2.5-1.5B/7B-Instruct only)")
    for r in runs:
        if r.protocol is None:
            return _left_out(f"{r.arm} seed {r.seed} has no recorded protocol")
        diff = _protocol_mismatch(r.protocol)
        if diff:
            return _left_out(f"protocol differs from the published one ({r.arm}: "
                             f"{'; '.join(diff)})")
    (backbone,) = backbones
    assert backbone is not None
    rows = tuple(BaselineRow(method, {c: v / 100.0 for c, v in zip(COLUMNS, vals, strict=True)})
                 for method, vals in PUBLISHED[backbone].items())
    return Baselines(shown=True, note=None, backbone=backbone, source=SOURCE, rows=rows)
