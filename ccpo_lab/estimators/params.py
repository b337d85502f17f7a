"""Estimator parameters: one frozen dataclass per estimator, the one source of truth.

Each field is one parameter of the arm YAML's ``estimator`` section: its annotation is the
kind (``float``, ``int``, ``bool``, ``str``), its default the default, its attribute
docstring the documentation, and its metadata (:func:`param`) the choices and bounds.
Validation (:meth:`EstimatorParams.resolve`), ``ccpo-lab arms show``, the lint warnings,
the verl command's mirrors of the parameters and capabilities such as "reads the
features" are all derived from the class. Torch-free.

A field bound to a protocol key (``param(..., protocol="invalid_action_penalty")``) takes
its value from the run's protocol; an arm file cannot set it (one source of truth).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ccpo_lab.estimators.errors import ParamError

P = TypeVar("P", bound="EstimatorParams")

_KINDS: dict[str, type] = {"float": float, "int": int, "bool": bool, "str": str}

SEMANTICS = ("described", "as-run")
"""The values of every estimator's ``semantics`` parameter."""


def param(default: Any, *, choices: tuple[str, ...] | None = None, low: float | None = None,
          high: float | None = None, low_open: bool = False,
          protocol: str | None = None, identity: bool | str = True) -> Any:
    """A parameter field: ``default`` plus its valid values (``choices`` for a ``str``,
    ``[low, high]`` for a number, ``low`` excluded when ``low_open``) and, for a parameter
    whose value is the protocol's, the ``protocol`` key it is bound to. ``identity=
    "non-default"``: the parameter enters a run's identity only when it differs from its
    default (a parameter added later leaves the ids of existing runs unchanged)."""
    meta = {"choices": choices, "low": low, "high": high, "low_open": low_open,
            "protocol": protocol, "identity": identity}
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class Param:
    """One parameter as validation and the CLI see it (derived from a field)."""

    name: str
    """Key in the arm YAML's ``estimator`` section."""
    kind: type
    """``float``, ``int``, ``bool`` or ``str``."""
    default: Any
    """Value used when the arm does not set it."""
    doc: str
    """The field's docstring."""
    choices: tuple[str, ...] | None = None
    """Allowed values for ``str`` parameters."""
    low: float | None = None
    """Lower bound (inclusive unless ``low_open``)."""
    high: float | None = None
    """Upper bound (inclusive)."""
    low_open: bool = False
    """Whether ``low`` itself is excluded."""
    protocol: str | None = None
    """Protocol key this parameter takes its value from (arms cannot set it)."""
    identity: bool | str = True
    """Whether it enters run identity: True, or "non-default" (only when not the default)."""

    @property
    def valid(self) -> str:
        """Human-readable description of the valid values."""
        if self.choices is not None:
            return " | ".join(self.choices)
        if self.kind is bool:
            return "true | false (or 1 | 0)"
        lo = "-inf" if self.low is None else repr(self.low)
        hi = "inf" if self.high is None else repr(self.high)
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high is None else "]"
        return f"{self.kind.__name__} in {left}{lo}, {hi}{right}"

    def check(self, value: Any, *, file: str | None = None, key: str | None = None) -> Any:
        """Return ``value`` normalised to ``kind``; raise :class:`ParamError` if invalid."""
        key = key or self.name
        raw = value

        def bad(msg: str) -> ParamError:
            return ParamError(msg, file=file, key=key, value=raw, valid=self.valid)

        if self.kind is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            raise bad("expected a boolean")
        if self.kind is str:
            if not isinstance(value, str) or value not in (self.choices or ()):
                raise bad("unknown value")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad(f"expected a number ({self.kind.__name__})")
        if self.kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise bad("expected an integer")
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise bad("expected a finite number")
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise bad("out of range")
        if self.high is not None and value > self.high:
            raise bad("out of range")
        return value


def _attribute_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` from the string literal under each annotated attribute."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source (e.g. a class built at run time)
        return {}
    tree = ast.parse(source)
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    out: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            out[node.target.id] = " ".join(nxt.value.value.split())
    return out


_DOCS: dict[type, dict[str, str]] = {}
_SPECS: dict[type, tuple[Param, ...]] = {}


def _field_docs(cls: type) -> dict[str, str]:
    if cls not in _DOCS:
        docs: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            if dataclasses.is_dataclass(klass):
                docs.update(_attribute_docs(klass))
        _DOCS[cls] = docs
    return _DOCS[cls]


@dataclass(frozen=True)
class EstimatorParams:
    """Parameters every estimator has. Subclass it (a frozen dataclass) to add more."""

    gamma: float = param(0.95, low=0.0, high=1.0, low_open=True)
    """Discount of the return-to-go G inside a trajectory (and of the node values)."""
    mode: str = param("mean_std_norm", choices=("mean_norm", "mean_std_norm"))
    """Group normalisation: subtract the group mean, and divide by its unbiased std +
    epsilon under mean_std_norm."""
    epsilon: float = param(1e-6, low=0.0, low_open=True)
    """Added to standard deviations before dividing."""
    invalid_penalty: float = param(0.1, low=0.0, protocol="invalid_action_penalty")
    """Invalid-action penalty coef (verl-agent's invalid_action_penalty_coef; 0 = off):
    subtracted from the episode score and the step return of the invalid row itself.
    Set by the protocol's invalid_action_penalty, not by arms."""
    semantics: str = param("described", choices=SEMANTICS, identity="non-default")
    """What is computed: described = the method as written (each turn once, in its true
    turn order, in float64); as-run = exactly what the trainer behind the published numbers
    computed on the batch it really passed (verl-agent's padding copies counted, the rows in
    the batch's order after load balancing, the reference's float32 where it used it; see
    docs/estimators.md)."""

    AS_RUN: ClassVar[bool] = False
    """Whether this estimator has an as-run form (a reference trainer to reproduce)."""
    VERL_STEP_ADVANTAGE_W: ClassVar[float] = 1.0
    """``algorithm.gigpo.step_advantage_w`` written for an estimator without a step term
    (verl-agent's own default)."""

    # -- derived from the fields ---------------------------------------------------------
    @classmethod
    def specs(cls) -> tuple[Param, ...]:
        """Every parameter, in field order."""
        return _specs(cls)

    @classmethod
    def resolve(cls: type[P], values: Mapping[str, Any], *, estimator: str,
                file: str | None = None, prefix: str = "estimator") -> P:
        """Validate ``values`` (any subset of the keys) and build the parameters.

        Raises :class:`ParamError` naming ``file`` and ``prefix.key`` for an unknown key
        (listing the valid ones) or a bad value (with its valid range).
        """
        spec = {p.name: p for p in cls.specs()}
        out: dict[str, Any] = {}
        for key, value in values.items():
            if key not in spec:
                raise ParamError(f"unknown parameter for estimator {estimator!r}", file=file,
                                 key=f"{prefix}.{key}", valid=sorted(spec))
            out[key] = spec[key].check(value, file=file, key=f"{prefix}.{key}")
        if out.get("semantics") == "as-run" and not cls.AS_RUN:
            raise ParamError(f"estimator {estimator!r} has no as-run form (no reference "
                             "trainer whose batch pipeline it reproduces)", file=file,
                             key=f"{prefix}.semantics", value="as-run", valid=["described"])
        return cls(**out)

    def identity_dict(self) -> dict[str, Any]:
        """The parameters that enter run identity: every one, except a parameter marked
        ``identity="non-default"`` while it holds its default."""
        specs = {p.name: p for p in self.specs()}
        return {k: v for k, v in self.as_dict().items()
                if not (specs[k].identity == "non-default" and v == specs[k].default)}

    def as_dict(self) -> dict[str, Any]:
        """Every parameter (defaults included), in field order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    # -- capabilities ----------------------------------------------------------------------
    def needs_features(self) -> bool:
        """Whether a batch without the features ``phi`` is refused."""
        return False

    def uses_features(self) -> bool:
        """Whether ``phi`` is read when given (the verl backend then captures it)."""
        return self.needs_features()

    def verl_algorithm(self) -> dict[str, Any]:
        """verl-agent's own ``algorithm.*`` keys mirroring these parameters (ccpo-lab
        computes the advantage; the mirrors keep verl-agent's config and logs truthful)."""
        return {"gamma": self.gamma,
                "gigpo.step_advantage_w": getattr(self, "step_advantage_w",
                                                  self.VERL_STEP_ADVANTAGE_W),
                "gigpo.mode": self.mode}

    def lint(self) -> list[str]:
        """Warnings (not errors) about this configuration."""
        return []


def _specs(cls: type[EstimatorParams]) -> tuple[Param, ...]:
    if cls in _SPECS:
        return _SPECS[cls]
    docs = _field_docs(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind = _KINDS.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", ""))
        if kind is None:
            raise TypeError(f"{cls.__name__}.{f.name}: parameter kind must be float, int, "
                            f"bool or str, got {f.type!r}")
        m = f.metadata
        out.append(Param(f.name, kind, f.default, docs.get(f.name, ""), m.get("choices"),
                         m.get("low"), m.get("high"), bool(m.get("low_open", False)),
                         m.get("protocol"), m.get("identity", True)))
    _SPECS[cls] = tuple(out)
    return _SPECS[cls]


# ----------------------------------------------------------------------- the shipped ones
@dataclass(frozen=True)
class GRPOParams(EstimatorParams):
    """Episode term only: the group-normalised episode score (verl-agent's GRPO)."""

    AS_RUN: ClassVar[bool] = True


@dataclass(frozen=True)
class GiGPOParams(EstimatorParams):
    """Episode term + anchor-state step term (verl-agent's GiGPO)."""

    AS_RUN: ClassVar[bool] = True

    step_advantage_w: float = param(1.0)
    """Weight of the step term: A = A_ep + step_advantage_w * A_step."""


@dataclass(frozen=True)
class CCPOParams(GiGPOParams):
    """Episode term + context-conditioned, shrunk leave-one-trajectory-out step term
    (CCPO, tracyhann/agent-context-grpo)."""

    gate: str = param("hard", choices=("hard", "global"))
    """Bucket key: hard = (task, anchor observation); global = (task,), which forces
    lambda = 1."""
    target: str = param("return", choices=("return", "successor-node"))
    """Credited quantity: return = the step return G - penalty * [invalid];
    successor-node = V(next node) - penalty * [invalid]."""
    rho: float = param(0.0, low=0.0)
    """Shrinkage strength of the kernel baseline against the uniform one (0: lambda is
    always 0 under gate=hard)."""
    shrink: str = param("eb", choices=("eb",))
    """Shrinkage rule (empirical Bayes)."""
    tau: float = param(0.15, low=0.0, low_open=True)
    """Kernel bandwidth as a fraction of the bucket's median pairwise feature distance."""
    whiten_k: int = param(3, low=0)
    """Top principal directions removed when whitening phi."""
    phi: str = param("hidden+ctx", choices=("hidden", "hidden+ctx"))
    """Features: the reference policy's hidden state, optionally with the 37-d context
    block."""
    ctx_w: float = param(1.0, low=0.0)
    """Scale of the context block in hidden+ctx."""
    edge_w: float = param(1.0, low=0.0)
    """Weight of the edge term z_task(V(next) - V(cur)), added to every row of a task with
    more than one row, credited or not; 0 = off."""
    step_norm: str = param("mode", choices=("mode", "task", "none"))
    """Re-standardisation of the credited rows' step term per task (tasks with more than
    one credited row; uncredited rows keep their edge value): mode = under mean_std_norm
    only (the reference's default), task = always, none = never."""
    backoff_task: bool = param(False)
    """A hard-gate row with no sibling trajectory in its bucket is credited against the
    task-wide bucket instead of getting no credit."""
    jweight_c: float = param(0.0, low=0.0)
    """Multiply each row's raw credit by J/(J+c), J = peer trajectories of the bucket it
    was credited from; 0 = off."""
    backoff_rho: float = param(0.5, low=0.0, high=1.0)
    """Factor on rho for rows credited through the task-wide backoff bucket (the
    reference's ACG_CCPO_BACKOFF_RHO). No effect when rho = 0."""
    success_value: float = param(10.0, low=0.0)
    """Episode reward of a success, and the node value of its terminal successor (a
    trajectory whose raw episode reward equals it within 1e-9 succeeded; any other's
    terminal value is 0). Used by target=successor-node and the edge term."""

    def needs_features(self) -> bool:
        """The kernel baseline reaches the advantages (gate=global, or rho > 0)."""
        return self.gate == "global" or self.rho > 0.0

    def uses_features(self) -> bool:
        """Always: with rho = 0 under gate=hard they still feed the n_eff diagnostic."""
        return True

    def lint(self) -> list[str]:
        warnings: list[str] = []
        if self.rho == 0.0 and self.shrink == "eb" and self.gate == "hard":
            warnings.append(
                "rho = 0 with shrink=eb and gate=hard: lambda is always 0, so the step term "
                "is TGT - mean(peers) and the features phi are computed and discarded")
        if self.gate == "global" and self.rho != 0.0:
            warnings.append("gate=global forces lambda = 1: rho has no effect")
        if self.gate == "global" and self.backoff_task:
            warnings.append("backoff_task has no effect under gate=global (the bucket is the "
                            "task)")
        if self.phi == "hidden" and self.ctx_w != 1.0:
            warnings.append("ctx_w has no effect with phi=hidden")
        if self.backoff_rho != 0.5 and (
                not self.backoff_task or self.rho == 0.0 or self.gate == "global"):
            warnings.append("backoff_rho has no effect here (it needs backoff_task, "
                            "gate=hard and rho > 0)")
        if self.target == "return" and self.edge_w == 0.0 and self.success_value != 10.0:
            warnings.append("success_value has no effect with target=return and edge_w = 0")
        if self.step_norm == "none" and self.mode == "mean_std_norm":
            warnings.append("step_norm=none with mode=mean_std_norm: the episode term is "
                            "standardised but the step term stays in reward units")
        return warnings
