"""Execute one run from its directory: the entry point every launcher calls.

``python -m ccpo_lab.runs.execute RUN_DIR`` (or :func:`execute_run`) takes the run's
ownership lock (:mod:`ccpo_lab.runs.owner`: one live executor per run), reads its
``config.yaml``, checks its identity, and hands it to the backend's ``train`` with the
:class:`~ccpo_lab.placement.Placement` its launcher gave it. A launcher needs nothing but
the run directory, so a requeued or resubmitted job resumes there. The other tasks of a
multi-node job call :func:`serve_run` (the backend's ``worker``).

What a run records when it stops (``state.json``): ``completed``; ``failed`` with the
traceback (an exception); ``cancelled`` (SIGINT: ``ccpo-lab cancel``, Ctrl-C);
``interrupted`` with the signal (SIGTERM, SIGHUP, or, recorded by :func:`supervise`, a
signal it could not catch, ``kill -9``). Cancelled and interrupted runs resume from their
checkpoint when relaunched.

:func:`supervise` executes the run in a child process and records how it ended when the
child could not (killed): the ``local`` launcher's jobs run this way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ccpo_lab.config.backends import backend_runner
from ccpo_lab.placement import Placement, this_host
from ccpo_lab.runs.cost import end_attempt, start_attempt
from ccpo_lab.runs.gpulock import inherited_lock_fds, keep_inherited_locks, lock_fds_env
from ccpo_lab.runs.layout import RunDir, load_run_config
from ccpo_lab.runs.owner import RunBusy, acquire, describe_exit, try_acquire
from ccpo_lab.runs.provenance import now_iso

BUSY_EXIT = 75
"""Exit code of ``python -m ccpo_lab.runs.execute`` when another process executes the run."""
FINISHED = ("completed", "failed", "cancelled", "interrupted")
"""Outcomes a run records itself."""


class Stopped(BaseException):
    """A signal (SIGTERM, SIGHUP) asked this executor to stop: the run is interrupted."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def stop_on(*signums: int) -> Iterator[None]:
    """Within the block, ``signums`` raise :class:`Stopped` (main thread only; else a
    no-op); the previous handlers are restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise Stopped(signum)

    old = {s: signal.signal(s, handler) for s in signums}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _interruptible() -> None:
    """Let SIGINT interrupt this process even if it was started with SIGINT ignored (a
    background job of a non-interactive shell): ``ccpo-lab cancel`` relies on it."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)



def _mark(rd: RunDir, state: str, **info: Any) -> None:
    with contextlib.suppress(OSError):
        rd.write_state(state, **info)


def execute_run(run_dir: str | Path, placement: Placement | None = None, *,
                requeueing: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """Train the run in ``run_dir`` to completion (resuming from its last checkpoint).

    ``placement``: where this task runs (default: this machine, one task);
    ``requeueing()``: whether a ``SystemExit`` is the scheduler requeueing the job (the
    run is then recorded ``requeued``). Raises :class:`~ccpo_lab.runs.owner.RunBusy`,
    touching nothing, when another live process executes the run. A completed or
    cancelled run is left as it is. Returns the backend's summary; records the outcome
    in ``state.json`` (see the module docstring) and re-raises on failure.
    """
    rd = RunDir(Path(run_dir))
    with acquire(rd):
        st = rd.read_state()
        if st.get("state") == "completed":
            return dict(st.get("summary") or {})
        if st.get("state") == "cancelled":
            return {"cancelled": True}
        where = placement if placement is not None else this_host()
        _interruptible()
        attempt = _start_attempt(rd, where)
        rd.write_state("running", started=now_iso(), restarts=where.restarts,
                       host=socket.gethostname(), pid=os.getpid(), error=None,
                       traceback=None, exit=None, rate_from=None)
        try:
            summary = _train(rd, where)
        except KeyboardInterrupt:
            _mark(rd, "cancelled", error="cancelled (SIGINT)", traceback=None)
            raise
        except Stopped as e:
            _mark(rd, "interrupted", error=f"stopped by {e}", traceback=None)
            raise
        except SystemExit as e:
            if requeueing():
                _mark(rd, "requeued", error=None, traceback=None, requeued=now_iso())
            else:
                _mark(rd, "failed", error=f"SystemExit: {e.code}",
                      traceback=traceback.format_exc())
            raise
        except BaseException as e:
            _mark(rd, "failed", error=f"{type(e).__name__}: {e}",
                  traceback=traceback.format_exc())
            raise
        finally:
            if attempt:
                _end_attempt(rd)
        rd.write_state("completed", summary=summary)
        return summary


def _start_attempt(rd: RunDir, where: Placement) -> bool:
    """Record the attempt's start and devices (:mod:`ccpo_lab.runs.cost`); False when the
    run's configuration cannot be read (then ``_train`` fails, saying why)."""
    try:
        run = load_run_config(rd)
        needs = backend_runner(run.backend.kind).needs(run)
    except Exception:  # noqa: BLE001 - reported by _train, which reads the same files
        return False
    with contextlib.suppress(OSError):
        start_attempt(rd, needs, where)
    return True


def _end_attempt(rd: RunDir) -> None:
    """Record the attempt's end with the outcome ``state.json`` holds now."""
    with contextlib.suppress(OSError, ValueError):
        state = rd.read_state().get("state")
        end_attempt(rd, "completed" if state == "running" else str(state))


def _train(rd: RunDir, where: Placement) -> dict[str, Any]:
    """The backend's ``train``, with progress lines when it reports progress; for an
    evaluation job's directory (``ccpo-lab evaluate``), the job."""
    import inspect

    from ccpo_lab.runs.evals import eval_job_module, is_eval_job

    if is_eval_job(rd.path):
        return dict(eval_job_module().run_eval_job(rd.path, where))

    run = load_run_config(rd)
    _record_stack(rd, run, where)
    train = backend_runner(run.backend.kind).train
    label = f"{run.arm} seed {run.seed}"
    print(f"{label}: {_start_line(run, rd)}", flush=True)
    if "progress" in inspect.signature(train).parameters and not sys.stdout.isatty():
        return dict(train(run, rd, placement=where, progress=ProgressLines(label)))
    return dict(train(run, rd, placement=where))


def _record_stack(rd: RunDir, run: Any, where: Placement) -> None:
    """Record in ``run.json`` the stack this attempt runs on (``verify`` compares arms'
    stacks): the GPUs of its slice (none for a CPU run) and, for a run whose trainer has
    an interpreter of its own (the verl backend), that interpreter's package versions."""
    from ccpo_lab.runs.provenance import run_stack

    settings = run.backend.settings
    python = getattr(settings, "python", None)
    versions = _trainer_versions(python) if python else None
    try:
        needs = backend_runner(run.backend.kind).needs(run)
        gpus, nodes = (where.gpus if needs.gpus_per_node else ()), needs.nodes
    except Exception:  # noqa: BLE001 - reported by train, which asks the same
        gpus, nodes = None, 1
    with contextlib.suppress(OSError):
        rd.update_run(stack=run_stack(versions, getattr(settings, "verl_agent_path", None),
                                      gpus=gpus, nodes=nodes))


def _trainer_versions(python: str) -> dict[str, str | None] | None:
    """Package versions in the interpreter ``python`` (30 s at most; None if it cannot
    say)."""
    import json
    import subprocess

    code = "; ".join([
        "import json", "from importlib import metadata as m",
        "names = ('torch', 'vllm', 'flash-attn', 'transformers', 'alfworld')",
        "have = {d.metadata['Name'].lower().replace('_', '-'): d.version"
        " for d in m.distributions()}",
        "print(json.dumps({n: have.get(n) for n in names}))"])
    try:
        r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=30,
                           check=False)
        data = json.loads(r.stdout) if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _start_line(run: Any, rd: RunDir) -> str:
    """Where this attempt starts, said before it does: from the checkpoint its backend
    finds, or from step 0 (saying so when an earlier attempt had gone further)."""
    at = backend_runner(run.backend.kind).resume_step(rd)
    if at is not None:
        return f"resuming from its checkpoint at step {at}"
    reached = int(rd.read_state().get("step") or 0)
    if reached:
        return (f"no checkpoint left in {rd.checkpoints} (an earlier attempt reached step "
                f"{reached}): restarting from step 0")
    return "starting from step 0"


class ProgressLines:
    """``progress(step, total, last_val)`` printing one line per step to stdout (the job's
    log, for ``tail -f``): ``[12:01:33] grpo seed 0: step 12/40, 1.32 s/step, ETA
    0:00:37, held-out 0.250``."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._origin: tuple[int, float] | None = None

    def __call__(self, step: int, total: int, last_val: float | None) -> None:
        now = time.monotonic()
        if self._origin is None:
            self._origin = (step, now)
        parts = [f"step {step}/{total}"]
        done = step - self._origin[0]
        if done > 0:
            per = (now - self._origin[1]) / done
            eta = int(per * (total - step))
            parts += [f"{per:.2f} s/step", f"ETA {eta // 3600}:{eta % 3600 // 60:02d}:"
                                            f"{eta % 60:02d}"]
        if last_val is not None:
            parts.append(f"held-out {last_val:.3f}")
        print(f"[{time.strftime('%H:%M:%S')}] {self.label}: {', '.join(parts)}", flush=True)


def serve_run(run_dir: str | Path, placement: Placement) -> dict[str, Any]:
    """A task other than rank 0 of a multi-node run: the backend's ``worker(run, rd,
    placement)`` when it has one. Only rank 0 writes the run's state."""
    from ccpo_lab.runs.evals import eval_job_module, is_eval_job

    if is_eval_job(run_dir):
        return dict(eval_job_module().serve_eval_job(run_dir, placement))
    rd = RunDir(Path(run_dir))
    run = load_run_config(rd)
    worker = getattr(backend_runner(run.backend.kind), "worker", None)
    if worker is None:
        return {"rank": placement.rank}
    return dict(worker(run, rd, placement) or {})


# ---------------------------------------------------------------- a run in a child process
def supervise(run_dir: str | Path, placement: Placement) -> dict[str, Any]:
    """Execute the run in a child process (``python -m ccpo_lab.runs.execute``) and wait.

    SIGINT is passed on to the child (it records ``cancelled``). When the child dies
    without recording an outcome, it is recorded here: ``interrupted`` with the signal
    that killed it, ``failed`` with its exit code. If only this process dies, the child
    goes on and finishes the run. The locks this process inherited from its pool (a GPU
    slice, a sweep slot: :mod:`ccpo_lab.runs.gpulock`) are handed to the child too, so
    they last as long as the run. Returns the run's summary; raises ``RuntimeError``
    when the run did not complete (its outcome is in ``state.json``).
    """
    rd = RunDir(Path(run_dir))
    cmd = [sys.executable, "-m", "ccpo_lab.runs.execute", str(rd.path),
           "--placement", json.dumps(asdict(placement))]
    locks = inherited_lock_fds()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, pass_fds=locks,
                            env={**os.environ, **lock_fds_env(locks)})
    while True:
        try:
            rc = proc.wait()
            break
        except KeyboardInterrupt:
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGINT)
    if rc == BUSY_EXIT:
        return {"busy": True}
    record_exit(rd, proc.pid, rc)
    st = rd.read_state()
    if rc == 0 and st.get("state") == "completed":
        return dict(st.get("summary") or {})
    if st.get("state") == "cancelled":
        return {"cancelled": True}
    raise RuntimeError(f"run {st.get('state', 'not completed')}: {st.get('error') or ''}")


def record_exit(rd: RunDir, pid: int, returncode: int) -> None:
    """Record how executor ``pid`` of ``rd`` ended when it could not record it itself:
    ``interrupted`` (killed by a signal) or ``failed`` (a non-zero exit). Nothing is
    written when it recorded an outcome, or when another executor holds the run now."""
    lock = try_acquire(rd)
    if lock is None:
        return
    with lock:
        st = rd.read_state()
        state, mine = st.get("state"), st.get("pid") == pid
        if state == "completed" or (state in FINISHED and mine) or \
                (returncode == 0 and state != "running"):
            return
        how = describe_exit(returncode)
        started = "" if mine else " before starting the run"
        if returncode < 0:
            _mark(rd, "interrupted", error=f"executor pid {pid} {how}{started}",
                  traceback=None, exit=returncode)
        else:
            _mark(rd, "failed", error=f"executor pid {pid} {how}{started} without "
                                      "recording an outcome (see its log)",
                  traceback=None, exit=returncode)


def _placement(text: str) -> Placement:
    data = json.loads(text)
    gpus = data.get("gpus")
    return Placement(**{**data, "hosts": tuple(data.get("hosts") or ()),
                        "gpus": None if gpus is None else tuple(gpus)})


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``python -m ccpo_lab.runs.execute RUN_DIR [--placement JSON]``.

    Exit codes: 0 completed (or already), 1 failed, 130 cancelled (SIGINT), 128+N stopped
    by signal N (SIGTERM, SIGHUP), :data:`BUSY_EXIT` another process executes the run.
    """
    keep_inherited_locks()  # held until this process exits; passed to none of its children
    args = sys.argv[1:] if argv is None else argv
    where: Placement | None = None
    if len(args) == 3 and args[1] == "--placement":
        where = _placement(args[2])
        args = args[:1]
    if len(args) != 1:
        print("usage: python -m ccpo_lab.runs.execute RUN_DIR [--placement JSON]",
              file=sys.stderr)
        return 2
    try:
        with stop_on(signal.SIGTERM, signal.SIGHUP):
            execute_run(args[0], where)
    except RunBusy as e:
        print(f"{e}; leaving the run to it", file=sys.stderr, flush=True)
        return BUSY_EXIT
    except KeyboardInterrupt:
        print(f"{args[0]}: cancelled (SIGINT)", file=sys.stderr, flush=True)
        return 130
    except Stopped as e:
        print(f"{args[0]}: stopped by {e}", file=sys.stderr, flush=True)
        return 128 + e.signum
    return 0


def _exit_now(code: int) -> None:
    """End this process with ``code`` once stdout and stderr are flushed, skipping the
    interpreter's teardown: after a run, freeing its engines and modules one object at a
    time takes about 2.5 s, and every file the run writes is already closed."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
