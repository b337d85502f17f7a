"""Sokoban on the CPU backend: verl-agent's text Sokoban on gym_sokoban's engine (rooms
generated and solved here: :mod:`.rooms`, :mod:`.solver`; the policy's view: :mod:`.view`)."""

from ccpo_lab.backends.local.envs.sokoban.environment import SOKOBAN, SokobanEnvironment

__all__ = ["SOKOBAN", "SokobanEnvironment"]
