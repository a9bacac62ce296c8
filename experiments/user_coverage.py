"""Coverage of the user-level intervals on real grouped text (docs/users.md).

Two corpora with natural users, read from this machine:

* Debian changelog entries (``/usr/share/doc/*/changelog.Debian.gz``), one text per
  upload (its bullet lines), the user = the e-mail of its signature line
  `` -- Name <email>  date``;
* installed Python packages' ``METADATA`` descriptions, one text per paragraph, the
  user = the ``Author-email`` (else ``Author``, else ``Maintainer-email``) field.

Each text gets a fixed, model-free score that clusters by user (its zlib compression
ratio: authors differ in how repetitive and long their entries are).  Every
replicate draws users without replacement from the corpus and assigns them at random
to the two sides, so the sides are two samples of the same population of users:

* ``null``: the scores as they are; the true text-level and user-level AUC are 0.5 and
  the true TPR at FPR x is x.
* ``effect``: every member user's texts are shifted by one user-level random effect
  ``u ~ N(mu, tau^2)`` (the same u for all of a user's texts); the truths are computed
  from the whole population (pairs of texts of different users, Phi of the shifted
  difference; thresholds from the population's text or user distribution).

Per replicate and interval: does the 95 % interval contain the truth?  Reported with
Clopper-Pearson 95 % intervals over the replicates:
(i) the text-level intervals that treat texts as independent
(``membership_metrics``: DeLong AUC, exact TPR bracket); (ii) ``grouped_text_metrics``
(clustered AUC, user-bootstrap TPR); (iii) ``user_metrics`` on the per-user means.
Plus the user-level dataset-inference null: the rate at which a true non-member user
gets a conformal p-value <= 0.05, and the behaviour of Benjamini-Hochberg.

Run: ``python -m privacy_audit.experiments.user_coverage --splits 1000`` (minutes on one
core); writes docs/records/users-coverage.json.
"""

from __future__ import annotations

import argparse
import email.parser
import glob
import json
import re
import sys
import time
import zlib
from pathlib import Path

import numpy as np
from scipy.special import ndtr
from scipy.stats import beta

from privacy_audit.audit.benchmarks.users import changelog_blocks
from privacy_audit.stats import by_user as ul
from privacy_audit.stats.metrics import membership_metrics, split_counts

#: FPRs whose TPR intervals are checked (lower ones are not resolvable at these n).
FPRS = (0.05, 0.1, 0.2)
#: Texts kept per user (a seeded sample when a user has more): a few prolific Debian
#: maintainers have thousands of entries, which would make them the whole corpus.
MAX_TEXTS = 20
MIN_TEXTS = 2


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cp_interval(k: int, n: int, confidence: float = 0.95) -> list[float]:
    """Clopper-Pearson interval of k successes in n trials."""
    a = 1.0 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return [round(lo, 4), round(hi, 4)]


# ---------------------------------------------------------------------------
# Corpora: (user, text) pairs
# ---------------------------------------------------------------------------


def debian_users() -> list[tuple[str, str]]:
    """(maintainer e-mail, entry text) for every Debian changelog entry on this machine;
    the text is the entry's body without its header and signature (no date, no name)."""
    out = []
    for _, block, body in changelog_blocks():
        m = re.search(r"^ -- .*?<([^>]+)>", block, re.M)
        if not m:
            continue
        if len(body.split()) >= 5:
            out.append((m.group(1).strip().lower(), body))
    return out


def metadata_users() -> list[tuple[str, str]]:
    """(author, description paragraph) from installed packages' METADATA files."""
    paths = sorted(
        set(
            glob.glob("/usr/lib/python3*/**/*.dist-info/METADATA", recursive=True)
            + glob.glob("/usr/local/lib/python3*/**/*.dist-info/METADATA", recursive=True)
            + glob.glob(f"{sys.prefix}/lib/python3*/site-packages/*.dist-info/METADATA")
        )
    )
    out = []
    seen = set()
    for p in paths:
        try:
            raw = Path(p).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        msg = email.parser.Parser().parsestr(raw)
        author = ""
        for field in ("Author-email", "Author", "Maintainer-email"):
            author = (msg.get(field) or "").strip()
            if author:
                break
        if not author:
            continue
        body = msg.get_payload() or msg.get("Description") or ""
        if not isinstance(body, str):
            continue
        for para in re.split(r"\n\s*\n", body):
            t = " ".join(para.split())
            if len(t.split()) >= 8 and t not in seen:
                seen.add(t)
                out.append((author.lower(), t))
    return out


CORPORA = {"debian-changelogs": debian_users, "package-metadata": metadata_users}


def zlib_ratio(text: str) -> float:
    """Compressed over raw length (lower = more repetitive)."""
    b = text.encode("utf-8")
    return len(zlib.compress(b, 9)) / len(b)


def population(pairs, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(scores, user index) of users with >= MIN_TEXTS texts, at most MAX_TEXTS each
    (a seeded sample); exact duplicate texts of one user are kept once."""
    by_user: dict[str, list[str]] = {}
    for u, t in pairs:
        by_user.setdefault(u, []).append(t)
    rng = np.random.default_rng(seed)
    scores, users = [], []
    k = 0
    for u in sorted(by_user):
        texts = list(dict.fromkeys(by_user[u]))
        if len(texts) < MIN_TEXTS:
            continue
        if len(texts) > MAX_TEXTS:
            texts = [texts[i] for i in sorted(rng.choice(len(texts), MAX_TEXTS, replace=False))]
        scores += [zlib_ratio(t) for t in texts]
        users += [k] * len(texts)
        k += 1
    s = np.asarray(scores)
    # a fixed tiny jitter breaks exact ties, so every truth below is continuous
    s = s + np.random.default_rng(seed + 1).uniform(-1e-9, 1e-9, s.size)
    return s, np.asarray(users)


def icc(s: np.ndarray, g: np.ndarray) -> float:
    """One-way ANOVA intraclass correlation of the scores within users."""
    k = g.max() + 1
    n = np.bincount(g, minlength=k).astype(float)
    means = np.bincount(g, weights=s, minlength=k) / n
    grand = s.mean()
    msb = np.sum(n * (means - grand) ** 2) / (k - 1)
    msw = np.sum((s - means[g]) ** 2) / (s.size - k)
    n0 = (s.size - np.sum(n**2) / s.size) / (k - 1)
    return float((msb - msw) / (msb + (n0 - 1) * msw))


# ---------------------------------------------------------------------------
# Truths from the population
# ---------------------------------------------------------------------------


def _pair_auc(x, gx, y, gy, mu, tau, chunk=2000) -> float:
    """Mean over pairs (x_i, y_j) of different users of P(x_i + u > y_j), u ~ N(mu, tau^2)."""
    num = 0.0
    den = 0
    for a in range(0, x.size, chunk):
        d = x[a : a + chunk, None] - y[None, :]
        other = gx[a : a + chunk, None] != gy[None, :]
        p = ndtr((d + mu) / tau) if tau > 0 else (d + mu > 0) + 0.5 * (d + mu == 0)
        num += float(np.sum(p * other))
        den += int(other.sum())
    return num / den


def _tpr_truth(x_member, x_null, mu, tau, fpr) -> float:
    """TPR at FPR ``fpr`` of the shifted population vs the population: threshold = the
    (1 - fpr) quantile of the population, TPR = mean of P(x + u >= t)."""
    t = float(np.quantile(x_null, 1.0 - fpr))
    if tau <= 0:
        return float(np.mean(x_member + mu >= t))
    return float(np.mean(ndtr((x_member + mu - t) / tau)))


def _rates(x_pop, mu, tau, thr):
    """Population (TPR, FPR) of the rule "score >= thr": members = the population
    shifted by u ~ N(mu, tau^2), non-members = the population."""
    thr = np.atleast_1d(np.asarray(thr, dtype=np.float64))
    xs = np.sort(x_pop)
    fpr = 1.0 - np.searchsorted(xs, thr, side="left") / xs.size
    if tau <= 0:
        tpr = 1.0 - np.searchsorted(xs + mu, thr, side="left") / xs.size
    else:
        tpr = np.array([float(np.mean(ndtr((x_pop + mu - t) / tau))) for t in thr])
    return tpr, fpr


def _advantage_truth(x_pop, mu, tau) -> float:
    """sup over thresholds of TPR - FPR, on a grid of 2,001 population quantiles
    (exactly 0 when members and non-members are the same population)."""
    if mu == 0 and tau == 0:
        return 0.0
    grid = np.quantile(x_pop + mu, np.linspace(0, 1, 2001))
    tpr, fpr = _rates(x_pop, mu, tau, grid)
    return float(max(0.0, np.max(tpr - fpr)))


def truths(s, g, mu, tau) -> dict:
    means = np.bincount(g, weights=s) / np.bincount(g)
    gu = np.arange(means.size)
    if mu == 0 and tau == 0:
        text = {"auc": 0.5, **{f"tpr_at_fpr_{x:g}": x for x in FPRS}, "advantage": 0.0}
        return {"text": text, "user": dict(text)}
    return {
        "text": {
            "auc": _pair_auc(s, g, s, g, mu, tau),
            **{f"tpr_at_fpr_{x:g}": _tpr_truth(s, s, mu, tau, x) for x in FPRS},
            "advantage": _advantage_truth(s, mu, tau),
        },
        # user-level: the per-user mean of a member user is shifted by its u
        "user": {
            "auc": _pair_auc(means, gu, means, gu, mu, tau),
            **{f"tpr_at_fpr_{x:g}": _tpr_truth(means, means, mu, tau, x) for x in FPRS},
            "advantage": _advantage_truth(means, mu, tau),
        },
    }


def _ba_truth(x_pop, mu, tau, thr) -> float:
    """Population balanced accuracy of the rule "score >= thr" (the split's threshold)."""
    tpr, fpr = _rates(x_pop, mu, tau, thr)
    return float(0.5 * (1.0 + tpr[0] - fpr[0]))


# ---------------------------------------------------------------------------
# Simulation
# ---------------------------------------------------------------------------


def _covers(entry: dict, truth: float):
    if entry.get("value") is None or entry.get("ci_low") is None:
        return None  # unresolved: not counted
    return bool(entry["ci_low"] <= truth <= entry["ci_high"])


def coverage(
    s, g, users_per_side: int, splits: int, mu: float, tau: float, n_boot: int, seed: int
) -> dict:
    """Coverage counts of the three families of intervals over random user splits."""
    truth = truths(s, g, mu, tau)
    pop_means = np.bincount(g, weights=s) / np.bincount(g)
    n_users = int(g.max()) + 1
    if 2 * users_per_side > n_users:
        raise ValueError(f"{2 * users_per_side} users asked, the corpus has {n_users}.")
    rng = np.random.default_rng(seed)
    by_user = np.argsort(g, kind="stable")
    starts = np.r_[0, np.cumsum(np.bincount(g))]
    hits: dict[str, list] = {}

    def add(name, ok):
        if ok is not None:
            hits.setdefault(name, []).append(ok)

    widths: dict[str, list] = {}
    for r in range(splits):
        pick = rng.choice(n_users, 2 * users_per_side, replace=False)
        mem = pick[:users_per_side]
        idx = np.concatenate([by_user[starts[u] : starts[u + 1]] for u in pick])
        gg = g[idx]
        m = np.isin(gg, mem)
        sc = s[idx].copy()
        if mu or tau:
            u = rng.normal(mu, tau, size=n_users)
            sc[m] += u[gg[m]]
        t_m = membership_metrics(sc, m, n_boot=n_boot, seed=r)
        gt = ul.grouped_text_metrics(sc, m, gg, n_boot=n_boot, seed=r)
        um = ul.user_metrics(sc, m, gg, how="mean", n_boot=n_boot, seed=r)
        # balanced accuracy: truth = the population's at the threshold each split chose
        us = ul.user_scores(sc, m, gg, "mean")
        thr_text = split_counts(sc, m, r)[4]
        thr_user = split_counts(us.scores, us.members.astype(bool), r)[4]
        add(
            "text_resampled/balanced_accuracy",
            _covers(t_m["balanced_accuracy"], _ba_truth(s, mu, tau, thr_text)),
        )
        add(
            "user_resampled/balanced_accuracy",
            _covers(
                gt["balanced_accuracy"],
                _ba_truth(s, mu, tau, gt["balanced_accuracy"]["threshold"]),
            ),
        )
        add(
            "user_level/balanced_accuracy",
            _covers(um["balanced_accuracy"], _ba_truth(pop_means, mu, tau, thr_user)),
        )
        for key in ("auc", "advantage", *(f"tpr_at_fpr_{x:g}" for x in FPRS)):
            add(f"text_resampled/{key}", _covers(t_m[key], truth["text"][key]))
            add(f"user_resampled/{key}", _covers(gt[key], truth["text"][key]))
            add(f"user_level/{key}", _covers(um[key], truth["user"][key]))
            for fam, res in (("text_resampled", t_m), ("user_resampled", gt)):
                if res[key].get("ci_low") is not None:
                    widths.setdefault(f"{fam}/{key}", []).append(
                        res[key]["ci_high"] - res[key]["ci_low"]
                    )
    out = {}
    for name, v in sorted(hits.items()):
        k, n = int(np.sum(v)), len(v)
        out[name] = {
            "coverage": round(k / n, 4),
            "ci95": cp_interval(k, n),
            "n": n,
            "covered": k,
            "unresolved_replicates": splits - n,
        }
        if name in widths:
            out[name]["mean_width"] = round(float(np.mean(widths[name])), 4)
    return {"truth": truth, "intervals": out}


def di_null(s, g, n_null: int, n_test: int, splits: int, q: float, seed: int) -> dict:
    """User-level dataset inference with no member at all: every tested user is a true
    non-member.  Per replicate: n_null held-out users (the null set) and n_test tested
    users, disjoint random draws; scores = per-user means."""
    means = np.bincount(g, weights=s) / np.bincount(g)
    rng = np.random.default_rng(seed)
    first_hit = 0
    pooled = 0
    any_found = 0
    for _ in range(splits):
        pick = rng.choice(means.size, n_null + n_test, replace=False)
        null, test = means[pick[:n_null]], means[pick[n_null:]]
        p = ul.user_pvalues(test, null)
        first_hit += int(p[0] <= 0.05)
        pooled += int(np.sum(p <= 0.05))
        any_found += int(ul.benjamini_hochberg(p, q).any())
    return {
        "n_null_users": n_null,
        "n_tested_users": n_test,
        "replicates": splits,
        "one_user_p_le_0.05": {
            "rate": round(first_hit / splits, 4),
            "ci95": cp_interval(first_hit, splits),
            "n": splits,
            "note": "the first tested user of each replicate: independent trials",
        },
        "all_users_p_le_0.05": {
            "rate": round(pooled / (splits * n_test), 4),
            "n": splits * n_test,
            "note": "pooled over users that share a null set within a replicate (no CI)",
        },
        "bh_any_found": {
            "rate": round(any_found / splits, 4),
            "ci95": cp_interval(any_found, splits),
            "n": splits,
            "q": q,
            "note": "under the global null every discovery is false, so this is BH's "
            "family-wise error = its FDR; BH guarantees <= q",
        },
    }


def di_effect(s, g, n_null, n_test, splits, q, mu, tau, seed) -> dict:
    """Half of the tested users are members (per-user means shifted by u ~ N(mu, tau^2)):
    BH's false-discovery proportion (mean over replicates = the FDR) and its power."""
    means = np.bincount(g, weights=s) / np.bincount(g)
    rng = np.random.default_rng(seed)
    fdp, power = [], []
    for _ in range(splits):
        pick = rng.choice(means.size, n_null + n_test, replace=False)
        null, test = means[pick[:n_null]], means[pick[n_null:]].copy()
        is_mem = np.arange(n_test) < n_test // 2
        test[is_mem] += rng.normal(mu, tau, size=int(is_mem.sum()))
        rej = ul.benjamini_hochberg(ul.user_pvalues(test, null), q)
        fdp.append(np.sum(rej & ~is_mem) / max(1, rej.sum()))
        power.append(np.sum(rej & is_mem) / is_mem.sum())
    fdp = np.asarray(fdp)
    se = float(fdp.std(ddof=1) / np.sqrt(splits))
    return {
        "n_null_users": n_null,
        "n_tested_users": n_test,
        "member_share": 0.5,
        "replicates": splits,
        "q": q,
        "fdr": round(float(fdp.mean()), 4),
        "fdr_ci95_normal": [
            round(float(fdp.mean()) - 1.96 * se, 4),
            round(float(fdp.mean()) + 1.96 * se, 4),
        ],
        "mean_power": round(float(np.mean(power)), 4),
    }


SETTINGS = {
    # mean / sd of the user-level shift of member users' scores (zlib-ratio units)
    "null": (0.0, 0.0),
    "effect": (0.05, 0.05),
    "strong-effect": (0.2, 0.1),
}
#: Shift of member users' per-user means in the dataset-inference setting with members.
DI_SHIFT = (0.4, 0.05)


def run(splits: int, n_boot: int, seed: int, corpora=None, users_per_side=None) -> dict:
    out = {
        "what": "coverage at nominal 95 % of text-resampled, user-resampled and user-level "
        "intervals over random user splits of real grouped text (experiments/user_coverage.py)",
        "score": "zlib compression ratio of each text (fixed, model-free)",
        "max_texts_per_user": MAX_TEXTS,
        "splits": splits,
        "n_boot": n_boot,
        "seed": seed,
        "settings": {k: {"mu": v[0], "tau": v[1]} for k, v in SETTINGS.items()},
        "dataset_inference_shift": {"mu": DI_SHIFT[0], "tau": DI_SHIFT[1]},
        "corpora": {},
    }
    for name in corpora or CORPORA:
        t0 = time.time()
        s, g = population(CORPORA[name](), seed)
        n_users = int(g.max()) + 1
        side = users_per_side or min(150, n_users // 2)
        c = out["corpora"][name] = {
            "users": n_users,
            "texts": int(s.size),
            "texts_per_user_median": float(np.median(np.bincount(g))),
            "icc": round(icc(s, g), 4),
            "users_per_side": side,
        }
        for setting, (mu, tau) in SETTINGS.items():
            c[setting] = coverage(s, g, side, splits, mu, tau, n_boot, seed)
            _log(f"{name} {setting}: {time.time() - t0:.0f}s")
        n_null = n_users // 2
        n_test = min(100, n_users - n_null)
        c["dataset_inference_null"] = di_null(s, g, n_null, n_test, splits, 0.05, seed)
        c["dataset_inference_effect"] = di_effect(
            s, g, n_null, n_test, splits, 0.05, *DI_SHIFT, seed
        )
    return out


def _pct(c: dict) -> str:
    lo, hi = c["ci95"]
    return f"{100 * c['coverage']:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"


def markdown(res: dict) -> str:
    """The coverage tables of docs/users.md, from the JSON this script writes."""
    lines = []
    fams = (
        ("text_resampled", "texts resampled (`membership_metrics` on texts)"),
        ("user_resampled", "users resampled (`grouped_text_metrics`)"),
        ("user_level", "user level (`user_metrics`, per-user mean)"),
    )
    for name, c in res["corpora"].items():
        lines.append(
            f"**{name}**: {c['users']} users, {c['texts']} texts (median "
            f"{c['texts_per_user_median']:g} per user), ICC of the score {c['icc']:.2f}, "
            f"{c['users_per_side']} users per side per split.\n"
        )
        keys = ("auc", *(f"tpr_at_fpr_{x:g}" for x in FPRS), "advantage", "balanced_accuracy")
        lines.append("| setting | intervals | " + " | ".join(keys) + " |")
        lines.append("|---|---|" + "---|" * len(keys))
        for setting in (s for s in SETTINGS if s in c):
            iv = c[setting]["intervals"]
            for fam, label in fams:
                cells = []
                for k in keys:
                    e = iv.get(f"{fam}/{k}")
                    if e is None:
                        cells.append("unresolved in every split")
                        continue
                    cell = _pct(e)
                    if e["n"] != res["splits"]:
                        cell += f" (n = {e['n']})"
                    if "mean_width" in e:
                        cell += f" w {e['mean_width']:.3f}"
                    cells.append(cell)
                lines.append(f"| {setting} | {label} | " + " | ".join(cells) + " |")
        lines.append("")
        d = c["dataset_inference_null"]
        o = d["one_user_p_le_0.05"]
        b = d["bh_any_found"]
        e = c["dataset_inference_effect"]
        lines.append(
            f"Dataset-inference null ({d['n_null_users']} null users, {d['n_tested_users']} "
            f"tested non-member users, {d['replicates']} splits): P(p <= 0.05) for one "
            f"non-member user = {100 * o['rate']:.1f} % [{100 * o['ci95'][0]:.1f}, "
            f"{100 * o['ci95'][1]:.1f}] (n = {o['n']}); pooled over all tested users "
            f"{100 * d['all_users_p_le_0.05']['rate']:.2f} % (n = "
            f"{d['all_users_p_le_0.05']['n']:,}); BH at q = 0.05 found anyone in "
            f"{100 * b['rate']:.1f} % [{100 * b['ci95'][0]:.1f}, {100 * b['ci95'][1]:.1f}] of "
            f"splits. With half the tested users members: FDR {100 * e['fdr']:.2f} % "
            f"[{100 * e['fdr_ci95_normal'][0]:.2f}, {100 * e['fdr_ci95_normal'][1]:.2f}], "
            f"mean power {100 * e['mean_power']:.1f} %.\n"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", type=int, default=1000)
    ap.add_argument("--n-boot", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="docs/records/users-coverage.json")
    ap.add_argument(
        "--markdown", metavar="JSON", help="print the docs/users.md tables of a written JSON"
    )
    a = ap.parse_args(argv)
    if a.markdown:
        print(markdown(json.loads(Path(a.markdown).read_text(encoding="utf-8"))))
        return 0
    res = run(a.splits, a.n_boot, a.seed)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    _log(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
