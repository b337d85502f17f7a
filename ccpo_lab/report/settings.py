"""The report's settings: options over the sweep manifest's ``analysis`` over defaults."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccpo_lab.config.analysis import (
    BOOTSTRAP_REPS_RANGE,
    SETTING_KEYS,
    AnalysisConfig,
    AnalysisSettings,
)
from ccpo_lab.errors import UserError

OPTION_KEYS = SETTING_KEYS
"""Settings an option may give (every analysis setting: :mod:`ccpo_lab.config.analysis`)."""
DEFAULT_RNG_SEED = 0


@dataclass(frozen=True)
class ResolvedAnalysis(AnalysisSettings):
    """The analysis settings a report used (:class:`~ccpo_lab.config.analysis.
    AnalysisSettings`), the reference arm chosen."""

    reference: str = ""
    """Reference arm (resolved: the sweep's first arm when not set)."""


@dataclass(frozen=True)
class ReportSettings(ResolvedAnalysis):
    """How a report reads the runs (resolved): the analysis settings, and how the
    bootstrap is seeded and where each setting came from."""

    rng_seed: int = DEFAULT_RNG_SEED
    """Seed of the bootstrap Generators (reports are reproducible)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Where each setting came from: ``option``, ``sweep.json`` or ``default``."""
    pairs: tuple[tuple[str, str], ...] = ()
    """The comparison family as explicit ``(arm, reference)`` pairs (the sweep's
    ``analysis.pairs`` whose arms have runs); empty: every arm against ``reference``."""

    def reference_of(self, arm: str) -> str | None:
        """The arm ``arm`` is compared with: its pair's reference, or ``reference`` (None:
        it is compared with nothing, e.g. it is a pair's reference)."""
        if not self.pairs:
            return None if arm == self.reference else self.reference
        return next((r for a, r in self.pairs if a == arm), None)


def _check_unit(value: float, key: str) -> float:
    v = float(value)
    if not 0.0 < v < 1.0:
        raise UserError("must be strictly between 0 and 1", key=key, value=value)
    return v


def resolve_settings(manifest: Mapping[str, Any], arms: Sequence[str],
                     options: Mapping[str, Any] | None = None,
                     rng_seed: int = DEFAULT_RNG_SEED) -> tuple[ReportSettings, list[str]]:
    """Settings from ``options`` (non-None values), else ``manifest["analysis"]``, else defaults.

    Returns the settings and notes for the report (e.g. how the reference was chosen).
    Raises :class:`UserError` for values out of range or an unknown reference arm.
    """
    opts = {k: v for k, v in (options or {}).items() if v is not None}
    unknown = sorted(set(opts) - set(OPTION_KEYS))
    if unknown:
        raise UserError("unknown report setting", key=unknown[0], valid=OPTION_KEYS)
    if isinstance(rng_seed, bool) or not isinstance(rng_seed, int) or rng_seed < 0:
        raise UserError("must be an integer >= 0", key="--bootstrap-seed", value=rng_seed)
    analysis = manifest.get("analysis", {}) if manifest else {}
    defaults = AnalysisConfig()
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in OPTION_KEYS:
        if key in opts:
            values[key], sources[key] = opts[key], "option"
        elif analysis.get(key) is not None:
            values[key], sources[key] = analysis[key], "sweep.json"
        else:
            values[key], sources[key] = getattr(defaults, key), "default"
    notes: list[str] = []
    if not arms:
        raise UserError("no arms to report")
    if values["reference"] is None:
        listed = [a for a in manifest.get("arms", []) if a in arms] if manifest else []
        values["reference"] = listed[0] if listed else arms[0]
        if not listed:
            notes.append(f"reference arm not set: using {values['reference']} (the first arm "
                         "alphabetically); pass --reference to choose")
    if values["reference"] not in arms:
        raise UserError("reference arm has no runs in this sweep directory", key="reference",
                        value=values["reference"], valid=list(arms))
    if not isinstance(values["metric"], str) or not values["metric"]:
        raise UserError("metric must be a metric name as logged", key="metric",
                        value=values["metric"])
    ws = values["window_start"]
    if isinstance(ws, bool) or not isinstance(ws, int) or ws < 0:
        raise UserError("must be an integer >= 0", key="window_start", value=ws)
    reps = values["bootstrap_reps"]
    low, high = BOOTSTRAP_REPS_RANGE
    if isinstance(reps, bool) or not isinstance(reps, int) or not low <= reps <= high:
        where = {"option": "--bootstrap-reps", "sweep.json": "analysis.bootstrap_reps "
                 "(sweep.json)"}.get(sources["bootstrap_reps"], "bootstrap_reps")
        raise UserError(f"must be an integer from {low:,} to {high:,} (more resamples change "
                        "no interval visibly and cost minutes and memory)", key=where,
                        value=reps)
    settings = ReportSettings(
        metric=values["metric"], window_start=ws, reference=values["reference"],
        confidence=_check_unit(values["confidence"], "confidence"), bootstrap_reps=reps,
        alpha=_check_unit(values["alpha"], "alpha"), power=_check_unit(values["power"], "power"),
        rng_seed=int(rng_seed), sources=sources,
        pairs=_pairs(analysis, arms, sources["reference"] == "option", notes))
    return settings, notes


def _pairs(analysis: Mapping[str, Any], arms: Sequence[str], by_option: bool,
           notes: list[str]) -> tuple[tuple[str, str], ...]:
    """The sweep's ``analysis.pairs`` whose two arms have runs (a note for the others);
    none when ``--reference`` was given (every arm against it, as asked)."""
    raw = analysis.get("pairs") or [] if isinstance(analysis, Mapping) else []
    if by_option or not isinstance(raw, list):
        return ()
    out = []
    for pair in raw:
        if not (isinstance(pair, list | tuple) and len(pair) == 2):
            continue
        a, r = str(pair[0]), str(pair[1])
        if a in arms and r in arms:
            out.append((a, r))
        else:
            notes.append(f"pair {a} vs {r} not compared: {a if a not in arms else r} has no "
                         "runs in this sweep directory")
    return tuple(out)
