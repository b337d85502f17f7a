"""What a verl-agent checkout offers: its commit and the optional trainer settings it knows.

Read from files only (no import of the checkout), so ``describe`` and ``doctor`` stay cheap
and work where the checkout lacks its dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REFERENCE_COMMIT = "796ed310287fa605c9292a0fce07a86d79fde05e"
"""The verl-agent commit the hooks were written against (langfengQ/verl-agent, 2026-02-27)."""

_CONFIG_FILES = ("verl/trainer/config/ppo_trainer.yaml",
                 "verl/trainer/config/_generated_ppo_trainer.yaml")


@dataclass(frozen=True)
class CheckoutInfo:
    """Facts about one verl-agent checkout."""

    path: Path
    """The checkout directory."""
    exists: bool
    """Whether it holds ``verl/trainer/main_ppo.py``."""
    commit: str | None
    """``HEAD`` commit (hex) when the checkout is a git work tree, else the commit its
    :data:`EXTRACTED_MARKER` names; None for a plain tree (e.g. a copy without ``.git``)."""
    has_full_determinism: bool
    """Whether its rollout config knows ``full_determinism`` (newer verl)."""
    has_rollout_seed: bool
    """Whether its rollout config declares ``seed`` (older ones read it with a default)."""


def _git_head(path: Path) -> str | None:
    git = path / ".git"
    if git.is_file():  # a worktree: "gitdir: <dir>"
        text = git.read_text(encoding="utf-8").strip()
        if text.startswith("gitdir:"):
            git = (path / text.split(":", 1)[1].strip()).resolve()
    head = git / "HEAD"
    if not head.is_file():
        return None
    ref = head.read_text(encoding="utf-8").strip()
    if not ref.startswith("ref:"):
        return ref or None
    name = ref.split(":", 1)[1].strip()
    for base in (git, _common_dir(git)):
        f = base / name
        if f.is_file():
            return f.read_text(encoding="utf-8").strip()
        packed = base / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == name:
                    return parts[0]
    return None


def _common_dir(git: Path) -> Path:
    common = git / "commondir"
    if common.is_file():
        return (git / common.read_text(encoding="utf-8").strip()).resolve()
    return git


EXTRACTED_MARKER = ".extracted-ok"
"""File holding the commit of a tree extracted from git (``scripts/verl-agent-contract.sh
--from-git`` writes it)."""


def _extracted_commit(path: Path) -> str | None:
    """The commit named by an extracted tree's marker (None: no marker)."""
    try:
        text = (path / EXTRACTED_MARKER).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) == 40 and all(c in "0123456789abcdef" for c in text) else None


def inspect_checkout(path: str | Path) -> CheckoutInfo:
    """Inspect the checkout at ``path`` (a missing one gives ``exists=False``)."""
    p = Path(path).expanduser()
    exists = (p / "verl" / "trainer" / "main_ppo.py").is_file()
    text = ""
    for rel in _CONFIG_FILES:
        f = p / rel
        if f.is_file():
            text += f.read_text(encoding="utf-8", errors="replace")
    rollout = _section(text, "rollout")
    return CheckoutInfo(
        path=p,
        exists=exists,
        commit=(_git_head(p) or _extracted_commit(p)) if exists else None,
        has_full_determinism="full_determinism:" in rollout,
        has_rollout_seed=any(line.strip().startswith("seed:") for line in rollout.splitlines()),
    )


def _section(yaml_text: str, key: str) -> str:
    """The lines of every ``<key>:`` block of a YAML text (indentation-based, no parsing)."""
    out: list[str] = []
    lines = yaml_text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith(f"{key}:") and stripped.rstrip() == f"{key}:":
            indent = len(line) - len(stripped)
            i += 1
            while i < len(lines):
                nxt = lines[i]
                body = nxt.lstrip()
                if body and not body.startswith("#") and len(nxt) - len(body) <= indent:
                    break
                out.append(nxt)
                i += 1
            continue
        i += 1
    return "\n".join(out)
