"""The estimator registry: name -> parameter class + implementation, in one place.

Torch-free, so configuration loading, ``ccpo-lab arms`` and ``--dry-run`` validate an
arm's ``estimator`` section without importing torch. The implementation (a subclass of
:class:`ccpo_lab.estimators.base.Estimator`, which needs torch) is named by a
``"module:Class"`` string and imported on first use; registration checks that the module
exists, and :func:`ccpo_lab.estimators.get_estimator` builds every estimator through the
same entry that validated its parameters, so an estimator that validates also runs.

Adding an estimator: a parameter dataclass (a subclass of
:class:`~ccpo_lab.estimators.params.EstimatorParams`), an :class:`Estimator` subclass,
and one :func:`register_estimator` line below.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ccpo_lab.estimators.errors import EstimatorError, ParamError
from ccpo_lab.estimators.params import (
    CCPOParams,
    EstimatorParams,
    GiGPOParams,
    GRPOParams,
    Param,
)


@dataclass(frozen=True)
class EstimatorEntry:
    """One registered estimator."""

    name: str
    """Registry name (the arm YAML's ``estimator.name``)."""
    params: type[EstimatorParams]
    """Its parameter dataclass."""
    impl: str | type
    """``"module:Class"`` of its :class:`~ccpo_lab.estimators.base.Estimator` subclass (or
    the class itself)."""

    @property
    def doc(self) -> str:
        """One line: the first line of the parameter class's docstring."""
        return (self.params.__doc__ or "").strip().splitlines()[0].strip() \
            if self.params.__doc__ else ""

    def load(self) -> type:
        """The implementation class (imports torch)."""
        from ccpo_lab.estimators.base import Estimator

        if isinstance(self.impl, str):
            module, _, attr = self.impl.partition(":")
            cls = getattr(importlib.import_module(module), attr, None)
            if cls is None:
                raise EstimatorError(f"estimator {self.name!r}: {module} has no {attr}")
        else:
            cls = self.impl
        if not (isinstance(cls, type) and issubclass(cls, Estimator)):
            raise EstimatorError(f"estimator {self.name!r}: {self.impl!r} is not an "
                                 "Estimator subclass")
        return cls


_REGISTRY: dict[str, EstimatorEntry] = {}


def register_estimator(name: str, params: type[EstimatorParams], impl: str | type
                       ) -> EstimatorEntry:
    """Register estimator ``name``: its parameter class and its implementation.

    ``impl``: ``"module:Class"`` (the module must exist; it is imported on first use) or
    an :class:`Estimator` subclass. Re-registering a name raises.
    """
    if name in _REGISTRY:
        raise ValueError(f"estimator {name!r} is already registered")
    if not (isinstance(params, type) and issubclass(params, EstimatorParams)):
        raise TypeError(f"estimator {name!r}: params must subclass EstimatorParams")
    if isinstance(impl, str):
        module, sep, attr = impl.partition(":")
        if not sep or not attr or importlib.util.find_spec(module) is None:
            raise ValueError(f"estimator {name!r}: no module for {impl!r} "
                             "(expected 'package.module:Class')")
    params.specs()  # field kinds checked now, not at first use
    entry = EstimatorEntry(name, params, impl)
    _REGISTRY[name] = entry
    return entry


def unregister_estimator(name: str) -> None:
    """Remove a registered estimator (tests)."""
    _REGISTRY.pop(name, None)


# The shipped estimators: one line each.
register_estimator("grpo", GRPOParams, "ccpo_lab.estimators.grpo:GRPO")
register_estimator("gigpo", GiGPOParams, "ccpo_lab.estimators.gigpo:GiGPO")
register_estimator("ccpo", CCPOParams, "ccpo_lab.estimators.ccpo:CCPO")


def estimator_names() -> list[str]:
    """Names of the registered estimators, sorted."""
    return sorted(_REGISTRY)


def entry(name: Any, *, file: str | None = None, prefix: str = "estimator") -> EstimatorEntry:
    """The registry entry of ``name``; :class:`ParamError` listing the valid names if none."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ParamError("unknown estimator", file=file, key=f"{prefix}.name", value=name,
                         valid=estimator_names())
    return _REGISTRY[name]


class _ParamTable(Mapping[str, tuple[Param, ...]]):
    """Read-only view: every registered estimator name -> its parameters."""

    def __getitem__(self, name: str) -> tuple[Param, ...]:
        return _REGISTRY[name].params.specs()

    def __iter__(self) -> Iterator[str]:
        return iter(estimator_names())

    def __len__(self) -> int:
        return len(_REGISTRY)


ESTIMATOR_PARAMS: Mapping[str, tuple[Param, ...]] = _ParamTable()
"""Every estimator name with its parameters (defaults included), derived from the
parameter classes."""


def typed_params(name: Any, params: Mapping[str, Any], *, file: str | None = None,
                 prefix: str = "estimator") -> EstimatorParams:
    """The validated parameter object of estimator ``name`` (errors as :func:`resolve_params`)."""
    return entry(name, file=file, prefix=prefix).params.resolve(
        params, estimator=name, file=file, prefix=prefix)


def resolve_params(name: Any, params: Mapping[str, Any], *, file: str | None = None,
                   prefix: str = "estimator") -> dict[str, Any]:
    """Validate an estimator name and parameters; return every parameter with defaults.

    Raises :class:`ParamError` (a ``UserError`` and a ``ValueError``) naming ``file``
    and the key path (``prefix.param``) for an unknown estimator, an unknown parameter
    (listing the valid keys) or a bad value (with its valid range).
    """
    return typed_params(name, params, file=file, prefix=prefix).as_dict()


def identity_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved parameters of ``name`` that enter run identity (a parameter marked
    ``identity="non-default"`` is left out while it holds its default)."""
    return typed_params(name, params).identity_dict()


def protocol_bound(name: str) -> dict[str, str]:
    """``{parameter: protocol key}`` of the parameters of ``name`` set by the protocol."""
    return {p.name: p.protocol for p in entry(name).params.specs() if p.protocol}


def lint_params(name: str, params: Mapping[str, Any]) -> list[str]:
    """Warnings (not errors) about a resolved estimator configuration."""
    return typed_params(name, params).lint()
