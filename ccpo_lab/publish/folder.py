"""The upload-ready folder: the card, the chosen checkpoint's weights, per-step revisions
and a manifest, assembled beside its destination and renamed into place.

Layout (``DIR``, the repository's ``main`` revision at its root)::

    DIR/README.md                the model card
    DIR/<weights>                the main revision's weights (:mod:`.export`)
    DIR/revisions/step_N/...     every other kept checkpoint's weights (revision step_N)
    DIR/manifest.json            what is where (:func:`manifest`)

The main checkpoint's own step is a revision too (``step_T``, folder ``.``: the same files
as ``main``), as published per-step revisions include the last one. Everything is written
into a hidden folder beside ``DIR`` and renamed into place once complete: an error leaves
``DIR`` as it was. ``DIR`` may be new, empty, hold only a card (``README.md``) or an
earlier folder of this kind (its manifest says so); anything else is refused.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.atomic import atomic_write_text, temp_dir
from ccpo_lab.errors import UserError
from ccpo_lab.publish.choose import RULE, Choice, revision_name
from ccpo_lab.publish.export import export, weights_format
from ccpo_lab.publish.sources import Source
from ccpo_lab.report.card import PublishedWeights

MANIFEST = "manifest.json"
"""The manifest's file name."""
FORMAT = "ccpo-lab publish folder"
"""The manifest's ``format`` (what marks a folder this module may replace)."""
REVISIONS = "revisions"
"""Folder of the per-step revisions."""
ROLE_NOTE = {
    "final": "the run's final checkpoint",
    "kept": "a checkpoint the run kept",
    "best": "kept because it had the best training-time held-out evaluation: selected on "
            "the held-out games, its score there is biased upward (see the card)",
}


@dataclass(frozen=True)
class Revision:
    """One published revision."""

    name: str
    """``step_N``."""
    step: int
    """Training step."""
    folder: str
    """Its files' folder in ``DIR`` (``.``: the main revision's)."""
    role: str
    """``final``, ``kept`` or ``best`` (:data:`ROLE_NOTE`)."""


def revisions(choice: Choice) -> tuple[Revision, ...]:
    """Every revision of ``choice``, by step (the main checkpoint's folder is ``.``)."""
    return tuple(Revision(revision_name(s.step), s.step,
                          "." if s == choice.main else f"{REVISIONS}/{revision_name(s.step)}",
                          s.role) for s in choice.revisions)


def check_destination(out: Path) -> None:
    """UserError when ``out`` holds anything but a card or an earlier folder of this kind."""
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError("is a file, expected a directory", file=out, key="--out")
    names = {p.name for p in out.iterdir()}
    if names <= {"README.md"}:
        return
    try:
        earlier = json.loads((out / MANIFEST).read_text(encoding="utf-8")).get("format")
    except (OSError, ValueError, AttributeError):
        earlier = None
    if earlier != FORMAT:
        raise UserError("holds other files (not a card folder written by ccpo-lab): "
                        "choose a new or empty directory", file=out, key="--out")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def file_list(root: Path) -> list[dict[str, Any]]:
    """``{"path", "size", "sha256"}`` of every file under ``root`` but the manifest."""
    return [{"path": p.relative_to(root).as_posix(), "size": p.stat().st_size,
             "sha256": _sha256(p)}
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != MANIFEST]


def manifest(choice: Choice, run: dict[str, Any], sweep: str, root: Path,
             files_of: dict[str, list[str]]) -> dict[str, Any]:
    """The manifest of the folder at ``root`` (``files_of``: revision -> its files)."""
    import ccpo_lab

    main = revision_name(choice.main.step)
    return {
        "format": FORMAT, "version": 1, "ccpo_lab_version": ccpo_lab.__version__,
        "sweep": sweep, "arm": choice.arm, "seed": choice.seed,
        "run_id": run.get("run_id"), "run_dir": str(choice.run_dir),
        "backend": choice.backend, "weights_format": weights_format(choice.main.kind),
        "loadable_with_transformers": choice.main.kind == "hf-dir",
        "main": {"revision": "main", "same_as": main, "step": choice.main.step,
                 "final": choice.final, "source": str(choice.main.path)},
        "rule": RULE, "why": choice.why,
        "revisions": [{"name": r.name, "step": r.step, "folder": r.folder, "role": r.role,
                       "note": ROLE_NOTE[r.role], "files": files_of[r.name]}
                      for r in revisions(choice)],
        "skipped": list(choice.skipped),
        "files": file_list(root),
    }


def _fill(stage: Path, card: str, choice: Choice, config: dict[str, Any]) -> dict[str, list]:
    """Card and weights into ``stage``; revision -> the files written for it."""
    atomic_write_text(stage / "README.md", card)
    out: dict[str, list[str]] = {}
    by_step: dict[int, Source] = {s.step: s for s in choice.revisions}
    for r in revisions(choice):
        names = export(by_step[r.step], stage / r.folder, config)
        out[r.name] = [n if r.folder == "." else f"{r.folder}/{n}" for n in names]
    return out


def _install(stage: Path, out: Path) -> None:
    """Rename ``stage`` to ``out`` (an earlier ``out`` moved aside, removed after)."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{stage.name[-8:]}"
        out.rename(old)
    try:
        stage.rename(out)
    except BaseException:
        if old is not None:
            old.rename(out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_folder(out: Path, card: str, choice: Choice, run_config: dict[str, Any],
                 run: dict[str, Any], sweep: str) -> dict[str, Any]:
    """Write the folder at ``out`` (see the module docstring); return its manifest.

    Raises:
        UserError: ``out`` holds other files (nothing is written then).
    """
    check_destination(out)
    created = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        stage = temp_dir(out.parent, f".{out.name}.tmp-")
        try:
            files_of = _fill(stage, card, choice, run_config)
            doc = manifest(choice, run, sweep, stage, files_of)
            atomic_write_text(stage / MANIFEST, json.dumps(doc, indent=2) + "\n")
            _install(stage, out)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    except BaseException:
        for d in created:  # the folders made for it, deepest first
            try:
                d.rmdir()
            except OSError:
                break
        raise
    return doc


def card_weights(choice: Choice, run: dict[str, Any]) -> PublishedWeights:
    """What the card says about the folder's weights."""
    return PublishedWeights(
        seed=choice.seed, step=choice.main.step, final=choice.final,
        run_id=str(run.get("run_id") or "unknown"), rule=RULE, why=choice.why,
        weights_format=weights_format(choice.main.kind),
        transformers=choice.main.kind == "hf-dir",
        revisions=tuple((r.name, r.step, ROLE_NOTE[r.role] + (" (= main)" if r.folder == "."
                                                              else ""))
                        for r in revisions(choice)),
        skipped=len(choice.skipped))
