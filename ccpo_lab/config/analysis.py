"""The analysis settings: how a sweep's runs are scored and compared, declared once.

:class:`RunScore` (a run's score: the converged-window mean of a held-out metric) and
:class:`AnalysisSettings` (the score plus how arms are compared) are the one declaration
of each setting's name, type, default and meaning. Everything else derives from them:
the sweep file's ``analysis`` section (:class:`AnalysisConfig`), the report's resolved
settings and document (:mod:`ccpo_lab.report.settings`, :mod:`ccpo_lab.report.model`),
the adaptive design's record (:mod:`ccpo_lab.adaptive.store`), the statistics' default
window (:mod:`ccpo_lab.stats.run`) and the help of ``ccpo-lab report``'s options
(:func:`setting_help`, from the field docstrings, as estimator parameters give
``arms show --docs``).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from dataclasses import dataclass, field
from functools import cache

from ccpo_lab.config.adaptive import AdaptiveConfig

BOOTSTRAP_REPS_RANGE = (100, 1_000_000)
"""Bootstrap resamples a report accepts: at a million the Monte-Carlo error of a 95%
percentile bound is far below any seed-to-seed difference, and a report of 2 arms x 20
seeds takes about 12 s and 90 MB; ten million took 135 s and 240 MB (2-core AMD EPYC)."""


@dataclass(frozen=True)
class RunScore:
    """A run's score: the mean of its held-out evaluations in the converged window."""

    metric: str = "val/success_rate"
    """Held-out metric to compare (as logged)."""
    window_start: int = 70
    """Converged window: evaluations at step >= this."""


@dataclass(frozen=True)
class AnalysisSettings(RunScore):
    """How the runs are read and the arms compared (the score first)."""

    reference: str | None = field(default=None, metadata={"default": "the first arm"})
    """Reference arm: every other arm is compared against it."""
    confidence: float = 0.95
    """Interval level."""
    bootstrap_reps: int = 50_000
    """Bootstrap resamples (a report accepts :data:`BOOTSTRAP_REPS_RANGE`)."""
    alpha: float = 0.05
    """Family-wise level of the comparisons (Holm)."""
    power: float = 0.8
    """Target power for the seeds-needed estimate."""


SETTING_KEYS = tuple(f.name for f in dataclasses.fields(AnalysisSettings))
"""The analysis settings' names, in declaration order (also the report's option keys)."""


@dataclass(frozen=True)
class AnalysisConfig(AnalysisSettings):
    """How ``ccpo-lab report`` reads the runs: a sweep file's ``analysis`` section."""

    pairs: list[list[str]] = field(default_factory=list)
    """The comparison family as explicit pairs ``[arm, reference]`` (e.g. each arm against
    its -as-run twin), Holm over the pairs; empty: every arm against ``reference``. A
    report's ``--reference`` option replaces the pairs by that reference."""
    adaptive: AdaptiveConfig = field(default_factory=AdaptiveConfig)
    """An adaptive seed design (off unless ``adaptive.max_seeds`` is set); not part of
    any run's identity."""


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


@cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` of a dataclass, its bases' fields included (a subclass's
    docstring wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_attribute_docs(klass))
    return docs


def setting_help(name: str) -> str:
    """The help of the report option that sets ``name``: the field's docstring, and that
    it defaults to the sweep's ``analysis`` value, else the declared default."""
    f = next(f for f in dataclasses.fields(AnalysisSettings) if f.name == name)
    default = f.metadata.get("default", f.default)
    doc = field_docs(AnalysisSettings)[name].split(" (:")[0].split(" (a report")[0]
    doc = doc.rstrip(".")
    return f"{doc} (default: the sweep's analysis.{name}, else {default})."
