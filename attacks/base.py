"""Contracts for attacks and the one result record every consumer reads.

An :class:`Attack` declares the surfaces it needs. :func:`run_attack` returns an
:class:`AttackResult` for every attack: ``ok`` with per-example scores and metrics,
``not_applicable`` (naming the missing surface) or ``error``. Metrics, ε bounds, plots,
reports and the gate read only ``AttackResult`` records, so users can bring their own
scores through :meth:`AttackResult.from_scores`.

Conventions: a higher score means "member"; members are the positive class (1).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from defenses.base import Examples, ReleasedModel, Surface


@dataclass(frozen=True)
class MetricSettings:
    delta: float = 1e-5
    confidence: float = 0.95
    n_boot: int = 1000
    seed: int = 0


class Attack(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    requires: ClassVar[frozenset[Surface]]

    @abstractmethod
    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        """Per-example membership scores, shape (n,), higher = member."""


def validate_scores(scores: Any, members: Any) -> tuple[np.ndarray, np.ndarray]:
    """Check a score/label pair at the boundary; raise ValueError naming the problem."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    m = np.asarray(members).reshape(-1)
    if s.size == 0:
        raise ValueError("no scores: the member/non-member set is empty")
    if s.size != m.size:
        raise ValueError(f"scores ({s.size}) and member labels ({m.size}) have different lengths")
    if not np.all(np.isfinite(s)):
        bad = int((~np.isfinite(s)).sum())
        raise ValueError(f"{bad} score(s) are NaN or infinite")
    if not np.all(np.isin(m, (0, 1))):
        raise ValueError("member labels must be 0 (non-member) or 1 (member)")
    m = m.astype(np.int64)
    n_in = int(m.sum())
    if n_in == 0 or n_in == m.size:
        raise ValueError(
            f"need both members and non-members, got {n_in} members and {m.size - n_in} non-members"
        )
    return s, m


@dataclass
class AttackResult:
    attack: str
    description: str = ""
    surfaces: list[str] = field(default_factory=list)
    status: str = "ok"  # ok | not_applicable | error
    reason: str | None = None
    ids: list[str] = field(default_factory=list)
    scores: np.ndarray | None = None
    members: np.ndarray | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_scores(
        cls,
        attack: str,
        scores: Any,
        members: Any,
        ids: list[str] | None = None,
        settings: MetricSettings = MetricSettings(),
        description: str = "",
        surfaces: list[str] | None = None,
    ) -> AttackResult:
        from attacks.metrics import membership_metrics

        s, m = validate_scores(scores, members)
        ids = [str(i) for i in ids] if ids is not None else [str(i) for i in range(len(s))]
        if len(ids) != len(s):
            raise ValueError(f"ids ({len(ids)}) and scores ({len(s)}) have different lengths")
        metrics = membership_metrics(
            s,
            m,
            delta=settings.delta,
            n_boot=settings.n_boot,
            confidence=settings.confidence,
            seed=settings.seed,
        )
        return cls(attack, description, surfaces or [], "ok", None, ids, s, m, metrics)

    @property
    def n_members(self) -> int:
        return 0 if self.members is None else int(self.members.sum())

    @property
    def n_nonmembers(self) -> int:
        return 0 if self.members is None else int(len(self.members) - self.members.sum())

    def to_dict(self) -> dict[str, Any]:
        """The record as stored in results.json (aggregate-only pseudonymisation of the
        ids happens in ``audit.runner.run_record``, with a per-run secret salt)."""
        d: dict[str, Any] = {
            "attack": self.attack,
            "description": self.description,
            "surfaces": list(self.surfaces),
            "status": self.status,
            "reason": self.reason,
            "n_members": self.n_members,
            "n_nonmembers": self.n_nonmembers,
        }
        if self.status == "ok":
            d["metrics"] = self.metrics
            d["examples"] = {
                "ids": list(self.ids),
                "scores": [float(x) for x in self.scores],
                "members": [int(x) for x in self.members],
            }
        return d


def run_attack(
    attack: Attack, release: ReleasedModel, examples: Examples, settings: MetricSettings
) -> AttackResult:
    """Run one attack; never raises for a missing surface (returns ``not_applicable``)."""
    surfaces = sorted(s.value for s in attack.requires)
    missing = sorted(s.value for s in attack.requires - release.surfaces)
    if missing:
        return AttackResult(
            attack.name,
            attack.description,
            surfaces,
            status="not_applicable",
            reason=f"not applicable: needs {', '.join(missing)}",
        )
    scores = attack.score(release, examples)
    return AttackResult.from_scores(
        attack.name,
        scores,
        examples.members,
        examples.ids,
        settings,
        description=attack.description,
        surfaces=surfaces,
    )
