"""Step-1 identity: are the arms of each seed comparable?

Nothing an arm changes acts before the first gradient step, so every arm of a seed must
produce the same step-1 rollouts (same hardware layout, seed, batch and data order). The
backends record each run's step-1 fingerprint in ``run.json``; :func:`verify_sweep`
compares them per seed and, on a difference, locates the first diverging episode and turn.
:func:`step1_agreement` is what ``ccpo-lab report`` uses to mark comparisons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ccpo_lab.config.identity import canonical_json
from ccpo_lab.errors import UserError
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.provenance import stack_differences
from ccpo_lab.runs.rollouts import Divergence, first_divergence, read_rollouts
from ccpo_lab.runs.sweep_runs import load_sweep_runs

SeedStatus = Literal["identical", "different", "missing", "single"]


@dataclass(frozen=True)
class SeedCheck:
    """The step-1 verdict of one seed."""

    seed: int
    """The seed."""
    status: SeedStatus
    """``identical``; ``different`` (some fingerprints differ); ``missing`` (some arm has
    no fingerprint, the others agree); ``single`` (one arm only: nothing to compare)."""
    reference: str
    """The arm others are compared with."""
    fingerprints: dict[str, str | None]
    """Fingerprint of every arm of the seed (None: not recorded)."""
    divergences: dict[str, Divergence | str] = field(default_factory=dict)
    """Arm -> first divergence from the reference (or why it cannot be located)."""
    groups: int | None = None
    """Step-1 groups (tasks) with >= 2 rollouts in the reference arm's rollout file (None:
    no file to count)."""
    distinct_groups: int | None = None
    """How many of them hold rollouts that are not all identical."""

    @property
    def collapsed(self) -> bool:
        """Whether most step-1 groups are degenerate (every rollout of a group the same):
        fewer than half of the groups distinct. Group-relative advantages are then ~0 for
        every arm, and identical step-1 rollouts across arms prove nothing."""
        return bool(self.groups) and 2 * (self.distinct_groups or 0) < (self.groups or 0)
    left_out: tuple[str, ...] = ()
    """Directories of this seed that are not runs of their place, each as
    ``<arm>/<dir>: left out: why`` (their arms are not compared)."""
    stack_diffs: tuple[str, ...] = ()
    """Where an arm ran on another stack than the reference arm (issue 36, item 14), each
    as ``<arm>: <field> <its value> vs <reference's value>``."""
    no_stack: tuple[str, ...] = ()
    """Arms whose runs recorded no stack (made before it was recorded): not compared."""

    @property
    def missing(self) -> list[str]:
        """Arms without a fingerprint."""
        return [a for a, fp in self.fingerprints.items() if fp is None]

    @property
    def ok(self) -> bool:
        """Whether this seed passes (identical, or a single arm that has a fingerprint, and
        no directory of the seed left out)."""
        return not self.left_out and not self.stack_diffs and (
            self.status == "identical" or (self.status == "single" and not self.missing))


@dataclass(frozen=True)
class Step1Agreement:
    """Whether the step-1 identity of two arms is verified on their common seeds."""

    status: Literal["verified", "different", "not verified"]
    """``verified``: every common seed has equal fingerprints; ``different``: some seed's
    differ; ``not verified``: no common seed, or a fingerprint is missing."""
    different: tuple[int, ...]
    """Common seeds whose fingerprints differ."""
    missing: tuple[int, ...]
    """Common seeds where an arm has no fingerprint."""

    @property
    def verified(self) -> bool:
        """Whether the identity is verified."""
        return self.status == "verified"

    @property
    def detail(self) -> str:
        """One line: what was (not) verified."""
        if self.status == "verified":
            return "step-1 rollouts identical"
        parts = []
        if self.different:
            parts.append(f"step-1 rollouts differ (seed {', '.join(map(str, self.different))})")
        if self.missing:
            parts.append("no step-1 fingerprint (seed "
                         f"{', '.join(map(str, self.missing))})")
        return "; ".join(parts) or "no seed in common: step-1 identity not verifiable"


def step1_agreement(fp_x: Mapping[int, str | None],
                    fp_y: Mapping[int, str | None]) -> Step1Agreement:
    """Compare two arms' fingerprints (seed -> fingerprint or None) on their common seeds."""
    common = sorted(set(fp_x) & set(fp_y))
    missing = tuple(k for k in common if fp_x[k] is None or fp_y[k] is None)
    different = tuple(k for k in common if k not in missing and fp_x[k] != fp_y[k])
    if different:
        status: Literal["verified", "different", "not verified"] = "different"
    elif missing or not common:
        status = "not verified"
    else:
        status = "verified"
    return Step1Agreement(status, different, missing)


def _fingerprint(run: Mapping[str, Any]) -> str | None:
    step1 = run.get("step1")
    fp = step1.get("fingerprint") if isinstance(step1, dict) else None
    return fp if isinstance(fp, str) and fp else None


def _rollouts(run_dir: Path) -> list[dict[str, Any]]:
    """A run's step-1 episodes, read through the run-file gateway; ``OSError`` or
    ``ValueError`` naming the file when it cannot be read."""
    rd = RunDir(run_dir)
    return read_rollouts(rd.rollouts, root=rd.sweep_root)


def _locate(ref_dir: Path, other_dir: Path) -> Divergence | str:
    try:
        a = _rollouts(ref_dir)
        b = _rollouts(other_dir)
    except (OSError, ValueError) as e:
        return f"the step-1 rollouts cannot be read ({e}): cannot locate the divergence"
    if not a or not b:
        which = ref_dir if not a else other_dir
        return f"step-1 rollouts not found in {which / 'rollouts'}: cannot locate the divergence"
    div = first_divergence(a, b)
    return div if div is not None else "fingerprints differ but the rollout files are equal " \
        "(a rollout file was rewritten after its fingerprint was recorded)"


def count_groups(episodes: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(groups with >= 2 rollouts, groups among them whose rollouts are not all identical).

    A group is a ``task_id``; rollouts are compared by their turns.
    """
    by_task: dict[str, set[str]] = {}
    sizes: dict[str, int] = {}
    for ep in episodes:
        t = str(ep.get("task_id"))
        by_task.setdefault(t, set()).add(canonical_json(list(ep.get("turns", []))))
        sizes[t] = sizes.get(t, 0) + 1
    groups = [t for t, n in sizes.items() if n >= 2]
    return len(groups), sum(1 for t in groups if len(by_task[t]) > 1)


def _group_counts(run_dir: Path) -> tuple[int | None, int | None, str | None]:
    """Step-1 groups and distinct groups of a run's rollout file (None: no file), and why
    the file could not be read (then the seed is not verified)."""
    try:
        eps = _rollouts(run_dir)
    except (OSError, ValueError) as e:
        return None, None, (f"{run_dir.parent.name}/{run_dir.name}: step-1 rollouts "
                            f"unreadable ({e}): groups not counted")
    if not eps:
        return None, None, None
    return (*count_groups(eps), None)


def verify_sweep(sweep_dir: str | Path, reference: str | None = None) -> list[SeedCheck]:
    """Check every seed of a sweep directory (newest directory per (arm, seed)).

    Args:
        sweep_dir: ``<results>/<sweep>``.
        reference: arm the others are compared with (default: the sweep's analysis
            reference, else its first arm, else the first arm alphabetically; per seed, the
            first arm present when the reference lacks the seed).

    Returns:
        One :class:`SeedCheck` per seed, by seed.
    """
    found = load_sweep_runs(sweep_dir)
    manifest, newest, arms = found.manifest, found.newest, found.arms
    ref = reference or manifest.get("analysis", {}).get("reference") or arms[0]
    if reference is not None and reference not in arms:
        raise UserError("reference arm has no runs in this sweep directory", key="reference",
                        value=reference, valid=arms)
    left: dict[int, list[str]] = {}
    for x in found.left_out:
        left.setdefault(x.seed, []).append(x.text)
    checks = []
    for seed in sorted({k for _, k in newest} | set(left)):
        dirs = {a: newest[(a, seed)].path for a in arms if (a, seed) in newest}
        checks.append(_check_seed(seed, dirs, ref, tuple(left.get(seed, ()))))
    return checks


def _check_seed(seed: int, dirs: Mapping[str, Path], ref: str, left_out: tuple[str, ...]
                ) -> SeedCheck:
    """The verdict of one seed over its arms' run directories (``arm -> directory``)."""
    present = list(dirs)
    if not present:
        return SeedCheck(seed, "missing", ref, {}, left_out=left_out)
    fps = {a: _fingerprint(RunDir(dirs[a]).read_run()) for a in present}
    seed_ref = ref if ref in present else present[0]
    distinct = {fp for fp in fps.values() if fp is not None}
    divergences: dict[str, Divergence | str] = {}
    if len(distinct) > 1:
        status: SeedStatus = "different"
        base = seed_ref if fps[seed_ref] is not None else next(a for a in present if fps[a])
        for a in present:
            if fps[a] is not None and fps[a] != fps[base]:
                divergences[a] = _locate(dirs[base], dirs[a])
        seed_ref = base
    elif len(present) == 1:
        status = "single"
    elif any(fp is None for fp in fps.values()):
        status = "missing"
    else:
        status = "identical"
    groups, varied, unread = (_group_counts(dirs[seed_ref]) if fps.get(seed_ref)
                              else (None, None, None))
    diffs, unrecorded = _stacks(dirs, seed_ref)
    return SeedCheck(seed, status, seed_ref, fps, divergences, groups=groups,
                     distinct_groups=varied,
                     left_out=left_out + ((unread,) if unread else ()),
                     stack_diffs=diffs, no_stack=unrecorded)


def _stacks(dirs: Mapping[str, Path], ref: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The arms of a seed whose recorded stack differs from ``ref``'s (``arm: field value
    vs value``), and those that recorded none."""
    stacks = {a: RunDir(d).read_run().get("stack") for a, d in dirs.items()}
    unrecorded = tuple(a for a, st in stacks.items() if not isinstance(st, dict))
    base = stacks.get(ref)
    diffs = []
    for arm, st in stacks.items():
        if arm == ref:
            continue
        for key, mine, theirs in stack_differences(st, base):
            diffs.append(f"{arm}: {key} {mine!r} vs {theirs!r} ({ref})")
    return tuple(diffs), unrecorded


def _clip(text: Any, width: int = 160) -> str:
    s = text if isinstance(text, str) else repr(text)
    s = s.replace("\n", "\\n")
    return s if len(s) <= width else s[: width - 3] + "..."


def _describe_side(prefix: str, value: Any) -> list[str]:
    if value is None:
        return [f"{prefix}(absent)"]
    if isinstance(value, dict) and ("obs" in value or "action" in value):
        return [f"{prefix}obs:    {_clip(value.get('obs'))}",
                f"{' ' * len(prefix)}action: {_clip(value.get('action'))}"]
    return [f"{prefix}{_clip(value)}"]


def format_divergence(ref: str, arm: str, div: Divergence | str) -> list[str]:
    """Lines describing where ``arm`` first leaves ``ref``'s step-1 rollouts."""
    if isinstance(div, str):
        return [f"  {arm} vs {ref}: {div}"]
    where = f"episode {div.episode} (task {div.task_id}, rollout {div.rollout})"
    where += f", turn {div.turn}" if div.turn is not None else " (outside its turns)"
    lines = [f"  {arm} vs {ref}: first divergence at {where}"]
    width = max(len(ref), len(arm)) + 1
    for name, side in ((ref, div.a), (arm, div.b)):
        lines.extend(_describe_side(f"    {name + ':':<{width}} ", side))
    return lines


def format_checks(checks: Sequence[SeedCheck]) -> list[str]:
    """The human-readable verification, one block per seed."""
    out = []
    for c in checks:
        out.extend(_format_check(c))
        out.extend(f"  {text}" for text in c.left_out)
        out.extend(f"  DIFFERENT STACK: {text}" for text in c.stack_diffs)
        if c.no_stack:
            out.append(f"  stack not recorded: {', '.join(c.no_stack)} (runs made before "
                       "ccpo-lab recorded it: not compared)")
    return out


def _format_check(c: SeedCheck) -> list[str]:
    """The lines of one seed's verdict (without its directories left out)."""
    n = len(c.fingerprints)
    if not c.fingerprints:
        return [f"seed {c.seed}: NOT VERIFIED (no usable run directory)"]
    if c.status == "identical":
        fp = next(iter(c.fingerprints.values()))
        return [f"seed {c.seed}: identical ({n} arms, fingerprint {(fp or '')[:12]}"
                f"{_groups_text(c)})"]
    if c.status == "single":
        (arm, fp), = c.fingerprints.items()
        what = f"fingerprint {fp[:12]}" if fp else "NO fingerprint"
        return [f"seed {c.seed}: only {arm} ({what}{_groups_text(c)}): nothing to compare"]
    out: list[str] = []
    if c.status == "different":
        groups: dict[str | None, list[str]] = {}
        for a, fp in c.fingerprints.items():
            groups.setdefault(fp, []).append(a)
        desc = "; ".join(f"{(fp or 'none')[:12]}: {', '.join(arms)}"
                         for fp, arms in groups.items())
        out.append(f"seed {c.seed}: DIFFERENT ({desc})")
        for arm, div in c.divergences.items():
            out.extend(format_divergence(c.reference, arm, div))
    if c.missing:
        if c.status == "missing":
            out.append(f"seed {c.seed}: NOT VERIFIED ({n - len(c.missing)} of {n} arms agree)")
        out.append(f"  missing fingerprint: {', '.join(c.missing)} (run.json has no "
                   "step1.fingerprint: the run has not reached step 1, or its backend did "
                   "not record it)")
    return out


def _groups_text(c: SeedCheck) -> str:
    if not c.groups:
        return ""
    return f"; {c.distinct_groups} of {c.groups} step-1 groups distinct"


def collapse_line(checks: Sequence[SeedCheck]) -> str | None:
    """One line naming the seeds whose step-1 groups collapsed (None when none did)."""
    bad = [c for c in checks if c.collapsed]
    if not bad:
        return None
    what = "; ".join(f"{c.distinct_groups} of {c.groups}" for c in bad)
    return (f"step-1 groups COLLAPSED for seed {', '.join(str(c.seed) for c in bad)}: {what} "
            "groups have rollouts that differ (every rollout of a group sampled the same "
            "actions: check the rollout seeding)")
