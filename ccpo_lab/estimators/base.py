"""Estimator interface and output type."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import torch

from ccpo_lab.estimators.batch import StepBatch
from ccpo_lab.estimators.params import EstimatorParams


@dataclass(frozen=True)
class EstimatorOutput:
    """What every estimator returns for a batch of ``N`` rows."""

    advantages: torch.Tensor
    """``(M,)`` ``A = A_ep + step_advantage_w * A_step``, one per row of the passed batch
    (``batch.passed``; ``M = N`` without ``rows``), in the dtype of ``batch.reward``
    (float32 under ``semantics = as-run``, the reference trainers' dtype)."""
    diagnostics: dict[str, float]
    """Scalar diagnostics of this batch (NaN where undefined)."""
    episode_term: torch.Tensor = field(repr=False)
    """``(M,)`` the episode term ``A_ep``."""
    step_term: torch.Tensor = field(repr=False)
    """``(M,)`` the step term ``A_step`` before ``step_advantage_w`` (zeros for GRPO)."""

    def take(self, rows: torch.Tensor) -> EstimatorOutput:
        """The output for ``rows`` (``(M,)`` indices into these rows)."""
        return EstimatorOutput(self.advantages[rows], self.diagnostics,
                               self.episode_term[rows], self.step_term[rows])


class Estimator(ABC):
    """An advantage estimator: ``est(batch) -> EstimatorOutput``.

    Built by :func:`ccpo_lab.estimators.get_estimator` from its registry entry
    (:mod:`ccpo_lab.estimators.spec`) with validated parameters; subclasses implement
    :meth:`compute` and read their parameters from ``self.config`` (the estimator's
    parameter dataclass, :mod:`ccpo_lab.estimators.params`).
    """

    def __init__(self, config: EstimatorParams, *, name: str) -> None:
        self.name = name
        """Registry name."""
        self.config = config
        """The validated parameters (a frozen dataclass)."""

    @property
    def params(self) -> dict[str, Any]:
        """The full resolved parameter dict (every key, defaults included)."""
        return self.config.as_dict()

    def __call__(self, batch: StepBatch) -> EstimatorOutput:
        """Advantages for ``batch`` (a :class:`StepBatch`): one per passed row.

        ``semantics = described``: :meth:`compute` on the ``N`` unique rows, each padding
        copy given its row's result; ``as-run``: :meth:`compute_as_run` on the passed
        batch itself.
        """
        if not isinstance(batch, StepBatch):
            raise TypeError(f"expected a StepBatch, got {type(batch).__name__}")
        with torch.no_grad():
            if self.config.semantics == "as-run":
                return self.compute_as_run(batch)
            out = self.compute(batch)
            return out if batch.rows is None else out.take(batch.passed)

    @abstractmethod
    def compute(self, batch: StepBatch) -> EstimatorOutput:
        """The method as described, on the ``N`` unique rows (under ``torch.no_grad()``)."""

    def compute_as_run(self, batch: StepBatch) -> EstimatorOutput:
        """What the reference trainer computed on the passed batch (``M`` rows); only
        estimators whose parameters say ``AS_RUN`` implement it."""
        raise NotImplementedError(f"estimator {self.name!r} has no as-run form")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params!r})"
