"""Every verdict, headline and reason sentence, rendered for every branch the rules can
take, read by a linter that fails on doubled words, empty slots, leftovers of formatting
and contradictions (a TPR both "not resolvable" and a number; "no leakage" beside HIGH)."""

from __future__ import annotations

import functools
import itertools
import re

import numpy as np
import pytest

from privacy_audit.attacks.base import AttackResult, MetricSettings
from privacy_audit.audit.results import pick_strongest, run_record
from privacy_audit.defenses.base import PrivacyClaim

DOUBLED = re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)
# a doubled word that is English ("had had", "that that") does not occur in these texts
SLOTS = re.compile(
    r"\{[a-z_]*\}|\bNone\b|\bnan\b|\binf\b(?!ini)|\(\s*\)|\[\s*\]|\s[,.;:](?!\d)|,,|\.\.(?!\.)|  "
)


def lint(text: str) -> list[str]:
    problems = []
    if not text.strip():
        problems.append("empty")
    m = DOUBLED.search(text)
    if m and m.group(1).lower() not in {"very"}:
        problems.append(f"doubled word {m.group(0)!r}")
    m = SLOTS.search(text)
    if m:
        problems.append(
            f"slot or leftover {m.group(0)!r} at {m.start()}: …{text[max(0, m.start() - 40) : m.end() + 40]}…"
        )
    if re.search(r"not resolvable at this n", text) and re.search(
        r"identifies \d+\.\d% \[[^\]]*\] of members at 1% false positives", text
    ):
        problems.append("TPR at 1% both unresolvable and a number")
    if text.lower().startswith("no leakage") and "HIGH" in text:
        problems.append("no leakage beside HIGH")
    return problems


def _attack(name, sep, n_in, n_out, seed):
    rng = np.random.default_rng(seed)
    m = np.r_[np.ones(n_in, dtype=int), np.zeros(n_out, dtype=int)]
    s = rng.normal(size=n_in + n_out) + sep * m
    return AttackResult.from_scores(name, s, m, None, MetricSettings(n_boot=100), name)


CLAIMS = {
    "none": PrivacyClaim.none(),
    "dp-8": PrivacyClaim(8.0, 1e-5, "example", "central-dp", "rdp", True, "DP-SGD"),
    "dp-0.1": PrivacyClaim(0.1, 1e-5, "example", "central-dp", "rdp", True, "DP-SGD"),
    "heuristic": PrivacyClaim(2.0, None, "token", "metric-dp", None, False, "heuristic"),
}


BRANCHES = list(
    itertools.product(
        (0.0, 0.3, 3.0, -2.0),
        ((60, 60), (300, 298), (400, 1200)),
        CLAIMS,
        (False, True),
        (False, True),
    )
)


def _label(sep, sizes, claim, shifted, two) -> str:
    return f"sep={sep} n={sizes[0]}/{sizes[1]} claim={claim} shifted={shifted} two={two}"


@functools.cache
def _run(sep, sizes, claim, shifted, two) -> dict:
    """One run over the branches: separations (none, weak, strong, inverted), sizes around
    the resolution thresholds, two attacks that disagree, claims, a shifted split. Built
    when a test asks for it (not at collection: 192 runs with bootstraps take seconds)."""
    n_in, n_out = sizes
    attacks = [_attack("lm-loss", sep, n_in, n_out, 1)]
    if two:
        attacks.append(_attack("zlib", sep / 2 + 0.2, n_in, n_out, 2))
    run = run_record("model", "as-is", CLAIMS[claim], None, attacks)
    p = pick_strongest(run["attacks"])
    run.update(
        strongest_attack=p["attack"],
        strongest_attack_by_auc=p["by_auc"],
        strongest_attack_low_fpr=p["low_fpr"],
    )
    if shifted:
        run["split_check"] = {
            "shifted": True,
            "status": "shifted",
            "confidence": 0.98,
            "text": "the two sets differ in their text itself",
            "blind": {"auc": {"value": 0.8, "ci_low": 0.7, "ci_high": 0.9}},
            "duplicates": {"pairs": 0},
        }
    return run


@pytest.mark.parametrize("branch", BRANCHES, ids=[_label(*b) for b in BRANCHES])
def test_every_verdict_sentence_reads_cleanly(branch):
    from privacy_audit.audit.commands.common import verdict_line
    from privacy_audit.reports.verdict import (
        epsilon_headline,
        headline_text,
        strongest_two_ways,
        verdict_for_run,
    )

    run = _run(*branch)
    v = verdict_for_run(run)
    texts = {
        "verdict": v["text"],
        "verdict line": verdict_line(run),
        "headline": headline_text(epsilon_headline(run)) or "none",
        "strongest": strongest_two_ways(run) or "none",
    }
    for where, text in texts.items():
        assert lint(text) == [], (where, text)


def test_the_levels_and_claims_reached_cover_every_branch():
    from privacy_audit.reports.verdict import verdict_for_run

    runs = [_run(*b) for b in BRANCHES]
    levels = {verdict_for_run(r)["level"] for r in runs}
    assert {"high", "low", "inconclusive", "invalid-attack", "split-shifted"} <= levels, levels
    claims = {verdict_for_run(r)["claim_status"] for r in runs}
    assert len(claims) >= 3, claims


@pytest.mark.parametrize(
    "bad",
    [
        "the the attack",
        "ε ≥ None (strongest attack)",
        "AUC nan [0.5, 0.6]",
        "identifies {tpr} of members",
        "reaches AUC 0.6 , which",
        "TPR ()",
        "its TPR at 1% false positives is not resolvable at this n; it identifies 5.0% [1.0, 9.0] of members at 1% false positives",
    ],
)
def test_the_linter_catches_what_it_looks_for(bad):
    assert lint(bad) != []


# --------------------------------------------------------------------------- #
# The templates themselves (reports/sentences.py)
# --------------------------------------------------------------------------- #
#: a plausible value per slot name; a fragment slot gets the fragment it holds in use
SAMPLE = {
    "attack": "lm-loss",
    "auc": "0.612 [0.571, 0.650]",
    "alpha": "0.05",
    "audit": "gradient-canary",
    "audit_delta": "1e-05",
    "bound": "ε ≥ 0.761 (δ = 1e-05, 95% confidence)",
    "cap": "200 texts per side",
    "ceiling": "9.51",
    "check_members": "150",
    "check_nonmembers": "150",
    "claim": "ε = 8, δ = 1e-05, per example, central DP",
    "claim_delta": "0.001",
    "clause": "identifies 5.0% [2.1%, 9.9%] of members at 1% false positives",
    "conditions": "δ = 1e-05, 95% confidence",
    "detail": "4 attack(s) configured: 1 not applicable, 3 failed",
    "details": "per example, central DP",
    "detectable": "0.556",
    "distinct": "61",
    "eps": "0.761",
    "err": "3",
    "first": "ε ≥ 0.761 (strongest attack: loss)",
    "fpr": "1%",
    "headline": "ε ≥ 0.761 (strongest attack: loss)",
    "high": "0.640",
    "includes": "includes 0.5",
    "items": "gradient-canary: ε ≥ 9.51 (95%) exceeds the claimed ε = 8",
    "k": "40",
    "largest": "40",
    "lead": "the sample is too small to call the leakage low",
    "level": "98%",
    "members": "400 members",
    "n": "400",
    "n_members": "400",
    "n_nonmembers": "398",
    "na": "1",
    "p": "0.31",
    "permutations": "1000",
    "rates": "0.1%, 1%",
    "reason": "the claim is metric DP, whose ε scales with a distance",
    "reasons": "the AUC interval reaches 0.640 (HIGH from 0.6)",
    "removed": "39",
    "rest": "ε ≥ 2.20 (input-canaries)",
    "run": "non-private",
    "side": "member",
    "sides": "100 member texts hold 61 distinct records",
    "size": "400 per class",
    "source": "strongest attack: loss",
    "stated": "ε = 8, δ = 1e-05",
    "status": "consistent",
    "texts": "100",
    "threshold": "0.6",
    "tpr": "5.0% [2.1%, 9.9%]",
    "unit": "token",
    "advice": "draw the two sets at random from one source",
    "word": "about",
    "why": "with 400 per class, the AUC interval reaches 0.640 (HIGH from 0.6)",
    "baseline": "non-private",
    "baseline_auc": "0.612 [0.571, 0.650]",
    "run_auc": "0.521 [0.480, 0.560]",
    "sep": "the 95% CIs overlap, so this sample cannot separate them",
    "metric": "perplexity",
    "value": "412 [398, 431]",
    "floors": "the unigram perplexity 389",
    "name": "the unigram perplexity",
    "n_in": "100",
    "n_out": "300",
    "text": "No leakage detected at this sample size: the strongest attack (lm-loss) reaches "
    "AUC 0.512 [0.480, 0.545].",
    "delta": "1.00e-5",
    "found": "12",
    "tested": "100",
    "q": "0.0500",
    "null": "the 300 non-member users (held out)",
    "pmin": "0.00332",
    "which": "median",
    "m_in": "76",
    "m_out": "24",
    "who_in": "members",
    "who_out": "non-members",
    "per": "per",
}
FRAGMENT_SAMPLE = {
    ("HIGH", "tpr"): " and identifies 5.0% [2.1%, 9.9%] of members at 1% false positives",
    ("MODERATE", "tpr"): " and identifies 5.0% [2.1%, 9.9%] of members at 1% false positives",
    ("INCONCLUSIVE", "tpr"): " and its TPR at 1% false positives is not resolvable at this n",
    ("LOW", "tpr"): ", and identifies 0.9% [0.1%, 3.0%] of members at 1% false positives",
    ("BOUND", "extra"): "; at least; the sample cannot certify more",
    ("CERTIFIED", "cap"): "; the most this sample could certify is 9.51",
    ("NOT_CERTIFIED", "cap"): "; the most this sample could certify is 9.51",
    ("STRONGEST_BY_AUC", "auc"): " (AUC 0.612 [0.571, 0.650])",
    ("SPLIT_SHIFTED", "level"): " (98% interval)",
    ("AUDIT_VIOLATED", "details"): " (per example, central DP)",
    (
        "AUDIT_VIOLATED",
        "evidence",
    ): ". Evidence: gradient-canary: ε ≥ 9.51 exceeds the claimed ε = 8",
    ("UNRESOLVED", "attack_sizes"): " on 400 members and 398 non-members",
    ("UNRESOLVED", "check_sizes"): " of 150 members and 150 non-members",
    ("LINE_BLIND", "shifted"): " (split SHIFTED)",
    ("DI_SHIFTED", "blind"): " (blind AUC 0.8 [0.7, 0.9])",
    ("INVALID", "why"): "the scores point the wrong way: check the labels or the score direction",
    ("COMPARE_NOT_COMPARABLE", "why"): "dp-sgd did not learn: its accuracy 0.25 does not clear "
    "the majority-class rate 0.25",
    ("COMPARE_PAIR", "lead"): "the undefended model (non-private) is more vulnerable",
    ("FLOOR", "value"): "389",
    ("FLOOR", "interval"): " [380, 398]",
    ("USER_VERDICT", "attack_clause"): ". The strongest user-level attack (lm-loss:user-mean) "
    "reaches AUC 0.901 [0.855, 0.934]",
    ("USER_VERDICT", "eps_clause"): ". Per-user privacy loss certified: ε ≥ 1.60 (δ = 1.00e-5)",
    ("USER_VERDICT", "extra"): "; with 100 users per class, the AUC interval reaches 0.640",
    ("USER_ATTACK", "tpr"): " and identifies 40.0% [30.1%, 50.2%] of member users at 1% false "
    "positives",
    ("USER_TPR_UNRESOLVED", "lead"): "; at 10% false positives it identifies 73.0% [44.3%, "
    "89.8%] of member users",
}


def _template_cases():
    from privacy_audit.reports.sentences import TEMPLATES

    for name, t in sorted(TEMPLATES.items()):
        # every optional slot both filled and empty: each branch of the sentence
        for filled in itertools.product((True, False), repeat=len(t.optional)):
            on = dict(zip(sorted(t.optional), filled, strict=True))
            values = {}
            for slot in t.slots:
                if slot in t.optional:
                    values[slot] = FRAGMENT_SAMPLE[(name, slot)] if on[slot] else ""
                else:
                    values[slot] = FRAGMENT_SAMPLE.get((name, slot), SAMPLE[slot])
            yield f"{name}-" + "-".join(f"{k}={int(v)}" for k, v in on.items()), name, values


TEMPLATE_CASES = list(_template_cases())


@pytest.mark.parametrize("case, name, values", TEMPLATE_CASES, ids=[c[0] for c in TEMPLATE_CASES])
def test_every_template_renders_cleanly_in_every_branch(case, name, values):
    from privacy_audit.reports.sentences import TEMPLATES

    text = TEMPLATES[name](**values)
    # fragments begin with their separator (" and …", "; …"); lint them as they read in a
    # sentence, after a word
    assert lint("x" + text if text[:1] in " ;,." else text) == [], (name, text)
    for slot, v in values.items():
        assert v in text, (name, slot)


def test_every_template_is_used_and_every_slot_is_checked():
    """Each template is rendered somewhere in the product (a template nobody renders is a
    sentence the tests lint but no user reads), and rendering refuses a missing, unknown,
    None or (for a required slot) empty value."""
    from pathlib import Path

    from privacy_audit.reports.sentences import TEMPLATES

    root = Path(__file__).resolve().parents[2]
    code = "".join(
        p.read_text(encoding="utf-8")
        for p in [*(root / "reports").glob("*.py"), root / "audit/commands/common.py"]
        if p.name != "sentences.py"
    )
    unused = [n for n in TEMPLATES if f"S.{n}(" not in code]
    assert unused == [], unused
    for t in TEMPLATES.values():
        good = {s: SAMPLE.get(s, "x") for s in t.slots}
        for slot in t.slots:
            with pytest.raises(ValueError, match="missing"):
                t(**{k: v for k, v in good.items() if k != slot})
            with pytest.raises(ValueError, match="None"):
                t(**{**good, slot: None})
            if slot not in t.optional:
                with pytest.raises(ValueError, match="empty"):
                    t(**{**good, slot: " "})
        with pytest.raises(ValueError, match="unknown"):
            t(**good, surplus="x")


def test_the_other_surfaces_sentences_read_cleanly():
    """The split check's within-side sentence and dataset inference's no-p-value reasons,
    in each of their branches, through the linter."""
    from privacy_audit.reports.dataset_inference_view import why_no_p
    from privacy_audit.reports.split_check_view import within_sentence

    side = {"texts": 100, "distinct": 61, "removed": 39, "largest": 40}
    texts = [
        within_sentence({"within_members": side}),
        within_sentence({"within_nonmembers": side}),
        within_sentence({"within_members": {**side, "largest": 1}, "within_nonmembers": side}),
        why_no_p({"status": "split-shifted"}),
        why_no_p({"status": "split-shifted", "split_check": {"blind": {"auc": {"value": 0.8}}}}),
        why_no_p({"status": "error", "reason": "too few texts"}),
        why_no_p({"status": "error", "reason": "  "}),
        why_no_p({"status": "ok"}),
    ]
    for text in texts:
        assert lint(text) == [], text
    assert within_sentence({}) == ""
    assert "group of 40" in texts[0] and "group of" not in texts[1]


def test_every_comparison_sentence_reads_cleanly():
    """compare_runs in each branch: no baseline, the baseline alone, a baseline without an
    attack, an unmeasured defended run, overlapping intervals, and disjoint ones both ways."""
    from privacy_audit.reports.run_comparison import compare_runs

    def run(name, defense, sep, seed, attacks=True):
        a = [_attack("lm-loss", sep, 300, 300, seed)] if attacks else []
        return run_record(name, defense, CLAIMS["none"], None, a)

    base = run("non-private", "none", 1.0, 1)
    cases = [
        [run("dp", "dp-sgd", 0.1, 2)],
        [base],
        [run("non-private", "none", 1.0, 1, attacks=False), run("dp", "dp-sgd", 0.1, 2)],
        [base, run("dp", "dp-sgd", 0.1, 2, attacks=False)],
        [base, run("dp", "dp-sgd", 0.95, 3)],
        [base, run("dp", "dp-sgd", 0.0, 4)],
        [base, run("worse", "dp-sgd", 3.0, 5)],
    ]
    texts = [compare_runs(c)["text"] for c in cases]
    for text in texts:
        for line in text.splitlines():
            assert lint(line) == [], line
    assert "reduces" in texts[5] and "more exposed" in texts[6] and "overlap" in texts[4]
