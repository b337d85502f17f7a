"""``ccpo-lab evaluate --reference``: policies no run trained, on the sweep's common draw.

A reference is one of (:func:`resolve`):

- ``base``: the protocol's base model (the verl backend: ``backend.verl.model_path``; the
  CPU backend: the policy each seed starts from, before its first update);
- a local Hugging Face folder (``config.json`` and weights);
- a Hugging Face Hub id, ``ORG/NAME`` or ``ORG/NAME@REVISION``, read from the local cache
  first (with ``HF_HUB_OFFLINE=1`` only from there) and downloaded otherwise.

It is evaluated once per seed of the sweep, with that seed's configuration
(:mod:`ccpo_lab.runs.references`): the same games in the same order, the same sampling
seeds per (seed, game, repeat), the same splits and temperature as the seed's
checkpoints, through the backend's own evaluation path. The report compares each arm with
it game by game (:mod:`ccpo_lab.stats.crossed`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.atomic import atomic_write_text
from ccpo_lab.config.schema import RunConfig
from ccpo_lab.errors import UserError
from ccpo_lab.evaluation.spec import canonical
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.references import FILE, Reference, read_reference

SMALL_FILE = 64 << 20
"""Files up to this size are hashed whole into a local folder's identity; larger ones by
their size and first and last MiB (a 7B model's shards would take a minute)."""


def _folder_identity(path: Path) -> str:
    """A digest of a Hugging Face folder's files (names, sizes, contents as above)."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.parts):
        size = f.stat().st_size
        h.update(f"{f.relative_to(path)}\0{size}\0".encode())
        with f.open("rb") as fh:
            if size <= SMALL_FILE:
                h.update(fh.read())
            else:
                h.update(fh.read(1 << 20))
                fh.seek(-(1 << 20), os.SEEK_END)
                h.update(fh.read())
    return h.hexdigest()


def _local_folder(value: str, path: Path) -> Reference:
    if not (path / "config.json").is_file():
        raise UserError("not a Hugging Face model folder (no config.json)", key="--reference",
                        value=value, file=path)
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise UserError("the folder holds no weights (*.safetensors or *.bin)",
                        key="--reference", value=value, file=path)
    resolved = path.resolve()
    return Reference(label=resolved.name, kind="hf", source=value, path=str(resolved),
                     identity=_folder_identity(resolved))


def _hub(value: str) -> Reference:
    """A Hub id at a revision, from the cache (and the network unless offline)."""
    repo, _, revision = value.partition("@")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:
        raise UserError("reading a Hub model needs huggingface_hub (pip install "
                        "'ccpo-lab[hub]')", key="--reference", value=value) from None
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    try:
        path = Path(snapshot_download(repo, revision=revision or None, cache_dir=_cache_dir(),
                                      local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError):
        if offline:
            raise UserError(
                f"not in the offline Hugging Face cache ({_cache_dir()}, HF_HUB_OFFLINE=1)"
                + (f": no snapshot of revision {revision!r}" if revision else ""),
                key="--reference", value=value) from None
        try:
            path = Path(snapshot_download(repo, revision=revision or None,
                                          cache_dir=_cache_dir()))
        except RevisionNotFoundError:
            raise UserError("no such revision on the Hub", key="--reference",
                            value=value) from None
        except RepositoryNotFoundError:
            raise UserError("no such model on the Hub (or it needs a token)",
                            key="--reference", value=value) from None
        except (OSError, ValueError) as e:
            raise UserError(f"cannot download it: {type(e).__name__}: "
                            f"{str(e).splitlines()[0] if str(e) else ''}",
                            key="--reference", value=value) from None
    if not (path / "config.json").is_file():
        raise UserError("the snapshot has no config.json (not a model?)", key="--reference",
                        value=value, file=path)
    commit = path.name
    return Reference(label=value, kind="hf", source=value, path=str(path),
                     revision=revision or "main", commit=commit,
                     identity=hashlib.sha256(f"hub\0{repo}\0{commit}".encode()).hexdigest())


def _cache_dir() -> str:
    """The Hub cache as the environment names it now (``HF_HUB_CACHE``, ``HF_HOME/hub``;
    huggingface_hub reads them once, when first imported)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def resolve(value: str) -> Reference:
    """The reference ``value`` names (``base``, a folder, a Hub id); :class:`UserError`
    naming ``--reference`` and the value when it cannot be found."""
    text = value.strip()
    if not text:
        raise UserError("empty", key="--reference", value=value,
                        valid="base, a Hugging Face folder, or ORG/NAME[@REVISION]")
    if text == "base":
        return Reference(label="base", kind="base", source=text,
                         identity=hashlib.sha256(b"base").hexdigest())
    path = Path(text).expanduser()
    if path.is_dir():
        return _local_folder(value, path)
    if path.exists() or text.startswith((".", "/", "~")) or text.count("/") > 1:
        raise UserError("no such folder (a reference is base, a Hugging Face folder, or "
                        "ORG/NAME[@REVISION])", key="--reference", value=value)
    return _hub(text)


@dataclass(frozen=True)
class ReferenceRun:
    """One reference on one seed: where it is evaluated and the run it copies."""

    reference: Reference
    """The policy."""
    run: RunConfig
    """The seed's configuration (its first run's)."""
    source: RunDir
    """That run's directory."""
    rd: RunDir
    """``<sweep_dir>/_ref-<label>-<id8>/seed-<k>``."""


def reference_runs(sweep_dir: Path, refs: Sequence[Reference],
                   runs: Sequence[tuple[RunConfig, RunDir]]) -> list[ReferenceRun]:
    """Per reference, one directory per seed of ``runs``, with the configuration of the
    seed's first run in ``runs``' order (nothing written)."""
    from ccpo_lab.runs.layout import run_dir_name

    first: dict[int, tuple[RunConfig, RunDir]] = {}
    for run, rd in runs:
        first.setdefault(run.seed, (run, rd))
    return [ReferenceRun(ref, run, rd, RunDir(sweep_dir / ref.dir_name / run_dir_name(seed)))
            for ref in refs for seed, (run, rd) in sorted(first.items())]


def check_reference_dir(r: ReferenceRun) -> None:
    """:class:`UserError` when ``r``'s directory holds another policy or configuration."""
    if not (r.rd.path / FILE).is_file():
        return
    try:
        have = read_reference(r.rd)
    except (OSError, ValueError) as e:
        raise UserError(f"unreadable ({e}): move the folder away", file=r.rd.path / FILE
                        ) from None
    if have is None or have.identity != r.reference.identity:
        raise UserError("this reference folder holds another policy (move it away to "
                        "evaluate this one)", file=r.rd.path / FILE, key="identity",
                        value=have.identity[:12] if have else None,
                        valid=[r.reference.identity[:12]])
    if r.rd.config_yaml.read_bytes() != r.source.config_yaml.read_bytes():
        raise UserError("this reference folder was evaluated with another configuration of "
                        "the seed (its run was relaunched?): move it away",
                        file=r.rd.config_yaml)


def write_reference_dir(r: ReferenceRun) -> None:
    """Create ``r``'s directory unless it exists: ``config.yaml`` (the seed's run's),
    ``run.json`` (its place, the run it copies, the reference: what ``status`` reads) and
    ``reference.json`` (last: the directory is a reference once it exists)."""
    check_reference_dir(r)
    if (r.rd.path / FILE).is_file():
        return
    r.rd.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(r.rd.config_yaml, r.source.config_yaml.read_text(encoding="utf-8"))
    atomic_write_text(r.rd.run_json, canonical(
        {"run_id": r.run.run_id, "sweep": r.run.sweep, "arm": r.rd.arm, "seed": r.run.seed,
         "copies": r.run.arm, "reference": r.reference.to_json()}) + "\n")
    atomic_write_text(r.rd.path / FILE, canonical(r.reference.to_json()) + "\n")
