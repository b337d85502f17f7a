"""The ``skypilot`` launcher's settings: where SkyPilot finds GPUs, and the results bucket."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ccpo_lab.config.launcher import LauncherSettings, Where
from ccpo_lab.config.validate import check_range
from ccpo_lab.errors import UserError

_BUCKET = re.compile(r"(s3|gs|r2|cos|oci|az|https)://[A-Za-z0-9_.\-/]+")
_ACCELERATOR = re.compile(r"[A-Za-z0-9_.\-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SkyPilotSettings(LauncherSettings):
    """``launcher.kind: skypilot``: each run one SkyPilot managed job (spot by default,
    recovered on preemption), its results in a bucket mounted on every node. Nodes and
    GPUs per node come from the backend (``backend.verl.nnodes``, ``n_gpus_per_node``)."""

    kind: str = field(default="skypilot", init=False)
    accelerator: str = "H100"
    """The GPU type (``H100``, ``H200``, ``A100-80GB``...: SkyPilot's names); the count
    per node is the backend's."""
    infra: str | None = None
    """Where to look (``aws``, ``gcp/us-central1``, ``k8s``); default: every cloud
    SkyPilot is set up for."""
    use_spot: bool = True
    """Spot (preemptible) instances; a preempted job is recovered and resumes from the
    run's checkpoint in the bucket."""
    max_restarts_on_errors: int = 0
    """Restarts of a job whose run exits with an error (besides preemptions)."""
    bucket: str | None = None
    """The bucket holding the results (``s3://my-bucket/ccpo``, ``gs://...``), mounted at
    ``mount_path`` on every node: checkpoints survive a preemption there, and the results
    come back with ``aws s3 sync`` / ``gcloud storage rsync``."""
    mount_path: str = "/ccpo-results"
    """Where the bucket is mounted on the nodes."""
    image_id: str | None = None
    """The nodes' image (``docker:verlai/verl:...``); default SkyPilot's."""
    disk_size: int | None = None
    """Disk per node in GB; default SkyPilot's."""
    setup: list[str] = field(default_factory=list)
    """Shell lines run once per node before ccpo-lab is installed (the trainer
    environment: conda, verl-agent)."""
    install: str = "pip install ccpo-lab"
    """The shell command that installs ccpo-lab on a node (a wheel, ``-e`` of a synced
    clone); a verl run then runs ``ccpo-lab install-into`` the trainer's interpreter."""
    envs: dict[str, str] = field(default_factory=dict)
    """Environment variables of every job."""

    def validate(self, where: Where) -> None:
        """Names that look right, a bucket URL, counts in range (SkyPilot's own parser
        checks the generated task before a launch)."""
        if not _ACCELERATOR.fullmatch(self.accelerator):
            raise UserError("not an accelerator name", file=where("launcher.accelerator"),
                            key="launcher.accelerator", value=self.accelerator)
        if self.bucket is not None and not _BUCKET.fullmatch(self.bucket):
            raise UserError("not a bucket URL", file=where("launcher.bucket"),
                            key="launcher.bucket", value=self.bucket,
                            valid="s3://NAME[/PREFIX], gs://..., r2://...")
        if not self.mount_path.startswith("/") or " " in self.mount_path:
            raise UserError("expected an absolute path without spaces",
                            file=where("launcher.mount_path"), key="launcher.mount_path",
                            value=self.mount_path)
        check_range(self.max_restarts_on_errors, low=0, key="launcher.max_restarts_on_errors",
                    file=where("launcher.max_restarts_on_errors"))
        if self.disk_size is not None:
            check_range(self.disk_size, low=1, key="launcher.disk_size",
                        file=where("launcher.disk_size"))
        for name in self.envs:
            if not _ENV_NAME.fullmatch(str(name)):
                key = f"launcher.envs.{name}"
                raise UserError("not a variable name", file=where(key), key=key, value=name)
