"""The typed record of one ``results.json``: what the verdict, the gate, the compare
command and the HTML report read, kept apart from the code that runs the attacks (as
TF Privacy keeps its result records apart from its attacks).

Two ways in:

* :meth:`ResultsRecord.load` / :meth:`ResultsRecord.from_dict` read a file from outside
  (``gate``, ``compare``): the structure is checked once, here, and a malformed file is
  one :class:`~privacy_audit.ground.errors.DataError` naming the file and the key, never a
  ``KeyError`` traceback further in.
* :meth:`ResultsRecord.of` / :meth:`RunRecord.of` wrap a dictionary the suite has just
  assembled, or one built by hand in a test, without checking it: every field reads as
  the readers used to guard it (a field of the wrong type reads as absent).

Every record keeps its dictionary as ``raw``, for the parts not typed yet (per-example
scores, leakage details, the users' counts, the environment).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_audit.ground.errors import DataError
from privacy_audit.reports.formatting import as_finite, as_float

#: the schema versions of results.json this suite reads
KNOWN_SCHEMA_VERSIONS = frozenset({1})

_EMPTY: Mapping[str, Any] = {}


def _dict(x: Any) -> Mapping[str, Any] | None:
    return x if isinstance(x, dict) else None


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


# --------------------------------------------------------------------------- #
# Records
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class MetricRecord:
    """One estimate: ``{"value", "ci_low", "ci_high", "n", ...}`` (NaN and non-numbers
    read as ``None``; infinities are kept, see :func:`as_float`)."""

    key: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int | None
    raw: Mapping[str, Any]

    @classmethod
    def of(cls, key: str, m: Any) -> MetricRecord | None:
        if not isinstance(m, dict):
            return None
        return cls(
            key,
            as_float(m.get("value")),
            as_float(m.get("ci_low")),
            as_float(m.get("ci_high")),
            _int(m.get("n")),
            m,
        )

    @property
    def finite_value(self) -> float | None:
        v = self.value
        return v if v is not None and math.isfinite(v) else None


@dataclass(frozen=True)
class AttackRecord:
    """One attack's entry: name, status and its metrics (the estimates only; scalar
    summaries such as ``metrics.n_members`` stay in ``raw``)."""

    name: str | None
    status: str | None
    metrics: Mapping[str, MetricRecord]
    n_members: Any
    n_nonmembers: Any
    raw: Mapping[str, Any]

    @classmethod
    def of(cls, a: Mapping[str, Any]) -> AttackRecord:
        ms = a.get("metrics")
        metrics = {}
        if isinstance(ms, dict):
            for k, m in ms.items():
                rec = MetricRecord.of(k, m)
                if rec is not None:
                    metrics[k] = rec
        return cls(
            a.get("attack"),
            a.get("status"),
            metrics,
            a.get("n_members"),
            a.get("n_nonmembers"),
            a,
        )

    def metric(self, key: str) -> MetricRecord | None:
        return self.metrics.get(key)

    def value(self, key: str) -> float | None:
        m = self.metrics.get(key)
        return m.value if m is not None else None

    @property
    def measured(self) -> bool:
        """Status ``ok`` with a numeric AUC: an attack a verdict can read."""
        return self.status == "ok" and self.value("auc") is not None

    def resolvable(self, fpr: float) -> bool:
        """Whether the sample resolves the TPR at ``fpr`` (reports/resolution.py, the one
        rule every surface uses)."""
        from privacy_audit.reports.resolution import tpr_standing

        return bool(tpr_standing(self.raw, fpr)["resolvable"])


@dataclass(frozen=True)
class ClaimRecord:
    """The run's privacy claim: ``notion`` "none" (or missing) is no formal claim."""

    epsilon: Any
    delta: Any
    unit: Any
    notion: Any
    proven: bool
    raw: Mapping[str, Any]

    @classmethod
    def of(cls, c: Any) -> ClaimRecord:
        c = c if isinstance(c, dict) else {}
        return cls(
            c.get("epsilon"),
            c.get("delta"),
            c.get("unit"),
            c.get("notion"),
            bool(c.get("proven")),
            c,
        )

    @property
    def formal(self) -> bool:
        return self.notion not in (None, "none")

    @property
    def finite_epsilon(self) -> float | None:
        """The finite claimed ε of a formal claim, else ``None``."""
        return as_finite(self.epsilon) if self.formal else None


@dataclass(frozen=True)
class SplitCheckRecord:
    """The split check (stats/split_check.py): were members and non-members drawn alike?"""

    shifted: bool
    confidence: Any
    advice: Any
    blind: Mapping[str, Any]
    raw: Mapping[str, Any]

    @classmethod
    def of(cls, s: Any) -> SplitCheckRecord | None:
        if not isinstance(s, dict):
            return None
        blind = s.get("blind") or {}
        return cls(s.get("shifted") is True, s.get("confidence"), s.get("advice"), blind, s)

    @property
    def blind_auc(self) -> Mapping[str, Any]:
        return (self.blind.get("auc") if hasattr(self.blind, "get") else None) or {}


@dataclass(frozen=True)
class EpsilonAuditRecord:
    """The run's ε audits (``epsilon_audit``): each audit (dicts), the trade-off test."""

    status: Any
    audits: tuple[Mapping[str, Any], ...]
    tradeoff: Mapping[str, Any] | None
    raw: Mapping[str, Any]

    @classmethod
    def of(cls, e: Any) -> EpsilonAuditRecord | None:
        if not isinstance(e, dict):
            return None
        audits = e.get("audits")
        audits = tuple(a for a in audits if isinstance(a, dict)) if isinstance(audits, list) else ()
        return cls(e.get("status"), audits, _dict(e.get("tradeoff")), e)


@dataclass(frozen=True)
class BatteryChanceRecord:
    """The battery's family-wise test of "no attack beats chance" (audit/results.py)."""

    p_value: float | None
    alpha: float | None
    attacks: tuple[Any, ...]
    permutations: Any
    raw: Mapping[str, Any]

    @classmethod
    def of(cls, b: Any) -> BatteryChanceRecord | None:
        if not isinstance(b, dict):
            return None
        return cls(
            as_float(b.get("p_value")),
            as_float(b.get("alpha")),
            tuple(b.get("attacks") or []),
            b.get("permutations"),
            b,
        )

    @property
    def rejects_chance(self) -> bool:
        p, alpha = self.p_value, self.alpha
        return p is None or alpha is None or p <= alpha


@dataclass(frozen=True)
class UsersRecord:
    """The users section of a run whose data names users (``run["users"]``)."""

    attacks: tuple[AttackRecord, ...]
    verdict: Mapping[str, Any]
    counts: Mapping[str, Any]
    raw: Mapping[str, Any]

    @classmethod
    def of(cls, u: Any) -> UsersRecord | None:
        if not isinstance(u, dict):
            return None
        attacks = u.get("attacks")
        attacks = attacks if isinstance(attacks, list) else []
        return cls(
            tuple(AttackRecord.of(a) for a in attacks if isinstance(a, dict)),
            u.get("verdict") or {},
            u.get("counts") or {},
            u,
        )


@dataclass(frozen=True)
class RunRecord:
    """One run of results.json (audit/results.py ``run_record`` writes it)."""

    name: Any
    defense: Any
    claim: ClaimRecord
    attacks: tuple[AttackRecord, ...]
    strongest_attack: Any
    strongest_attack_by_auc: Any
    strongest_attack_low_fpr: Mapping[str, Any] | None
    battery_chance: BatteryChanceRecord | None
    split_check: SplitCheckRecord | None
    epsilon_audit: EpsilonAuditRecord | None
    users: UsersRecord | None
    leakage: tuple[AttackRecord, ...]
    utility: Mapping[str, Any] | None
    uninitialized_weights: tuple[Any, ...]
    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def of(cls, run: Any) -> RunRecord:
        """The record of a run dict (unchecked; see the module docstring), or ``run``
        itself when it already is one."""
        if isinstance(run, RunRecord):
            return run
        r = run if isinstance(run, dict) else {}
        attacks = r.get("attacks") or []
        attacks = attacks if isinstance(attacks, list) else []
        missing = r.get("uninitialized_weights")
        leakage = r.get("leakage") or []
        leakage = leakage if isinstance(leakage, list) else []
        return cls(
            name=r.get("name"),
            defense=r.get("defense"),
            claim=ClaimRecord.of(r.get("claim")),
            attacks=tuple(AttackRecord.of(a) for a in attacks if isinstance(a, dict)),
            strongest_attack=r.get("strongest_attack"),
            strongest_attack_by_auc=r.get("strongest_attack_by_auc"),
            strongest_attack_low_fpr=_dict(r.get("strongest_attack_low_fpr")),
            battery_chance=BatteryChanceRecord.of(r.get("battery_chance")),
            split_check=SplitCheckRecord.of(r.get("split_check")),
            epsilon_audit=EpsilonAuditRecord.of(r.get("epsilon_audit")),
            users=UsersRecord.of(r.get("users")),
            leakage=tuple(AttackRecord.of(a) for a in leakage if isinstance(a, dict)),
            utility=_dict(r.get("utility")),
            uninitialized_weights=tuple(missing) if isinstance(missing, list) else (),
            raw=r,
        )

    @property
    def display_name(self) -> str:
        return str(self.name or self.defense or "unnamed run")

    @property
    def shifted(self) -> bool:
        """Whether the split check found the two sets of texts shifted."""
        return self.split_check is not None and self.split_check.shifted

    def measured_attacks(self) -> list[AttackRecord]:
        """Attacks with status ``ok`` and a numeric AUC."""
        return [a for a in self.attacks if a.measured]

    def measured_attack(self, name: Any) -> AttackRecord | None:
        return next((a for a in self.measured_attacks() if a.name == name), None)

    def strongest(self) -> AttackRecord | None:
        """The strongest measured attack: the one the run names when it names a measured
        attack; otherwise the highest AUC point estimate (first on ties)."""
        candidates = self.measured_attacks()
        if not candidates:
            return None
        if self.strongest_attack is not None:
            for a in candidates:
                if a.name == self.strongest_attack:
                    return a
        return max(candidates, key=lambda a: a.value("auc") or 0.0)

    def gated_attacks(self) -> list[AttackRecord]:
        """The per-text attacks and, when the data names users, the user-level ones."""
        return [*self.attacks, *(self.users.attacks if self.users else ())]


@dataclass(frozen=True)
class ResultsRecord:
    """One results.json: its header, its runs and the raw dictionary."""

    schema_version: Any
    tool: Mapping[str, Any]
    title: Any
    created: Any
    seed: Any
    config: Any
    aggregate_only: bool
    runs: tuple[RunRecord, ...]
    comparison: Mapping[str, Any] | None
    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def of(cls, results: Any) -> ResultsRecord:
        """The record of a results dict (unchecked), or ``results`` when it is one."""
        if isinstance(results, ResultsRecord):
            return results
        d = results if isinstance(results, dict) else {}
        runs = d.get("runs") or []
        runs = runs if isinstance(runs, list) else []
        return cls(
            schema_version=d.get("schema_version"),
            tool=_dict(d.get("tool")) or {},
            title=d.get("title"),
            created=d.get("created"),
            seed=d.get("seed"),
            config=d.get("config", {}),
            aggregate_only=bool(d.get("aggregate_only", False)),
            runs=tuple(RunRecord.of(r) for r in runs if isinstance(r, dict)),
            comparison=_dict(d.get("comparison")),
            raw=d,
        )

    @classmethod
    def from_dict(
        cls, d: Any, source: str = "results", what: str = "results file"
    ) -> ResultsRecord:
        """Check the structure of a results dictionary read from ``source`` (a path, for
        the message) and return its record; :class:`DataError` names the key otherwise."""
        validate(d, source, what)
        return cls.of(d)

    @classmethod
    def load(cls, path: str | Path, what: str = "results file") -> ResultsRecord:
        """Read and check a results.json (one :class:`DataError` when it is not one)."""
        return cls.from_dict(read_results(path, what), str(Path(path)), what)


# --------------------------------------------------------------------------- #
# The boundary: reading and checking a file
# --------------------------------------------------------------------------- #
def read_results(path: str | Path, what: str = "results file") -> Any:
    """The parsed JSON of a results file; :class:`DataError` when it is not a file."""
    p = Path(path)
    if not p.is_file():
        if p.is_dir():
            raise DataError(f"{what} {str(p)!r} is a directory, not a results.json")
        if p.exists():  # a device or a pipe: reading it could block or return nothing
            raise DataError(f"{what} {str(p)!r} is not a regular file (a device or a pipe)")
        raise DataError(f"{what} {str(p)!r} does not exist")
    from privacy_audit.ground.io import read_json

    return read_json(p, what)


def metric_range(key: str) -> tuple[float, float] | None:
    """The values a gated metric can take (None: not range-checked)."""
    if key == "auc" or key.startswith("tpr_at_fpr_"):
        return (0.0, 1.0)
    if key == "advantage":
        return (-1.0, 1.0)
    if key == "epsilon_lower_bound":
        return (0.0, math.inf)
    return None


def check_schema(results: Mapping[str, Any], what: str, path: Path | str) -> None:
    v = results.get("schema_version")
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v not in KNOWN_SCHEMA_VERSIONS:
        raise DataError(
            f"{what} {str(path)!r} has schema_version {v!r}, which this privacy-audit does "
            f"not know (it reads {', '.join(map(str, sorted(KNOWN_SCHEMA_VERSIONS)))}); "
            "regenerate it with this version"
        )


def validate(results: Any, source: str, what: str = "results file") -> None:
    """Check the structure every reader relies on; raise :class:`DataError` naming the
    file (``source``) and the key otherwise."""
    if not isinstance(results, dict) or not isinstance(results.get("runs"), list):
        raise DataError(
            f"{what} {source!r} has no 'runs' list; is it a privacy-audit results.json?"
        )
    check_schema(results, what, source)
    for i, run in enumerate(results["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("name"), str):
            raise DataError(f"{what} {source!r}: run #{i + 1} is not an object with a 'name'")
        _validate_run(run, f"{what} {source!r}")


def _validate_run(run: Mapping[str, Any], where: str) -> None:
    attacks = run.get("attacks", [])
    users = run.get("users")
    if users is not None and (
        not isinstance(users, dict) or not isinstance(users.get("attacks", []), list)
    ):
        raise DataError(
            f"{where}: run {run['name']!r} has a 'users' entry that is not an "
            "object with an 'attacks' list"
        )
    if isinstance(attacks, list) and isinstance(users, dict):
        attacks = [*attacks, *users.get("attacks", [])]
    if not isinstance(attacks, list) or not all(
        isinstance(a, dict) and isinstance(a.get("attack"), str) for a in attacks
    ):
        raise DataError(
            f"{where}: run {run['name']!r} has an 'attacks' entry that is not "
            "an object with an 'attack' name"
        )
    leaks = run.get("leakage") or [] if isinstance(run.get("leakage"), list) else []
    for a in [*attacks, *leaks]:
        if isinstance(a, dict) and "metrics" in a:
            _validate_metrics(a, run["name"], where)
    leakage = run.get("leakage", [])
    if not isinstance(leakage, list) or not all(
        isinstance(a, dict) and isinstance(a.get("attack"), str) for a in leakage
    ):
        raise DataError(
            f"{where}: run {run['name']!r} has a 'leakage' entry that is not "
            "an object with an 'attack' name"
        )
    ea = run.get("epsilon_audit")
    if ea is not None and (
        not isinstance(ea, dict)
        or not isinstance(ea.get("audits", []), list)
        or not all(isinstance(a, dict) for a in ea.get("audits", []))
    ):
        raise DataError(
            f"{where}: run {run['name']!r} has an 'epsilon_audit' that is not "
            "an object with an 'audits' list"
        )


def _validate_metrics(a: Mapping[str, Any], run: str, where: str) -> None:
    if not isinstance(a["metrics"], dict):
        raise DataError(
            f"{where}: the 'metrics' of attack {a.get('attack')!r} of run "
            f"{run!r} is {type(a['metrics']).__name__}, not an object"
        )
    for key, m in a["metrics"].items():
        if not isinstance(m, dict):
            continue  # a scalar summary, not an estimate; never gated
        at = f"{where}: metric {key!r} of attack {a.get('attack')!r} of run {run!r}"
        for field_ in ("value", "ci_low", "ci_high"):
            x = m.get(field_)
            if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float))):
                raise DataError(f"{at}: {field_} must be a number or null, got {x!r}")
            if x is not None and not math.isfinite(x):
                # the suite writes an unmeasured number as null, never NaN or ∞
                raise DataError(
                    f"{at}: {field_} is {x!r}; a results.json holds null for a "
                    "number that was not measured, never a non-finite one"
                )
            lo_hi = metric_range(key)
            if x is not None and lo_hi is not None and not lo_hi[0] <= x <= lo_hi[1]:
                raise DataError(
                    f"{at}: {field_} {x!r} is outside the metric's range "
                    f"[{lo_hi[0]:g}, {lo_hi[1]:g}]"
                )
        lo, hi = m.get("ci_low"), m.get("ci_high")
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo > hi:
            raise DataError(f"{at}: ci_low {lo!r} is above ci_high {hi!r}")
