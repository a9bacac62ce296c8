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
from defenses.dp_blogs import DPBloGS
from defenses.dp_forward import DPForward
from defenses.dp_sgd import DPSGD
from defenses.none import NonPrivate
from defenses.phantom_dp_sgd import PhantomDPSGD
from defenses.re_attention import ReAttentionDefense
from defenses.split_n_denoise import SplitNDenoise

DEFENSES: dict[str, type[Defense]] = {
    cls.name: cls
    for cls in (
        NonPrivate,
        DPSGD,
        SplitNDenoise,
        DPForward,
        PhantomDPSGD,
        ReAttentionDefense,
        DPBloGS,
        DPAttention,
    )
}

__all__ = [
    "DEFENSES",
    "Defense",
    "Examples",
    "PrivacyClaim",
    "ReleasedModel",
    "Surface",
    "SurfaceNotAvailable",
]
