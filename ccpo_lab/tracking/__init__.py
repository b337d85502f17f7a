"""Tracking of sweeps: MLflow (synced from the run files), Weights & Biases, live syncs.

Training never talks to MLflow: ``ccpo-lab sync`` (and ``ccpo-lab report --out``) read
the run directories and bring the tracking store up to date, so a tracking server that is
down loses nothing (sync again later); ``sync --watch`` does so while the runs go
(:mod:`ccpo_lab.tracking.live`). See :mod:`ccpo_lab.tracking.mlflow_sync`; MLflow itself is
imported only when a sync runs. Weights & Biases, when a sweep turns it on
(``tracking.wandb``), is logged to by the runs themselves and by ``sync --wandb``
(:mod:`ccpo_lab.runs.wandb_run`, :mod:`ccpo_lab.tracking.wandb_sync`); ``wandb`` is
imported only by them.
"""
