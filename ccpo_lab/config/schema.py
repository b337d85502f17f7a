"""Dataclass schemas of sweep files and the frozen, fully resolved run configuration.

A field whose ``metadata`` has ``identity: False`` does not change results and is left
out of the run identity (:mod:`ccpo_lab.config.identity`).

The ``analysis`` section's schema lives in :mod:`ccpo_lab.config.analysis`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ccpo_lab.config.analysis import BOOTSTRAP_REPS_RANGE, AnalysisConfig  # noqa: F401 (re-exported)
from ccpo_lab.config.backends import BACKENDS, backend_settings  # noqa: F401 (re-exported)
from ccpo_lab.config.environments import (
    DEFAULT_ENVIRONMENT,
    ENVIRONMENTS,
    AlfworldSettings,
    SokobanSettings,
    WebshopSettings,
)
from ccpo_lab.config.identity import identity_dict, run_id
from ccpo_lab.config.launcher import LauncherSettings
from ccpo_lab.config.protocol import ProtocolConfig
from ccpo_lab.config.tracking import WandbConfig, check_tracking


def _settings_of(kind: str) -> Any:
    return field(default_factory=lambda: backend_settings(kind)())


@dataclass(frozen=True)
class BackendConfig:
    """Which backend trains the runs, with each backend's settings.

    This class is the backend registry: a field per backend, named by its kind, holding
    its settings dataclass (:data:`BACKENDS`); the backend's code is
    ``ccpo_lab.backends.<kind>.runner``.
    """

    kind: str = "local"
    """``local`` (CPU, generated games, small policy) or ``verl`` (GPU clusters)."""
    local: backend_settings("local") = _settings_of("local")  # type: ignore[valid-type]
    """Settings used when ``kind`` is ``local``
    (:class:`~ccpo_lab.backends.local.settings.LocalBackendConfig`)."""
    verl: backend_settings("verl") = _settings_of("verl")  # type: ignore[valid-type]
    """Settings used when ``kind`` is ``verl``
    (:class:`~ccpo_lab.backends.verl.settings.VerlBackendConfig`)."""

    @property
    def settings(self) -> Any:
        """The active backend's settings."""
        return getattr(self, self.kind)

    @classmethod
    def kinds(cls) -> tuple[str, ...]:
        """The registered backends (every field but ``kind``)."""
        return tuple(f.name for f in fields(cls) if f.name != "kind")


@dataclass(frozen=True)
class EnvConfig:
    """Each environment's settings (``env.<name>``), a field per registered environment
    (:data:`~ccpo_lab.config.environments.ENVIRONMENTS`): a key of one environment
    under another is an unknown key."""

    alfworld: AlfworldSettings = field(default_factory=AlfworldSettings)
    sokoban: SokobanSettings = field(default_factory=SokobanSettings)
    webshop: WebshopSettings = field(default_factory=WebshopSettings)

    def of(self, name: str) -> Any:
        """The settings of environment ``name``."""
        return getattr(self, name)


assert set(f.name for f in fields(EnvConfig)) == set(ENVIRONMENTS), "EnvConfig vs registry"


@dataclass(frozen=True)
class TrackingConfig:
    """MLflow tracking (and Weights & Biases, ``wandb``)."""

    uri: str | None = None
    """Tracking URI; default ``sqlite:///<results>/<sweep>/mlflow.db``."""
    experiment: str | None = None
    """Experiment name; default the sweep's name."""
    enabled: bool = True
    """Sync runs to MLflow on ``report`` and ``sync``."""
    live: bool = False
    """``sweep --wait`` keeps the MLflow store current while the runs go (a ``ccpo-lab
    sync --watch`` beside it, every ``live_every`` seconds, ending with the sweep)."""
    live_every: float = 30.0
    """Seconds between two rounds of the live sync."""
    wandb: WandbConfig = field(default_factory=WandbConfig)
    """Weights & Biases (off unless ``wandb.mode`` is ``online`` or ``offline``)."""

    def validate(self, where: Any) -> None:
        """The checks the types cannot express (:func:`ccpo_lab.config.tracking.check_tracking`)."""
        check_tracking(self.enabled, self.live, self.live_every, self.wandb, where)


@dataclass(frozen=True)
class BudgetConfig:
    """What a study may spend (``budget``): device-hours, or money at the launcher's
    ``price_per_device_hour``; a launch whose estimated cost exceeds it is refused
    (:mod:`ccpo_lab.launch.budget`)."""

    device_hours: float | None = None
    """Most device-hours (GPU-hours on verl, CPU-hours on the CPU backend) the study's runs
    may take, every attempt counted."""
    money: float | None = None
    """Most money the study may cost, in ``currency`` (needs ``launcher.price_per_device_hour``
    in the same currency)."""
    currency: str | None = None
    """The currency of ``money`` (three letters: ``USD``, ``EUR``)."""

    @property
    def set(self) -> bool:
        """Whether a limit is given."""
        return self.device_hours is not None or self.money is not None


@dataclass(frozen=True)
class SweepConfig:
    """A sweep file: arms x seeds x backend x launcher."""

    name: str = "???"
    """Sweep name; its directory is ``<results>/<name>/``."""
    description: str = ""
    """Free text."""
    arms: list[str] = field(default_factory=list)
    """Arm names (files ``<arms_dir>/<name>.yaml``)."""
    seeds: list[int] = field(default_factory=list)
    """Run seeds; every arm runs every seed."""
    environments: list[str] = field(default_factory=lambda: [DEFAULT_ENVIRONMENT])
    """Environments every (arm, seed) runs on (:mod:`ccpo_lab.config.environments`);
    several make one sweep directory per environment under ``<results>/<sweep>/``."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Each environment's settings."""
    arms_dir: str | None = None
    """Directory of arm files; default ``arms/`` beside the sweep's directory, then ``./arms``."""
    backend: BackendConfig = field(default_factory=BackendConfig)
    """Backend and its settings."""
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    """Training protocol shared by every arm (arms may override via ``training``)."""
    launcher: LauncherSettings = field(default_factory=LauncherSettings)
    """The launcher's typed settings (its kind's dataclass, :mod:`ccpo_lab.config.launchers.kinds`;
    :func:`~ccpo_lab.config.sweep.load_sweep` fills it in)."""
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    """Report settings."""
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    """MLflow settings."""
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """What the study may spend (none: no limit)."""


@dataclass(frozen=True)
class EstimatorConfig:
    """A resolved estimator: name and every parameter (defaults filled in)."""

    name: str
    """Registry name (``grpo``, ``gigpo``, ``ccpo``)."""
    params: dict[str, Any]
    """Every parameter of the estimator, validated."""


@dataclass(frozen=True)
class ArmConfig:
    """A resolved arm (``extends`` applied, estimator validated)."""

    name: str
    """Arm name (its file's stem)."""
    description: str
    """Free text."""
    estimator: EstimatorConfig
    """The advantage estimator."""
    training: dict[str, Any]
    """Protocol overrides of this arm (validated against :class:`ProtocolConfig`)."""
    source: str
    """File the arm was read from."""
    chain: tuple[str, ...] = ()
    """Arm names along ``extends``, this arm first."""
    shadows: tuple[str, ...] = ()
    """Other files of this arm's name on the arms path (differing from the one used)."""

    @property
    def warnings(self) -> list[str]:
        """Lint warnings about the estimator configuration, and the arm files of the same
        name that this one shadows."""
        # imported on use: the estimator registry checks each implementation's module (~40 ms)
        from ccpo_lab.estimators.spec import lint_params

        shadow = [f"arm file {self.source} is used; it shadows {other} (the first on the "
                  "arms path wins)" for other in self.shadows]
        return [*lint_params(self.estimator.name, self.estimator.params), *shadow]


@dataclass(frozen=True)
class RunConfig:
    """The fully resolved configuration of one (arm, seed) run."""

    sweep: str
    """Sweep name."""
    arm: str
    """Arm name."""
    seed: int
    """Run seed."""
    estimator: EstimatorConfig
    """The arm's estimator."""
    protocol: ProtocolConfig
    """Sweep protocol with the arm's ``training`` overrides applied."""
    backend: BackendConfig
    """Backend and settings."""
    environment: str = DEFAULT_ENVIRONMENT
    """The environment the run plays."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Environment settings (the run reads its :attr:`environment`'s)."""

    @property
    def env_settings(self) -> Any:
        """The settings of the run's environment."""
        return self.env.of(self.environment)

    @property
    def identity(self) -> dict[str, Any]:
        """The result-relevant configuration, the input of :attr:`run_id`."""
        return identity_dict(self)

    @property
    def run_id(self) -> str:
        """sha256 of the canonical identity (hex)."""
        return run_id(self)

    @property
    def short_id(self) -> str:
        """First 12 hex digits of :attr:`run_id`."""
        return self.run_id[:12]
