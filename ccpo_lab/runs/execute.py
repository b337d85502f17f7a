"""Execute one run from its directory: the entry point every launcher calls.

``python -m ccpo_lab.runs.execute RUN_DIR`` (or :func:`execute_run`) reads the run's
``config.yaml``, checks its identity, and hands it to the backend's ``train`` with the
:class:`~ccpo_lab.placement.Placement` its launcher gave it. A launcher needs nothing but
the run directory, so a requeued or resubmitted job resumes there. The other tasks of a
multi-node job call :func:`serve_run` (the backend's ``worker``).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

from ccpo_lab.placement import Placement, this_host
from ccpo_lab.runs.layout import RunDir, load_run_config


def execute_run(run_dir: str | Path, placement: Placement | None = None) -> dict[str, Any]:
    """Train the run in ``run_dir`` to completion (resuming from its last checkpoint).

    ``placement``: where this task runs (default: this machine, one task). Returns the
    backend's summary. Records ``running`` / ``completed`` / ``failed`` with the traceback
    in ``state.json``; re-raises on failure.
    """
    from ccpo_lab.backends import backend_module

    rd = RunDir(Path(run_dir))
    run = load_run_config(rd)
    where = placement if placement is not None else this_host()
    rd.write_state("running")
    try:
        summary = backend_module(run.backend.kind).train(run, rd, placement=where)
    except BaseException as e:
        rd.write_state("failed", error=f"{type(e).__name__}: {e}",
                       traceback=traceback.format_exc())
        raise
    rd.write_state("completed", summary=summary)
    return summary


def serve_run(run_dir: str | Path, placement: Placement) -> dict[str, Any]:
    """A task other than rank 0 of a multi-node run: the backend's ``worker(run, rd,
    placement)`` when it has one. Only rank 0 writes the run's state."""
    from ccpo_lab.backends import backend_module

    rd = RunDir(Path(run_dir))
    run = load_run_config(rd)
    worker = getattr(backend_module(run.backend.kind), "worker", None)
    if worker is None:
        return {"rank": placement.rank}
    return dict(worker(run, rd, placement) or {})


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``python -m ccpo_lab.runs.execute RUN_DIR``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ccpo_lab.runs.execute RUN_DIR", file=sys.stderr)
        return 2
    execute_run(args[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
