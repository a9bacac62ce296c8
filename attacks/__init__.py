"""The attack battery, one module per attack family. ``ATTACKS`` maps config names to classes."""

from attacks.base import Attack, AttackResult, MetricSettings, run_attack
from attacks.membership import ConfidenceAttack, EntropyAttack, LossAttack, ModifiedEntropyAttack

ATTACKS: dict[str, type[Attack]] = {
    cls.name: cls for cls in (LossAttack, ConfidenceAttack, EntropyAttack, ModifiedEntropyAttack)
}
DEFAULT_ATTACKS = tuple(ATTACKS)

__all__ = ["ATTACKS", "DEFAULT_ATTACKS", "Attack", "AttackResult", "MetricSettings", "run_attack"]
