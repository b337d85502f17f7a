"""Reference policies in a sweep directory: released checkpoints evaluated beside the arms.

``ccpo-lab evaluate --reference`` scores a policy that no run of the sweep trained (the
protocol's base model, a Hugging Face model by id and revision, a local Hugging Face
folder) on the sweep's common draw. Each reference has one directory per seed of the
sweep, ``<sweep_dir>/_ref-<label>-<id8>/seed-<k>/``:

- ``config.yaml``: the configuration of that seed's run (the protocol, the games, the
  backend's settings; the draw and episode ``k``'s sampling seeds are the seed's), so the
  reference plays exactly the episodes that seed's checkpoints play;
- ``reference.json``: what the policy is (:class:`Reference`);
- ``evals/``: its evaluations, keyed and written like a run's
  (:mod:`ccpo_lab.runs.evals`), and their jobs.

The leading ``_`` keeps these directories out of the sweep's runs
(:meth:`~ccpo_lab.runs.layout.SweepDir.scan` skips them), and ``<id8>`` (a digest of the
policy's identity) keeps two policies with one label apart: a reference is evaluated once
per identity, never redone.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ccpo_lab.runs.layout import RunDir

PREFIX = "_ref-"
"""First characters of a reference's directory under the sweep."""
FILE = "reference.json"
"""What the reference is, in each of its seed directories."""
KINDS = ("base", "hf")
"""``base``: the protocol's base model (the verl backend's ``model_path``; the CPU
backend's policy before its first update, its warm start included); ``hf``: a Hugging
Face model (a local folder or a Hub id at a revision)."""


@dataclass(frozen=True)
class Reference:
    """One reference policy, resolved."""

    label: str
    """Its name in tables (``base``, a folder's name, a Hub id with ``@revision``)."""
    kind: str
    """One of :data:`KINDS`."""
    source: str
    """What the command line said."""
    path: str | None = None
    """The local folder holding its weights (``hf``): a Hub id's snapshot in the cache."""
    revision: str | None = None
    """The Hub revision asked for (``hf`` from the Hub)."""
    commit: str | None = None
    """The Hub commit it resolved to."""
    identity: str = ""
    """Digest of what the policy is (``base``; the commit; the folder's files)."""

    @property
    def dir_name(self) -> str:
        """``_ref-<label>-<id8>``: the label without its ``@revision`` (the identity tells
        revisions apart; ``@main`` and no revision are one directory), characters outside
        ``[A-Za-z0-9._-]`` replaced."""
        name = self.label.partition("@")[0]
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:48] or "ref"
        return f"{PREFIX}{slug}-{self.identity[:8]}"

    def to_json(self) -> dict[str, object]:
        """The ``reference.json`` document."""
        return asdict(self)


def read_reference(rd: RunDir) -> Reference | None:
    """The reference ``rd`` holds, or None when it is a run's directory; ``ValueError``
    for a ``reference.json`` that is not one."""
    path = rd.path / FILE
    if not path.is_file():
        return None
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
        raise ValueError(f"{path}: not a reference description")
    fields = Reference.__dataclass_fields__
    return Reference(**{k: v for k, v in doc.items() if k in fields})


def is_reference_dir(rd: RunDir) -> bool:
    """Whether ``rd`` is (or will be) a reference's seed directory, by its place."""
    return rd.path.parent.name.startswith(PREFIX)


def reference_dirs(sweep_dir: str | Path) -> list[RunDir]:
    """Every ``_ref-*/seed-<k>`` directory of the sweep holding a reference, sorted."""
    root = Path(sweep_dir)
    out = [RunDir(d) for d in sorted(root.glob(f"{PREFIX}*/seed-*"))
           if (d / FILE).is_file() and RunDir(d).seed is not None]
    return sorted(out, key=lambda rd: (rd.path.parent.name, rd.seed or 0))
