"""``torchvision.transforms`` names verl-agent's ALFWorld module binds (never called)."""

from __future__ import annotations

from typing import Any


class _Unavailable:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("torchvision is a stand-in here: AlfredThorEnv images need the "
                           "real torchvision (a GPU trainer environment)")


class Compose(_Unavailable):
    """Stand-in (raises when built)."""


class ToTensor(_Unavailable):
    """Stand-in (raises when built)."""
