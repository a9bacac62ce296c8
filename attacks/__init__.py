"""The attack battery, one module per attack family.

``ATTACKS`` maps config names to membership attacks (per-example scores, one
:class:`AttackResult` each); ``LEAKAGE_ATTACKS`` maps names to attacks on other leakage
(reconstruction, attribute inference, mutual information, extraction, distinguishing
tests; one :class:`LeakageResult` each). Both are listed in ``[attacks] names``.
"""

from attacks.attention_lrt import AttentionLRTAttack
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
from attacks.gradient_inversion import GradientInversionAttack
from attacks.membership import ConfidenceAttack, EntropyAttack, LossAttack, ModifiedEntropyAttack

ATTACKS: dict[str, type[Attack]] = {
    cls.name: cls for cls in (LossAttack, ConfidenceAttack, EntropyAttack, ModifiedEntropyAttack)
}
DEFAULT_ATTACKS = tuple(ATTACKS)

LEAKAGE_ATTACKS: dict[str, type[LeakageAttack]] = {
    cls.name: cls for cls in (GradientInversionAttack, AttentionLRTAttack)
}

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
