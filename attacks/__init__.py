"""The attack battery, one module per attack family.

``ATTACKS`` maps config names to membership attacks (per-example scores, one
:class:`AttackResult` each); ``LEAKAGE_ATTACKS`` maps names to attacks on other leakage
(reconstruction, attribute inference, mutual information, extraction, distinguishing
tests; one :class:`LeakageResult` each). Both are listed in ``[attacks] names``.

Both registries are :class:`privacy_audit.registry.LazyRegistry`: an attack's module loads
when its name is looked up, so ``import privacy_audit.attacks`` stays light (no torch). A
new attack is registered as ``"name": "privacy_audit.attacks.module:Class"``.
"""

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
from privacy_audit.registry import LazyRegistry

# name -> "module:Class": each attack family's module (torch, transformers, sklearn, ...)
# is imported when its name is first looked up, not when this package is.
_A = "privacy_audit.attacks."
ATTACKS: LazyRegistry = LazyRegistry(
    {
        "loss": _A + "membership:LossAttack",
        "confidence": _A + "membership:ConfidenceAttack",
        "entropy": _A + "membership:EntropyAttack",
        "modified-entropy": _A + "membership:ModifiedEntropyAttack",
    }
)
DEFAULT_ATTACKS = tuple(ATTACKS)
ATTACKS.update(  # causal-LM signals (llm_membership.LLM_ATTACKS) and the stacked attack
    {
        "lm-loss": _A + "llm_membership:LMLossAttack",
        "zlib": _A + "llm_membership:ZlibAttack",
        "zlib-total": _A + "llm_membership:ZlibTotalAttack",
        "min-k": _A + "llm_membership:MinKAttack",
        "reference": _A + "llm_membership:ReferenceAttack",
        "stacked": _A + "stacked:StackedAttack",
    }
)
ATTACKS.update(
    {
        "min-k++": _A + "min_k_pp:MinKPlusPlusAttack",
        "recall": _A + "recall_mia:RecallAttack",
        "neighbourhood": _A + "neighbourhood:NeighbourhoodAttack",
        "dc-pdd": _A + "dc_pdd:DCPDDAttack",
        "lowercase": _A + "lowercase:LowercaseAttack",
        "grad-norm": _A + "grad_norm:GradNormAttack",
        "ez-mia": _A + "ez_mia:EZMIAAttack",
        "informia": _A + "informia:InfoRMIAAttack",
        "con-recall": _A + "con_recall:ConRecallAttack",
        "samia": _A + "samia:SaMIAAttack",
    }
)

LEAKAGE_ATTACKS: LazyRegistry = LazyRegistry(
    {
        "inversion-nn": _A + "embedding_inversion:NearestNeighbourInversion",
        "inversion-relaxed": _A + "embedding_inversion:RelaxedInversion",
        "attribute-inference": _A + "attribute_inference:AttributeInference",
        "gradient-inversion": _A + "gradient_inversion:GradientInversionAttack",
        "attention-lrt": _A + "attention_lrt:AttentionLRTAttack",
        "mutual-information": _A + "mutual_info:TokenMutualInformationAttack",
    }
)
LEAKAGE_ATTACKS.update(  # extraction.EXTRACTION_ATTACKS and the other extraction attacks
    {
        "canary-exposure": _A + "extraction:CanaryExposure",
        "prompt-extraction": _A + "extraction:PromptExtraction",
        "extraction-untargeted": _A + "extraction_untargeted:UntargetedExtraction",
        "pii-extraction": _A + "pii_extraction:PIIExtraction",
        "extraction-risk": _A + "extraction_risk:ExtractionRisk",
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
