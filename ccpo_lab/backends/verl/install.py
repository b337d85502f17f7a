"""``ccpo-lab install-into PYTHON``: ccpo-lab into a trainer's environment, its stack kept.

A verl-agent environment has its own torch, vLLM, transformers, flash-attn and (vendored)
verl. ccpo-lab's base install needs none of them, but a resolver may still upgrade one to
satisfy another requirement. The command:

1. reads the versions of the protected packages (:data:`PROTECTED`, plus ``--keep``) in
   the target interpreter;
2. asks that interpreter's pip for the plan (``pip install --dry-run --report``) with each
   installed protected package pinned to its version by a constraints file;
3. refuses, changing nothing (exit 2), when pip cannot keep them or would install any of
   them, naming the package, both versions and the interpreter;
4. installs, then runs ``pip check`` and prints what it says.

Without network access pip answers from its cache, or fails (exit 1, pip's last line).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.errors import EnvironmentFailure, UserError

PROTECTED: tuple[str, ...] = ("torch", "vllm", "transformers", "flash-attn", "verl")
"""The trainer's own packages: never installed, upgraded or removed by this command."""

_VERSIONS = """
import importlib.metadata as md, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        out[name] = md.version(name)
    except md.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Plan:
    """What pip would do: ``(name, version)`` of each distribution it would install."""

    installs: tuple[tuple[str, str], ...]
    kept: dict[str, str | None]
    """The protected packages' versions in the target (None: not installed)."""


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _run(cmd: Sequence[str], what: str, timeout: float = 3600
         ) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              check=False)
    except FileNotFoundError:
        raise UserError("no such interpreter", key="PYTHON", value=cmd[0]) from None
    except subprocess.TimeoutExpired:
        raise EnvironmentFailure(f"{what} did not finish in {timeout:.0f} s") from None


def protected_versions(python: str, keep: Sequence[str] = ()) -> dict[str, str | None]:
    """``{name: version or None}`` of the protected packages in ``python``."""
    names = [*PROTECTED, *keep]
    r = _run([python, "-c", _VERSIONS, *names], "reading the installed versions", 120)
    if r.returncode != 0:
        raise UserError("cannot run this interpreter: " + _last(r.stderr), key="PYTHON",
                        value=python)
    return dict(json.loads(r.stdout))


def _last(text: str) -> str:
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    return lines[-1] if lines else "(no output)"


def _reason(stderr: str) -> str:
    """pip's own reason in one line: its first ``ERROR:`` line that says what (not the
    ``ResolutionImpossible: for help visit ...`` pointer), else its last line."""
    for line in stderr.splitlines():
        text = line.strip()
        if text.startswith("ERROR:") and "for help visit" not in text:
            return text.removeprefix("ERROR:").strip()
    return _last(stderr)


def constraints_text(kept: dict[str, str | None]) -> str:
    """A pip constraints file pinning each installed protected package."""
    return "".join(f"{name}=={v}\n" for name, v in kept.items() if v)


def plan(python: str, spec: str, kept: dict[str, str | None], constraints: Path) -> Plan:
    """pip's plan for ``spec`` in ``python`` under ``constraints`` (nothing installed).

    Raises :class:`UserError` when pip cannot keep the protected versions (its reason in
    one line), or when the plan installs a protected package.
    """
    r = _run([python, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
              "-c", str(constraints), spec], "pip's dry run")
    if r.returncode != 0:
        reason = _reason(r.stderr)
        pinned = ", ".join(f"{n} {v}" for n, v in kept.items() if v) or "nothing installed"
        raise UserError(f"pip cannot install {spec} keeping the trainer's packages "
                        f"({pinned}): {reason}; nothing was changed", key="PYTHON",
                        value=python)
    report = json.loads(r.stdout)
    installs = tuple((item["metadata"]["name"], item["metadata"]["version"])
                     for item in report.get("install", []))
    wanted = {canonical(n) for n in kept}
    for name, version in installs:
        if canonical(name) in wanted:
            have = kept.get(name) or next((v for n, v in kept.items()
                                           if canonical(n) == canonical(name)), None)
            raise UserError(f"the install would put {name} {version} in place of "
                            f"{have or 'nothing (not installed)'}: a trainer's package is "
                            "never changed; nothing was changed", key="PYTHON", value=python)
    return Plan(installs, kept)


def install_into(python: str, spec: str, keep: Sequence[str] = (),
                 dry_run: bool = False) -> tuple[Plan, str]:
    """Install ``spec`` into ``python`` keeping its protected packages; returns the plan
    and ``pip check``'s output (empty for a dry run)."""
    kept = protected_versions(python, keep)
    with tempfile.TemporaryDirectory(prefix="ccpo-lab-install-") as tmp:
        constraints = Path(tmp) / "keep.txt"
        constraints.write_text(constraints_text(kept), encoding="utf-8")
        p = plan(python, spec, kept, constraints)
        if dry_run:
            return p, ""
        r = _run([python, "-m", "pip", "install", "--quiet", "-c", str(constraints), spec],
                 "pip install")
        if r.returncode != 0:
            raise EnvironmentFailure(f"pip install failed in {python}: {_last(r.stderr)}")
    after = protected_versions(python, keep)
    if after != kept:
        changed = [f"{n} {kept[n]} -> {after[n]}" for n in kept if after.get(n) != kept[n]]
        raise EnvironmentFailure("a trainer's package changed during the install: "
                                 + ", ".join(changed))
    check = _run([python, "-m", "pip", "check"], "pip check", 300)
    return p, (check.stdout + check.stderr).strip()
