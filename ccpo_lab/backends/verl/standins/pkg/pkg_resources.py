"""Stand-in for ``pkg_resources`` (setuptools 81+ no longer ships it).

``gym_sokoban`` (verl-agent's Sokoban rooms) imports it at import time and reads its
sprite files through ``resource_filename`` only when rendering images, which the text
form never does. Put on ``sys.path`` by the hooks only where the real module is missing.
"""

from __future__ import annotations

import importlib.util
import os


def resource_filename(package: str, path: str) -> str:
    """``path`` inside the folder of ``package``."""
    spec = importlib.util.find_spec(package)
    base = os.path.dirname(spec.origin) if spec is not None and spec.origin else ""
    return os.path.join(base, path)


def fixup_namespace_packages(path_item: str, parent: str | None = None) -> None:
    """No-op (pytest's ``syspath_prepend`` calls it once ``pkg_resources`` is imported)."""
