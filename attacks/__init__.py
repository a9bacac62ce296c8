"""The attack battery, one module per attack family.

``ATTACKS`` maps config names to membership attacks (per-example scores, one
:class:`AttackResult` each); ``LEAKAGE_ATTACKS`` maps names to attacks on other leakage
(reconstruction, attribute inference, mutual information, extraction, distinguishing
tests; one :class:`LeakageResult` each). Both are listed in ``[attacks] names``.
"""

from privacy_audit.attacks.attention_lrt import AttentionLRTAttack
from privacy_audit.attacks.attribute_inference import AttributeInference
from privacy_audit.attacks.base import (
    Attack,
    AttackContext,
    AttackResult,
    LeakageAttack,
    LeakageResult,
    MetricSettings,
    run_attack,
    run_leakage_attack,
)
from privacy_audit.attacks.con_recall import ConRecallAttack
from privacy_audit.attacks.dc_pdd import DCPDDAttack
from privacy_audit.attacks.embedding_inversion import NearestNeighbourInversion, RelaxedInversion
from privacy_audit.attacks.extraction import EXTRACTION_ATTACKS
from privacy_audit.attacks.extraction_risk import ExtractionRisk
from privacy_audit.attacks.extraction_untargeted import UntargetedExtraction
from privacy_audit.attacks.ez_mia import EZMIAAttack
from privacy_audit.attacks.grad_norm import GradNormAttack
from privacy_audit.attacks.gradient_inversion import GradientInversionAttack
from privacy_audit.attacks.informia import InfoRMIAAttack
from privacy_audit.attacks.llm_membership import LLM_ATTACKS
from privacy_audit.attacks.lowercase import LowercaseAttack
from privacy_audit.attacks.membership import (
    ConfidenceAttack,
    EntropyAttack,
    LossAttack,
    ModifiedEntropyAttack,
)
from privacy_audit.attacks.min_k_pp import MinKPlusPlusAttack
from privacy_audit.attacks.mutual_info import TokenMutualInformationAttack
from privacy_audit.attacks.neighbourhood import NeighbourhoodAttack
from privacy_audit.attacks.pii_extraction import PIIExtraction
from privacy_audit.attacks.recall import RecallAttack
from privacy_audit.attacks.samia import SaMIAAttack
from privacy_audit.attacks.stacked import StackedAttack

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
            EZMIAAttack,
            InfoRMIAAttack,
            ConRecallAttack,
            SaMIAAttack,
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
