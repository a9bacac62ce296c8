"""Dataset inference (Maini et al., NeurIPS 2024, "LLM Dataset Inference: Did you train
on my dataset?", arXiv 2406.06443).

Question: was this *set* of suspect documents used to train the model? Per-example
membership AUC is often 0.5-0.6 on large LMs even when the text was trained on; summed
over many texts the small per-text shifts become a test with a p-value.

Procedure (one split fixed in advance from the seed, so the p-value needs no combination
over repeated splits):

1. Features: per-text LM membership signals, all read from the release's one cached
   forward pass per text (``release.token_stats``): mean log-likelihood (LOSS), zlib ratio,
   Min-K% (k = 0.2) and Min-K%++ (k = 0.2); with a reference model also the
   reference-calibrated log-likelihood difference (target - reference).
2. Suspect texts S and validation texts V (known not trained on) are each split at
   random, once, into an aggregator part (``fit_fraction``) and a test part.
3. A linear aggregator (least squares on standardised features, target 1 for suspect and
   0 for validation; Maini et al. learn a linear model) is fitted on the aggregator
   part only.
4. On the test part, a one-sided Welch t-test of H0: mean score(S) <= mean score(V).

Assumption (stated in every result): S and V come from the same distribution; under H0
the model did not train on S, so the test-part scores of S and V are exchangeable and the
aggregator, fitted on disjoint texts, cannot create a difference. A shifted pair breaks
this assumption; the split check runs on S and V first, and a shifted pair gets no p-value.

With users (:class:`UserDatasetInference`) the unit is the person, not the text: a user's
texts share an author, topic and style, so they are a cluster, not independent draws, and
a text-level test counts one user's 30 texts as 30 pieces of evidence (it over-rejects
on clustered text; docs/users.md). Users are split into the fit and test parts (all of a
user's texts on one side), each held-out user is summarised by the mean aggregated score
of their texts, and the set-level test compares suspect users with validation users by a
permutation test over users. Each held-out suspect user also gets a conformal p-value
against the held-out validation users, and Benjamini-Hochberg picks the users found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from scipy import stats

ASSUMPTION = (
    "The suspect and validation texts come from the same distribution (same source, same "
    "time, same processing), and the validation texts were not trained on. Under that "
    "assumption and H0 (the suspect texts were not trained on either), the p-value is valid."
)

FEATURES = ("loss", "zlib", "min-k-20", "min-k++-20")

#: A blind AUC that would bias the test: a shift of this size between suspect and
#: validation texts makes the membership features differ without any training (measured:
#: a temporal shift no model trained on passed the check at small n and got p = 0.029).
GUARD_SHIFT_AUC = 0.65
#: Power at which the split check is said to detect a shift.
GUARD_POWER = 0.8


def lm_features(release, texts: list[str], reference=None) -> tuple[np.ndarray, list[str]]:
    """Per-text membership signals (higher = more member-like) from the release's cached
    token statistics: one forward pass per distinct text, shared with the attacks."""
    from privacy_audit.attacks.llm_membership import (
        loss_scores,
        min_k_scores,
        token_stats,
        zlib_scores,
    )
    from privacy_audit.attacks.min_k_pp import min_k_pp_scores

    st = token_stats(release, list(texts))
    logp = [s.log_probs for s in st]
    cols = [loss_scores(logp), zlib_scores(logp, list(texts)), min_k_scores(logp, 0.2)]
    cols.append(min_k_pp_scores(st, 0.2))
    names = list(FEATURES)
    if reference is not None:
        ref = [s.log_probs for s in token_stats(reference, list(texts))]
        cols.append(cols[0] - loss_scores(ref))
        names.append("reference-diff")
    return np.column_stack(cols).astype(np.float64), names


def welch_one_sided(a, b) -> dict[str, float]:
    """Welch's t-test of H0: mean(a) <= mean(b) against mean(a) > mean(b), by hand:
    ``t = (ā - b̄) / sqrt(s_a²/n_a + s_b²/n_b)``, Welch-Satterthwaite degrees of freedom
    ``df = (s_a²/n_a + s_b²/n_b)² / ((s_a²/n_a)²/(n_a-1) + (s_b²/n_b)²/(n_b-1))``,
    ``p = P(T_df >= t)``."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = a.size, b.size
    if na < 2 or nb < 2:
        raise ValueError("the Welch t-test needs at least 2 values per group")
    va, vb = a.var(ddof=1) / na, b.var(ddof=1) / nb
    se2 = va + vb
    if not se2 > 0:
        return {"t": math.nan, "df": math.nan, "p_value": math.nan}
    t = (a.mean() - b.mean()) / math.sqrt(se2)
    df = se2**2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    return {"t": float(t), "df": float(df), "p_value": float(stats.t.sf(t, df))}


def fit_aggregator(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares ``y ≈ w0 + w·z`` on standardised features ``z = (x - mean) / sd``
    (means and sds of the aggregator part). Returns ``(mean, sd, [w0, w...])``."""
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    z = np.column_stack([np.ones(len(x)), (x - mu) / sd])
    w, *_ = np.linalg.lstsq(z, y.astype(np.float64), rcond=None)
    return mu, sd, w


def aggregate(x: np.ndarray, mu: np.ndarray, sd: np.ndarray, w: np.ndarray) -> np.ndarray:
    return w[0] + ((x - mu) / sd) @ w[1:]


@dataclass(frozen=True)
class DatasetInference:
    """Dataset-inference test (see the module docstring). ``fit_fraction`` of each set
    trains the aggregator; the rest is tested. ``seed`` fixes the one split."""

    fit_fraction: float = 0.5
    seed: int = 0
    alpha: float = 0.01

    def __post_init__(self) -> None:
        if not 0 < self.fit_fraction < 1:
            raise ValueError(f"fit_fraction must be in (0, 1), got {self.fit_fraction}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")

    def _parts(self, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
        perm = rng.permutation(n)
        k = int(round(self.fit_fraction * n))
        k = min(max(k, 2), n - 2)
        return perm[:k], perm[k:]

    def test(
        self, x_suspect: np.ndarray, x_validation: np.ndarray, names: list[str] | None = None
    ) -> dict[str, Any]:
        """p-value, effect size and sizes of the test on feature matrices (rows = texts)."""
        xs, xv = np.asarray(x_suspect, np.float64), np.asarray(x_validation, np.float64)
        if xs.ndim != 2 or xv.ndim != 2 or xs.shape[1] != xv.shape[1]:
            raise ValueError("suspect and validation features must be 2-D with equal columns")
        if len(xs) < 4 or len(xv) < 4:
            raise ValueError(
                "dataset inference needs at least 4 suspect and 4 validation texts, got "
                f"{len(xs)} and {len(xv)}"
            )
        if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(xv))):
            raise ValueError("a membership feature is NaN or infinite")
        rng = np.random.default_rng(self.seed)
        fs, ts = self._parts(len(xs), rng)
        fv, tv = self._parts(len(xv), rng)
        x_fit = np.vstack([xs[fs], xv[fv]])
        y_fit = np.r_[np.ones(len(fs)), np.zeros(len(fv))]
        mu, sd, w = fit_aggregator(x_fit, y_fit)
        s_s, s_v = aggregate(xs[ts], mu, sd, w), aggregate(xv[tv], mu, sd, w)
        t = welch_one_sided(s_s, s_v)
        pooled = math.sqrt((s_s.var(ddof=1) + s_v.var(ddof=1)) / 2)
        d = float((s_s.mean() - s_v.mean()) / pooled) if pooled > 0 else math.nan
        p = t["p_value"]
        return {
            "p_value": p,
            "t": t["t"],
            "df": t["df"],
            "effect_size": d,
            "effect_size_name": "Cohen's d (test-part aggregated scores, average-variance SD)",
            "alternative": "mean aggregated score of suspect texts > validation texts",
            "n_suspect": int(len(xs)),
            "n_validation": int(len(xv)),
            "n_fit": {"suspect": int(len(fs)), "validation": int(len(fv))},
            "n_test": {"suspect": int(len(ts)), "validation": int(len(tv))},
            "features": list(names) if names is not None else None,
            "weights": [float(v) for v in w[1:]],
            "alpha": self.alpha,
            "significant": bool(np.isfinite(p) and p < self.alpha),
            "assumption": ASSUMPTION,
            "split": f"one random split fixed by seed {self.seed}: {self.fit_fraction:g} of "
            "each set fits the aggregator, the rest is tested",
        }


USER_ASSUMPTION = (
    "The suspect and validation users come from the same population (same source, same "
    "time, same processing), and no validation user's texts were trained on. Under that "
    "assumption and H0 (no suspect user's texts were trained on either), the held-out "
    "suspect and validation users are exchangeable: the set-level permutation p-value is "
    "exact, and each suspect user's conformal p-value is valid (super-uniform); the "
    "per-user p-values share one null set, they are positively dependent (PRDS) and "
    "Benjamini-Hochberg controls the false discovery rate (Bates et al. 2023). A user's "
    "texts are never assumed independent."
)

#: Permutations of the set-level user test when the exact enumeration is larger than
#: :data:`EXACT_LIMIT` arrangements (Monte Carlo p-value ``(1 + #{t* >= t}) / (1 + B)``).
USER_PERMUTATIONS = 9999
EXACT_LIMIT = 20000


def user_means(scores, groups) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per user (sorted names): the mean of the user's text scores and the text count."""
    s = np.asarray(scores, dtype=np.float64)
    names, inv = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    inv = inv.ravel()
    n = np.bincount(inv, minlength=len(names))
    return [str(u) for u in names], np.bincount(inv, s, minlength=len(names)) / n, n


def _welch_t_rows(v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Welch's t of ``v[mask_r]`` vs ``v[~mask_r]`` for every row ``r`` of a boolean mask."""
    m = mask.astype(np.float64)
    na, nb = m.sum(axis=1), (1 - m).sum(axis=1)
    sa, sb = m @ v, (1 - m) @ v
    qa, qb = m @ (v * v), (1 - m) @ (v * v)
    ma, mb = sa / na, sb / nb
    va = np.maximum(qa - na * ma**2, 0) / (na - 1) / na
    vb = np.maximum(qb - nb * mb**2, 0) / (nb - 1) / nb
    se = np.sqrt(va + vb)
    diff = ma - mb
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.sign(diff) * np.inf)
    return np.where(np.isnan(t), 0.0, t)


def permutation_welch(
    a, b, permutations: int = USER_PERMUTATIONS, seed: int = 0, exact_limit: int = EXACT_LIMIT
) -> dict[str, Any]:
    """One-sided permutation test of "values ``a`` are larger than ``b``" with Welch's t
    as the statistic (a studentised permutation test: exact when the values are
    exchangeable under H0, and still asymptotically valid when only the means are equal,
    Janssen 1997; Chung & Romano 2013). All ``C(n_a + n_b, n_a)`` arrangements when there
    are at most ``exact_limit`` of them (``p = #{t* >= t} / C``, the observed one
    included), else ``permutations`` seeded random ones (``p = (1 + #{t* >= t}) / (1 + B)``).
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = a.size, b.size
    if na < 2 or nb < 2:
        raise ValueError("the permutation test needs at least 2 values per group")
    v = np.r_[a, b]
    n = v.size
    observed = _welch_t_rows(v, np.r_[np.ones(na, bool), np.zeros(nb, bool)][None, :])[0]
    # the same t recomputed in another order can differ in the last bits: a tie is a tie
    tol = 1e-9 * max(1.0, abs(observed)) if np.isfinite(observed) else 0.0
    total = math.comb(n, na)
    if total <= exact_limit:
        idx = np.array(list(combinations(range(n), na)), dtype=np.int64)
        mask = np.zeros((total, n), bool)
        mask[np.arange(total)[:, None], idx] = True
        ge = int((_welch_t_rows(v, mask) >= observed - tol).sum())
        p, method, count = ge / total, "exact", total
    else:
        rng = np.random.default_rng(seed)
        ge, left, chunk = 0, permutations, 2000
        while left > 0:
            k = min(chunk, left)
            order = np.argsort(rng.random((k, n)), axis=1)
            mask = np.zeros((k, n), bool)
            mask[np.arange(k)[:, None], order[:, :na]] = True
            ge += int((_welch_t_rows(v, mask) >= observed - tol).sum())
            left -= k
        p, method, count = (1 + ge) / (1 + permutations), "monte-carlo", permutations
    return {"t": float(observed), "p_value": float(p), "method": method, "permutations": count}


def users_needed(fit_fraction: float) -> int:
    """The fewest users a side needs so that the fit part holds at least 1 user and the
    test part at least 2 (fit part ``max(1, round(fit_fraction * n))``)."""
    n = 3
    while n - max(1, round(fit_fraction * n)) < 2:
        n += 1
    return n


@dataclass(frozen=True)
class UserDatasetInference:
    """Dataset inference with users as the unit (see the module docstring).

    ``fit_fraction`` of each side's USERS (all their texts) fits the aggregator; the other
    users are tested: per user the mean aggregated score of their texts; the set-level
    test is :func:`permutation_welch` on the suspect vs validation user means (one-sided,
    suspect users higher); each held-out suspect user gets the conformal p-value of their
    mean against the held-out validation users' means, and Benjamini-Hochberg at ``fdr``
    gives the users found. ``seed`` fixes the one user split and the permutations."""

    fit_fraction: float = 0.5
    seed: int = 0
    alpha: float = 0.01
    fdr: float = 0.05
    permutations: int = USER_PERMUTATIONS

    def __post_init__(self) -> None:
        if not 0 < self.fit_fraction < 1:
            raise ValueError(f"fit_fraction must be in (0, 1), got {self.fit_fraction}")
        for key in ("alpha", "fdr"):
            if not 0 < getattr(self, key) < 1:
                raise ValueError(f"{key} must be in (0, 1), got {getattr(self, key)}")

    def split_users(self, n_suspect: int, n_validation: int):
        """``((fit, test) suspect-user positions, (fit, test) validation-user positions)``
        of users in sorted order; ValueError when a side has too few users."""
        need = users_needed(self.fit_fraction)
        for side, n in (("suspect", n_suspect), ("validation", n_validation)):
            if n < need:
                raise ValueError(
                    f"{n} {side} user(s): the user-level test needs at least 2 users per "
                    f"side after the fit split, so at least {need} users per side at "
                    f"fit_fraction {self.fit_fraction:g}"
                )
        rng = np.random.default_rng(self.seed)
        out = []
        for n in (n_suspect, n_validation):
            perm = rng.permutation(n)
            k = max(1, round(self.fit_fraction * n))
            out.append((np.sort(perm[:k]), np.sort(perm[k:])))
        return out[0], out[1]

    def test(
        self,
        x_suspect: np.ndarray,
        groups_suspect,
        x_validation: np.ndarray,
        groups_validation,
        names: list[str] | None = None,
    ) -> dict[str, Any]:
        """The user-level result on feature matrices (rows = texts) and each text's user."""
        from privacy_audit.stats.by_user import benjamini_hochberg, user_pvalues

        xs, xv = np.asarray(x_suspect, np.float64), np.asarray(x_validation, np.float64)
        gs = np.asarray(groups_suspect, dtype=object).astype(str)
        gv = np.asarray(groups_validation, dtype=object).astype(str)
        if xs.ndim != 2 or xv.ndim != 2 or xs.shape[1] != xv.shape[1]:
            raise ValueError("suspect and validation features must be 2-D with equal columns")
        if len(gs) != len(xs) or len(gv) != len(xv):
            raise ValueError("one user per text is needed")
        both = set(gs) & set(gv)
        if both:
            raise ValueError(
                f"{len(both)} user(s) have texts on both the suspect and validation side"
            )
        if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(xv))):
            raise ValueError("a membership feature is NaN or infinite")
        us, inv_s = np.unique(gs, return_inverse=True)
        uv, inv_v = np.unique(gv, return_inverse=True)
        (fs, ts), (fv, tv) = self.split_users(len(us), len(uv))
        rows_fs, rows_ts = np.isin(inv_s.ravel(), fs), np.isin(inv_s.ravel(), ts)
        rows_fv, rows_tv = np.isin(inv_v.ravel(), fv), np.isin(inv_v.ravel(), tv)
        x_fit = np.vstack([xs[rows_fs], xv[rows_fv]])
        y_fit = np.r_[np.ones(int(rows_fs.sum())), np.zeros(int(rows_fv.sum()))]
        mu, sd, w = fit_aggregator(x_fit, y_fit)
        names_s, mean_s, n_s = user_means(aggregate(xs[rows_ts], mu, sd, w), gs[rows_ts])
        names_v, mean_v, n_v = user_means(aggregate(xv[rows_tv], mu, sd, w), gv[rows_tv])
        perm = permutation_welch(
            mean_s,
            mean_v,
            self.permutations,
            seed=int(np.random.SeedSequence([self.seed, 1]).generate_state(1)[0]),
        )
        welch = welch_one_sided(mean_s, mean_v)
        pooled = math.sqrt((mean_s.var(ddof=1) + mean_v.var(ddof=1)) / 2)
        d = float((mean_s.mean() - mean_v.mean()) / pooled) if pooled > 0 else math.nan
        pv = user_pvalues(mean_s, mean_v)
        found = benjamini_hochberg(pv, q=self.fdr)
        p = perm["p_value"]
        users = [
            {"user": u, "score": float(s), "n_texts": int(k), "p_value": float(q), "found": bool(f)}
            for u, s, k, q, f in zip(names_s, mean_s, n_s, pv, found, strict=True)
        ]
        null_users = [
            {"user": u, "score": float(s), "n_texts": int(k)}
            for u, s, k in zip(names_v, mean_v, n_v, strict=True)
        ]
        return {
            "unit": "user",
            "p_value": p,
            "t": perm["t"],
            "df": welch["df"],
            "test": f"one-sided permutation test over users ({perm['method']}, "
            f"{perm['permutations']} arrangements) of Welch's t on the per-user mean "
            "aggregated scores",
            "permutation": perm,
            "welch_user_means_p_value": welch["p_value"],
            "effect_size": d,
            "effect_size_name": "Cohen's d (per-user mean aggregated scores of the test users, "
            "average-variance SD)",
            "alternative": "mean aggregated score of suspect users > validation users",
            "n_suspect": int(len(xs)),
            "n_validation": int(len(xv)),
            "n_users": {"suspect": int(len(us)), "validation": int(len(uv))},
            "n_texts": {"suspect": int(len(xs)), "validation": int(len(xv))},
            "n_fit": {"suspect": int(len(fs)), "validation": int(len(fv))},
            "n_test": {"suspect": int(len(ts)), "validation": int(len(tv))},
            "n_fit_texts": {"suspect": int(rows_fs.sum()), "validation": int(rows_fv.sum())},
            "n_test_texts": {"suspect": int(rows_ts.sum()), "validation": int(rows_tv.sum())},
            "features": list(names) if names is not None else None,
            "weights": [float(v) for v in w[1:]],
            "alpha": self.alpha,
            "significant": bool(np.isfinite(p) and p < self.alpha),
            "fdr": self.fdr,
            "users": users,
            "null_users": null_users,
            "n_found": int(found.sum()),
            # the smallest conformal p-value m validation users allow: above q, BH can
            # find no user whatever the model did
            "min_user_p_value": 1 / (len(names_v) + 1),
            "found": [u["user"] for u in users if u["found"]],
            "per_user_test": "conformal p-value (1 + #{validation users with mean >= the "
            f"user's}}) / (1 + {len(names_v)}) against the {len(names_v)} held-out validation "
            f"users; users found: Benjamini-Hochberg at FDR q = {self.fdr:g}",
            "assumption": USER_ASSUMPTION,
            "split": f"one random split of the USERS fixed by seed {self.seed}: "
            f"{self.fit_fraction:g} of each side's users (all their texts) fit the "
            "aggregator, the other users are tested",
        }


def split_guard(check: dict[str, Any], shift_auc: float = GUARD_SHIFT_AUC) -> dict[str, Any]:
    """Can the split check vouch for the test's assumption on this many texts? It can
    when it detects a shift of blind AUC ``shift_auc`` with power >= ``GUARD_POWER``
    (normal approximation with the permutation null SD, stats/split_check.py
    ``detectable_auc``); otherwise the p-value stands on the user's word that the two
    sets come from one source."""
    from privacy_audit.stats.blind_baseline import SHIFT_CONFIDENCE, detectable_auc

    blind = check.get("blind") or {}
    auc = blind.get("auc") or {}
    sd = auc.get("null_sd")
    if not isinstance(sd, int | float) or not math.isfinite(sd):
        return {"can_speak": False, "shift_auc": shift_auc, "detectable_auc": None,
                "text": "The split check did not measure these sets, so nothing checks the "
                "test's assumption."}  # fmt: skip
    # the check's own level as stored (98%, stats/split_check.py SHIFT_CONFIDENCE): the
    # detectable AUC is at the level the check decides at (one-sided 1%)
    conf = float(check.get("confidence", SHIFT_CONFIDENCE))
    det = detectable_auc(sd, conf, GUARD_POWER)
    n = f"{blind.get('n_members')} suspect and {blind.get('n_nonmembers')} validation texts"
    if blind.get("n_member_users") is not None:  # users were the check's units
        n = (
            f"{blind.get('n_members')} suspect texts of {blind.get('n_member_users')} users "
            f"and {blind.get('n_nonmembers')} validation texts of "
            f"{blind.get('n_nonmember_users')} users"
        )
    can = bool(det <= shift_auc)
    if can:
        text = (
            f"On {n} the split check detects a shift of blind AUC {det:.3f} or more with "
            f"{GUARD_POWER:.0%} power, so a shift large enough to bias this test (blind AUC "
            f"{shift_auc:.3f}) would have been flagged."
        )
    else:
        text = (
            # three decimals: at two, 0.652 and 0.650 both read 0.65 and the sentence
            # contradicted itself
            f"The split check cannot speak for these sets: on {n} it detects only a shift "
            f"of blind AUC {det:.3f} or more ({GUARD_POWER:.0%} power), so a shift of blind "
            f"AUC {shift_auc:.3f}, large enough to bias this test, could pass unnoticed. "
            "The p-value is valid only if the two sets were drawn from one source by design."
        )
    return {
        "can_speak": can,
        "shift_auc": shift_auc,
        "detectable_auc": det,
        "power": GUARD_POWER,
        "text": text,
    }


def result_text(res: dict[str, Any]) -> str:
    """One plain-language sentence on a dataset-inference result."""
    if res.get("status") == "split-shifted":
        return (
            "No p-value: the suspect and validation texts differ in their text itself "
            f"(blind AUC {res['split_check']['blind']['auc']['value']:.3f}, interval above "
            "0.5), so the test's assumption fails and any difference could come from the "
            "texts, not from training. Draw validation texts from the same source and time."
        )
    if res.get("status") != "ok":
        return f"Not measured: {res.get('reason', 'no result')}."
    if res.get("unit") == "user":
        return _user_text(res)
    p = res["p_value"]
    n = res["n_test"]
    verdict = (
        f"the suspect set WAS very likely used in training (p < {res['alpha']:g})"
        if res["significant"]
        else f"no evidence at α = {res['alpha']:g} that the suspect set was used; this is "
        "not proof that it was not"
    )
    guard = res.get("split_guard") or {}
    tail = f" {guard['text']}" if guard.get("text") and not guard.get("can_speak") else ""
    return (
        f"Dataset inference: p = {p:.3g} (one-sided Welch t-test, t = {res['t']:.2f}, "
        f"df = {res['df']:.1f}), effect size d = {res['effect_size']:.2f}, on "
        f"{n['suspect']} suspect and {n['validation']} validation test texts: {verdict}.{tail}"
    )


def _user_text(res: dict[str, Any]) -> str:
    """The sentence of a user-level result: the unit, users and texts per side, the
    set-level p-value and the users found."""
    p, n, nt = res["p_value"], res["n_test"], res.get("n_test_texts") or {}
    verdict = (
        f"the suspect users' texts WERE very likely used in training (p < {res['alpha']:g})"
        if res["significant"]
        else f"no evidence at α = {res['alpha']:g} that the suspect users' texts were used; "
        "this is not proof that they were not"
    )
    m = n["validation"]
    floor = 1 / (m + 1)
    if floor > res["fdr"]:
        per_user = (
            f" No single user can be found: against {m} held-out validation users the "
            f"smallest per-user p-value is 1/{m + 1} = {floor:.3g} > q = {res['fdr']:g} "
            f"(at least {math.ceil(1 / res['fdr'] - 1)} held-out validation users are needed)."
        )
    else:
        per_user = (
            f" Per user: {res['n_found']} of the {n['suspect']} held-out suspect users found "
            f"at FDR q = {res['fdr']:g} (conformal p-values against the {m} held-out "
            "validation users)."
        )
    fit = (res.get("n_fit") or {}).get("suspect")
    if fit:
        per_user += (
            f" The {fit} suspect users whose texts fitted the aggregator get no p-value "
            "(not tested, not cleared)."
        )
    found = res.get("found")
    if isinstance(found, list) and found:
        more = f" and {len(found) - 10} more" if len(found) > 10 else ""
        per_user += f" Users found: {', '.join(map(str, found[:10]))}{more}."
    guard = res.get("split_guard") or {}
    tail = f" {guard['text']}" if guard.get("text") and not guard.get("can_speak") else ""
    return (
        f"Dataset inference, unit: users: p = {p:.3g} (one-sided permutation test over users "
        f"of Welch's t on per-user mean scores, t = {res['t']:.2f}), effect size d = "
        f"{res['effect_size']:.2f}, on {n['suspect']} suspect users "
        f"({nt.get('suspect', '?')} texts) and {m} validation users "
        f"({nt.get('validation', '?')} texts) held out from the fit: {verdict}."
        f"{per_user}{tail}"
    )
