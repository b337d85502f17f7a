"""Adaptive seeds: add seeds in looks where they decide something, stop where they cannot.

Pure decision logic, no I/O (the sweep, the launcher, the report and MLflow use it):

* :mod:`.design` -- :class:`AdaptiveDesign`, the frozen, validated design.
* :mod:`.state` -- :class:`Decision`, :class:`Look`, :class:`AdaptiveState` (JSON).
* :mod:`.decide` -- :func:`decide_look` / :func:`advance`: the next look from the state
  and the completed per-seed scores.
* :mod:`.simulate` -- the decision rule on simulated studies, vectorised: error rate,
  power and seeds used against the fixed design (``python -m ccpo_lab.adaptive.simulate``).
* :mod:`.store` -- the one module with I/O: the design's state file in the sweep
  directory, its lock, and a run's score (used by :mod:`ccpo_lab.adaptive.launch`, which
  takes the looks and launches their seeds, and by the report and MLflow).

* :mod:`.levels` -- the family's nominal levels (joint max-|t| or Holm) for a design.
* :mod:`.pool` -- the joint family's pooled-variance t-tests on a live look's scores.

The statistics (alpha spending, boundaries, Holm across looks) live in
:mod:`ccpo_lab.stats.sequential`, the joint max-|t| boundary in :mod:`ccpo_lab.stats.joint`.
"""

from ccpo_lab.adaptive.decide import advance, decide_look, pending_seeds
from ccpo_lab.adaptive.state import STATE_VERSION, Action, AdaptiveState, Decision, Look
from ccpo_lab.config.design import AdaptiveDesign, every_arm_versus

__all__ = [
    "STATE_VERSION",
    "Action",
    "AdaptiveDesign",
    "AdaptiveState",
    "Decision",
    "Look",
    "advance",
    "decide_look",
    "every_arm_versus",
    "pending_seeds",
]
