"""Defense adapters, one module per mechanism. ``DEFENSES`` maps config names to classes."""

from defenses.base import (
    Defense,
    Examples,
    PrivacyClaim,
    ReleasedModel,
    Surface,
    SurfaceNotAvailable,
)
from defenses.dp_attention import DPAttention
from defenses.dp_sgd import DPSGD
from defenses.none import NonPrivate

DEFENSES: dict[str, type[Defense]] = {cls.name: cls for cls in (NonPrivate, DPSGD, DPAttention)}

__all__ = [
    "DEFENSES",
    "Defense",
    "Examples",
    "PrivacyClaim",
    "ReleasedModel",
    "Surface",
    "SurfaceNotAvailable",
]
