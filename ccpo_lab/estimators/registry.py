"""The public entry points: ``get_estimator`` and ``available_estimators``.

Both go through the one registry of :mod:`ccpo_lab.estimators.spec`: the entry that
validates an estimator's parameters is the entry that builds it.
"""

from __future__ import annotations

from typing import Any

from ccpo_lab.estimators.base import Estimator, EstimatorOutput
from ccpo_lab.estimators.spec import entry, estimator_names

__all__ = ["Estimator", "EstimatorOutput", "available_estimators", "get_estimator"]


def get_estimator(name: str, **params: Any) -> Estimator:
    """Build estimator ``name`` with ``params`` (an arm YAML's ``estimator`` section).

    Unknown names, unknown parameters and out-of-range values raise
    :class:`~ccpo_lab.estimators.errors.ParamError` (a ``UserError`` and a ``ValueError``)
    listing the valid names, keys or range. The estimator exposes ``.name``, ``.config``
    (its parameter dataclass) and ``.params`` (every parameter, defaults included).
    """
    e = entry(name)
    config = e.params.resolve(params, estimator=name)
    return e.load()(config, name=name)


def available_estimators() -> list[str]:
    """Names accepted by :func:`get_estimator`, sorted."""
    return estimator_names()
