"""Defense adapters, one module per mechanism. ``DEFENSES`` maps config names to classes."""

from privacy_audit.defenses.base import (
    Defense,
    Examples,
    PrivacyClaim,
    ReleasedModel,
    Surface,
    SurfaceNotAvailable,
)
from privacy_audit.defenses.dp_attention import DPAttention
from privacy_audit.defenses.dp_blogs import DPBloGS
from privacy_audit.defenses.dp_forward import DPForward
from privacy_audit.defenses.dp_sgd import DPSGD
from privacy_audit.defenses.none import NonPrivate
from privacy_audit.defenses.phantom_dp_sgd import PhantomDPSGD
from privacy_audit.defenses.re_attention import ReAttentionDefense
from privacy_audit.defenses.split_n_denoise import SplitNDenoise

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
