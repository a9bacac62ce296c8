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

from privacy_audit.defenses.base import Examples, ReleasedModel, Surface
from privacy_audit.stats.estimates import estimate, mean_estimate, proportion_estimate  # noqa: F401 - the record's estimates


@dataclass(frozen=True)
class MetricSettings:
    delta: float = 1e-5
    confidence: float = 0.95
    n_boot: int = 1000
    seed: int = 0


#: What an attack may need beyond the model and the member / non-member texts (its
#: ``needs``; ``privacy-audit attacks`` lists them): a reference model, a population of
#: same-distribution texts, member or non-member prefixes, generation, gradients, labels.
NEEDS = (
    "reference",
    "population",
    "member-prefixes",
    "nonmember-prefixes",
    "generation",
    "gradients",
    "labels",
)


class Attack(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    requires: ClassVar[frozenset[Surface]]
    #: one line for ``privacy-audit attacks``
    summary: ClassVar[str] = ""
    #: what it needs beyond the model and the texts (words of :data:`NEEDS`)
    needs: ClassVar[tuple[str, ...]] = ()
    #: its cost in forward passes (or training)
    cost: ClassVar[str] = ""

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
        from privacy_audit.stats.metrics import membership_metrics

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
        ids happens in ``privacy_audit.audit.results.run_record``, with a per-run secret salt)."""
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


# ---------------------------------------------------------------------------------------
# Leakage beyond membership: reconstruction, attribute inference, mutual information,
# extraction and distinguishing tests. They do not score examples for membership, so
# they return a LeakageResult (kept in a run's "leakage" list) instead of an AttackResult.
# ---------------------------------------------------------------------------------------

LEAKAGE_KINDS = (
    "reconstruction",  # inputs recovered from a released surface (token recall, ...)
    "attribute-inference",  # a sensitive attribute predicted from a released surface
    "mutual-information",  # information between the input and a released surface (nats)
    "extraction",  # training text reproduced by generation (exposure, verbatim rate)
    "distinguishing",  # a hypothesis test between neighbouring inputs (ε lower bound)
)


@dataclass
class AttackContext:
    """What a leakage attack may use besides the released model.

    ``members`` / ``nonmembers`` are the audit's examples (members were trained on);
    ``public`` is auxiliary data the adversary owns (disjoint from both; the fixture's
    public split), e.g. to train an attribute classifier. ``options`` are this attack's
    validated config options (``[attacks.options.<name>]``).
    """

    members: Examples
    nonmembers: Examples
    public: Examples | None = None
    test: Examples | None = None
    settings: MetricSettings = MetricSettings()
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    aggregate_only: bool = False


@dataclass
class LeakageResult:
    """The one record of a leakage attack, read by reports, plots and the gate.

    ``metrics`` maps a name to an :func:`estimate` dict; ``headline`` names the metric the
    report leads with, oriented so that higher means more leakage. Baselines an adversary
    gets without the release (majority class, a model never trained on the record, ...)
    are metrics too, named ``*_baseline``. ``details`` holds JSON-serialisable numbers
    only; anything that carries text from the data (reconstructions, completions) goes in
    ``samples``, which aggregate-only mode drops.
    """

    attack: str
    kind: str
    description: str = ""
    surfaces: list[str] = field(default_factory=list)
    status: str = "ok"  # ok | not_applicable | error
    reason: str | None = None
    headline: str | None = None
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind not in LEAKAGE_KINDS:
            raise ValueError(
                f"unknown leakage kind {self.kind!r}; allowed: {', '.join(LEAKAGE_KINDS)}"
            )
        if self.status == "ok" and (self.headline is None or self.headline not in self.metrics):
            raise ValueError(
                f"leakage result {self.attack!r}: headline must name one of its metrics"
            )

    def to_dict(self, aggregate_only: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "attack": self.attack,
            "kind": self.kind,
            "description": self.description,
            "surfaces": list(self.surfaces),
            "status": self.status,
            "reason": self.reason,
        }
        if self.status == "ok":
            d["headline"] = self.headline
            d["metrics"] = self.metrics
            d["details"] = self.details
            d["samples"] = [] if aggregate_only else list(self.samples)
        return d


class LeakageAttack(ABC):
    """An attack measuring leakage other than per-example membership.

    ``OPTIONS`` maps each config option to ``(type, default)``; the config loader checks
    ``[attacks.options.<name>]`` against it before any training.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    kind: ClassVar[str]
    requires: ClassVar[frozenset[Surface]]
    summary: ClassVar[str] = ""  # as :class:`Attack`'s
    needs: ClassVar[tuple[str, ...]] = ()
    cost: ClassVar[str] = ""
    OPTIONS: ClassVar[dict[str, tuple[type | tuple[type, ...], Any]]] = {}

    def __init__(self, **options: Any) -> None:
        unknown = set(options) - set(self.OPTIONS)
        if unknown:
            raise ValueError(
                f"unknown option(s) {', '.join(sorted(unknown))} for attack {self.name!r}; "
                f"allowed: {', '.join(sorted(self.OPTIONS)) or 'none'}"
            )
        self.options = {k: options.get(k, default) for k, (_, default) in self.OPTIONS.items()}
        self.validate()

    def validate(self) -> None:  # noqa: B027 - optional hook
        """Check option values; raise ValueError naming the bad one."""

    @abstractmethod
    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        """Attack ``release``; return an ``ok`` result with metrics and a headline."""


def run_leakage_attack(
    attack: LeakageAttack, release: ReleasedModel, context: AttackContext
) -> LeakageResult:
    """Run one leakage attack: ``not_applicable`` for a missing surface, ``error`` (with the
    message) for a ValueError raised by the attack, never an exception for either."""
    surfaces = sorted(s.value for s in attack.requires)
    missing = sorted(s.value for s in attack.requires - release.surfaces)
    if missing:
        return LeakageResult(
            attack.name,
            attack.kind,
            attack.description,
            surfaces,
            status="not_applicable",
            reason=f"not applicable: needs {', '.join(missing)}",
        )
    try:
        result = attack.run(release, context)
    except ValueError as exc:
        return LeakageResult(
            attack.name, attack.kind, attack.description, surfaces, "error", str(exc)
        )
    result.surfaces = result.surfaces or surfaces
    result.description = result.description or attack.description
    return result
