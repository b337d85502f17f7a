"""WebShop on the verl backend: where verl-agent reads its data, and what its environment needs.

verl-agent's ``make_envs`` reads WebShop's products from the WebShop package inside the
checkout (``agent_system/environments/env_package/webshop/webshop/data/``:
``items_shuffle_1000.json`` and ``items_ins_v2_1000.json`` with ``env.webshop.use_small``,
``items_shuffle.json`` and ``items_ins_v2.json`` without), WebShop's engine always reads
``items_human_ins.json`` beside them and searches the Lucene index
``search_engine/indexes`` (pyserini, which needs Java 11); its goal module loads spaCy's
``en_core_web_sm``. verl-agent's README builds all of it with the package's ``setup.sh``
in an environment of its own (Python <= 3.10). No key of verl-agent moves these paths, so
``env.webshop.data_dir``, when given, must be that same folder (a link to it is fine).

:func:`missing_data` is the file-system part (the sweep's check before anything is
written: :func:`check_data`); :data:`PROBE` is what ``ccpo-lab doctor`` asks the trainer's
interpreter (:func:`ccpo_lab.backends.verl.doctor.check_webshop`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccpo_lab.errors import UserError

PACKAGE = Path("agent_system/environments/env_package/webshop/webshop")
"""WebShop's package inside a verl-agent checkout (``setup.sh`` runs there)."""
INDEX = Path("search_engine/indexes")
"""The Lucene index the engine opens (``num_products`` None, as verl-agent passes it)."""
MODULES = ("web_agent_site", "pyserini", "spacy", "flask", "thefuzz", "rank_bm25",
           "cleantext", "bs4", "gym")
"""Modules a WebShop worker imports (``web_agent_site`` from the package folder)."""
SPACY_MODEL = "en_core_web_sm"
"""The spaCy model WebShop's goal module loads."""
SETUP = "cd <verl_agent_path>/" + str(PACKAGE) + " && ./setup.sh -d small"
"""How verl-agent's README prepares WebShop (in the trainer's environment)."""


def package_dir(checkout: str | Path) -> Path:
    """WebShop's package folder in ``checkout``."""
    return Path(checkout).expanduser() / PACKAGE


def data_files(use_small: bool) -> tuple[str, ...]:
    """The product files verl-agent's ``make_envs`` and WebShop's engine read."""
    small = ("items_shuffle_1000.json", "items_ins_v2_1000.json")
    full = ("items_shuffle.json", "items_ins_v2.json")
    return (*(small if use_small else full), "items_human_ins.json")


def missing_data(settings: Any, checkout: str | Path) -> list[tuple[str, str, Path]]:
    """(key, what, path) of each missing piece of WebShop's data: the product files (in
    ``env.webshop.data_dir`` when given, else the package's ``data/``), the search index,
    and a ``data_dir`` that is not the folder verl-agent reads."""
    pkg = package_dir(checkout)
    read = pkg / "data"
    given = Path(settings.data_dir).expanduser() if settings.data_dir else None
    folder = given or read
    out: list[tuple[str, str, Path]] = []
    for name in data_files(settings.use_small):
        if not (folder / name).is_file():
            key = "env.webshop.data_dir" if given else "backend.verl.verl_agent_path"
            out.append((key, f"WebShop's {name}", folder / name))
    if given is not None and given.is_dir() and read.resolve() != given.resolve():
        out.append(("env.webshop.data_dir", "the folder verl-agent reads WebShop's data "
                    f"from (link {given} there)", read))
    index = pkg / INDEX
    if not index.is_dir() or not any(index.iterdir()):
        out.append(("backend.verl.verl_agent_path", "WebShop's search index "
                    "(setup.sh's run_indexing.sh)", index))
    return out


def check_data(run: Any, source: str | None = None) -> None:
    """One-line :class:`UserError` naming the first missing piece of a WebShop run's data
    (the backend's ``check_sweep``, before anything is written)."""
    s = run.backend.verl
    for key, what, path in missing_data(run.env_settings, s.verl_agent_path):
        value = run.env_settings.data_dir if key == "env.webshop.data_dir" \
            else s.verl_agent_path
        raise UserError(f"{what} is missing at {path} (prepare WebShop: {SETUP}; "
                        "docs/env-webshop.md)", file=source, key=key, value=value)


PROBE = r"""
import importlib.util, json, os, shutil, subprocess, sys
pkg = sys.argv[1]
sys.path.append(pkg)
out = {"python": list(sys.version_info[:2]), "modules": {}, "spacy_model": False}
for m in sys.argv[2].split(","):
    try:
        out["modules"][m] = importlib.util.find_spec(m) is not None
    except Exception:
        out["modules"][m] = False
try:
    out["spacy_model"] = importlib.util.find_spec(sys.argv[3]) is not None
except Exception:
    pass
java = shutil.which("java")
if java is None and os.environ.get("JAVA_HOME"):
    cand = os.path.join(os.environ["JAVA_HOME"], "bin", "java")
    java = cand if os.path.exists(cand) else None
out["java"] = None
if java:
    r = subprocess.run([java, "-version"], capture_output=True, text=True)
    out["java"] = (r.stderr or r.stdout).strip().splitlines()[0] if r.returncode == 0 else None
print(json.dumps(out))
"""
"""Run by the trainer's interpreter: ``PROBE PACKAGE_DIR MODULES SPACY_MODEL``; prints
what it found as JSON (nothing imported, Java asked for its version)."""
