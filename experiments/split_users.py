"""The figures of docs/split-validity.md, section "Users as clusters": the split check's
false ``split-shifted`` rate on random *user* splits of real text with natural users,
with the users given (``SplitCheck.run(..., users=...)``: folds never split a user, the
permutation test permutes users) and, on the same splits, without them (texts treated as
independent).

    OMP_NUM_THREADS=1 python -m experiments.split_users --out docs/records/split-check-users.json

Corpora (real text on this machine, no download):

- **Debian changelog entries by maintainer**: one entry per upload of
  ``/usr/share/doc/*/changelog.Debian.gz`` (its bullet text, as
  ``experiments.split_validity.debian_corpus`` reads it: no header, no signature, so no
  name or date in the text), the user being the e-mail address of its signature line
  `` -- Name <email>  date`` (lower case).
- **Package descriptions by author**: paragraphs of the long descriptions (``METADATA``
  / ``PKG-INFO``) of every Python distribution installed on this machine (the suite's
  virtual environment, the system and pyenv interpreters, each distribution name once),
  grouped by author: the first e-mail address of ``Author-email``, else ``Author``
  (lower case); distributions with neither are left out.

A split assigns the users to the two sides at random (``users_per_side`` each, or half
of the users where there are fewer) and keeps at most ``cap`` texts per user, a seeded
random choice of its texts (labels never read), so each split is random by construction
at the user level: every ``split-shifted`` is a false alarm. Rates carry Clopper-Pearson
95% intervals.
"""

from __future__ import annotations

import argparse
import glob
import re
import sys
import time
from email import message_from_bytes
from typing import Any

import numpy as np

from experiments.split_validity import cp_interval
from privacy_audit.audit.benchmarks.split_check_cost import paragraphs
from privacy_audit.audit.benchmarks.users import changelog_blocks

#: The signature line of a Debian changelog entry: maintainer name, e-mail, date.
_SIGNATURE = re.compile(r"^ -- (.+?) <([^>]*)>\s+\S.*?\b(\d{4}) \d\d:\d\d", re.M)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def debian_users(pattern: str = "/usr/share/doc/*/changelog.Debian.gz") -> list[tuple[str, str]]:
    """(maintainer e-mail, entry text) of the Debian changelog entries on this machine:
    the entry's bullet text as ``debian_corpus`` cuts it (>= 12 words, at most 300
    characters, exact repeats dropped), the user from its signature line."""
    out = []
    seen: set[str] = set()
    for _, block, body in changelog_blocks(pattern):
        m = _SIGNATURE.search(block)
        if not m:
            continue
        entry = body[:300]
        if len(entry.split()) >= 12 and entry not in seen:
            seen.add(entry)
            out.append((m.group(2).strip().lower(), entry))
    return out


#: Where installed distributions' metadata lie on this machine (each name read once).
METADATA_GLOBS = (
    "/work/main/.venv/lib/python3*/site-packages/*.dist-info/METADATA",
    "/root/.pyenv/versions/*/lib/python3*/site-packages/*.dist-info/METADATA",
    "/usr/lib/python3/dist-packages/*.dist-info/METADATA",
    "/usr/lib/python3/dist-packages/*.egg-info/PKG-INFO",
    "/usr/lib/google-cloud-sdk/**/*.dist-info/METADATA",
)


def _author(msg) -> str | None:
    """The first e-mail address of ``Author-email``, else ``Author`` (lower case)."""
    for field in ("Author-email", "Author"):
        v = str(msg.get(field) or "").strip()
        found = _EMAIL.findall(v)
        if found:
            return found[0].lower()
    v = str(msg.get("Author") or "").strip()
    if v and v.lower() not in ("unknown", "none"):
        return v.lower()
    v = str(msg.get("Author-email") or "").strip()
    return v.split("<")[0].strip().strip('"').lower() or None


def metadata_users(globs=METADATA_GLOBS) -> list[tuple[str, str]]:
    """(author, paragraph) of installed distributions' long descriptions: prose
    paragraphs (>= 12 words, > 60% letters, at most 300 characters, exact repeats
    dropped), each distribution name once."""
    paths = sorted({p for g in globs for p in glob.glob(g, recursive=True)})
    seen_names: set[str] = set()
    seen: set[str] = set()
    out = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                msg = message_from_bytes(f.read())
        except OSError:
            continue
        name = str(msg.get("Name") or "").strip().lower().replace("_", "-")
        if not name or name in seen_names:
            continue
        seen_names.add(name)
        user = _author(msg)
        body = msg.get_payload()
        if not user or not isinstance(body, str):
            continue
        for p in paragraphs(body):
            if sum(c.isalpha() for c in p) > 0.6 * len(p) and p not in seen:
                seen.add(p)
                out.append((user, p))
    return out


CORPORA = {
    "Debian changelog entries by maintainer": debian_users,
    "package descriptions by author": metadata_users,
}


def user_split(
    items: list[tuple[str, str]], users_per_side: int, cap: int, rng: np.random.Generator
) -> tuple[list[str], list[str], list[str]]:
    """A random user split: ``users_per_side`` users a side (half of the users where there
    are fewer), at most ``cap`` texts a user (a random choice). Returns the member texts,
    the non-member texts and the user ids (members then non-members)."""
    by_user: dict[str, list[str]] = {}
    for u, t in items:
        by_user.setdefault(u, []).append(t)
    names = sorted(by_user)
    k = min(users_per_side, len(names) // 2)
    order = rng.permutation(len(names))[: 2 * k]
    sides: list[tuple[list[str], list[str]]] = [([], []), ([], [])]
    for pos, i in enumerate(order):
        texts = by_user[names[i]]
        pick = rng.permutation(len(texts))[:cap]
        side = sides[0 if pos < k else 1]
        for j in sorted(pick):
            side[0].append(texts[j])
            side[1].append(names[i])
    (mt, mu), (nt, nu) = sides
    return mt, nt, mu + nu


def false_alarms(
    corpus: str,
    trials: int,
    users_per_side: int,
    cap: int,
    seed: int = 0,
    first: int = 0,
    permutations: int = 999,
    text_trials: int | None = None,
) -> dict[str, Any]:
    """``trials`` random user splits of one corpus, each checked with the users given;
    the splits numbered below ``text_trials`` (default: all) also without them (the same
    texts, the same seed)."""
    from privacy_audit.stats.split_check import SplitCheck

    items = CORPORA[corpus]()
    per_split = []
    t0 = time.process_time()
    for t in range(first, first + trials):
        rng = np.random.default_rng([seed, 48, t])
        members, nonmembers, users = user_split(items, users_per_side, cap, rng)
        chk = SplitCheck(seed=t, families=False, permutations=permutations)
        row: dict[str, Any] = {
            "split": t,
            "member_texts": len(members),
            "nonmember_texts": len(nonmembers),
        }
        modes = [("users", {"users": users})]
        if text_trials is None or t < text_trials:
            modes.append(("texts", {}))
        for mode, kw in modes:
            c0 = time.process_time()
            r, _ = chk.run(members, nonmembers, **kw)
            cpu = time.process_time() - c0
            if r["status"] == "not-measured":
                row[mode] = {"status": "not-measured"}
                continue
            a = r["blind"]["auc"]
            row[mode] = {
                "shifted": bool(r["shifted"]),
                "missed": not a["ci_low"] <= 0.5 <= a["ci_high"],
                **{k: a[k] for k in ("value", "ci_low", "ci_high", "p_value", "null_sd")},
                "detectable_auc": r["blind"]["detectable_auc"],
                "cpu_s": round(cpu, 3),
            }
            if mode == "users":
                row["user_counts"] = {
                    k: r["blind"][k]
                    for k in (
                        "n_member_users",
                        "n_nonmember_users",
                        "clusters",
                        "clusters_of_several_users",
                    )
                }
                row["cross_set_pairs"] = r["duplicates"]["pairs"]
        per_split.append(row)
        if (t - first + 1) % 25 == 0:
            _log(
                f"  {corpus}: {t - first + 1}/{trials} splits, {time.process_time() - t0:.0f} CPU-s"
            )
    by_user: dict[str, int] = {}
    for u, _ in items:
        by_user[u] = by_user.get(u, 0) + 1
    sizes = np.array(list(by_user.values()))
    base = {
        "corpus": corpus,
        "corpus_texts": len(items),
        "corpus_users": len(by_user),
        "texts_per_user_quartiles": [float(q) for q in np.percentile(sizes, [25, 50, 75])],
        "texts_per_user_max": int(sizes.max()),
        "users_per_side": min(users_per_side, len(by_user) // 2),
        "texts_per_user_cap": cap,
        "permutations": permutations,
    }
    return summarise(base, per_split)


def summarise(base: dict[str, Any], per_split: list[dict]) -> dict[str, Any]:
    """Rates per mode, with Clopper-Pearson 95% intervals, and the users mode's rate by
    tercile of the member share of the texts (the relabellings keep the number of member
    users, not of member texts: is the level kept whatever the split's text balance?)."""
    from scipy.stats import kstest

    out = {**base, "trials": len(per_split)}
    for mode in ("users", "texts"):
        assert mode not in base
        rows = [r[mode] for r in per_split if "shifted" in r.get(mode, {})]
        n = len(rows)
        k = sum(r["shifted"] for r in rows)
        miss = sum(r["missed"] for r in rows)
        p25 = sum(r["p_value"] <= 0.025 for r in rows)
        aucs = np.array([r["value"] for r in rows])
        out[mode] = {
            "measured": n,
            "split_shifted": k,
            "split_shifted_rate": k / n if n else None,
            "split_shifted_ci": cp_interval(k, n),
            "p_at_most_0.025": p25,
            "p_at_most_0.025_ci": cp_interval(p25, n),
            "interval_misses_0.5": miss,
            "interval_miss_ci": cp_interval(miss, n),
            "auc_mean": float(aucs.mean()),
            "auc_sd_over_splits": float(aucs.std(ddof=1)),
            "mean_null_sd": float(np.mean([r["null_sd"] for r in rows])),
            "mean_detectable_auc": float(np.mean([r["detectable_auc"] for r in rows])),
            "median_cpu_s_per_check": float(np.median([r["cpu_s"] for r in rows])),
            "p_uniform_ks": float(kstest([r["p_value"] for r in rows], "uniform").pvalue),
        }
    share = np.array(
        [r["member_texts"] / (r["member_texts"] + r["nonmember_texts"]) for r in per_split]
    )
    cuts = np.quantile(share, [1 / 3, 2 / 3])
    terciles = []
    for lo, hi, name in ((-1, cuts[0], "low"), (cuts[0], cuts[1], "middle"), (cuts[1], 2, "high")):
        rows = [
            r["users"]
            for r, s in zip(per_split, share, strict=True)
            if lo < s <= hi and "shifted" in r["users"]
        ]
        n = len(rows)
        p05 = sum(r["p_value"] <= 0.05 for r in rows)
        k = sum(r["shifted"] for r in rows)
        terciles.append(
            {
                "member_share_tercile": name,
                "member_share_range": [float(max(lo, share.min())), float(min(hi, share.max()))],
                "splits": n,
                "split_shifted": k,
                "split_shifted_ci": cp_interval(k, n),
                "p_at_most_0.05": p05,
                "p_at_most_0.05_ci": cp_interval(p05, n),
            }
        )
    out["users_by_member_text_share"] = terciles
    out["per_split"] = per_split
    return out


def merge(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary per corpus from parts run apart (``--first``)."""
    by: dict[str, list[dict]] = {}
    for p in parts:
        by.setdefault(p["corpus"], []).append(p)
    out = []
    for ps in by.values():
        rows = sorted((r for p in ps for r in p["per_split"]), key=lambda r: r["split"])
        assert len({r["split"] for r in rows}) == len(rows), "overlapping parts"
        keys = (
            "corpus", "corpus_texts", "corpus_users", "texts_per_user_quartiles", "texts_per_user_max",
            "users_per_side", "texts_per_user_cap", "permutations",
        )  # fmt: skip
        base = {k: ps[0][k] for k in keys}
        out.append(summarise(base, rows))
    return out


def _pct(k: int, n: int) -> str:
    lo, hi = cp_interval(k, n)
    return f"{k}/{n} = {100 * k / n:.1f}% [{100 * lo:.1f}%, {100 * hi:.1f}%]"


def markdown_table(doc: dict[str, Any]) -> str:
    """The table of docs/split-validity.md's "Users as clusters" from the JSON."""
    out = [
        "| Corpus (users) | texts / users in the corpus; per split | `split-shifted`, users as "
        "units | `split-shifted`, texts as units (same splits) | p ≤ 0.025, users / texts | "
        "98% interval misses 0.5, users / texts | null SD, users / texts |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["false_alarms"]:
        u, t = r["users"], r["texts"]
        out.append(
            f"| {r['corpus']} | {r['corpus_texts']} / {r['corpus_users']}; {r['users_per_side']} + "
            f"{r['users_per_side']} users, ≤ {r['texts_per_user_cap']} texts each | "
            f"{_pct(u['split_shifted'], u['measured'])} | {_pct(t['split_shifted'], t['measured'])} | "
            f"{_pct(u['p_at_most_0.025'], u['measured'])} / {_pct(t['p_at_most_0.025'], t['measured'])} | "
            f"{_pct(u['interval_misses_0.5'], u['measured'])} / "
            f"{_pct(t['interval_misses_0.5'], t['measured'])} | "
            f"{u['mean_null_sd']:.3f} / {t['mean_null_sd']:.3f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trials", type=int, default=400, help="splits per corpus")
    ap.add_argument("--first", type=int, default=0, help="first split number")
    ap.add_argument("--users-per-side", type=int, default=100)
    ap.add_argument("--cap", type=int, default=3, help="texts per user at most")
    ap.add_argument("--corpora", help="comma list of corpus numbers (1-2)")
    ap.add_argument(
        "--text-trials", type=int, help="splits (the first ones) also checked without users"
    )
    ap.add_argument("--merge", nargs="+", help="merge these part files into --out")
    ap.add_argument("--tables", help="print the markdown table of this JSON and exit")
    args = ap.parse_args(argv)
    if not args.tables and not args.out:
        ap.error("--out is required (unless --tables)")
    if args.tables:
        import json

        with open(args.tables, encoding="utf-8") as f:
            print(markdown_table(json.load(f)))
        return 0
    if args.merge:
        import json

        parts = []
        for path in args.merge:
            with open(path, encoding="utf-8") as f:
                parts += json.load(f)["false_alarms"]
        doc = {"command": "merged: " + " ".join(args.merge), "false_alarms": merge(parts)}
        atomic_write_text(args.out, dumps_json(doc))
        return 0
    names = list(CORPORA)
    if args.corpora:
        names = [names[int(i) - 1] for i in args.corpora.split(",")]
    doc: dict[str, Any] = {
        "command": "python -m experiments.split_users " + " ".join(argv or sys.argv[1:]),
        "false_alarms": [],
    }
    for c in names:
        _log(f"{c}: {args.trials} random user splits")
        doc["false_alarms"].append(
            false_alarms(
                c,
                args.trials,
                args.users_per_side,
                args.cap,
                args.seed,
                args.first,
                text_trials=args.text_trials,
            )
        )
        atomic_write_text(args.out, dumps_json(doc))
    _log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
