"""The attack battery, one module per attack family.

``ATTACKS`` maps config names to membership attacks (per-example scores, one
:class:`AttackResult` each); ``LEAKAGE_ATTACKS`` maps names to attacks on other leakage
(reconstruction, attribute inference, mutual information, extraction, distinguishing
tests; one :class:`LeakageResult` each). Both are listed in ``[attacks] names``.
"""

from attacks.attention_lrt import AttentionLRTAttack
from attacks.attribute_inference import AttributeInference
from attacks.base import (
    Attack,
    AttackContext,
    AttackResult,
    LeakageAttack,
    LeakageResult,
    MetricSettings,
    run_attack,
    run_leakage_attack,
)
from attacks.dc_pdd import DCPDDAttack
from attacks.embedding_inversion import NearestNeighbourInversion, RelaxedInversion
from attacks.extraction import EXTRACTION_ATTACKS
from attacks.extraction_risk import ExtractionRisk
from attacks.extraction_untargeted import UntargetedExtraction
from attacks.grad_norm import GradNormAttack
from attacks.gradient_inversion import GradientInversionAttack
from attacks.llm_membership import LLM_ATTACKS
from attacks.lowercase import LowercaseAttack
from attacks.membership import ConfidenceAttack, EntropyAttack, LossAttack, ModifiedEntropyAttack
from attacks.min_k_pp import MinKPlusPlusAttack
from attacks.mutual_info import TokenMutualInformationAttack
from attacks.neighbourhood import NeighbourhoodAttack
from attacks.pii_extraction import PIIExtraction
from attacks.recall import RecallAttack
from attacks.stacked import StackedAttack

ATTACKS: dict[str, type[Attack]] = {
    cls.name: cls for cls in (LossAttack, ConfidenceAttack, EntropyAttack, ModifiedEntropyAttack)
}
DEFAULT_ATTACKS = tuple(ATTACKS)
ATTACKS.update({cls.name: cls for cls in (*LLM_ATTACKS, StackedAttack)})  # causal-LM signals
ATTACKS.update(
    {
        cls.name: cls
        for cls in (
            MinKPlusPlusAttack,
            RecallAttack,
            NeighbourhoodAttack,
            DCPDDAttack,
            LowercaseAttack,
            GradNormAttack,
        )
    }
)

LEAKAGE_ATTACKS: dict[str, type[LeakageAttack]] = {
    cls.name: cls
    for cls in (
        NearestNeighbourInversion,
        RelaxedInversion,
        AttributeInference,
        GradientInversionAttack,
        AttentionLRTAttack,
        TokenMutualInformationAttack,
    )
}
LEAKAGE_ATTACKS.update(
    {
        cls.name: cls
        for cls in (*EXTRACTION_ATTACKS, UntargetedExtraction, PIIExtraction, ExtractionRisk)
    }
)

ALL_ATTACK_NAMES = (*ATTACKS, *LEAKAGE_ATTACKS)

__all__ = [
    "ATTACKS",
    "ALL_ATTACK_NAMES",
    "DEFAULT_ATTACKS",
    "LEAKAGE_ATTACKS",
    "Attack",
    "AttackContext",
    "AttackResult",
    "LeakageAttack",
    "LeakageResult",
    "MetricSettings",
    "run_attack",
    "run_leakage_attack",
]
