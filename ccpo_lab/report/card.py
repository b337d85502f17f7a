"""A model card for one arm of a study (``ccpo-lab card``), in the Hugging Face format.

Nothing in the card is typed by hand: :func:`gather_card` reads what the report does not
hold (the arms' configurations, the resolved protocol, the runs' states, the sweep's date)
into a :class:`CardInputs` beside the report's model, and :func:`render_card` turns that
into text with pure functions. Every number of the results is the report's, formatted by
the report's own functions (:mod:`ccpo_lab.report.tables`), and the tables side by side
are the report's tables themselves, so the card cannot disagree with ``ccpo-lab report``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.errors import UserError
from ccpo_lab.report.model import ArmRow, ComparisonRow, ReportModel
from ccpo_lab.report.numbers import is_rate
from ccpo_lab.report.tables import (
    DASH,
    Table,
    arms_table,
    comparisons_table,
    fmt,
    fmt_ci,
    fmt_p,
    level,
    per_task_table,
    table_markdown,
)

if TYPE_CHECKING:
    from ccpo_lab.report.analysis import Report

DEFAULT_LICENSE = "unknown"
"""The front matter's license when none is given (the Hub's value for an unstated one)."""
BASE_TAGS = ("reinforcement-learning", "ccpo-lab")
"""Tags every card has; the estimator's name and the backend follow."""
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
SEMANTICS_TEXT = {
    "described": "the method as described",
    "as-run": "what the published trainers computed on the padded, load-balanced batch "
              "they passed (as run)",
    "mixed": "runs of both semantics (described and as run): not one method",
}
"""What each value of an arm's estimator ``semantics`` means (docs/estimators.md)."""
BEST_WARNING = ("Do not read the best single evaluation as the result: it is the largest "
                "of several noisy evaluations and overstates the policy by about its bias; "
                "the result is the converged-window mean.")
"""The sentence under the best evaluation."""


@dataclass(frozen=True)
class ArmFacts:
    """What an arm is: its estimator, the flags that set it apart, its description."""

    name: str
    """Arm name."""
    estimator: str
    """Estimator name."""
    flags: dict[str, Any] = field(default_factory=dict)
    """Estimator parameters that differ from their defaults (``distinguishing_flags``)."""
    description: str = ""
    """The arm file's description ('' when the arm file is not found)."""
    source: str | None = None
    """Where the description came from (an arm file), None when not found."""


@dataclass(frozen=True)
class RunState:
    """One run's state as ``ccpo-lab status`` reads it (``state.json`` and metrics)."""

    arm: str
    """Arm."""
    seed: int
    """Seed."""
    state: str
    """Reconciled state (``completed``, ``running``, ``pending``, ...)."""
    step: int
    """Last step reached."""
    total: int
    """Final step (0: unknown)."""

    @property
    def final(self) -> bool:
        """Completed at its final step."""
        return self.state == "completed" and (self.total == 0 or self.step >= self.total)


@dataclass(frozen=True)
class PublishedWeights:
    """The weights an upload-ready folder holds beside the card (``--weights``)."""

    seed: int
    """The seed they come from."""
    step: int
    """The main revision's training step."""
    final: bool
    """It is the completed run's final checkpoint (False: interim)."""
    run_id: str
    """The run's id."""
    rule: str
    """How the run and checkpoint were chosen."""
    why: str
    """Why this seed."""
    weights_format: str
    """What the files are."""
    transformers: bool
    """Loadable with transformers (Hugging Face weights)."""
    revisions: tuple[tuple[str, int, str], ...]
    """``(name, step, note)`` of each per-step revision."""
    skipped: int = 0
    """Checkpoints of the run that could not be exported (listed in the manifest)."""


@dataclass(frozen=True)
class CardInputs:
    """Everything the card shows: the report's model and what it reads beside it."""

    model: ReportModel
    """The report (every number comes from it)."""
    arm: str
    """The arm the card is about."""
    arms: dict[str, ArmFacts]
    """Every arm of the study."""
    protocols: dict[str, dict[str, Any]]
    """Each arm's resolved protocol (its first run's ``config.yaml``)."""
    models: dict[str, str | None]
    """Each arm's recorded model (None: the backend records none)."""
    backend: str | None
    """The card arm's backend kind."""
    backend_settings: dict[str, Any]
    """Its backend section as run (``backend_runtime``, else the sweep's)."""
    runs: tuple[RunState, ...]
    """Every run's state."""
    created: str | None
    """When the sweep was created (``sweep.json``)."""
    version: str
    """ccpo-lab's version."""
    sweep_dir: str
    """The sweep directory as given."""
    license: str = DEFAULT_LICENSE
    """The front matter's license."""
    weights: PublishedWeights | None = None
    """The weights of the folder beside the card (None: a card alone)."""


# --- reading (the only part that touches files) -------------------------------------


def check_arm(model: ReportModel, arm: str) -> ArmRow:
    """The report's row of ``arm``; UserError for an arm not in the study or without a
    finished evaluation in the converged window."""
    names = [a.arm for a in model.arms]
    if arm not in names:
        raise UserError("unknown arm for this sweep", key="--arm", value=arm, valid=names)
    row = model.arm(arm)
    if row.n_seeds == 0 or row.mean is None:
        raise UserError(f"arm has no finished evaluation in the converged window (step >= "
                        f"{model.window_start}) yet: nothing to put on a card", key="--arm",
                        value=arm)
    return row


def _arm_facts(name: str, config: Mapping[str, Any], arms_dir: Path | None) -> ArmFacts:
    """The arm's estimator as its run ran it (``config.yaml``), its description from its
    arm file when one is found."""
    from ccpo_lab.config.arms import distinguishing_flags, load_arm
    from ccpo_lab.config.schema import ArmConfig, EstimatorConfig

    est = config.get("estimator") or {}
    est_name = str(est.get("name") or "unknown")
    params = dict(est.get("params") or {})
    try:
        arm_cfg = load_arm(name, arms_dir)
    except (UserError, OSError, ValueError):
        arm_cfg = None
    desc = arm_cfg.description if arm_cfg is not None else ""
    source = arm_cfg.source if arm_cfg is not None else None
    run_cfg = ArmConfig(name=name, description=desc,
                        estimator=EstimatorConfig(name=est_name, params=params), training={},
                        source=source or "")
    try:
        flags = distinguishing_flags(run_cfg)
    except KeyError:  # an estimator this version does not know (an imported run)
        flags = params
    return ArmFacts(name, est_name, flags, desc, source)


def _read_config(path: Any) -> dict[str, Any]:
    from ccpo_lab.runs.layout import RunDir

    try:
        return RunDir(path).read_config()
    except (OSError, ValueError):
        return {}


def _manifest(report: Report) -> dict[str, Any]:
    from ccpo_lab.runs.layout import SweepDir

    try:
        doc = json.loads(SweepDir(report.sweep_dir).manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _run_states(report: Report) -> tuple[RunState, ...]:
    from ccpo_lab.launch.status import collect_status

    rows = collect_status(report.sweep_dir, scheduler=False)
    return tuple(RunState(r.arm, r.seed, r.state, r.step, r.total)
                 for r in sorted(rows, key=lambda r: (r.arm, r.seed)))


def _arms_dir(report: Report, manifest: Mapping[str, Any]) -> Path | None:
    """The sweep's ``arms_dir`` (relative to the sweep directory when relative), None
    when it names no folder (then the arms path's default)."""
    raw = (manifest.get("config") or {}).get("arms_dir")
    if not isinstance(raw, str) or not raw:
        return None
    p = Path(raw) if Path(raw).is_absolute() else report.sweep_dir / raw
    return p if p.is_dir() else None


def gather_card(report: Report, arm: str, license: str = DEFAULT_LICENSE) -> CardInputs:
    """Read what the card shows beside the report's model (UserError: see
    :func:`check_arm`)."""
    import ccpo_lab
    from ccpo_lab.backends import recorded_model

    check_arm(report.model, arm)
    manifest = _manifest(report)
    arms_dir = _arms_dir(report, manifest)
    configs = {a: _read_config(next(r.path for (x, _), r in sorted(report.runs.items())
                                    if x == a)) for a in report.arms}
    own = configs[arm]
    kind = own.get("backend", {}).get("kind") if isinstance(own.get("backend"), dict) else None

    def model_of(cfg: Mapping[str, Any]) -> str | None:
        backend = cfg.get("backend") or {}
        try:
            found = recorded_model(backend.get("kind"), backend, cfg.get("backend_runtime") or {})
        except (ImportError, ValueError, KeyError):
            found = None
        return None if found is None else str(found)

    settings = own.get("backend_runtime") or (own.get("backend") or {}).get(str(kind)) or {}
    return CardInputs(
        model=report.model, arm=arm,
        arms={a: _arm_facts(a, configs[a], arms_dir) for a in report.arms},
        protocols={a: dict(configs[a].get("protocol") or {}) for a in report.arms},
        models={a: model_of(configs[a]) for a in report.arms}, backend=kind,
        backend_settings=dict(settings), runs=_run_states(report),
        created=manifest.get("created"), version=ccpo_lab.__version__,
        sweep_dir=str(report.sweep_dir), license=license)


# --- rendering (pure) -----------------------------------------------------------------


def hub_base_model(model: str | None) -> str | None:
    """``model`` when it is a Hugging Face Hub id (``org/name``), else None: the Hub's
    ``base_model`` names a Hub model, never a local path."""
    if not model or model.startswith((".", "/", "~")) or not _HUB_ID.match(model):
        return None
    return model


def front_matter(c: CardInputs) -> str:
    """The YAML front matter: license, base model (a Hub id only), tags."""
    from ccpo_lab.config.yamlio import dump_yaml

    meta: dict[str, Any] = {"license": c.license}
    base = hub_base_model(c.models.get(c.arm))
    if base is not None:
        meta["base_model"] = base
    tags = [*BASE_TAGS, c.arms[c.arm].estimator]
    if c.backend:
        tags.append(f"backend-{c.backend}")
    meta["tags"] = list(dict.fromkeys(tags))
    if c.weights is not None and c.weights.transformers:
        meta["library_name"] = "transformers"
    return f"---\n{dump_yaml(meta)}---\n"


def _pct(model: ReportModel) -> bool:
    return is_rate(model.metric)


def _unit(model: ReportModel) -> str:
    return "%" if _pct(model) else ""


def _flags_text(flags: Mapping[str, Any]) -> str:
    if not flags:
        return "none (every estimator parameter at its default)"
    return ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in sorted(flags.items()))


def _base_model_text(c: CardInputs) -> str:
    model = c.models.get(c.arm)
    if c.backend == "local":
        return ("The policy is the local backend's small CPU policy, trained from scratch "
                "by ccpo-lab: it has no Hugging Face base model, so the front matter names "
                "none.")
    if model is None:
        return "The runs recorded no base model, so the front matter names none."
    if hub_base_model(model) is None:
        return (f"The base model was a local path (`{model}`), not a Hub id, so the front "
                "matter names none.")
    return f"The base model is `{model}`."


def section_arm(c: CardInputs) -> list[str]:
    """1. What the arm is."""
    a, row = c.arms[c.arm], c.model.arm(c.arm)
    sem = SEMANTICS_TEXT.get(row.semantics, row.semantics)
    lines = ["## What this arm is", "",
             f"- Arm: `{a.name}` of the study `{c.model.sweep}`",
             f"- Estimator: `{a.estimator}`",
             f"- Distinguishing flags: {_flags_text(a.flags)}",
             f"- Estimator semantics computed: `{row.semantics}` ({sem})",
             f"- Backend: `{c.backend or 'unknown'}`. {_base_model_text(c)}", ""]
    if a.description:
        lines += [f"> {line}" if line else ">" for line in a.description.splitlines()] + [""]
    else:
        lines += ["(no arm file found for this arm: no description)", ""]
    return lines


def _best(row: ArmRow, pct: bool) -> list[str]:
    out = []
    for k in row.seeds:
        e = row.per_seed[k]
        if e.best is None:
            continue
        out.append(f"- seed {k}: best {fmt(e.best, pct)} at step {e.best_step} (the best "
                   f"of {e.n_evals} window evaluations); expected upward bias "
                   f"{fmt(e.best_bias, pct, signed=True)}")
    return out


def section_result(c: CardInputs) -> list[str]:
    """2. The result: the converged-window mean with sd and n, the best evaluation."""
    m, row = c.model, c.model.arm(c.arm)
    pct, u = _pct(m), _unit(m)
    sd = (f"sd {fmt(row.sd, pct)}{u} across seeds" if row.sd is not None
          else "no sd across seeds (one seed)")
    lines = ["## Result", "",
             f"**{m.metric}: {fmt(row.mean, pct)}{u}** — the mean over {row.n_seeds} "
             f"seed(s) of each seed's converged-window mean (step ≥ {m.window_start}, "
             f"{row.n_evals} evaluations in all); {sd}; {level(m)} CI (t) "
             f"{fmt_ci(row.ci_t, pct)}.", ""]
    if row.interim:
        lines += [f"Interim: seed(s) {', '.join(map(str, row.interim_seeds))} not at the "
                  "final step.", ""]
    lines += ["Best single evaluation in the window, per seed (bias: the expected maximum of "
              "that many evaluations' noise):", "", *_best(row, pct), "",
              f"**{BEST_WARNING}**", ""]
    return lines


def _table(t: Table) -> list[str]:
    return [f"### {t.title}", "", *table_markdown(t), "", *(f"- {n}" for n in t.notes), ""]


def section_arms(c: CardInputs) -> list[str]:
    """3. Every arm side by side, per task type, and the comparisons (the report's tables)."""
    m = c.model
    out = ["## All arms of the study", ""] + _table(arms_table(m)) + _table(per_task_table(m))
    if m.comparisons:
        out += _table(comparisons_table(m))
    return out


def _comparison_line(cmp: ComparisonRow, m: ReportModel) -> str:
    pct, u = _pct(m), _unit(m)
    head = (f"{cmp.arm} vs {cmp.reference}: Δ {fmt(cmp.diff, pct, signed=True)}{u}, "
            f"{level(m)} CI {fmt_ci(cmp.ci, pct)}, p (Holm) {fmt_p(cmp.p_holm, m.alpha)}")
    if cmp.verdict in ("better", "worse"):
        return f"{head}: {cmp.verdict} (shown)."
    if "seeds per arm" in cmp.reason:
        need = ""
    elif cmp.seeds_needed is not None:
        need = (f"about {cmp.seeds_needed} seeds per arm would resolve it at power "
                f"{m.power:g} (it has {cmp.n_x} and {cmp.n_y})")
    elif "more than" in cmp.verdict_text:
        need = "more than 1,000 seeds per arm would be needed at the observed difference"
    else:
        need = "the seeds it would need cannot be computed yet"
    assumed = " (sd assumed: an arm has one seed)" if cmp.power_sd_assumed else ""
    return f"{head}: unresolved, not shown ({cmp.reason}){'; ' + need if need else ''}{assumed}."


def _protocol_lines(c: CardInputs) -> list[str]:
    mine, out = c.protocols.get(c.arm, {}), []
    for other in c.model.arms:
        if other.arm == c.arm:
            continue
        theirs = c.protocols.get(other.arm, {})
        diff = [f"{k} {mine.get(k)!r} vs {theirs.get(k)!r}" for k in sorted(set(mine) | set(
            theirs)) if mine.get(k) != theirs.get(k)]
        if c.models.get(other.arm) != c.models.get(c.arm):
            diff.insert(0, f"model {c.models.get(c.arm)} vs {c.models.get(other.arm)}")
        if diff:
            out.append(f"{c.arm} and {other.arm} ran different setups ({'; '.join(diff)}): "
                       "their difference is not the estimator's alone.")
    return out


def _not_comparable(c: CardInputs) -> list[str]:
    m = c.model
    out = [] if m.baselines.shown or not m.baselines.note else [m.baselines.note + "."]
    out += [n.text for n in m.notes if n.kind == "setting" and "different stacks" in n.text]
    return out + _protocol_lines(c)


def section_limits(c: CardInputs) -> list[str]:
    """4. What the study shows and does not, from the statistics."""
    m = c.model
    lines = ["## What this study does and does not show", ""]
    shown = [_comparison_line(x, m) for x in m.comparisons]
    lines += ["Comparisons (one test per row, adjusted by Holm's step-down):", ""]
    lines += [f"- {x}" for x in shown] or ["- none (a single arm)"]
    one = [a.arm for a in m.arms if a.n_seeds == 1]
    none = [a.arm for a in m.arms if a.n_seeds == 0]
    lines += ["", "Limits:", ""]
    if one:
        lines.append(f"- One seed: {', '.join(one)}: no sd across seeds and no interval; a "
                     "single seed's result can be that seed's luck.")
    if none:
        lines.append(f"- No evaluation in the window yet: {', '.join(none)}.")
    interim = [a.arm for a in m.arms if a.interim]
    if interim:
        lines.append(f"- Interim arms (not at the final step): {', '.join(interim)}.")
    lines += [f"- Not comparable: {x}" for x in _not_comparable(c)]
    lines += ["", "Estimator semantics of each arm:", ""]
    lines += [f"- {a.arm}: `{a.semantics}` ({SEMANTICS_TEXT.get(a.semantics, a.semantics)})"
              for a in m.arms]
    return [*lines, ""]


def _cell(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, dict | list | bool) or v is None else str(v)
    return text.replace("|", "\\|")


def section_setup(c: CardInputs) -> list[str]:
    """5. The training setup as resolved (the run's ``config.yaml``)."""
    m, row = c.model, c.model.arm(c.arm)
    episodes = sorted({e.n_episodes for e in row.per_seed.values() if e.n_episodes})
    rows: list[tuple[str, Any]] = [
        ("backend", c.backend or DASH), ("model", c.models.get(c.arm) or DASH),
        ("seeds", ", ".join(map(str, row.seeds))), ("metric", m.metric),
        ("converged window", f"step ≥ {m.window_start}"),
        ("held-out episodes per evaluation", ", ".join(map(str, episodes)) or DASH)]
    rows += [(f"protocol.{k}", v) for k, v in c.protocols.get(c.arm, {}).items()]
    rows += [(f"backend.{k}", v) for k, v in c.backend_settings.items()]
    return ["## Training setup", "", "| setting | value |", "|:--|:--|",
            *(f"| {k} | {_cell(v)} |" for k, v in rows), ""]


def status_text(runs: Sequence[RunState], arm: str) -> tuple[str, list[str]]:
    """``final`` or ``interim`` with the step reached, and a line per run not final."""
    if runs and all(r.final for r in runs):
        return "final", []
    mine = [r for r in runs if r.arm == arm]
    total = max((r.total for r in mine), default=0)
    steps = ", ".join(f"step {r.step} (seed {r.seed})" for r in mine)
    head = f"interim: this arm's runs have reached {steps or 'no step'} of {total or '?'}"
    return head, [f"{r.arm} seed {r.seed}: {r.state}, step {r.step} of {r.total or '?'}"
                  for r in runs if not r.final]


def section_status(c: CardInputs) -> list[str]:
    """6. Interim or final, from the runs' states."""
    head, lines = status_text(c.runs, c.arm)
    out = ["## Status", "", f"**{head[0].upper()}{head[1:]}.**", ""]
    if lines:
        out += ["Runs not finished (their numbers may still change):", "",
                *(f"- {x}" for x in lines), ""]
    return out


def _year(created: str | None) -> str:
    return created[:4] if created and created[:4].isdigit() else "n.d."


def bibtex(c: CardInputs) -> str:
    """A generic BibTeX entry for the study (no paper is implied)."""
    key = re.sub(r"[^A-Za-z0-9]+", "_", f"ccpo_lab_{c.model.sweep}_{_year(c.created)}")
    return "\n".join([
        f"@misc{{{key},", f"  title = {{{{{c.model.sweep}}}: a ccpo-lab study "
        f"({len(c.model.arms)} arms), arm {c.arm}}},", f"  year = {{{_year(c.created)}}},",
        f"  note = {{Model card generated by ccpo-lab {c.version} from the sweep's runs"
        f"{'; created ' + c.created if c.created else ''}}},", "}"])


def section_weights(c: CardInputs) -> list[str]:
    """6b. The weights published with the card (only with ``--weights``)."""
    w = c.weights
    if w is None:
        return []
    what = ("the final checkpoint" if w.final else
            "the newest kept checkpoint (interim: no seed has finished)")
    load = ("Load it with `transformers` (`AutoModelForCausalLM.from_pretrained`, "
            "`revision=` a branch below)." if w.transformers else
            "It is ccpo-lab's small torch policy, **not a transformers model** (not loadable "
            "with `AutoModel`): `model.safetensors` holds its tensors and "
            "`policy_config.json` its class and shape; load them with "
            "`safetensors.torch.load_file` into "
            "`ccpo_lab.backends.local.policy.ActionScorer`.")
    lines = ["## Weights", "",
             f"The `main` revision holds {what} of seed {w.seed}, step {w.step} (run id "
             f"`{w.run_id[:12]}`), as {w.weights_format}. {load}", "",
             f"Chosen by rule: {w.rule}", "", f"Here: {w.why}.", "",
             "Per-step revisions (branches):", "",
             *(f"- `{name}`: step {step}, {note}" for name, step, note in w.revisions), ""]
    if w.skipped:
        lines += [f"{w.skipped} checkpoint(s) of the run could not be exported; "
                  "`manifest.json` lists them with why.", ""]
    return lines


def section_usage(c: CardInputs) -> list[str]:
    """7. Usage and citation."""
    where = ("the runs' `checkpoints/` folders (the local backend's policy, loaded by "
             "ccpo-lab, not by transformers)" if c.backend == "local"
             else "the runs' `checkpoints/` folders")
    if c.weights is not None:
        where = f"this repository (see Weights) and {where}"
    flag = " --weights" if c.weights is not None else ""
    return ["## Usage and citation", "",
            f"The checkpoints are in {where}. Every number above is one the report prints; "
            "to reproduce them and this card:", "", "```bash",
            f"ccpo-lab report {c.sweep_dir}",
            f"ccpo-lab card {c.sweep_dir} --arm {c.arm}{flag}",
            "```", "", "```bibtex", bibtex(c), "```", ""]


SECTIONS = (section_arm, section_result, section_arms, section_limits, section_setup,
            section_status, section_weights, section_usage)
"""The card's sections, in order."""


def render_card(c: CardInputs) -> str:
    """The whole card: front matter, title, the sections."""
    status, _ = status_text(c.runs, c.arm)
    body = [f"# {c.arm} ({c.model.sweep}, {status.split(':')[0]})", ""]
    for section in SECTIONS:
        body += section(c)
    return front_matter(c) + "\n" + "\n".join(body).rstrip("\n") + "\n"
