"""The ``ray-jobs`` launcher's settings: which Ray cluster, and what each run's job gets."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ccpo_lab.config.launcher import LauncherSettings, Where
from ccpo_lab.config.validate import check_range
from ccpo_lab.errors import UserError

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESOURCE = re.compile(r"[A-Za-z0-9_./:-]{1,128}")
_ADDRESS = re.compile(r"(https?://)?[A-Za-z0-9_.\-\[\]:]+(:[0-9]+)?/?")


@dataclass(frozen=True)
class RayJobsSettings(LauncherSettings):
    """``launcher.kind: ray-jobs``: each run one job of an existing Ray cluster, submitted
    through its Jobs API (the dashboard). The cluster must see the results directory at
    the same path (a shared file system) and have ccpo-lab in its interpreter."""

    kind: str = field(default="ray-jobs", init=False)
    address: str | None = None
    """The cluster's dashboard address (``http://head:8265``); default ``$RAY_ADDRESS``."""
    python: str | None = None
    """The interpreter a job runs on the cluster; default: the run's (a verl run's
    ``backend.verl.python``), else the one that submits (a shared file system)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables of every job (its ``runtime_env.env_vars``)."""
    entrypoint_num_cpus: float = 1.0
    """CPUs reserved for each job's entry point (the run's process)."""
    entrypoint_resources: dict[str, float] = field(default_factory=dict)
    """Custom Ray resources each job's entry point reserves (``{run_slot: 1}`` with
    ``ray start --resources='{"run_slot": 2}'``: at most two runs at once)."""

    def validate(self, where: Where) -> None:
        """An address that looks like one, variable names, positive amounts."""
        if self.address is not None and not _ADDRESS.fullmatch(self.address):
            raise UserError("not a Ray dashboard address", file=where("launcher.address"),
                            key="launcher.address", value=self.address,
                            valid="http://HOST:PORT (the dashboard, 8265 by default)")
        for name, value in self.env.items():
            key = f"launcher.env.{name}"
            if not _ENV_NAME.fullmatch(str(name)) or not isinstance(value, str | int | float):
                raise UserError("expected NAME: value (a variable name and a string)",
                                file=where(key), key=key, value=value)
        check_range(self.entrypoint_num_cpus, low=0, key="launcher.entrypoint_num_cpus",
                    file=where("launcher.entrypoint_num_cpus"))
        for name, amount in self.entrypoint_resources.items():
            key = f"launcher.entrypoint_resources.{name}"
            if not _RESOURCE.fullmatch(str(name)):
                raise UserError("not a Ray resource name", file=where(key), key=key,
                                value=name)
            check_range(amount, low=0, low_open=True, key=key, file=where(key))
