"""Nothing the CLI has goes undocumented, and no link of the documentation is dead.

The README is a way in and ``docs/`` holds the rest; these tests hold the two together:

* every command of ``ccpo-lab`` (walked from the Typer application that
  ``ccpo_lab/cli/main.py`` builds, so a new command or option is checked the day it is
  added) is named in ``README.md`` or ``docs/*.md``, and every option of it appears in a
  section (the text under one heading) that names the command;
* every file and folder the CLI writes into a sweep or run directory (the names taken from
  the code that owns the layout: :class:`~ccpo_lab.runs.layout.RunDir`,
  :class:`~ccpo_lab.runs.layout.SweepDir` and the modules' name constants) is named there;
* every relative link in the documentation leads to an existing file, and every
  ``#anchor`` to a heading of it.

The checkers are functions of their inputs, so a planted omission shows that they fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
"""Where a command, option or file must be documented."""
LINKED_FILES = (*DOC_FILES, REPO / "benchmarks" / "HISTORY.md",
                REPO / "ccpo_lab" / "backends" / "verl" / "README.md")
"""Whose relative links must resolve."""


@dataclass(frozen=True)
class Command:
    """One command of the CLI: its full name and its options."""

    name: str
    """``ccpo-lab arms show``."""
    options: tuple[str, ...]
    """Every option string (``--dry-run``; both halves of ``--sync/--no-sync``)."""


def cli_commands() -> list[Command]:
    """Every command and group of the ``ccpo-lab`` application, root included, with its
    options (hidden ones too: a user may meet them in a job's command line)."""
    import typer.main

    from ccpo_lab.cli.main import app

    out: list[Command] = []

    def walk(cmd: Any, name: str) -> None:
        opts = tuple(o for p in cmd.params if p.param_type_name == "option"
                     for o in (*p.opts, *p.secondary_opts) if o.startswith("--"))
        out.append(Command(name, opts))
        for sub_name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, f"{name} {sub_name}")

    walk(typer.main.get_command(app), "ccpo-lab")
    return out


def sections(text: str) -> list[str]:
    """``text`` cut at its Markdown headings (a ``#`` line outside a code block)."""
    out: list[list[str]] = [[]]
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.append([])
        out[-1].append(line)
    return ["\n".join(s) for s in out]


def _word(s: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(s)}(?![\w-])")


def undocumented_commands(commands: Iterable[Command], texts: Sequence[str]) -> list[str]:
    """What of ``commands`` the documents ``texts`` do not mention: a command nowhere, or
    an option in no section that names its command."""
    parts = [s for t in texts for s in sections(t)]
    problems = []
    for c in commands:
        named = _word(c.name)
        where = [s for s in parts if named.search(s)]
        if not where:
            problems.append(f"{c.name}: not mentioned")
            continue
        problems += [f"{c.name}: {o} is in no section that names the command"
                     for o in c.options if not any(_word(o).search(s) for s in where)]
    return problems


def layout_names() -> list[str]:
    """The names of what the CLI writes into a sweep or run directory, from the code that
    owns them; a folder ends with ``/``."""
    from ccpo_lab.report import directory as report_dir
    from ccpo_lab.runs import evals, family, wandb_run
    from ccpo_lab.runs.layout import RunDir, SweepDir
    from ccpo_lab.tracking import live, mlflow_sync, store, wandb_sync

    sweep = Path("/results/sweep")
    names: list[str] = []
    for owner in (SweepDir(sweep), RunDir(sweep / "arm" / "seed-0")):
        for attr, value in vars(type(owner)).items():
            path = getattr(owner, attr) if isinstance(value, property) else None
            if isinstance(path, Path) and path.parent == owner.path:
                names.append(path.name)
    names += [evals.EVALS_DIR, evals.JOBS_DIR, evals.REQUEST, evals.PARTIAL,
              mlflow_sync.STORE, mlflow_sync.ARTIFACTS_DIR,
              store.lock_path(f"sqlite:///{sweep / mlflow_sync.STORE}", sweep).name,
              wandb_sync.REPORT_DIR, wandb_run.OFFLINE_DIR, live.LOG_NAME,
              report_dir.MANIFEST, family.FAMILY]
    return [n if "." in n else f"{n}/" for n in dict.fromkeys(names)]


def undocumented_names(names: Iterable[str], texts: Sequence[str]) -> list[str]:
    """The names of ``names`` that no document of ``texts`` mentions."""
    text = "\n".join(texts)
    return [n for n in names
            if not re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", text)]


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.lstrip("#").strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of ``text``'s headings (repeats numbered as GitHub does)."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#+ ", line):
            continue
        a = anchor(line)
        out.add(f"{a}-{seen[a]}" if a in seen else a)
        seen[a] = seen.get(a, 0) + 1
    return out


LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def broken_links(path: Path, text: str) -> list[str]:
    """The relative links of ``text`` (a file at ``path``) that lead nowhere: no such file,
    or no heading of that anchor in it. Code blocks and inline code are not read."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    problems = []
    for target in LINK_RE.findall(prose):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file_part, _, frag = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{path.name}: {target}: no such file")
        elif frag and dest.suffix == ".md" and frag not in anchors(
                dest.read_text(encoding="utf-8")):
            problems.append(f"{path.name}: {target}: no such heading")
    return problems


def _texts() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in DOC_FILES]


def test_every_command_and_option_is_documented() -> None:
    commands = cli_commands()
    assert len(commands) > 10 and any(c.name == "ccpo-lab report" for c in commands)
    assert undocumented_commands(commands, _texts()) == []


def test_every_file_of_the_layout_is_documented() -> None:
    names = layout_names()
    assert {"sweep.json", "run.json", "metrics.jsonl", "checkpoints/"} <= set(names)
    assert undocumented_names(names, _texts()) == []


def test_every_relative_link_resolves() -> None:
    problems = [p for f in LINKED_FILES
                for p in broken_links(f, f.read_text(encoding="utf-8"))]
    assert problems == []


def test_the_checkers_report_what_is_missing(tmp_path: Path) -> None:
    texts = _texts()
    planted = Command("ccpo-lab sweep", ("--dry-run", "--planted-option"))
    assert undocumented_commands([planted], texts) == [
        "ccpo-lab sweep: --planted-option is in no section that names the command"]
    assert undocumented_commands([Command("ccpo-lab planted", ())], texts) == [
        "ccpo-lab planted: not mentioned"]
    # an option named only under another command's heading does not count
    assert undocumented_commands([Command("ccpo-lab x", ("--y",))],
                                 ["# ccpo-lab x\n\nno options\n\n# other\n\n--y\n"]) == [
        "ccpo-lab x: --y is in no section that names the command"]
    assert undocumented_names(["run.json", "planted.json", "planted/"], texts) == [
        "planted.json", "planted/"]
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading\n", encoding="utf-8")
    text = ("[ok](there.md#a-heading) [gone](gone.md) [bad](there.md#nope) "
            "[web](https://example.org) `[code](not-read.md)`\n")
    assert broken_links(page, text) == ["page.md: gone.md: no such file",
                                        "page.md: there.md#nope: no such heading"]
