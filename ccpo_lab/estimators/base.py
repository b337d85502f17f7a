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
    """``(N,)`` ``A = A_ep + step_advantage_w * A_step``, in the dtype of ``batch.reward``."""
    diagnostics: dict[str, float]
    """Scalar diagnostics of this batch (NaN where undefined)."""
    episode_term: torch.Tensor = field(repr=False)
    """``(N,)`` the episode term ``A_ep`` (reward dtype)."""
    step_term: torch.Tensor = field(repr=False)
    """``(N,)`` the step term ``A_step`` before ``step_advantage_w`` (zeros for GRPO)."""


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
        """Advantages for ``batch`` (a :class:`StepBatch` of ``N`` rows)."""
        if not isinstance(batch, StepBatch):
            raise TypeError(f"expected a StepBatch, got {type(batch).__name__}")
        with torch.no_grad():
            return self.compute(batch)

    @abstractmethod
    def compute(self, batch: StepBatch) -> EstimatorOutput:
        """Compute the advantages (called under ``torch.no_grad()``)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params!r})"
