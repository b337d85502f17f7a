"""Launching runs: the :class:`~ccpo_lab.launch.base.Launcher` interface, its registry
(:mod:`.registry`: ``inline``, ``local``, ``slurm``), plans, submission, status and cancel."""
