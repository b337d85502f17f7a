"""Advantage estimators (GRPO, GiGPO, CCPO) behind one registry.

Public API::

    from ccpo_lab.estimators import StepBatch, get_estimator, available_estimators

The torch-backed names are imported lazily so that configuration code can use
:mod:`ccpo_lab.estimators.spec` (the registry) and :mod:`ccpo_lab.estimators.params` (the
parameter dataclasses) without importing torch.
"""

from __future__ import annotations

from typing import Any

from ccpo_lab.estimators.errors import (
    BatchError,
    EstimatorError,
    MissingFeaturesError,
    ParamError,
)
from ccpo_lab.estimators.params import EstimatorParams, Param, param
from ccpo_lab.estimators.spec import (
    ESTIMATOR_PARAMS,
    estimator_names,
    lint_params,
    register_estimator,
    resolve_params,
    typed_params,
)

__all__ = [
    "ESTIMATOR_PARAMS",
    "BatchError",
    "Estimator",
    "EstimatorError",
    "EstimatorOutput",
    "EstimatorParams",
    "MissingFeaturesError",
    "Param",
    "ParamError",
    "StepBatch",
    "available_estimators",
    "estimator_names",
    "get_estimator",
    "lint_params",
    "param",
    "register_estimator",
    "resolve_params",
    "typed_params",
]

_LAZY = {
    "StepBatch": "ccpo_lab.estimators.batch",
    "Estimator": "ccpo_lab.estimators.base",
    "EstimatorOutput": "ccpo_lab.estimators.base",
    "get_estimator": "ccpo_lab.estimators.registry",
    "available_estimators": "ccpo_lab.estimators.registry",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ccpo_lab.estimators' has no attribute {name!r}")
