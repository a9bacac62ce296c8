"""Every verdict, headline and reason sentence the suite prints, as named templates.

The report, the verdict, ``score``, the stdout ``VERDICT`` line and the dataset-inference
page build their sentences only through these templates: a ``str.format`` pattern with
named slots. Rendering checks the slots: every slot must be given, none may be ``None``,
and only a slot declared optional may be empty (an optional slot holds a clause rendered
from another template, or nothing). So a sentence can never show ``None``, ``{tpr}`` or a
dangling "reaches ." where a number should be; a missing value is a ``ValueError`` at
the call, not a sentence.

Fragments (a clause a sentence may or may not hold) start with their own separator
(``" and "``, ``"; "``): the sentence pattern then reads ``...{auc}{tpr_clause}.``.

``tests/reports/test_sentences.py`` renders every template here with sample slots and through
the rule branches of the verdict, and lints the result (doubled words, empty slots,
leftovers of formatting, contradictions).
"""

from __future__ import annotations

from string import Formatter
from typing import Any


class Template:
    """A named ``str.format`` pattern with explicit slots (see the module docstring)."""

    __slots__ = ("name", "optional", "pattern", "slots")

    def __init__(self, name: str, pattern: str, optional: tuple[str, ...] = ()) -> None:
        self.name = name
        self.pattern = pattern
        self.slots = frozenset(f for _, f, _, _ in Formatter().parse(pattern) if f is not None)
        if "" in self.slots or any(not s.isidentifier() for s in self.slots):
            raise ValueError(f"template {name}: slots must be named identifiers")
        self.optional = frozenset(optional)
        if not self.optional <= self.slots:
            raise ValueError(f"template {name}: optional {set(self.optional - self.slots)}")

    def __call__(self, **values: Any) -> str:
        given = set(values)
        if given != self.slots:
            raise ValueError(
                f"template {self.name}: missing {sorted(self.slots - given)}, "
                f"unknown {sorted(given - self.slots)}"
            )
        for k, v in values.items():
            if v is None:
                raise ValueError(f"template {self.name}: slot {k!r} is None")
            if k not in self.optional and not str(v).strip():
                raise ValueError(f"template {self.name}: slot {k!r} is empty")
        return self.pattern.format(**values)

    def __repr__(self) -> str:
        return f"Template({self.name!r}, {self.pattern!r})"


#: every template by name (the test renders each one)
TEMPLATES: dict[str, Template] = {}


def _t(name: str, pattern: str, optional: tuple[str, ...] = ()) -> Template:
    if name in TEMPLATES:
        raise ValueError(f"template {name} defined twice")
    TEMPLATES[name] = t = Template(name, pattern, optional)
    return t


# --------------------------------------------------------------------------- #
# The membership verdict (reports/verdict.py::verdict_for_run)
# --------------------------------------------------------------------------- #
NOT_MEASURED_WEIGHTS = _t(
    "NOT_MEASURED_WEIGHTS",
    "Not measured: {n} weight tensor(s) of this model were not in the checkpoint and were "
    "initialised at random, so the attacks measured a partly random model. Audit the "
    "trained model.",
)
NOT_MEASURED_NO_ATTACK = _t(
    "NOT_MEASURED_NO_ATTACK",
    "Not measured: no attack produced a result for this run ({detail}). Nothing can be "
    "said about its privacy.",
)
ATTACKS_CONFIGURED = _t("ATTACKS_CONFIGURED", "{n} attack(s) configured")
ATTACKS_CONFIGURED_SPLIT = _t(
    "ATTACKS_CONFIGURED_SPLIT", "{n} attack(s) configured: {na} not applicable, {err} failed"
)

AUC_SLOT = _t("AUC_SLOT", "AUC {auc}")
TPR_RESOLVED = _t("TPR_RESOLVED", "identifies {tpr} of members at {fpr} false positives")
TPR_UNRESOLVED = _t("TPR_UNRESOLVED", "its TPR at {fpr} false positives is {reason}")
TPR_LEAD = _t(
    "TPR_LEAD",
    "; at {fpr} false positives, the lowest rate this sample resolves, it identifies {tpr} "
    "of members",
)
AND_CLAUSE = _t("AND_CLAUSE", " and {clause}")
COMMA_AND_CLAUSE = _t("COMMA_AND_CLAUSE", ", and {clause}")

INVALID = _t(
    "INVALID",
    "Invalid attack: the strongest attack ({attack}) reaches {auc}, entirely below chance "
    "(0.5), so {why}. This says nothing about leakage.",
)
HIGH = _t(
    "HIGH",
    "Measurable membership leakage: the strongest attack ({attack}) reaches {auc}{tpr}. "
    "Training data is not safe to assume private.",
    optional=("tpr",),
)
MODERATE = _t(
    "MODERATE",
    "Some membership leakage is detectable: the strongest attack ({attack}) reaches "
    "{auc}{tpr}. The signal is statistically distinguishable from chance but modest; treat "
    "membership of individual examples as partly exposed.",
    optional=("tpr",),
)
INCONCLUSIVE = _t(
    "INCONCLUSIVE",
    "Inconclusive: {lead}. The strongest attack ({attack}) reaches {auc}{tpr}; {why}. Do "
    "not read this as a low-leakage result.",
    optional=("tpr",),
)
INCONCLUSIVE_TIED = _t(
    "INCONCLUSIVE_TIED", "the strongest attack's scores are all tied, so it measured nothing"
)
INCONCLUSIVE_UNRESOLVED = _t(
    "INCONCLUSIVE_UNRESOLVED",
    "an effect is measured, but it is below the split check's resolution",
)
INCONCLUSIVE_SMALL = _t("INCONCLUSIVE_SMALL", "the sample is too small to call the leakage low")
LOW = _t(
    "LOW",
    "No leakage detected at this sample size: the strongest attack ({attack}) reaches "
    "{auc}, which {includes}{tpr}. This is not proof of privacy \u2014 it bounds what these "
    "attacks can see with {members}.",
    optional=("tpr",),
)
LOW_INCLUDES_CHANCE = _t("LOW_INCLUDES_CHANCE", "includes 0.5")
LOW_NOT_ESTABLISHED = _t("LOW_NOT_ESTABLISHED", "does not establish leakage")
N_MEMBERS = _t("N_MEMBERS", "{n} members")
N_MEMBERS_UNKNOWN = _t("N_MEMBERS_UNKNOWN", "this many members")
BATTERY_NOT_BEYOND_CHANCE = _t(
    "BATTERY_NOT_BEYOND_CHANCE",
    " Its interval excludes 0.5, but it is the best of {n} attacks chosen on these data: the "
    "battery's family-wise test (the largest AUC against {permutations} random "
    "relabellings) gives p = {p} > {alpha}, so this is not evidence of leakage.",
)

# --------------------------------------------------------------------------- #
# Why a verdict is inconclusive (reports/verdict.py::_level_of)
# --------------------------------------------------------------------------- #
WHY_SIZE = _t("WHY_SIZE", "with {size}, {reasons}")
SIZE_PER_CLASS = _t("SIZE_PER_CLASS", "{n} {per} class")
SIZE_UNKNOWN = _t("SIZE_UNKNOWN", "this sample")
WHY_TIED = _t(
    "WHY_TIED",
    "with {size}, every member and non-member score of the strongest attack is tied (AUC "
    "0.500 with a zero-width interval): it gives no signal, and no sample size would "
    "decide; check that the model and the attack produce distinct scores",
)
REASON_AUC_NO_UPPER = _t("REASON_AUC_NO_UPPER", "the AUC has no upper confidence bound")
REASON_AUC_REACHES = _t(
    "REASON_AUC_REACHES", "the AUC interval reaches {high} (HIGH from {threshold})"
)
REASON_TPR_BELOW_RESOLUTION = _t(
    "REASON_TPR_BELOW_RESOLUTION",
    "TPR at 1% FPR is below this sample's resolution (1% FPR needs about {n} {who_out})",
)
REASON_TPR_NOT_MEASURED = _t("REASON_TPR_NOT_MEASURED", "TPR at 1% FPR was not measured")
REASON_TPR_REACHES = _t(
    "REASON_TPR_REACHES", "the TPR@1%FPR interval reaches {high} (HIGH from {threshold})"
)
REASON_TPR_NO_UPPER = _t("REASON_TPR_NO_UPPER", "TPR at 1% FPR has no upper confidence bound")
NEED_TOO_MANY = _t(
    "NEED_TOO_MANY",
    "; more than {n} {who_in} and as many {who_out} would be needed to call it low (the "
    "point estimate is near the HIGH threshold)",
)
NEED_ABOUT = _t(
    "NEED_ABOUT",
    "; {word} {n} {who_in} and {n} {who_out} would decide (the intervals would then end "
    "below the HIGH thresholds if the point estimates held)",
)
NEED_AT_LEAST = _t("NEED_AT_LEAST", "; at least {n} {who_in} and {n} {who_out} are needed")
NEED_UNKNOWN = _t(
    "NEED_UNKNOWN",
    "; no deciding sample size can be estimated from these intervals (a point estimate at "
    "or above its HIGH threshold, or a missing interval)",
)
#: the start of :data:`UNRESOLVED` (the verdict text keys on it)
UNRESOLVED_LEAD = "the effect is smaller than the split check resolves"
UNRESOLVED = _t(
    "UNRESOLVED",
    UNRESOLVED_LEAD + ": the strongest attack's AUC {auc}{attack_sizes} lies above 0.5 but "
    "its interval starts below {detectable}, the smallest blind AUC the split check detects "
    "with 80% power on its sub-sample{check_sizes}, so a difference between "
    "the two sets this small could pass the check unnoticed and would carry the same "
    "effect; it can be attributed neither to training nor to the data. Draw the two sets "
    "at random from one source (then the effect is training's), or audit on at most {cap}, "
    "where the split check reads every text",
    optional=("attack_sizes", "check_sizes"),
)
#: how many members and non-members a statistic read (left out where the record has none)
SIZES_ON = _t("SIZES_ON", " on {n_members} members and {n_nonmembers} non-members")
SIZES_OF = _t("SIZES_OF", " of {n_members} members and {n_nonmembers} non-members")
CAP_PER_SIDE = _t("CAP_PER_SIDE", "{n} texts per side")
CAP_UNKNOWN = _t("CAP_UNKNOWN", "the split check's sample size per side")

# --------------------------------------------------------------------------- #
# The ε headline and bounds
# --------------------------------------------------------------------------- #
SOURCE_AUDIT = _t("SOURCE_AUDIT", "ε audit: {audit}")
SOURCE_ATTACK = _t("SOURCE_ATTACK", "strongest attack: {attack}")
BOUND = _t("BOUND", "ε ≥ {eps} ({source}{extra})", optional=("extra",))
HEADLINE_MORE = _t("HEADLINE_MORE", "{first}; {word}: {rest}")
CEILING_CAP = _t("CEILING_CAP", "; the most this sample could certify is {ceiling}")
SEMI_CLAUSE = _t("SEMI_CLAUSE", "; {clause}")
CERTIFIED = _t(
    "CERTIFIED", " Certified privacy loss: ε ≥ {eps} ({conditions}{cap}).", optional=("cap",)
)
NOT_CERTIFIED = _t(
    "NOT_CERTIFIED",
    " No privacy loss is certified (ε lower bound 0, {conditions}{cap}).",
    optional=("cap",),
)
CERTIFIED_HEADLINE = _t("CERTIFIED_HEADLINE", " Certified privacy loss: {headline}.")
LARGER_BOUND = _t(
    "LARGER_BOUND",
    " A larger bound from another audit, not the headline (picking the largest of several "
    "bounds after the fact would weaken its confidence): {headline}.",
)
STRONGEST_LOW_FPR = _t(
    "STRONGEST_LOW_FPR",
    "At {fpr} false positives, the lowest reported rate this sample resolves, the strongest "
    "attack is {attack} (TPR {tpr})",
)
STRONGEST_NONE_RESOLVED = _t(
    "STRONGEST_NONE_RESOLVED",
    "This sample resolves neither reported false-positive rate ({rates})",
)
STRONGEST_BY_AUC = _t("STRONGEST_BY_AUC", "by AUC, it is {attack}{auc}", optional=("auc",))
PAREN_AUC = _t("PAREN_AUC", " (AUC {auc})")

# --------------------------------------------------------------------------- #
# A shifted split (reports/verdict.py::split_shifted)
# --------------------------------------------------------------------------- #
SPLIT_SHIFTED = _t(
    "SPLIT_SHIFTED",
    "Split shifted: a classifier that never sees the model separates the members from the "
    "non-members with blind AUC {auc}{level}, so the attack numbers below measure the "
    "difference between the two sets of texts as well as any memorisation; no leakage "
    "verdict (high or low) can be drawn from them.",
    optional=("level",),
)
INTERVAL_LEVEL = _t("INTERVAL_LEVEL", " ({level} interval)")
SHIFTED_STRONGEST = _t("SHIFTED_STRONGEST", " The strongest attack ({attack}) reaches AUC {auc}.")
WHAT_TO_DO = _t("WHAT_TO_DO", " What to do: {advice}")

# --------------------------------------------------------------------------- #
# The claim check (reports/verdict.py::check_attack_claim, check_claim)
# --------------------------------------------------------------------------- #
CLAIM_NO_NUMBER = _t(
    "CLAIM_NO_NUMBER", "The defense states no numeric ε, so there is no privacy claim to check."
)
CLAIM_NONE = _t("CLAIM_NONE", "No formal privacy guarantee is claimed for this run.")
CLAIM_SHIFTED = _t(
    "CLAIM_SHIFTED",
    "The claim ({claim}) is not tested by the membership attacks: the member / non-member "
    "split is shifted, so their ε lower bounds measure the difference between the two sets "
    "of texts, not the model.",
)
CLAIM_NO_BOUND = _t(
    "CLAIM_NO_BOUND",
    "The claim ({claim}) could not be checked: no empirical ε lower bound is available.",
)
BOUND_WITH_CONDITIONS = _t("BOUND_WITH_CONDITIONS", "ε ≥ {eps} ({conditions})")
CLAIM_VIOLATED = _t(
    "CLAIM_VIOLATED",
    "Privacy claim VIOLATED: the audit certifies {bound}, above the claimed ε = {eps} "
    "({details}), so the claim is contradicted by this audit.",
)
CLAIM_NOT_COMPARABLE = _t(
    "CLAIM_NOT_COMPARABLE",
    "The empirical bound {bound} exceeds the claimed ε = {eps}, but {reason}, so this is "
    "not a formal contradiction of the claim.",
)
CLAIM_NO_UNIT = _t(
    "CLAIM_NO_UNIT",
    "The empirical bound {bound} does not test the claimed ε = {eps}: {reason}.",
)
CLAIM_UNTESTABLE = _t(
    "CLAIM_UNTESTABLE",
    "The empirical bound {bound} is below the claimed ε = {eps}, but with this sample size "
    "no attack could certify more than ε ≈ {ceiling}, so this audit could not have "
    "detected a violation of the claim.",
)
CLAIM_CONSISTENT = _t(
    "CLAIM_CONSISTENT",
    "The empirical bound {bound} is below the claimed ε = {eps} ({details}): consistent "
    "with the claim. An audit can contradict a privacy claim but never confirm it.",
)
REASON_METRIC_DP = _t("REASON_METRIC_DP", "the claim is metric DP, whose ε scales with a distance")
REASON_NO_UNIT = _t(
    "REASON_NO_UNIT",
    "the claim names no example, sequence or user unit (see its note), so it does not "
    "bound example-level membership",
)
REASON_UNIT = _t(
    "REASON_UNIT", "the claim is {unit}-level, which does not bound example-level membership"
)
REASON_DELTA = _t(
    "REASON_DELTA",
    "the claim is stated at δ = {claim_delta}, larger than the audit's δ = {audit_delta}",
)
AUDIT_VIOLATED = _t(
    "AUDIT_VIOLATED",
    "Privacy claim VIOLATED: the ε audit contradicts the claimed {stated}{details}"
    "{evidence}. A certified lower bound above the claim means the claim is false (or the "
    "accountant or the defense has a bug).",
    optional=("details", "evidence"),
)
EVIDENCE = _t("EVIDENCE", ". Evidence: {items}")
EVIDENCE_MORE = _t("EVIDENCE_MORE", "; and {n} more")
EVIDENCE_AUDIT = _t("EVIDENCE_AUDIT", "{audit}: {bound} exceeds the claimed ε = {eps}")
EVIDENCE_TRADEOFF = _t(
    "EVIDENCE_TRADEOFF",
    "{attack} attack ROC: {n} threshold(s) significantly above the trade-off curve of the "
    "claimed (ε, δ)",
)

# --------------------------------------------------------------------------- #
# Comparing runs (reports/run_comparison.py::compare_runs, did_not_learn)
# --------------------------------------------------------------------------- #
COMPARE_NO_BASELINE = _t(
    "COMPARE_NO_BASELINE",
    "No undefended baseline (defense \u201cnone\u201d) in this audit, so defenses are not "
    "compared against one.",
)
COMPARE_ONLY_BASELINE = _t(
    "COMPARE_ONLY_BASELINE",
    "Only the undefended run ({baseline}) was audited; there is nothing to compare it with.",
)
COMPARE_BASELINE_UNMEASURED = _t(
    "COMPARE_BASELINE_UNMEASURED",
    "The undefended baseline ({baseline}) has no measured attack, so no comparison is possible.",
)
COMPARE_NOT_MEASURED = _t(
    "COMPARE_NOT_MEASURED", "{run}: not compared (no attack produced a result)."
)
COMPARE_NOT_COMPARABLE = _t(
    "COMPARE_NOT_COMPARABLE",
    "{run} vs {baseline}: not comparable ({why}); its strongest-attack AUC {run_auc} vs "
    "{baseline_auc} says nothing about the defense.",
)
COMPARE_PAIR = _t(
    "COMPARE_PAIR",
    "{run} vs {baseline}: strongest-attack AUC {run_auc} vs {baseline_auc}: {lead}; {sep}.",
)
COMPARE_SAME = _t("COMPARE_SAME", "both have the same AUC point estimate")
COMPARE_BASELINE_MORE = _t(
    "COMPARE_BASELINE_MORE", "the undefended model ({baseline}) is more vulnerable"
)
COMPARE_RUN_MORE = _t("COMPARE_RUN_MORE", "{run} is more vulnerable than the undefended model")
COMPARE_NO_INTERVALS = _t(
    "COMPARE_NO_INTERVALS",
    "intervals are missing, so it cannot be judged whether this sample separates them",
)
COMPARE_OVERLAP = _t("COMPARE_OVERLAP", "the 95% CIs overlap, so this sample cannot separate them")
COMPARE_DEFENSE_HELPS = _t(
    "COMPARE_DEFENSE_HELPS",
    "the 95% CIs are disjoint, so the defense measurably reduces what these attacks can see",
)
COMPARE_DEFENSE_HURTS = _t(
    "COMPARE_DEFENSE_HURTS",
    "the 95% CIs are disjoint, so the defended model is measurably more exposed than the baseline",
)
DID_NOT_LEARN = _t(
    "DID_NOT_LEARN", "{run} did not learn: its {metric} {value} does not clear {floors}"
)
FLOOR = _t("FLOOR", "{name} {value}{interval}", optional=("interval",))

# --------------------------------------------------------------------------- #
# The stdout VERDICT line (audit/commands/common.py::verdict_line), "; "-joined parts
# --------------------------------------------------------------------------- #
LINE_HEAD = _t("LINE_HEAD", "VERDICT {run}: {level}")
LINE_NO_ATTACK = _t("LINE_NO_ATTACK", "no attack measured")
LINE_STRONGEST = _t("LINE_STRONGEST", "strongest {attack}")
LINE_TPR = _t("LINE_TPR", "TPR@{fpr}FPR {tpr}")
LINE_NO_EPSILON = _t("LINE_NO_EPSILON", "ε_lb n/a")
LINE_CLAIM = _t("LINE_CLAIM", "claim {status}")
LINE_BLIND = _t("LINE_BLIND", "blind AUC {auc}{shifted}", optional=("shifted",))
LINE_SHIFTED = _t("LINE_SHIFTED", " (split SHIFTED)")


# --------------------------------------------------------------------------- #
# Resolution labels, the split check's duplicates, dataset inference
# --------------------------------------------------------------------------- #
TPR_LABEL = _t("TPR_LABEL", "TPR @ {fpr} FPR")
WITHIN_SIDE = _t(
    "WITHIN_SIDE",
    "{texts} {side} texts hold {distinct} distinct records ({removed} copies collapsed; the "
    "largest group has {largest} copies)",
)
WITHIN_COUNTS = _t("WITHIN_COUNTS", "{sides}. Every interval and bound counts distinct records.")
WITHIN_GROUP = _t(
    "WITHIN_GROUP",
    " A record trained {k} times is protected only as a group of {k}: under an (ε, δ) claim "
    "per example, by group privacy at {k}ε (with a larger δ).",
)
DI_SHIFTED = _t(
    "DI_SHIFTED",
    "no p-value: a classifier that never sees the model tells the suspect texts from the "
    "validation texts{blind}, so the test's assumption (both sets from one distribution) "
    "fails and a difference could come from the texts, not training",
    optional=("blind",),
)
PAREN_BLIND_AUC = _t("PAREN_BLIND_AUC", " (blind AUC {auc})")
DI_NO_TEST = _t("DI_NO_TEST", "no p-value: {reason}")
DI_NO_P = _t("DI_NO_P", "no p-value: the test returned none")


def join_parts(parts: list[str]) -> str:
    """The VERDICT line's parts, ``"; "``-joined (each rendered from a template above)."""
    return "; ".join(parts)


__all__ = ["TEMPLATES", "UNRESOLVED_LEAD", "Template", "join_parts"]


# --------------------------------------------------------------------------- #
# The per-user verdict (reports/user_verdict.py) and the report's users section
# --------------------------------------------------------------------------- #
UNIT_TEXT = _t("UNIT_TEXT", "Per text: {text}")
USER_VERDICT = _t(
    "USER_VERDICT",
    "Per user ({n_in} member and {n_out} non-member users; each user's texts pooled; "
    "intervals resample users): {lead}{attack_clause}{eps_clause}{extra}.",
    optional=("attack_clause", "eps_clause", "extra"),
)
USER_LEAD_HIGH = _t(
    "USER_LEAD_HIGH",
    "Measurable user-level leakage: whether a person's texts were trained on can be inferred",
)
USER_LEAD_MODERATE = _t("USER_LEAD_MODERATE", "Some user-level leakage is detectable")
USER_LEAD_LOW = _t(
    "USER_LEAD_LOW",
    "No user-level leakage detected at this number of users (not proof of privacy)",
)
USER_LEAD_INCONCLUSIVE = _t(
    "USER_LEAD_INCONCLUSIVE",
    "Inconclusive per user: too few users to call user-level leakage low",
)
USER_LEAD_INVALID = _t(
    "USER_LEAD_INVALID",
    "Invalid user-level attack: its AUC interval lies below chance, which says nothing "
    "about leakage",
)
USER_LEAD_NOT_MEASURED = _t(
    "USER_LEAD_NOT_MEASURED", "Not measured per user: no user-level attack produced a result"
)
USER_LEAD_SHIFTED = _t(
    "USER_LEAD_SHIFTED", "Not evidence per user: the member / non-member split is shifted"
)
USER_ATTACK = _t(
    "USER_ATTACK",
    ". The strongest user-level attack ({attack}) reaches AUC {auc}{tpr}",
    optional=("tpr",),
)
USER_TPR = _t("USER_TPR", " and identifies {tpr} of member users at 1% false positives")
USER_TPR_UNRESOLVED = _t(
    "USER_TPR_UNRESOLVED", "; its TPR at 1% false positives is {why}{lead}", optional=("lead",)
)
USER_TPR_LEAD = _t(
    "USER_TPR_LEAD", "; at {fpr} false positives it identifies {tpr} of member users"
)
USER_EPS = _t("USER_EPS", ". Per-user privacy loss certified: ε ≥ {eps} (δ = {delta})")
USER_EXTRA = _t("USER_EXTRA", "; {reason}")
USER_VIOLATED = _t("USER_VIOLATED", ". {claim}")
USER_DI = _t(
    "USER_DI",
    "Were these people's texts used? {found} of {tested} member users found at a "
    "false-discovery rate of {q} (Benjamini-Hochberg over per-user p-values of {attack}, "
    "null: {null}; the smallest possible p-value is {pmin}).",
)
USER_GROUP_PRIVACY = _t(
    "USER_GROUP_PRIVACY",
    "The claim is per {unit} (ε = {eps}, δ = {delta}); for a person it implies, by group "
    "privacy (proven, and loose): {items}.",
)
USER_GROUP_ITEM = _t("USER_GROUP_ITEM", "a {which} member user ({k} texts): ε ≤ {eps}, δ ≤ {delta}")
USER_FRESH_K = _t(
    "USER_FRESH_K",
    "{k} fresh text(s) per user: {m_in} member and {n_in} non-member users tested; {m_out} "
    "member and {n_out} non-member users not tested (too few fresh texts): not tested is not "
    "safe",
)
USER_NOT_COMPARABLE = _t(
    "USER_NOT_COMPARABLE",
    "; the per-user aggregates of training texts are shown but not judged: {reason}",
)
USER_LEAD_NOT_COMPARABLE = _t(
    "USER_LEAD_NOT_COMPARABLE",
    "Inconclusive per user: no per-user attack is comparable across the two sides",
)
