"""ALFWorld on the CPU backend: the generated games of :mod:`ccpo_lab.backends.local.games`
on the real engine (:mod:`ccpo_lab.backends.local.env`), the out-of-distribution games of
:mod:`ccpo_lab.backends.local.ood`. The modules stay where they are; this adapts them to
:class:`~ccpo_lab.backends.local.envs.base.LocalEnvironment`."""

from ccpo_lab.backends.local.envs.alfworld.environment import ALFWORLD, AlfworldEnvironment

__all__ = ["ALFWORLD", "AlfworldEnvironment"]
