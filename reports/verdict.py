"""Plain-language verdicts and run comparisons, computed from a results dict.

Everything here is a pure function of the ``runs`` entries of the results
dictionary (the content of ``results.json``); no model is ever touched.

Conventions: a higher attack score means "member"; members are the positive
class. All intervals are the 95% intervals stored in the results.
"""

from __future__ import annotations

import math
from typing import Any

from privacy_audit.reports import sentences as S
from privacy_audit.reports.claim_text import claim_details, describe_claim
from privacy_audit.reports.epsilon_readout import epsilon_audit_bounds, has_claim
from privacy_audit.reports.formatting import as_finite, as_float, ci, num, pct_ci, small
from privacy_audit.reports.results_record import (
    AttackRecord,
    ClaimRecord,
    EpsilonAuditRecord,
    RunRecord,
)

LEVELS = (
    "high",
    "moderate",
    "low",
    "inconclusive",
    "not-measured",
    "split-shifted",
    "invalid-attack",
)

#: What an AUC interval entirely below chance means (the ``invalid-attack`` level).
INVALID_ATTACK_TEXT = "the scores point the wrong way: check the labels or the score direction"

#: AUC lower CI bound at or above which leakage is called "high".
HIGH_AUC_CI_LOW = 0.6
#: TPR@1%FPR lower CI bound at or above which leakage is called "high".
HIGH_TPR_CI_LOW = 0.05
#: AUC of a random guess.
CHANCE_AUC = 0.5
#: Largest per-class sample size an "inconclusive" verdict names (beyond it: "more than").
MAX_NAMED_SAMPLE = 10_000_000

TPR_1 = "tpr_at_fpr_0.01"
TPR_01 = "tpr_at_fpr_0.001"
EPS_LB = "epsilon_lower_bound"

# Claim units whose guarantee implies an example-level guarantee with the same
# epsilon (user-level protects every example of the user). A token-level claim
# does not bound example-level membership (group privacy multiplies epsilon).
_COMPARABLE_UNITS = (None, "example", "sequence", "user")
# Notions whose epsilon is the usual (epsilon, delta) indistinguishability
# parameter between neighbouring datasets. Metric DP scales with a distance.
_COMPARABLE_NOTIONS = ("central-dp", "local-dp")


# --------------------------------------------------------------------------- #
# Accessors
# --------------------------------------------------------------------------- #
def metric(attack: dict | None, key: str) -> dict | None:
    """The metric dict ``attack["metrics"][key]`` or ``None``."""
    if not isinstance(attack, dict):
        return None
    m = AttackRecord.of(attack).metric(key)
    return m.raw if m is not None else None


def metric_value(attack: dict | None, key: str) -> float | None:
    return AttackRecord.of(attack).value(key) if isinstance(attack, dict) else None


def ok_attacks(run: dict | RunRecord) -> list[dict]:
    """Attacks of ``run`` with status ``ok`` and a numeric AUC."""
    return [a.raw for a in RunRecord.of(run).measured_attacks()]


def strongest_attack(run: dict | RunRecord) -> dict | None:
    """The strongest measured attack of ``run`` (:meth:`RunRecord.strongest`): the run's
    own ``strongest_attack`` when it names an ``ok`` attack with an AUC, else the highest
    AUC point estimate (first on ties); ``None`` when no attack was measured."""
    best = RunRecord.of(run).strongest()
    return best.raw if best is not None else None


def attack_name(attack: dict | None) -> str:
    if not attack:
        return "none"
    return str(attack.get("attack") or "unnamed attack")


def run_name(run: dict | RunRecord) -> str:
    return RunRecord.of(run).display_name


# --------------------------------------------------------------------------- #
# Claims
# --------------------------------------------------------------------------- #
def claimed_epsilon(run: dict | RunRecord) -> float | None:
    """The finite claimed epsilon of a run, or ``None`` (no formal claim)."""
    return RunRecord.of(run).claim.finite_epsilon


# --------------------------------------------------------------------------- #
# Epsilon audit (run["epsilon_audit"])
# --------------------------------------------------------------------------- #
#: Maximum number of evidence strings quoted in a verdict.
MAX_EVIDENCE_IN_VERDICT = 4


def _audit_record(run: Any) -> EpsilonAuditRecord | None:
    return RunRecord.of(run).epsilon_audit if isinstance(run, dict | RunRecord) else None


def epsilon_audit(run: Any) -> dict | None:
    """The run's ``epsilon_audit`` dict, or ``None`` when it has none."""
    ea = _audit_record(run)
    return ea.raw if ea is not None else None


def epsilon_audit_entries(run: Any) -> list[dict]:
    """The audit records of the run's ``epsilon_audit`` (dicts only)."""
    ea = _audit_record(run)
    return list(ea.audits) if ea is not None else []


def epsilon_audit_tradeoff(run: Any) -> dict | None:
    """The trade-off test of the run's ``epsilon_audit``, or ``None``."""
    ea = _audit_record(run)
    return ea.tradeoff if ea is not None else None


def audit_violated(run: Any) -> bool:
    """True when the run's ε audit reports its claim as violated."""
    ea = _audit_record(run)
    return ea is not None and ea.status == "violated"


def audited_claim(run: Any) -> tuple[float | None, float | None]:
    """``(claimed ε, claimed δ)`` as tested by the ε audit.

    The audit's own ``claimed_epsilon``/``claimed_delta`` are used when present;
    otherwise the run's claim. ε is ``None`` for no (finite) claim.
    """
    ea = epsilon_audit(run) or {}
    claim = RunRecord.of(run).claim if isinstance(run, dict | RunRecord) else ClaimRecord.of(None)
    if "claimed_epsilon" in ea:
        eps = as_finite(ea.get("claimed_epsilon"))
    else:
        eps = claim.finite_epsilon
    if "claimed_delta" in ea:
        delta = as_float(ea.get("claimed_delta"))
    else:
        delta = as_float(claim.delta) if claim.formal else None
    return eps, delta


def audit_exceeds(audit: dict, eps_claim: float | None) -> bool:
    """Whether one audit's lower bound exceeds the claimed ε.

    The audit's own ``exceeds_claim`` flag wins; without it the bound is
    compared with the claim here.
    """
    if audit.get("status", "ok") != "ok":
        return False
    flag = audit.get("exceeds_claim")
    if isinstance(flag, bool):
        return flag
    lb = as_float(audit.get("epsilon_lb"))
    return eps_claim is not None and lb is not None and lb > eps_claim


#: What a bound at its ceiling means (the most this many trials could certify).
AT_CEILING = "at least; the sample cannot certify more"


def _at_ceiling(value: float | None, ceiling: Any) -> bool:
    c = as_finite(ceiling)
    return value is not None and c is not None and c > 0 and value >= c * (1 - 1e-6)


def epsilon_headline(run: dict[str, Any]) -> dict[str, Any] | None:
    """The one ε lower bound a run leads with, the same in the report's summary, its
    verdict, the stdout VERDICT line and the gate summary; ``None`` when nothing bounds ε.

    The headline is fixed by the kind of run before any number is seen, so its 95%
    confidence holds (the largest of several 95% bounds, picked after the fact, would hold
    with less): for a run whose privacy claim was audited (``epsilon_audit``), its first ε
    audit in the recorded order (the gradient canaries: the audit built to reach the
    claim); otherwise the ε lower bound of the strongest membership attack, the one the
    verdict names. An attack's bound is left out when the split check found the sets
    shifted (it then measures the texts as well as the model). Every other bound that is
    larger is listed in ``larger``, named, beside it. A bound at its ceiling (the most the
    sample could certify, even for a perfect attack) says :data:`AT_CEILING`.

    Returns ``{"value", "source", "kind" ("attack" | "epsilon audit"), "ceiling",
    "at_ceiling", "why", "larger": [{"value", "source", "ceiling", "at_ceiling"}]}``."""
    rec = RunRecord.of(run)
    ea = rec.epsilon_audit
    by_name = {str(a.get("name") or "unnamed audit"): a for a in (ea.audits if ea else ())}
    audits = []
    for name, lb in epsilon_audit_bounds(rec):
        v = as_finite(lb)
        if v is not None:
            ceiling = as_finite((by_name.get(name) or {}).get("ceiling"))
            audits.append(
                {
                    "value": v,
                    "source": S.SOURCE_AUDIT(audit=name),
                    "kind": "epsilon audit",
                    "ceiling": ceiling,
                    "at_ceiling": _at_ceiling(v, ceiling),
                }
            )
    attack = None
    best = rec.strongest()
    lb = best.metric(EPS_LB) if best is not None else None
    v = lb.finite_value if lb else None
    if v is not None and not rec.shifted:
        ceiling = as_finite(lb.raw.get("ceiling"))
        attack = {
            "value": v,
            "source": S.SOURCE_ATTACK(attack=attack_name(best.raw)),
            "kind": "attack",
            "ceiling": ceiling,
            "at_ceiling": _at_ceiling(v, ceiling),
        }
    if audits and has_claim(rec):
        head = {**audits[0], "why": "the run's privacy claim was audited: its first ε audit"}
        rest = audits[1:] + ([attack] if attack else [])
    elif attack is not None:
        head = {**attack, "why": "the bound of the attack the verdict names"}
        rest = audits
    elif audits:
        head = {
            **audits[0],
            "why": "no claim and no attack bound: an ε audit of the released model",
        }
        rest = audits[1:]
    else:
        return None
    head["why"] += " (fixed before the numbers, so its confidence holds)"
    head["larger"] = sorted(
        (b for b in rest if b["value"] > head["value"]), key=lambda b: -b["value"]
    )
    return head


def headline_text(h: dict[str, Any] | None, larger_word: str = "larger") -> str:
    """``ε ≥ 1.34 (strongest attack: lm-loss); larger: ε ≥ 9.51 (ε audit: gradient
    canaries; at least; the sample cannot certify more)`` ("" without a headline)."""
    if not h:
        return ""

    def one(b: dict[str, Any]) -> str:
        extra = S.SEMI_CLAUSE(clause=AT_CEILING) if b.get("at_ceiling") else ""
        return S.BOUND(eps=num(b["value"]), source=b["source"], extra=extra)

    text = one(h)
    if h.get("larger"):
        rest = ", ".join(one(b) for b in h["larger"])
        text = S.HEADLINE_MORE(first=text, word=larger_word, rest=rest)
    return text


def _audit_bound_text(audit: dict) -> str:
    parts = []
    conf = as_float(audit.get("confidence"))
    if conf is not None:
        parts.append(f"{100 * conf:g}%")
    if audit.get("delta") is not None:
        parts.append(f"δ = {small(audit.get('delta'))}")
    cond = f" ({', '.join(parts)})" if parts else ""
    return f"ε ≥ {num(as_float(audit.get('epsilon_lb')))}{cond}"


def audit_evidence(run: Any) -> list[str]:
    """Evidence for the run's ε-audit outcome, as plain strings.

    The audit's ``evidence`` list when it has one; otherwise, for a violated
    claim, sentences derived from the audits whose bound exceeds the claim and
    from the trade-off test's significant violations.
    """
    ea = epsilon_audit(run)
    if not ea:
        return []
    given = ea.get("evidence")
    if isinstance(given, list | tuple):
        items = [str(e) for e in given if e is not None and str(e).strip()]
        if items:
            return items
    elif isinstance(given, str) and given.strip():
        return [given]
    if ea.get("status") != "violated":
        return []
    eps, _ = audited_claim(run)
    out = []
    for a in epsilon_audit_entries(run):
        if audit_exceeds(a, eps):
            out.append(
                S.EVIDENCE_AUDIT(
                    audit=a.get("name") or "unnamed audit",
                    bound=_audit_bound_text(a),
                    eps=num(eps),
                )
            )
    tr = epsilon_audit_tradeoff(run)
    if tr and tr.get("violated"):
        pts = tr.get("points") if isinstance(tr.get("points"), list) else []
        out.append(S.EVIDENCE_TRADEOFF(attack=tr.get("attack") or "strongest", n=len(pts)))
    return out


def _audit_violation_text(run: dict) -> str:
    eps, delta = audited_claim(run)
    claim = RunRecord.of(run).claim
    stated = f"ε = {num(eps)}" if eps is not None else "claimed ε"
    if eps is not None and delta is not None:
        stated += f", δ = {small(delta)}"
    details = claim_details(claim.raw) if claim.formal else ""
    evidence = audit_evidence(run)
    cited = ""
    if evidence:
        shown = evidence[:MAX_EVIDENCE_IN_VERDICT]
        cited = S.EVIDENCE(items="; ".join(e.rstrip(". ") for e in shown))
        if len(evidence) > len(shown):
            cited += S.EVIDENCE_MORE(n=len(evidence) - len(shown))
    return S.AUDIT_VIOLATED(
        stated=stated, details=f" ({details})" if details else "", evidence=cited
    )


def check_claim(run: dict, attack: dict | None = None) -> dict:
    """Compare the run's privacy claim with the empirical evidence.

    As :func:`check_attack_claim` (the strongest attack's ε lower bound),
    except that a run whose ``epsilon_audit`` status is ``"violated"`` is
    always ``"violated"``, with the audit's evidence cited in the text.
    """
    result = check_attack_claim(run, attack)
    if not audit_violated(run):
        audit = RunRecord.of(run).epsilon_audit
        # A dedicated ε audit (e.g. gradient canaries, ceiling above the claim) can test a
        # claim the membership attacks' sample size cannot: prefer its "consistent".
        consistent = audit is not None and audit.status == "consistent"
        if consistent and result["status"] in ("untestable", "unmeasured"):
            return {
                "status": "consistent",
                "text": "The ε audits could have detected a violation of the claimed ε and found none; "
                "an audit can contradict a claim but never confirm it.",
            }
        return result
    text = _audit_violation_text(run)
    if result["status"] in ("violated", "not-comparable"):
        text += " " + result["text"]
    return {"status": "violated", "text": text}


def check_attack_claim(run: dict, attack: dict | None = None) -> dict:
    """Compare the run's privacy claim with the empirical epsilon lower bound.

    ``attack`` defaults to the strongest attack. Returns ``{"status", "text"}``
    where status is one of:

    * ``"no-claim"``: no finite claimed ε (notion "none", ε null or infinite);
    * ``"unmeasured"``: a claim exists but no ε lower bound is available;
    * ``"violated"``: the lower bound exceeds the claimed ε and is comparable
      with it: notion central/local DP, unit example/sequence/user (or
      unstated), and the claim's δ is not larger than the audit's δ (an
      (ε, δ_c)-DP mechanism is (ε, δ)-DP for every δ ≥ δ_c; a missing claim δ
      means pure ε-DP);
    * ``"not-comparable"``: the bound exceeds the claimed ε but the claim is
      token-level, metric DP, or stated at a larger δ, so this is not a formal
      contradiction;
    * ``"untestable"``: not exceeded, and the bound's ceiling (the most any
      attack could certify with this many samples) is at or below the claim,
      so no violation could have been detected;
    * ``"consistent"``: not exceeded although a violation was detectable.
      An audit can contradict a claim but never confirm it.
    """
    rec = RunRecord.of(run)
    if attack is None:
        attack = strongest_attack(rec)
    claim = rec.claim.raw
    eps_c = rec.claim.finite_epsilon
    if eps_c is None:
        if rec.claim.formal:
            return {"status": "no-claim", "text": S.CLAIM_NO_NUMBER()}
        return {"status": "no-claim", "text": S.CLAIM_NONE()}
    desc = describe_claim(claim)
    details = claim_details(claim)
    if rec.shifted:
        # the attacks' bounds measure the difference between the two sets of texts as well
        # as memorisation, so they neither contradict nor support a claim (an ε audit's own
        # violation still counts: check_claim reads it)
        return {"status": "unmeasured", "text": S.CLAIM_SHIFTED(claim=desc)}
    lb = metric(attack, EPS_LB)
    lb_v = as_float(lb.get("value")) if lb else None
    if lb_v is None:
        return {"status": "unmeasured", "text": S.CLAIM_NO_BOUND(claim=desc)}
    bound = S.BOUND_WITH_CONDITIONS(eps=num(lb_v), conditions=_bound_conditions(lb))
    if lb_v > eps_c:
        reason = _incomparable_reason(claim, lb)
        if reason is None:
            return {
                "status": "violated",
                "text": S.CLAIM_VIOLATED(bound=bound, eps=num(eps_c), details=details),
            }
        return {
            "status": "not-comparable",
            "text": S.CLAIM_NOT_COMPARABLE(bound=bound, eps=num(eps_c), reason=reason),
        }
    if claim.get("unit") is None:  # not about examples at all: a membership bound says nothing
        return {
            "status": "not-comparable",
            "text": S.CLAIM_NO_UNIT(
                bound=bound, eps=num(eps_c), reason=_incomparable_reason(claim, lb)
            ),
        }
    ceiling = as_float(lb.get("ceiling"))
    if ceiling is not None and ceiling <= eps_c:
        return {
            "status": "untestable",
            "text": S.CLAIM_UNTESTABLE(bound=bound, eps=num(eps_c), ceiling=num(ceiling)),
        }
    return {
        "status": "consistent",
        "text": S.CLAIM_CONSISTENT(bound=bound, eps=num(eps_c), details=details),
    }


def _bound_conditions(lb: dict) -> str:
    parts = []
    if lb.get("delta") is not None:
        parts.append(f"δ = {small(lb.get('delta'))}")
    conf = as_float(lb.get("confidence"))
    if conf is not None:
        parts.append(f"{100 * conf:g}% confidence")
    # a hand-made or old record without them still says so, never an empty "()"
    return ", ".join(parts) or "δ and confidence not recorded"


def _incomparable_reason(claim: dict, lb: dict) -> str | None:
    if claim.get("notion") not in _COMPARABLE_NOTIONS:
        return S.REASON_METRIC_DP()
    if claim.get("unit") is None:  # e.g. dp-attention: one feature column of one layer
        return S.REASON_NO_UNIT()
    if claim.get("unit") not in _COMPARABLE_UNITS:
        return S.REASON_UNIT(unit=claim.get("unit"))
    d_claim, d_audit = as_float(claim.get("delta")), as_float(lb.get("delta"))
    if d_claim is not None and d_audit is not None and d_claim > d_audit:
        return S.REASON_DELTA(claim_delta=small(d_claim), audit_delta=small(d_audit))
    return None


# --------------------------------------------------------------------------- #
# Verdict
# --------------------------------------------------------------------------- #
def measured_metric(attack: dict | None, key: str) -> dict | None:
    """The metric dict when it holds a finite value and, for a TPR, the sample resolves
    it (:func:`privacy_audit.reports.resolution.tpr_standing`, the rule every surface
    uses); else ``None``."""
    m = metric(attack, key)
    if not m or as_finite(m.get("value")) is None:
        return None
    if m.get("below_resolution") is True or m.get("status") == "below_resolution":
        return None
    if key.startswith("tpr_at_fpr_"):
        from privacy_audit.reports.resolution import tpr_standing

        if not tpr_standing(attack, float(key[len("tpr_at_fpr_") :]))["resolvable"]:
            return None
    return m


def needed_n(n: int | None, value: float, half_width: float, gap: float) -> int | None:
    """Per-class sample size at which an interval of ``half_width`` at ``n`` per class
    shrinks (as 1/sqrt(n)) to ``gap``: the size that would move its end past a
    threshold ``gap`` away from ``value``. ``None`` when it cannot be estimated."""
    if n is None or n < 1 or gap <= 0 or half_width <= 0:
        return None
    need = n * (half_width / gap) ** 2
    return int(min(math.ceil(need), MAX_NAMED_SAMPLE + 1))


def verdict_level(run: dict) -> tuple[str, str]:
    """The leakage level of a run and, for "inconclusive", why and what would decide.

    Rules on the strongest attack (first match wins): ``not-measured`` (no attack with
    an AUC); ``invalid-attack`` (the AUC interval lies entirely below 0.5); ``high`` (AUC
    ``ci_low`` >= 0.6 or TPR@1%FPR ``ci_low`` >= 0.05);
    ``moderate`` (AUC ``ci_low`` > 0.5 *and* the battery's family-wise test rejects chance,
    :func:`battery_beats_chance`; or ε lower bound > 0); ``low`` only when the
    attacks could have seen a high leak: AUC ``ci_high`` < 0.6 **and** TPR@1%FPR
    ``ci_high`` < 0.05 (a TPR flagged below resolution, or missing, is not measured);
    otherwise ``inconclusive``: the intervals still reach the HIGH range, so the sample is
    too small to call the leakage low. The reason names the per-class sample size at
    which each interval's upper end would fall below its threshold if the point estimate
    stayed where it is (interval width shrinking as 1/sqrt(n)). Also ``inconclusive``:
    an AUC-route HIGH or MODERATE whose AUC interval starts below the detectable AUC of a
    sub-sampled split check (:func:`split_resolution`).

    The run names its strongest attack two ways (``strongest_attack``: the best TPR at
    the lowest resolvable FPR; ``strongest_attack_by_auc``); when they differ the level is
    the more severe of the two attacks' levels, so a low-FPR leader with a weak AUC never
    reads LOW where the AUC leader does not (two looks, no multiplicity correction: this
    can only make the verdict more cautious)."""
    attack = verdict_attack(run)
    if attack is None:
        return "not-measured", ""
    return _level_of(attack, battery_beats_chance(run), split_resolution(run))


def split_resolution(run: dict) -> dict | None:
    """What the split check could rule out when it read fewer texts than the attacks:
    ``{"detectable_auc", "n_members", "n_nonmembers"}`` of its blind classifier when that
    classifier was sub-sampled (stats/split_check.py ``MAX_BLIND_PER_CLASS``), else None.

    Why it matters: at 10^4-10^5 texts per side an attack's AUC interval is a few
    thousandths wide, while the sub-sampled check detects (80% power, its 1% level) only a
    blind AUC of ``detectable_auc`` (0.556 at 1,000 per class). A difference between the
    two sets smaller than that passes the check and is measured by every attack; an
    effect below it cannot be attributed to training. Without sub-sampling the check
    reads the attacks' own texts and this rule does not apply."""
    check = RunRecord.of(run).split_check
    if check is None:
        return None
    blind = check.blind
    det = as_finite(blind.get("detectable_auc"))
    if blind.get("subsampled") is not True or det is None:
        return None
    return {
        "detectable_auc": det,
        "n_members": blind.get("n_members"),
        "n_nonmembers": blind.get("n_nonmembers"),
    }


def battery_beats_chance(run: dict) -> bool:
    """Whether the battery's family-wise test (``run["battery_chance"]``, audit/results.py
    ``battery_chance_test``) rejects "no attack beats chance" at its level; ``True`` when
    the run has no such test (one attack, or a record written before it existed). The
    MODERATE rule "the strongest attack's AUC interval excludes 0.5" needs it: that attack
    is chosen on the same data, so its own interval excludes 0.5 by chance far more often
    than its level says (7-8% instead of 2.5% for the best of four, docs/verdict-multiplicity.md)."""
    test = RunRecord.of(run).battery_chance
    return test is None or test.rejects_chance


def verdict_attack(run: dict) -> dict | None:
    """The attack the verdict's level is read from: the run's strongest attack, or its
    AUC leader when that one's level is more severe (:func:`verdict_level`)."""
    attack = strongest_attack(run)
    if attack is None:
        return None
    other = _by_auc(run, attack)
    if other is not None:
        fw, res = battery_beats_chance(run), split_resolution(run)
        if SEVERITY.get(_level_of(other, fw, res)[0], -1) > SEVERITY.get(
            _level_of(attack, fw, res)[0], -1
        ):
            return other
    return attack


#: order of the levels two attacks can disagree on (higher = more severe)
SEVERITY = {"low": 0, "inconclusive": 1, "moderate": 2, "high": 3}


def _by_auc(run: dict, attack: dict) -> dict | None:
    """The run's AUC leader when it is another ``ok`` attack than ``attack``."""
    rec = RunRecord.of(run)
    name = rec.strongest_attack_by_auc
    if name is None or name == attack.get("attack"):
        return None
    other = rec.measured_attack(name)
    return other.raw if other is not None else None


def _level_of(
    attack: dict, beats_chance: bool = True, resolution: dict | None = None
) -> tuple[str, str]:
    """:func:`verdict_level`'s rules on one attack; ``beats_chance`` is the battery's
    family-wise test (:func:`battery_beats_chance`), without which an AUC interval above
    0.5 alone is not MODERATE. HIGH and the ε-bound route are not gated by it: the test
    reads AUCs only, and a leak in the tail (a few members exposed at low FPR) can leave
    every AUC near 0.5, so gating them could turn a real leak into an all-clear.

    ``resolution`` (:func:`split_resolution`): when the split check read a sub-sample, an
    AUC-route HIGH or MODERATE whose AUC interval starts below the check's detectable
    AUC is ``inconclusive`` (an undetected difference between the sets could carry it),
    never LOW (a real leak of that size is not ruled out either). The TPR and ε-bound
    routes are kept: they read the tail, which the blind AUC does not describe."""
    rec = AttackRecord.of(attack)
    auc_m = rec.metric("auc")
    auc = auc_m.raw if auc_m is not None else {}
    tpr = rec.metric(TPR_1) if measured_metric(attack, TPR_1) is not None else None
    lb = rec.metric(EPS_LB)
    auc_v, auc_lo, auc_hi = (auc_m.value, auc_m.ci_low, auc_m.ci_high) if auc_m else (None,) * 3
    if auc_hi is not None and auc_hi < CHANCE_AUC:
        # even the strongest attack ranks non-members above members beyond chance: inverted
        # scores or swapped labels, which say nothing about leakage (never "low")
        return "invalid-attack", INVALID_ATTACK_TEXT
    tpr_lo = tpr.ci_low if tpr else None
    tpr_hi = tpr.ci_high if tpr else None
    lb_v = lb.value if lb else None
    if tpr_lo is not None and tpr_lo >= HIGH_TPR_CI_LOW:
        return "high", ""
    det = resolution.get("detectable_auc") if resolution else None
    unresolved = det is not None and auc_lo is not None and auc_lo < det
    if auc_lo is not None and auc_lo >= HIGH_AUC_CI_LOW and not unresolved:
        return "high", ""
    if lb_v is not None and lb_v > 0:
        return "moderate", ""
    if auc_lo is not None and auc_lo > CHANCE_AUC and beats_chance:
        if not unresolved:
            return "moderate", ""
        return "inconclusive", _unresolved_text(attack, auc, resolution)
    auc_ok = auc_hi is not None and auc_hi < HIGH_AUC_CI_LOW
    tpr_ok = tpr_hi is not None and tpr_hi < HIGH_TPR_CI_LOW
    if auc_ok and tpr_ok:
        return "low", ""
    n = attack.get("n_members")
    n_non = attack.get("n_nonmembers")
    # users are the trials when the record says so (a per-user attack, or per-text
    # intervals that resample users): every size below is then counted in users
    by_users = (
        attack.get("unit") == "user" or (attack.get("metrics") or {}).get("resampled") == "users"
    )
    if by_users and attack.get("unit") != "user":
        n = (attack.get("metrics") or {}).get("n_member_users")
        n_non = (attack.get("metrics") or {}).get("n_nonmember_users")
    who_in, who_out = (
        ("member users", "non-member users") if by_users else ("members", "non-members")
    )
    n = n if isinstance(n, int) and not isinstance(n, bool) else None
    n_non = n_non if isinstance(n_non, int) and not isinstance(n_non, bool) else None
    n_min = min(x for x in (n, n_non) if x is not None) if (n or n_non) else None
    reasons: list[str] = []
    needs: list[int | None] = []
    at_least = 0  # a lower bound on the deciding size where no estimate exists
    if not auc_ok:
        if auc_hi is None or auc_v is None:
            reasons.append(S.REASON_AUC_NO_UPPER())
        else:
            reasons.append(S.REASON_AUC_REACHES(high=f"{auc_hi:.3f}", threshold=HIGH_AUC_CI_LOW))
            needs.append(needed_n(n_min, auc_v, auc_hi - auc_v, HIGH_AUC_CI_LOW - auc_v))
    if not tpr_ok:
        if tpr is None:
            below = metric(attack, TPR_1) is not None
            # the one rule's own count (the record's needs_nonmembers), never a constant
            from privacy_audit.reports.resolution import needed_nonmembers, tpr_standing

            need_tpr = tpr_standing(attack, 0.01).get("needs") or needed_nonmembers(
                0.01, n_non, None
            )
            reasons.append(
                S.REASON_TPR_BELOW_RESOLUTION(n=f"{need_tpr:,}", who_out=who_out)
                if below
                else S.REASON_TPR_NOT_MEASURED()
            )
            at_least = max(at_least, need_tpr)
        else:
            tpr_v = tpr.value
            reasons.append(
                S.REASON_TPR_REACHES(
                    high=f"{100 * tpr_hi:.1f}%", threshold=f"{100 * HIGH_TPR_CI_LOW:g}%"
                )
                if tpr_hi is not None
                else S.REASON_TPR_NO_UPPER()
            )
            if tpr_v is not None and tpr_hi is not None:
                needs.append(needed_n(n_min, tpr_v, tpr_hi - tpr_v, HIGH_TPR_CI_LOW - tpr_v))
            else:
                needs.append(None)
    size = (
        S.SIZE_PER_CLASS(n=n_min, per="users per" if by_users else "per")
        if n_min is not None
        else S.SIZE_UNKNOWN()
    )
    if auc_v == auc_lo == auc_hi == CHANCE_AUC:
        # a zero-width interval at exactly 0.5: every member and non-member score is tied,
        # so no sample size narrows the TPR interval; the attack carries no signal at all
        return "inconclusive", S.WHY_TIED(size=size)
    why = S.WHY_SIZE(size=size, reasons=" and ".join(reasons))
    known = [x for x in needs if x is not None]
    if needs and len(known) == len(needs):
        need = max([*known, at_least])
        if need > MAX_NAMED_SAMPLE:
            why += S.NEED_TOO_MANY(n=f"{MAX_NAMED_SAMPLE:,}", who_in=who_in, who_out=who_out)
        else:
            word = "at least" if at_least >= need and not known else "about"
            why += S.NEED_ABOUT(word=word, n=f"{need:,}", who_in=who_in, who_out=who_out)
    elif at_least and len(known) == len(needs):
        why += S.NEED_AT_LEAST(n=f"{at_least:,}", who_in=who_in, who_out=who_out)
    else:
        why += S.NEED_UNKNOWN()
    return "inconclusive", why


#: the start of the reason :func:`_unresolved_text` gives (the verdict text keys on it)
UNRESOLVED_LEAD = S.UNRESOLVED_LEAD


def _unresolved_text(attack: dict, auc: dict, resolution: dict) -> str:
    """Why an AUC interval above chance is inconclusive on a sub-sampled split check."""
    n_m, n_n = resolution.get("n_members"), resolution.get("n_nonmembers")
    det = float(resolution["detectable_auc"])
    sizes = [x for x in (n_m, n_n) if isinstance(x, int) and not isinstance(x, bool)]
    cap = S.CAP_PER_SIDE(n=max(sizes)) if sizes else S.CAP_UNKNOWN()
    a_m, a_n = attack.get("n_members"), attack.get("n_nonmembers")
    return S.UNRESOLVED(
        auc=ci(auc),
        attack_sizes=S.SIZES_ON(n_members=a_m, n_nonmembers=a_n) if a_m and a_n else "",
        detectable=f"{det:.3f}",
        check_sizes=S.SIZES_OF(n_members=n_m, n_nonmembers=n_n) if n_m and n_n else "",
        cap=cap,
    )


def verdict_for_run(run: dict | RunRecord) -> dict:
    """Plain-language membership-leakage verdict for one run.

    The level is read from the strongest attack (see :func:`strongest_attack`), which is
    chosen on the same data; its interval excluding 0.5 therefore counts as MODERATE only
    when the battery's family-wise test agrees (below). Rules, first match wins:

    * ``"not-measured"``: no attack has status ``ok`` with an AUC.
    * ``"invalid-attack"``: the AUC ``ci_high`` < 0.5 — the scores point the wrong way
      (inverted score direction or wrong labels); this measures nothing, so it is never
      "low", and the gate fails on it.
    * ``"high"``: AUC ``ci_low`` ≥ 0.6, or TPR@1%FPR ``ci_low`` ≥ 0.05
      (at least 5% of members identified at 1% false positives, i.e. 5× chance).
    * ``"moderate"``: AUC ``ci_low`` > 0.5 (the interval excludes chance) and the
      battery's family-wise permutation test rejects chance (the strongest attack is
      chosen on the same data; :func:`battery_beats_chance`), or the empirical ε lower
      bound is > 0 (leakage certified at 95%).
    * ``"low"``: the AUC interval ends below 0.6 **and** the TPR@1%FPR interval
      below 0.05 — no leakage detected although these attacks could have seen a
      high one; not proof of privacy.
    * ``"inconclusive"``: otherwise — an interval still reaches the HIGH range (or
      the TPR is not measured), so the sample is too small; the text names the
      sample size that would decide (see :func:`verdict_level`). Or an AUC-route HIGH
      or MODERATE below the resolution of a sub-sampled split check
      (:func:`split_resolution`): the effect could come from an undetected difference
      between the sets.

    A missing bound counts as not meeting its rule. Independently of the level,
    the text reports the claim check of :func:`check_claim`; when the claimed
    finite ε is below the comparable empirical lower bound, or when the run's
    ``epsilon_audit`` reports the claim as violated, the text says the claim is
    VIOLATED and (for the ε audit) cites its evidence. The ε audit does not
    change the leakage level, which is about the membership attacks only.

    Returns ``{"level", "text", "attack", "claim_status"}``.

    A run whose model had weights the checkpoint did not hold (``uninitialized_weights``,
    audited only with ``allow_uninitialized``) is ``"not-measured"`` whatever the attacks
    found: they measured partly random weights, and a low number would be a false all-clear.
    """
    rec = RunRecord.of(run)
    early = _unmeasured_verdict(rec)
    if early is not None:
        return early
    attack = verdict_attack(rec)
    name = attack_name(attack)
    auc = metric(attack, "auc") or {}
    auc_lo = as_float(auc.get("ci_low"))
    tpr_txt = _tpr_clause(attack)
    level, undecided = verdict_level(rec)
    text = _level_text(level, undecided, attack, S.AUC_SLOT(auc=ci(auc)), tpr_txt)
    if level in ("low", "inconclusive") and auc_lo is not None and auc_lo > CHANCE_AUC:
        text += _battery_note(rec)
    claim = check_claim(rec, attack)
    text += _bound_text(rec, metric(attack, EPS_LB), claim)
    two = strongest_two_ways(rec)
    if two:
        text += " " + two
    text += " " + claim["text"]
    return {
        "level": level,
        "text": text,
        "attack": name,
        "claim_status": claim["status"],
        **({"inconclusive": undecided} if level == "inconclusive" else {}),
        **({"invalid": undecided} if level == "invalid-attack" else {}),
    }


def _unmeasured_verdict(rec: RunRecord) -> dict | None:
    """The verdict of a run no attack measured (untrained weights, a shifted split, no
    ``ok`` attack), else ``None``: :func:`verdict_for_run`'s first step."""
    if rec.uninitialized_weights:
        return {
            "level": "not-measured",
            "text": S.NOT_MEASURED_WEIGHTS(n=len(rec.uninitialized_weights)),
            "attack": None,
            "claim_status": "unmeasured" if claimed_epsilon(rec) else "no-claim",
        }
    shifted = split_shifted(rec)
    if shifted is not None:
        return shifted
    if verdict_attack(rec) is not None:
        return None
    attacks = rec.attacks
    na = sum(1 for a in attacks if a.status == "not_applicable")
    err = sum(1 for a in attacks if a.status == "error")
    detail = (
        S.ATTACKS_CONFIGURED_SPLIT(n=len(attacks), na=na, err=err)
        if attacks
        else S.ATTACKS_CONFIGURED(n=0)
    )
    result = {
        "level": "not-measured",
        "text": S.NOT_MEASURED_NO_ATTACK(detail=detail),
        "attack": None,
        "claim_status": "unmeasured" if claimed_epsilon(rec) else "no-claim",
    }
    if audit_violated(rec):
        result["text"] += " " + _audit_violation_text(rec)
        result["claim_status"] = "violated"
    return result


def _tpr_clause(attack: dict) -> str:
    """The verdict's TPR at 1% FPR: the number when the sample resolves it, else why not
    and the lowest FPR it does resolve ("" when the attack reports none)."""
    from privacy_audit.reports.resolution import lead_tpr, tpr_view

    one = tpr_view(attack, 0.01)
    if one["resolvable"]:
        tpr_txt = S.TPR_RESOLVED(tpr=pct_ci(one["metric"]), fpr="1%")
    elif metric(attack, TPR_1):
        # not resolvable at this n: why, and what the sample does resolve (never a number)
        tpr_txt = S.TPR_UNRESOLVED(fpr="1%", reason=one["text"])
    else:
        tpr_txt = ""
    lead = lead_tpr(attack) if tpr_txt and not one["resolvable"] else None
    if lead is not None:
        tpr_txt += S.TPR_LEAD(fpr=f"{100 * lead['fpr']:g}%", tpr=lead["text"])
    return tpr_txt


def _level_text(level: str, undecided: str, attack: dict, auc_txt: str, tpr_txt: str) -> str:
    """The verdict's first sentence: the level, the attack, its AUC and TPR."""
    name = attack_name(attack)
    and_tpr = S.AND_CLAUSE(clause=tpr_txt) if tpr_txt else ""
    if level == "invalid-attack":
        return S.INVALID(attack=name, auc=auc_txt, why=INVALID_ATTACK_TEXT)
    if level == "high":
        return S.HIGH(attack=name, auc=auc_txt, tpr=and_tpr)
    if level == "moderate":
        return S.MODERATE(attack=name, auc=auc_txt, tpr=and_tpr)
    if level == "inconclusive":
        if "score of the strongest attack is tied" in undecided:
            lead = S.INCONCLUSIVE_TIED()
        elif undecided.startswith(UNRESOLVED_LEAD):
            lead = S.INCONCLUSIVE_UNRESOLVED()
        else:
            lead = S.INCONCLUSIVE_SMALL()
        return S.INCONCLUSIVE(lead=lead, attack=name, auc=auc_txt, tpr=and_tpr, why=undecided)
    n = attack.get("n_members")
    auc_lo = as_float((metric(attack, "auc") or {}).get("ci_low"))
    includes = (
        S.LOW_INCLUDES_CHANCE()
        if auc_lo is not None and auc_lo <= CHANCE_AUC
        else S.LOW_NOT_ESTABLISHED()
    )
    return S.LOW(
        attack=name,
        auc=auc_txt,
        includes=includes,
        tpr=S.COMMA_AND_CLAUSE(clause=tpr_txt) if tpr_txt else "",
        members=S.N_MEMBERS(n=n) if n is not None else S.N_MEMBERS_UNKNOWN(),
    )


def _battery_note(rec: RunRecord) -> str:
    """Why an AUC interval above chance is no finding: the battery's family-wise test
    does not reject chance ("" when it does)."""
    fw = rec.battery_chance
    if fw is None or fw.rejects_chance:
        return ""
    return S.BATTERY_NOT_BEYOND_CHANCE(
        n=len(fw.attacks),
        permutations=fw.permutations,
        p=num(fw.p_value),
        alpha=num(fw.alpha),
    )


def _bound_text(rec: RunRecord, lb: dict | None, claim: dict) -> str:
    """The run's one headline ε (see :func:`epsilon_headline`, the same number as the
    summary) and any larger bound; with a checkable claim the claim sentence states the
    attack's bound instead."""
    text = ""
    head = epsilon_headline(rec)
    checkable = claim["status"] not in ("no-claim", "unmeasured")
    if head is not None and head["kind"] == "attack" and lb is not None and not checkable:
        lb_v = as_float(lb.get("value"))
        ceiling = as_float(lb.get("ceiling"))
        cap = S.CEILING_CAP(ceiling=num(ceiling)) if ceiling else ""
        if head["at_ceiling"]:
            cap = S.SEMI_CLAUSE(clause=AT_CEILING)
        conditions = _bound_conditions(lb)
        if lb_v is not None and lb_v > 0:
            text += S.CERTIFIED(eps=num(lb_v), conditions=conditions, cap=cap)
        else:
            text += S.NOT_CERTIFIED(conditions=conditions, cap=cap)
    elif head is not None and head["kind"] != "attack":
        text += S.CERTIFIED_HEADLINE(headline=headline_text({**head, "larger": []}))
    if head is not None and head["larger"]:
        text += S.LARGER_BOUND(
            headline=headline_text({**head["larger"][0], "larger": head["larger"][1:]}, "and")
        )
    return text


def strongest_two_ways(run: dict) -> str:
    """The sentence naming the strongest attack at the lowest resolvable FPR and by AUC
    (``strongest_attack_low_fpr`` / ``strongest_attack_by_auc`` of the run record); empty
    when the record has neither."""
    rec = RunRecord.of(run)
    low, by_auc = rec.strongest_attack_low_fpr, rec.strongest_attack_by_auc
    if low is None and by_auc is None:
        return ""
    parts = []
    if low is not None and low.get("attack") is not None:
        fpr = as_float(low.get("fpr"))
        tpr = {k: low.get(k) for k in ("value", "ci_low", "ci_high")}
        tpr["value"] = low.get("tpr")
        where = f"{100 * fpr:g}%" if fpr is not None else "a low"
        parts.append(S.STRONGEST_LOW_FPR(fpr=where, attack=low["attack"], tpr=pct_ci(tpr)))
    else:
        parts.append(S.STRONGEST_NONE_RESOLVED(rates="0.1%, 1%"))
    if by_auc is not None:
        a = rec.measured_attack(by_auc)
        auc = a.metric("auc").raw if a else None
        parts.append(S.STRONGEST_BY_AUC(attack=by_auc, auc=S.PAREN_AUC(auc=ci(auc)) if auc else ""))
    return "; ".join(parts) + "."


def split_shifted(run: dict) -> dict | None:
    """The ``split-shifted`` verdict when the run's split check (stats/split_check.py)
    found the blind AUC's interval above 0.5, else ``None``. The attacks then measure the
    difference between the texts as well as memorisation, so neither HIGH nor LOW is
    said; the attacks' ε lower bounds are not evidence about the model either, so only an
    ε audit's own violation (canaries: same-kind non-members by construction) is kept."""
    rec = RunRecord.of(run)
    check = rec.split_check
    if check is None or not check.shifted:
        return None
    auc = check.blind_auc
    conf = check.confidence
    lvl = S.INTERVAL_LEVEL(level=f"{100 * conf:g}%") if isinstance(conf, int | float) else ""
    text = S.SPLIT_SHIFTED(auc=ci(auc), level=lvl)
    best = strongest_attack(rec)
    if best is not None:
        text += S.SHIFTED_STRONGEST(attack=attack_name(best), auc=ci(metric(best, "auc")))
    if str(check.advice or "").strip():
        text += S.WHAT_TO_DO(advice=str(check.advice))
    status = "unmeasured" if claimed_epsilon(rec) else "no-claim"
    head = epsilon_headline(rec)  # from an ε audit only: the attacks' bounds measure the texts
    if head is not None:
        text += S.CERTIFIED_HEADLINE(headline=headline_text(head))
    if audit_violated(run):
        text += " " + _audit_violation_text(run)
        status = "violated"
    return {"level": "split-shifted", "text": text.strip(), "attack": None, "claim_status": status}
