"""Extraction risk at a product's own decoding settings (probabilistic discoverable
extraction, Hayes et al. 2024, "Measuring memorization in language models via
probabilistic extraction").

A record's first ``prefix_tokens`` tokens are the prompt and the next ``suffix_tokens``
the suffix. Under a sampling scheme (temperature, top-k, top-p, applied exactly as
``transformers`` generation applies them: :mod:`privacy_audit.targets.decoding`), the
probability that **one** query returns the suffix verbatim is (Hayes et al. 2024, arXiv
2410.19482)

    p = prod_{t in suffix} P_decode(x_t | x_<t),

read from the forward pass the audit already makes (no sampling), and the probability
that at least one of ``n`` independent queries returns it (the suffix is then
(n, risk)-discoverable in their terms) is

    risk(n) = 1 - (1 - p)^n = -expm1(n * log1p(-p)),

computed from log p so that neither p ~ 1 nor p ~ 1e-300 loses precision. Non-member
records (never trained on) are the control: what the model emits for text of the same
kind without having seen it.

Reported per n: the fraction of members (and of non-members) whose risk exceeds 1%, 10%
and 50%, with exact Clopper-Pearson intervals (records are independent draws); the median
risk with a distribution-free order-statistic interval; and the largest member risk,
which the gate holds (``--max-leakage extraction-risk@100=0.01``: no audited member may
have more than a 1% chance of coming out verbatim within 100 queries). Records with fewer
than ``prefix_tokens + suffix_tokens`` tokens (after ``max_length``) have no suffix; they
are counted, never scored as zero risk.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privacy_audit.attacks.base import (
    AttackContext,
    LeakageAttack,
    LeakageResult,
    estimate,
    proportion_estimate,
)
from privacy_audit.defenses.base import ReleasedModel, Surface

DEFAULT_QUERIES = (1, 10, 100, 1000)
#: Risk levels whose exceedance fractions are reported.
RISK_LEVELS = (0.01, 0.1, 0.5)
_NUM = (int, float)


def log1mexp(log_p: np.ndarray) -> np.ndarray:
    """log(1 - exp(x)) for x <= 0, accurate at both ends (Maechler 2012): log(-expm1(x))
    for x > -log 2, log1p(-exp(x)) below."""
    x = np.asarray(log_p, dtype=np.float64)
    out = np.full_like(x, -np.inf)
    near = x > -math.log(2.0)
    with np.errstate(divide="ignore"):
        out[near] = np.log(-np.expm1(x[near]))
    out[~near] = np.log1p(-np.exp(x[~near]))
    return out


def risk_within(log_p: np.ndarray, n: int) -> np.ndarray:
    """1 - (1 - p)^n from log p (−∞ for p = 0)."""
    lp = np.minimum(np.asarray(log_p, dtype=np.float64), 0.0)
    with np.errstate(invalid="ignore"):
        out = -np.expm1(float(n) * log1mexp(lp))
    return np.clip(np.nan_to_num(out, nan=1.0), 0.0, 1.0)  # n * -inf (p = 1) -> risk 1


def median_interval(values: np.ndarray, confidence: float = 0.95) -> dict[str, Any]:
    """Median with the distribution-free order-statistic interval [x_(l), x_(u)]: the
    number of values below the true median is Binomial(n, 1/2), so l, u are its
    (1 ± confidence)/2 quantiles; coverage >= ``confidence`` for any continuous law."""
    from scipy.stats import binom

    v = np.sort(np.asarray(values, dtype=np.float64))
    n = v.size
    if n == 0:
        raise ValueError("a median needs at least one value")
    alpha = 1 - confidence
    lo = int(binom.ppf(alpha / 2, n, 0.5))  # P(B <= lo - 1) <= alpha / 2
    hi = n - lo
    lo_v = v[lo - 1] if lo >= 1 else 0.0  # fewer than ~6 values: the interval is unbounded
    hi_v = v[hi] if hi < n else 1.0  # risks lie in [0, 1]
    return estimate(float(np.median(v)), float(lo_v), float(hi_v), n)


def sequence_log_prob(stats) -> float | None:
    """log p of one record's suffix from its TokenStats (None: the record has none).
    Raises ValueError when the model's distribution was NaN at a suffix position (+inf
    marks it): such a record is not measured, never "no risk"."""
    dec = getattr(stats, "decoding_log_probs", None)
    if dec is None:
        return None
    dec = np.asarray(dec, dtype=np.float64)
    span = ~np.isnan(dec)
    if not span.any():
        return None
    if np.isposinf(dec[span]).any():
        raise ValueError("the model's next-token distribution is NaN at a suffix position")
    return float(dec[span].sum())


def _decoding_stats(release, texts: list[str], spec) -> list:
    """TokenStats with the suffix's decoding log-probabilities: from the shared pass of a
    user's LM (:meth:`HFLMRelease.extraction_stats`), else one pass of the suite's LM."""
    if hasattr(release, "extraction_stats"):
        return release.extraction_stats(texts, spec)
    if not all(hasattr(release, a) for a in ("model", "tokenizer", "max_length")):
        raise ValueError("extraction-risk needs a causal language model release")
    from privacy_audit.targets.scoring import encode_lengths, extraction_spans, score_batch

    out = []
    for i in range(0, len(texts), 32):
        chunk = texts[i : i + 32]
        rows, _ = encode_lengths(release.tokenizer, chunk, release.max_length)
        spans = extraction_spans(release.tokenizer, chunk, rows, spec)
        stats, _ = score_batch(release.model, release.tokenizer, rows, False, spec.decoding, spans)
        out.extend(stats)
    return out


class ExtractionRisk(LeakageAttack):
    name = "extraction-risk"
    kind = "extraction"
    description = (
        "Probability that n sampled queries (the product's temperature / top-k / top-p) "
        "return a record's suffix verbatim given its prefix, exact from one forward pass "
        "(Hayes et al. 2024); non-member records as the control."
    )
    requires = frozenset({Surface.GENERATION})  # a sampled product, not a classifier
    summary = "Probability that n sampled queries return a record's suffix verbatim from its prefix (Hayes et al. 2024)."
    needs = ("member-prefixes", "generation")
    cost = "none beyond the shared forward pass (exact, no sampling)"
    OPTIONS = {
        "temperature": (_NUM, 1.0),
        "top_k": (int, 50),
        "top_p": (_NUM, 1.0),
        "queries": (list, list(DEFAULT_QUERIES)),
        "prefix_tokens": (int, 32),
        "suffix_tokens": (int, 32),
    }

    def validate(self) -> None:
        self.spec()  # raises ValueError naming the bad value
        q = self.options["queries"]
        if not q or not all(
            isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 10**12 for n in q
        ):
            raise ValueError(
                f"queries must be a non-empty list of integers in [1, 1e12], got {q!r}"
            )
        if len(set(q)) != len(q):
            raise ValueError(f"queries lists a number twice: {q!r}")

    def spec(self):
        from privacy_audit.targets.decoding import Decoding, ExtractionSpec

        o = self.options
        return ExtractionSpec(
            Decoding(o["temperature"], o["top_k"], o["top_p"]),
            o["prefix_tokens"],
            o["suffix_tokens"],
        )

    @property
    def queries(self) -> list[int]:
        return sorted(int(n) for n in self.options["queries"])

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        spec = self.spec()
        conf = context.settings.confidence
        groups = {"member": context.members, "nonmember": context.nonmembers}
        log_p: dict[str, list[float | None]] = {}
        for g, ex in groups.items():
            stats = _decoding_stats(release, list(ex.texts), spec)
            log_p[g] = [sequence_log_prob(s) for s in stats]
        eligible = {g: np.array([v for v in lp if v is not None]) for g, lp in log_p.items()}
        need = spec.prefix_tokens + spec.suffix_tokens
        for g, v in eligible.items():
            if v.size == 0:
                raise ValueError(
                    f"no {g} record has the {need} tokens that prefix_tokens + suffix_tokens "
                    "need (after max_length); lower them or raise target.max_length"
                )
        metrics: dict[str, dict] = {}
        for n in self.queries:
            risk = {g: risk_within(v, n) for g, v in eligible.items()}
            for g, r in risk.items():
                metrics[f"{g}_median_risk@{n}"] = median_interval(r, conf)
                metrics[f"max_{g}_risk@{n}"] = estimate(float(r.max()), None, None, int(r.size))
                for level in RISK_LEVELS:
                    k = int((r > level).sum())
                    metrics[f"{g}_frac_risk>{level:g}@{n}"] = proportion_estimate(
                        k, int(r.size), conf
                    )
        head_n = 100 if 100 in self.queries else self.queries[-1]
        records = {
            "ids": [*map(str, context.members.ids), *map(str, context.nonmembers.ids)],
            "members": [1] * len(log_p["member"]) + [0] * len(log_p["nonmember"]),
            "log_p": [
                None if v is None else _json_float(v) for v in log_p["member"] + log_p["nonmember"]
            ],
        }
        for n in self.queries:
            records[f"risk@{n}"] = [
                None if v is None else float(risk_within(np.array([v]), n)[0])
                for v in log_p["member"] + log_p["nonmember"]
            ]
        return LeakageResult(
            self.name,
            self.kind,
            self.description,
            headline=f"max_member_risk@{head_n}",
            metrics=metrics,
            details={
                **spec.to_dict(),
                "queries": self.queries,
                "risk_levels": list(RISK_LEVELS),
                "eligible": {g: int(v.size) for g, v in eligible.items()},
                "too_short": {g: sum(v is None for v in lp) for g, lp in log_p.items()},
                "records": records,
                "finding": _finding(metrics, head_n, eligible),
            },
        )


def _json_float(v: float) -> float | str:
    return v if math.isfinite(v) else "-inf"


def _finding(metrics: dict, n: int, eligible: dict) -> str:
    m = metrics[f"member_median_risk@{n}"]
    c = metrics[f"nonmember_median_risk@{n}"]
    f = metrics[f"member_frac_risk>0.01@{n}"]
    return (
        f"Within {n} queries, the median member's suffix comes out verbatim with probability "
        f"{m['value']:.3g} (95% CI {m['ci_low']:.3g}-{m['ci_high']:.3g}, n={m['n']}), the median "
        f"non-member's with {c['value']:.3g} ({c['ci_low']:.3g}-{c['ci_high']:.3g}, n={c['n']}); "
        f"{f['successes']} of {f['n']} members exceed 1%."
    )


__all__ = ["ExtractionRisk", "log1mexp", "median_interval", "risk_within", "sequence_log_prob"]
