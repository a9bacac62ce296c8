"""Defense adapters, one module per mechanism. ``DEFENSES`` maps config names to classes.

Each mechanism's module is imported when its name is first looked up
(:class:`privacy_audit.registry.LazyRegistry`), so importing this package, or
``privacy_audit.defenses.base``, loads no mechanism (torch, scipy.optimize, ...): the
commands that train nothing start fast. A new mechanism is registered as
``"name": "module:Class"``.
"""

from __future__ import annotations

import importlib
from typing import Any

from privacy_audit.defenses.base import (
    Defense,
    Examples,
    PrivacyClaim,
    ReleasedModel,
    Surface,
    SurfaceNotAvailable,
)
from privacy_audit.registry import LazyRegistry

DEFENSES: LazyRegistry = LazyRegistry(
    {
        "none": "privacy_audit.defenses.none:NonPrivate",
        "dp-sgd": "privacy_audit.defenses.dp_sgd:DPSGD",
        "split-n-denoise": "privacy_audit.defenses.split_n_denoise:SplitNDenoise",
        "dp-forward": "privacy_audit.defenses.dp_forward:DPForward",
        "phantom-dp-sgd": "privacy_audit.defenses.phantom_dp_sgd:PhantomDPSGD",
        "re-attention": "privacy_audit.defenses.re_attention:ReAttentionDefense",
        "dp-blogs": "privacy_audit.defenses.dp_blogs:DPBloGS",
        "dp-attention": "privacy_audit.defenses.dp_attention:DPAttention",
    }
)

#: class name -> module, for ``from privacy_audit.defenses import DPSGD`` (imported on use)
_CLASSES = {
    "NonPrivate": "none",
    "DPSGD": "dp_sgd",
    "SplitNDenoise": "split_n_denoise",
    "DPForward": "dp_forward",
    "PhantomDPSGD": "phantom_dp_sgd",
    "ReAttentionDefense": "re_attention",
    "DPBloGS": "dp_blogs",
    "DPAttention": "dp_attention",
}


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        return getattr(importlib.import_module(f"{__name__}.{_CLASSES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFENSES",
    "Defense",
    "Examples",
    "PrivacyClaim",
    "ReleasedModel",
    "Surface",
    "SurfaceNotAvailable",
]
