"""The null calibration of user-level dataset inference on real grouped text (docs/users.md,
"User-level dataset inference"; figures in docs/records/users-di-null.json).

    OMP_NUM_THREADS=1 python -m experiments.users_di_null --out docs/records/users-di-null.json

Corpus: Debian changelog entries on this machine (``/usr/share/doc/*/changelog.Debian.gz``),
each entry's bullet text (no header, no signature line), grouped by the person in its
signature line `` -- Name <email>  date`` (the name, case-folded: one person with two
addresses is one user). Users with at least ``MIN_TEXTS`` entries; a user's entries are
capped at ``MAX_TEXTS`` (a seeded choice) so a few heavy maintainers do not make the whole
corpus.

Null: no model at all. Each split assigns the users at random, half to "suspect" and half
to "validation", so nothing distinguishes the sides but chance. The per-text features are
fixed model-free statistics of the text (:func:`text_features`: length, word length, case,
digits, punctuation, compressibility, vocabulary), computed once; they stand in for the LM
features only so that 1,000 splits run in minutes. Everything downstream is the product
code: :class:`privacy_audit.attacks.dataset_inference.UserDatasetInference` (the user
fit/test split, the aggregator, the set-level permutation test over users, the per-user
conformal p-values and Benjamini-Hochberg).

Reported per split, on the same user assignment:

- ``user_level``: the set-level user test's p-value (must reject at most 5% at 0.05);
- ``per_user``: the held-out suspect users' conformal p-values (rate of p <= 0.05) and
  whether BH at q = 0.05 found any user (under the global null BH's FDR is the chance of
  any finding);
- ``text_level_same_fit``: a one-sided Welch t-test over the TEXTS of the same held-out
  users with the same aggregator (treats a user's texts as independent);
- ``text_level_di``: the text-level product test (:class:`DatasetInference`: texts, not
  users, split into fit and test parts, Welch over texts) on the same assignment.

Every rate carries its count and a Clopper-Pearson 95% interval.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import beta

from privacy_audit.audit.benchmarks.users import changelog_blocks

MIN_TEXTS = 3
MAX_TEXTS = 40
LEVEL = 0.05
#: users per side in the few-users run (4 held out per side after the fit split)
SMALL_USERS = 8


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cp_interval(k: int, n: int, confidence: float = 0.95) -> list[float]:
    """Clopper-Pearson interval of a binomial rate ``k / n``."""
    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return [lo, hi]


def debian_user_corpus(
    min_texts: int = MIN_TEXTS, max_texts: int = MAX_TEXTS, seed: int = 0
) -> tuple[list[str], list[str]]:
    """``(texts, users)``: Debian changelog entries and the person who signed each."""
    by_user: dict[str, list[str]] = collections.defaultdict(list)
    seen: set[str] = set()
    for _, block, body in changelog_blocks():
        m = re.search(r"^ -- (.+?)\s*<[^>]*>", block, re.M)
        if not m:
            continue
        entry = body[:300]
        if len(entry.split()) >= 5 and entry not in seen:
            seen.add(entry)
            by_user[" ".join(m.group(1).split()).casefold()].append(entry)
    rng = np.random.default_rng(seed)
    texts, users = [], []
    for user in sorted(by_user):
        entries = by_user[user]
        if len(entries) < min_texts:
            continue
        if len(entries) > max_texts:
            entries = [entries[i] for i in sorted(rng.choice(len(entries), max_texts, False))]
        texts += entries
        users += [user] * len(entries)
    return texts, users


def text_features(texts: list[str]) -> np.ndarray:
    """Model-free per-text statistics (rows = texts): log characters, mean word length,
    upper-case share, digit share, punctuation share, zlib compression ratio, type-token
    ratio. All differ between writers, so the texts of one user are a cluster."""
    rows = []
    for t in texts:
        words = t.split()
        n = max(len(t), 1)
        raw = t.encode("utf-8")
        rows.append(
            [
                np.log(n),
                np.mean([len(w) for w in words]) if words else 0.0,
                sum(c.isupper() for c in t) / n,
                sum(c.isdigit() for c in t) / n,
                sum((not c.isalnum()) and not c.isspace() for c in t) / n,
                len(zlib.compress(raw)) / max(len(raw), 1),
                len({w.lower() for w in words}) / max(len(words), 1),
            ]
        )
    return np.asarray(rows, dtype=np.float64)


def null_splits(
    x: np.ndarray,
    users: list[str],
    n_splits: int,
    seed: int = 0,
    permutations: int = 9999,
    fit_fraction: float = 0.5,
    users_per_side: int | None = None,
) -> dict[str, Any]:
    """``n_splits`` random suspect/validation assignments of the users; each split's
    p-values of the user-level test, the per-user p-values and the text-level tests.
    ``users_per_side``: each split draws that many users per side at random (the rest
    are left out), else every user is assigned (half each)."""
    from privacy_audit.attacks.dataset_inference import (
        DatasetInference,
        UserDatasetInference,
        aggregate,
        fit_aggregator,
        welch_one_sided,
    )

    g = np.asarray(users, dtype=object).astype(str)
    names, inv = np.unique(g, return_inverse=True)
    inv = inv.ravel()
    rng = np.random.default_rng(seed)
    out: dict[str, list] = {
        "user_p": [],
        "welch_user_means_p": [],
        "per_user_rejected": [],
        "per_user_tested": [],
        "first_user_p": [],
        "any_found": [],
        "text_same_fit_p": [],
        "text_di_p": [],
    }
    for s in range(n_splits):
        side = np.zeros(len(names), bool)
        order = rng.permutation(len(names))
        half = users_per_side or len(names) // 2
        side[order[:half]] = True
        other = np.zeros(len(names), bool)
        other[order[half : 2 * half] if users_per_side else order[half:]] = True
        rows_s, rows_v = side[inv], other[inv]
        udi = UserDatasetInference(fit_fraction, seed=s, alpha=LEVEL, permutations=permutations)
        res = udi.test(x[rows_s], g[rows_s], x[rows_v], g[rows_v])
        out["user_p"].append(res["p_value"])
        out["welch_user_means_p"].append(res["welch_user_means_p_value"])
        pv = np.array([u["p_value"] for u in res["users"]])
        out["per_user_rejected"].append(int((pv <= LEVEL).sum()))
        out["per_user_tested"].append(int(pv.size))
        out["first_user_p"].append(float(pv[rng.integers(pv.size)]))
        out["any_found"].append(bool(res["n_found"] > 0))
        # the same user split and aggregator, but Welch over the held-out TEXTS
        (fs, ts), (fv, tv) = udi.split_users(len(np.unique(g[rows_s])), len(np.unique(g[rows_v])))
        us, iv_s = np.unique(g[rows_s], return_inverse=True)
        uv, iv_v = np.unique(g[rows_v], return_inverse=True)
        xs, xv = x[rows_s], x[rows_v]
        f_s, t_s = np.isin(iv_s.ravel(), fs), np.isin(iv_s.ravel(), ts)
        f_v, t_v = np.isin(iv_v.ravel(), fv), np.isin(iv_v.ravel(), tv)
        mu, sd, w = fit_aggregator(
            np.vstack([xs[f_s], xv[f_v]]), np.r_[np.ones(f_s.sum()), np.zeros(f_v.sum())]
        )
        out["text_same_fit_p"].append(
            welch_one_sided(aggregate(xs[t_s], mu, sd, w), aggregate(xv[t_v], mu, sd, w))["p_value"]
        )
        # the text-level product test: texts (not users) split into fit and test parts
        out["text_di_p"].append(DatasetInference(fit_fraction, seed=s).test(xs, xv)["p_value"])
        if (s + 1) % 100 == 0:
            _log(f"  {s + 1}/{n_splits} splits")
    return out


def _rate(k: int, n: int) -> dict[str, Any]:
    return {"rejected": int(k), "n": int(n), "rate": k / n, "ci95": cp_interval(int(k), int(n))}


def summarise(raw: dict[str, list], level: float = LEVEL) -> dict[str, Any]:
    n = len(raw["user_p"])
    rej = lambda key: int((np.asarray(raw[key]) <= level).sum())  # noqa: E731
    per_split = np.asarray(raw["per_user_rejected"]) / np.asarray(raw["per_user_tested"])
    se = per_split.std(ddof=1) / np.sqrt(n)
    return {
        "splits": n,
        "level": level,
        "user_level": _rate(rej("user_p"), n),
        "user_level_welch_on_user_means": _rate(rej("welch_user_means_p"), n),
        "per_user": {
            "rejected": int(np.sum(raw["per_user_rejected"])),
            "tested": int(np.sum(raw["per_user_tested"])),
            "rate": float(per_split.mean()),
            # splits are independent; users within a split share their null users, so the
            # interval is over splits (mean of the per-split rates, normal approximation)
            "ci95_over_splits": [
                float(per_split.mean() - 1.96 * se),
                float(per_split.mean() + 1.96 * se),
            ],
            "one_random_user_per_split": _rate(rej("first_user_p"), n),
            "any_user_found_bh": _rate(int(np.sum(raw["any_found"])), n),
        },
        "text_level_same_fit": _rate(rej("text_same_fit_p"), n),
        "text_level_di": _rate(rej("text_di_p"), n),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=1000)
    ap.add_argument("--permutations", type=int, default=9999)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="docs/records/users-di-null.json")
    args = ap.parse_args(argv)
    t0 = time.time()
    texts, users = debian_user_corpus(seed=args.seed)
    x = text_features(texts)
    counts = np.unique(users, return_counts=True)[1]
    _log(f"{len(texts)} texts of {counts.size} users; {args.splits} splits")
    raw = null_splits(x, users, args.splits, args.seed, args.permutations)
    # few users: the set-level test then compares 4 held-out users per side, where the
    # permutation p is exact (C(8, 4) = 70 arrangements) and Welch's t-distribution on
    # 4 + 4 skewed user means is only an approximation
    _log(f"{args.splits} splits of {SMALL_USERS} users per side")
    small = null_splits(
        x, users, args.splits, args.seed + 1, args.permutations, users_per_side=SMALL_USERS
    )
    res = {
        "corpus": {
            "source": "Debian changelog entries (/usr/share/doc/*/changelog.Debian.gz), "
            "grouped by the signing person",
            "users": int(counts.size),
            "texts": len(texts),
            "texts_per_user": {
                "min": int(counts.min()),
                "median": float(np.median(counts)),
                "max": int(counts.max()),
                "cap": MAX_TEXTS,
                "at_least": MIN_TEXTS,
            },
        },
        "features": "model-free per-text statistics (experiments/users_di_null.py "
        "text_features), fixed; everything else is the product's UserDatasetInference",
        "permutations": args.permutations,
        "seed": args.seed,
        **summarise(raw),
        "few_users": {"users_per_side": SMALL_USERS, **summarise(small)},
        "seconds": round(time.time() - t0, 1),
    }
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    _log(json.dumps({k: res[k] for k in ("user_level", "per_user", "text_level_di")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
