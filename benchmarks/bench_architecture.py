"""The structure above the files, measured (issue 25): package cycles, function-level
imports of ccpo-lab's own modules, what loading a sweep imports, ``--help`` time and how far
into the README a reader meets the lifecycle.

    .venv/bin/python benchmarks/bench_architecture.py [--json]

Packages are ``ccpo_lab.<name>``; a top-level module (``errors.py``, ``placement.py``) is
its own package. The import graph is the one ``tests/test_architecture.py`` reads (every
import statement, at any depth, except under ``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.test_architecture import (  # noqa: E402
    PACKAGE,
    _import_time_imports,
    _imports,
    _resolve,
    cycles,
    modules,
)


def package_of(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def edges(top_level_only: bool) -> tuple[dict[str, set[str]], int]:
    """``package -> packages it imports`` and the count of import statements of ccpo-lab's
    own modules found inside functions."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    inside = 0
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_pkg = path.name == "__init__.py"
        top = {id(n) for n in _import_time_imports(tree)}
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [_resolve(a.name, node, mod, is_pkg) for a in node.names]
            else:
                targets = [_resolve(node.module or "", node, mod, is_pkg)]
            own = [t for t in targets if t.startswith("ccpo_lab")]
            if not own:
                continue
            if id(node) not in top:
                inside += 1
                if top_level_only:
                    continue
            for t in own:
                a, b = package_of(mod), package_of(t)
                if a != b and b != "ccpo_lab":
                    graph.setdefault(a, set()).add(b)
    for p in {package_of(m) for m in mods}:
        graph.setdefault(p, set())
    return graph, inside


def best_of(argv: list[str], n: int = 5) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=REPO, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return min(times)


def loaded_by(statement: str) -> list[str]:
    code = (f"import sys; {statement}; "
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('ccpo_lab'))))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                       text=True, check=True)
    return r.stdout.split()


def readme_figures() -> dict[str, int]:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()

    def first(pattern: str) -> int:
        rx = re.compile(pattern)
        return next((i + 1 for i, line in enumerate(lines) if rx.search(line)), -1)

    return {"lines": len(lines),
            "first_status_line": first(r"ccpo-lab status"),
            "first_verify_line": first(r"ccpo-lab verify"),
            "first_report_line": first(r"ccpo-lab report"),
            "first_package_map_line": first(r"ccpo_lab/(runs|stats|launch)/ +")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    full, inside = edges(top_level_only=False)
    top, _ = edges(top_level_only=True)
    sweep_mods = loaded_by("import ccpo_lab.config.sweep")
    doc = {
        "modules": len(modules()),
        "lines": sum(len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")),
        "package_cycles_top_level": cycles(top),
        "package_cycles_all_imports": cycles(full),
        "function_level_imports_of_ccpo_lab": inside,
        "config_sweep_loads": [m for m in sweep_mods
                               if m.startswith(("ccpo_lab.launch", "ccpo_lab.runs",
                                                "ccpo_lab.backends", "ccpo_lab.report"))],
        "import_config_sweep_s": round(best_of(
            [sys.executable, "-c", "import ccpo_lab.config.sweep"]), 3),
        "help_s": round(best_of([sys.executable, "-m", "ccpo_lab.cli.main", "--help"]), 3),
        "python_startup_s": round(best_of([sys.executable, "-c", "pass"]), 3),
        "readme": readme_figures(),
    }
    if a.json:
        print(json.dumps(doc, indent=1))
        return 0
    for k, v in doc.items():
        print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
