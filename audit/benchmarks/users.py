"""``privacy-audit bench users``: user-level membership on real text with natural users.

Corpus: the Debian changelog entries on this machine (``/usr/share/doc/*/changelog.Debian.gz``),
one text per upload, grouped by the e-mail of the maintainer signature line
(`` -- Name <email>  date``): a maintainer is a user, their entries are their texts.

Cleaning rules (:func:`user_texts`), in this order:

1. a text is the bullet lines of one upload (header line and signature removed), stripped
   and joined with single spaces;
2. texts with fewer than ``min_words`` words are dropped (``New upstream release.``,
   ``No-change rebuild.``: trivially short, repeated by many maintainers);
3. near-duplicates: a text's key is its lower-cased letters and spaces only (digits,
   version numbers and punctuation removed); a user keeps the first text of each key;
4. a key that occurs under two or more users is dropped from all of them (one changelog
   copied into several packages, or a team upload signed by two people): a member's text
   must never be a non-member's text.

Users (:func:`split_users`, seeded): each user's texts are shuffled and capped at
``max_texts``; up to ``max_fresh`` of them are held out as FRESH texts, never trained
on: fresh = min(max_fresh, ⌊n/2⌋, n − min_rest), so at least half of them and at least
``min_rest`` remain. Users with
at least ``min_rest + 1`` texts are eligible; ``n_members`` of them are drawn as member
users, ``n_nonmembers`` as non-member users, and every other user (the ineligible ones
with fewer texts, and the eligible ones not drawn) is a REFERENCE user. Member users'
remaining texts are the training set; non-member users' remaining texts are the
non-member texts of threat model (a).

Target (:func:`train_models`): a word-level tokenizer built from the reference users'
texts only (words seen at least twice; so the vocabulary reveals nothing about members or
non-members), a small GPT-2 (:func:`privacy_audit.targets.lm.build_lm`) trained
from scratch on the reference users' texts (the REFERENCE model), then fine-tuned on the
member users' training texts (the TARGET), scored at each of ``epochs`` (cumulative; a
lightly and a strongly fit target from one run). No download; CPU only.

Per-text scores (higher = member), from the suite's LM attacks on the target release:
``lm-loss`` (−mean token NLL), ``reference`` (mean token log-likelihood ratio target vs
reference: ReferenceAttack with the reference model), and ``seq-lr``: the SEQUENCE
log-likelihood ratio log p_target(x) − log p_ref(x) (the per-text term of Kandpal et al.
2023's user-inference statistic), from the same token log-probabilities.

Threat models, both at the user level with :mod:`privacy_audit.stats.by_user`:

* (a) aggregation: each user's training (member) / non-member texts, aggregated per user
  by each of ``user_level.AGGREGATORS``;
* (b) user inference: each user's first k FRESH texts, k in ``FRESH_K``; only users with
  at least k fresh texts take part at k (their counts are reported per row; a user without
  enough fresh texts is not tested at that k, never counted as safe).

Example level, on the same model and texts as (a): ``membership_metrics`` (texts as
independent draws) and ``user_level.grouped_text_metrics`` (intervals resampling users).

Design ``all-users`` (``--users-design all-users``; the above is ``disjoint-reference``):
``n_members`` member users are drawn from the eligible users as above, EVERY other user
(including those with 1 or 2 texts, which have no fresh text) is a non-member user, and
there is no reference user: the REFERENCE model and its tokenizer are trained on
``prose_texts`` paragraphs of generic English prose (:func:`prose_texts`:
``pydoc_data.topics`` and stdlib docstrings, no changelog text), the stand-in for a public
base model (Kandpal et al. 2023). The sides then differ in texts per user (members >=
``min_rest + 1`` by construction); a per-user mean or median keeps its expectation (it
assumes a text's score does not depend on its author's text count) and changes its
variance, while the (a) lr-sum grows with the count. :func:`ratio_bootstrap` gives the
user-level over example-level TPR at 1 % with a user-bootstrap interval.

Resolution: TPR at FPR f needs at least 3/f non-members (``stats.metrics.tpr_resolution``):
300 non-member USERS for 1 %. This machine's changelogs have 330 users with three or more
texts, so with 100 member users and a reference group (design ``disjoint-reference``) the
user-level TPR at 1 % is reported as not resolvable; TPR at 5 % and 10 % are reported beside
it (the record's notes say so). Design ``all-users`` has 449 non-member users.

The per-text scores go to a side file (``<out>.texts.csv.gz``: user pseudonym, side, set,
order, the three scores at each checkpoint as ``score@epochs``) so that every number can be
recomputed independently; it is written beside the JSON and replaces a file of that name.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import math
import re
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings
from privacy_audit.ground.errors import DataError

CHANGELOGS = "/usr/share/doc/*/changelog.Debian.gz"
#: the maintainer signature line of a Debian changelog entry
SIGNATURE = re.compile(r"^ -- (?P<name>.+?) <(?P<email>[^>]+)>\s+\S", re.M)
#: per-text scores (higher = member)
SCORES = ("lm-loss", "reference", "seq-lr")
#: fresh texts per user for threat model (b)
FRESH_K = (1, 3, 10)
#: the rows fixed before the run as the headline comparison (never picked after seeing
#: the results): (a) the reference score averaged per user, (b) Kandpal et al.'s
#: statistic (sum of sequence log-likelihood ratios) on 10 fresh texts, against the
#: example-level reference score
HEADLINE = {
    "a": ("reference", "mean", None),
    "b": ("seq-lr", "lr-sum", 10),
    "example": ("reference", None, None),
}
#: the designs of :class:`UsersConfig` (module docstring)
DESIGNS = ("disjoint-reference", "all-users")
#: user-level TPR over example-level TPR (texts independent) at 1 % FPR that the
#: acceptance asks for
TARGET_RATIO = 3.0


@dataclass(frozen=True)
class UsersConfig:
    """Sizes of the benchmark (``quick`` for the smoke test, never for reported figures)."""

    n_members: int = 100
    n_nonmembers: int = 200
    min_words: int = 6
    max_texts: int = 40
    max_fresh: int = 10
    min_rest: int = 2
    max_length: int = 64
    min_word_count: int = 2
    n_embd: int = 128
    n_layer: int = 2
    n_head: int = 4
    ref_epochs: int = 6
    ref_lr: float = 3e-3
    #: cumulative fine-tuning epochs at which the target is scored (a lightly and a
    #: strongly fit target, the same run)
    epochs: tuple[int, ...] = (2, 8)
    lr: float = 1e-3
    batch_size: int = 32
    n_boot: int = 1000
    #: "disjoint-reference": reference model on disjoint changelog users, ``n_nonmembers``
    #: non-member users; "all-users": reference model on generic English prose (no
    #: changelog text), every user not drawn as a member is a non-member user
    design: str = "disjoint-reference"
    #: all-users design: at most this many prose paragraphs train the reference model
    prose_texts: int = 1600

    @classmethod
    def quick(cls) -> UsersConfig:
        return cls(
            n_members=12,
            n_nonmembers=12,
            max_texts=8,
            max_fresh=3,
            max_length=32,
            n_embd=32,
            n_layer=1,
            n_head=2,
            ref_epochs=1,
            epochs=(1, 2),
            n_boot=100,
            prose_texts=200,
        )


# --------------------------------------------------------------------------- corpus
def changelog_blocks(pattern: str = CHANGELOGS):
    """``(package, block, body)`` per entry block of every Debian changelog matching
    ``pattern``: the block's raw text (its signature line included, for the caller's own
    parsing) and its body, the bullet lines of one upload without the header and the
    signature, whitespace collapsed. The one reader of these files for the benchmarks, the
    experiments and the tests; unreadable files are skipped."""
    for path in sorted(glob.glob(pattern)):
        pkg = Path(path).parent.name
        try:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except (OSError, EOFError):
            continue
        for block in re.split(r"\n(?=\S)", text):
            body = [
                ln.strip()
                for ln in block.splitlines()[1:]
                if ln.strip() and not ln.startswith(" -- ")
            ]
            yield pkg, block, " ".join(" ".join(body).split())


def changelog_entries(pattern: str = CHANGELOGS) -> list[tuple[str, str, str]]:
    """``(user e-mail, package, text)`` per signed changelog entry (:func:`changelog_blocks`).
    The user is the lower-cased e-mail of the signature (a name is spelled in several
    ways)."""
    out = []
    for pkg, block, entry in changelog_blocks(pattern):
        m = SIGNATURE.search(block)
        if m and entry:
            out.append((m.group("email").strip().lower(), pkg, entry))
    return out


def comparison_key(text: str) -> str:
    return " ".join(re.sub(r"[^a-z ]", " ", text.lower()).split())


def user_texts(
    entries: list[tuple[str, str, str]], min_words: int = 6
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Texts per user after the module docstring's cleaning rules, and the count each
    rule dropped."""
    drop = Counter()
    per_user: dict[str, dict[str, str]] = {}
    for user, _, text in entries:
        if len(text.split()) < min_words:
            drop["short"] += 1
            continue
        k = comparison_key(text)
        if k in per_user.setdefault(user, {}):
            drop["duplicate_within_user"] += 1
            continue
        per_user[user][k] = text
    owners = Counter(k for texts in per_user.values() for k in texts)
    out = {}
    for user, texts in per_user.items():
        kept = [t for k, t in texts.items() if owners[k] == 1]
        drop["shared_across_users"] += len(texts) - len(kept)
        if kept:
            out[user] = kept
    return out, dict(drop)


def pseudonym(user: str) -> str:
    """A stable short id for a maintainer (the record carries no e-mail address)."""
    return "u" + hashlib.sha256(user.encode("utf-8")).hexdigest()[:10]


@dataclass
class UserSplit:
    """Per user: side (member / nonmember / reference), fresh texts and remaining texts."""

    side: dict[str, str]
    fresh: dict[str, list[str]]
    rest: dict[str, list[str]]
    n_eligible: int


def split_users(texts: dict[str, list[str]], cfg: UsersConfig, seed: int) -> UserSplit:
    """The seeded user split of the module docstring. DataError (one line, before any
    training) when the corpus has too few eligible users."""
    rng = np.random.default_rng(seed)
    names = sorted(texts)
    side, fresh, rest = {}, {}, {}
    for u in names:
        t = list(texts[u])
        order = rng.permutation(len(t))
        t = [t[i] for i in order][: cfg.max_texts]
        # at most half of a user's texts are fresh, so (a) aggregates as many texts as
        # (b) holds out, and at least min_rest remain
        n_fresh = max(0, min(cfg.max_fresh, len(t) // 2, len(t) - cfg.min_rest))
        fresh[u], rest[u] = t[:n_fresh], t[n_fresh:]
    eligible = [u for u in names if fresh[u]]
    if cfg.design == "all-users":
        return _split_all_users(names, eligible, fresh, rest, cfg, rng)
    need = cfg.n_members + cfg.n_nonmembers
    if len(eligible) < need + 1:
        raise DataError(
            f"the changelog corpus has {len(eligible)} users with at least "
            f"{cfg.min_rest + 1} texts; the benchmark needs {need + 1} "
            f"({cfg.n_members} member, {cfg.n_nonmembers} non-member, >= 1 reference)"
        )
    picked = rng.permutation(len(eligible))
    for rank, i in enumerate(picked):
        u = eligible[i]
        side[u] = "member" if rank < cfg.n_members else "nonmember" if rank < need else "reference"
    for u in names:
        side.setdefault(u, "reference")
    return UserSplit(side, fresh, rest, len(eligible))


def _split_all_users(names, eligible, fresh, rest, cfg: UsersConfig, rng) -> UserSplit:
    """All-users design: ``n_members`` of the eligible users (>= ``min_rest + 1`` texts,
    so each has training and fresh texts) are member users; EVERY other user, eligible
    or not, is a non-member user (no reference user: the reference model is trained on
    prose, :func:`prose_texts`)."""
    if len(eligible) < cfg.n_members or len(names) - cfg.n_members < 2:
        raise DataError(
            f"the changelog corpus has {len(eligible)} users with at least "
            f"{cfg.min_rest + 1} texts and {len(names)} users in all; the all-users design "
            f"needs {cfg.n_members} eligible member users and >= 2 other users"
        )
    picked = rng.permutation(len(eligible))
    chosen = {eligible[i] for i in picked[: cfg.n_members]}
    side = {u: "member" if u in chosen else "nonmember" for u in names}
    return UserSplit(side, fresh, rest, len(eligible))


#: stdlib modules whose docstrings join ``pydoc_data.topics`` in the prose corpus
PROSE_MODULES = (
    "json", "os", "collections", "email", "logging", "argparse", "inspect", "pathlib",
    "subprocess", "threading", "asyncio", "unittest", "http.client", "csv", "decimal",
    "fractions", "statistics", "textwrap", "shutil", "tarfile", "zipfile", "typing",
    "functools", "itertools", "datetime", "calendar", "random", "string", "re", "socket",
    "urllib.parse", "sqlite3", "pickle", "copy", "enum", "dataclasses", "contextlib",
    "io", "codecs", "heapq", "bisect", "difflib", "configparser", "tempfile", "glob",
    "gzip", "hashlib", "struct", "weakref", "types", "operator", "math", "doctest", "ast",
)  # fmt: skip


def prose_texts(n: int, seed: int, exclude: set[str] = frozenset()) -> list[str]:
    """Generic English prose with no changelog text, for the all-users REFERENCE model
    (the stand-in for a public base model, Kandpal et al. 2023's setting): paragraphs
    (>= 12 words, cut to 300 characters) of ``pydoc_data.topics`` and of the docstrings
    of :data:`PROSE_MODULES`, exact repeats dropped, any paragraph whose near-duplicate
    key (:func:`comparison_key`) is in ``exclude`` dropped, then a seeded sample of ``n``."""
    import importlib
    import pydoc_data.topics as topics
    import warnings

    from privacy_audit.audit.benchmarks.split_check_cost import paragraphs

    paras = [p for v in topics.topics.values() for p in paragraphs(v)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated members warn when read
        for name in PROSE_MODULES:
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            for obj in [mod, *vars(mod).values()]:
                d = getattr(obj, "__doc__", None)
                if isinstance(d, str):
                    paras += paragraphs(d)
    uniq = [p for p in dict.fromkeys(paras) if comparison_key(p) not in exclude]
    rng = np.random.default_rng(seed)
    pick = rng.permutation(len(uniq))[:n]
    return [uniq[i] for i in sorted(pick)]


# --------------------------------------------------------------------------- models
def reference_tokenizer(texts: list[str], min_count: int):
    """Word-level :class:`~privacy_audit.targets.lm.LMTokenizer` over the words
    of ``texts`` seen at least ``min_count`` times (first-seen order, deterministic),
    plus every digit and punctuation mark."""
    import string

    from privacy_audit.targets.lm import WORD_RE, LMTokenizer

    counts: Counter = Counter()
    order: dict[str, None] = {c: None for c in string.digits + string.punctuation}
    for t in texts:
        for w in WORD_RE.findall(t.lower()):
            counts[w] += 1
            order.setdefault(w, None)
    keep = [w for w in order if len(w) == 1 and not w.isalpha() or counts[w] >= min_count]
    return LMTokenizer(keep, "word")


def _log(msg: str) -> None:
    print(f"  users: {msg}", file=sys.stderr, flush=True)


def train_models(ref_texts, member_texts, cfg: UsersConfig, seed: int) -> dict[str, Any]:
    """Reference model (from scratch on ``ref_texts``) and target (the reference
    fine-tuned on ``member_texts``), both as :class:`LMRelease`."""
    import copy

    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.lm import LMRelease, build_lm, train_lm

    tok = reference_tokenizer(ref_texts, cfg.min_word_count)
    ref = build_lm(
        tok.vocab_size,
        seed=seed,
        n_embd=cfg.n_embd,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_positions=cfg.max_length,
    )
    _log(f"reference model: {len(ref_texts)} texts, vocabulary {tok.vocab_size}")
    ref_log = train_lm(
        ref, tok, ref_texts, cfg.ref_epochs, cfg.batch_size, cfg.ref_lr, cfg.max_length, seed=seed
    )
    _log(f"reference trained in {ref_log['seconds']:.0f} s; fine-tuning on {len(member_texts)}")
    target = copy.deepcopy(ref)
    checkpoints, done = [], 0
    for i, total in enumerate(cfg.epochs):
        # each stage continues the previous one with a fresh AdamW (its moments restart)
        log = train_lm(
            target,
            tok,
            member_texts,
            total - done,
            cfg.batch_size,
            cfg.lr,
            cfg.max_length,
            seed=seed + 1 + i,
        )
        done = total
        _log(f"target at {total} epochs ({log['seconds']:.0f} s)")
        snap = copy.deepcopy(target).eval()
        claim = PrivacyClaim.none("non-private")
        checkpoints.append(
            {
                "epochs": total,
                "training": log,
                "target": LMRelease(snap, tok, cfg.max_length, claim),
            }
        )
    ref.eval()
    return {
        "tokenizer": tok,
        "reference": LMRelease(ref, tok, cfg.max_length, PrivacyClaim.none("reference model")),
        "reference_training": ref_log,
        "checkpoints": checkpoints,
    }


def text_scores(target, reference, texts: list[str]) -> dict[str, np.ndarray]:
    """Per-text scores of :data:`SCORES` (higher = member), plus the mean token NLL
    under each model."""
    from privacy_audit.attacks.llm_membership import LMLossAttack, ReferenceAttack
    from privacy_audit.defenses.base import Examples

    ex = Examples([str(i) for i in range(len(texts))], list(texts), np.zeros(len(texts)))
    lp_t = target.token_log_probs(list(texts))
    lp_r = reference.token_log_probs(list(texts))
    return {
        "lm-loss": LMLossAttack().score(target, ex),
        "reference": ReferenceAttack(reference=reference).score(target, ex),
        "seq-lr": np.array([a.sum() - b.sum() for a, b in zip(lp_t, lp_r, strict=True)]),
        "nll_target": np.array([-a.mean() for a in lp_t]),
        "nll_reference": np.array([-b.mean() for b in lp_r]),
    }


# --------------------------------------------------------------------------- metrics
def _slim(m: dict) -> dict:
    """The metrics a row reports: AUC, TPR at 1/5/10 % FPR (with the resolution fields),
    the counts."""
    keep = ("auc", "tpr_at_fpr_0.01", "tpr_at_fpr_0.05", "tpr_at_fpr_0.1")
    out = {k: m[k] for k in keep}
    for k, v in m.items():
        if k.startswith("n_") or k in ("unit", "aggregator", "resampled"):
            out[k] = v
    return out


def texts_table(split: UserSplit, k_max: int) -> list[dict]:
    """One row per scored text: user pseudonym, side, set (train/nonmember/fresh), order
    within the user's set, text."""
    rows = []
    for u, s in split.side.items():
        if s == "reference":
            continue
        pid = pseudonym(u)
        kind = "train" if s == "member" else "nonmember"
        rows += [
            dict(user=pid, side=s, set=kind, order=i, text=t) for i, t in enumerate(split.rest[u])
        ]
        rows += [
            dict(user=pid, side=s, set="fresh", order=i, text=t)
            for i, t in enumerate(split.fresh[u][:k_max])
        ]
    return rows


def evaluate(df, cfg: UsersConfig, seed: int) -> dict[str, Any]:
    """Every metric of the benchmark from the per-text table ``df`` (pandas, one row per
    text with the :data:`SCORES` columns)."""
    from privacy_audit.stats import by_user as user_level
    from privacy_audit.stats.metrics import membership_metrics

    out: dict[str, Any] = {"a": [], "b": [], "example": []}
    a = df[df["set"] != "fresh"]
    m_a = (a["side"] == "member").to_numpy().astype(int)
    g_a = a["user"].tolist()
    for score in SCORES:
        s = a[score].to_numpy()
        for how in user_level.AGGREGATORS:
            r = user_level.user_metrics(s, m_a, g_a, how=how, n_boot=cfg.n_boot, seed=seed)
            out["a"].append({"score": score, "aggregator": how, **_slim(r)})
        tm = membership_metrics(s, m_a, n_boot=cfg.n_boot, seed=seed)
        gm = user_level.grouped_text_metrics(s, m_a, g_a, n_boot=cfg.n_boot, seed=seed)
        out["example"].append(
            {"score": score, "independent": _slim(tm), "users_resampled": _slim(gm)}
        )
    fresh = df[df["set"] == "fresh"]
    for k in FRESH_K:
        have = fresh.groupby("user")["order"].transform("size")
        b = fresh[(have >= k) & (fresh["order"] < k)]
        m_b = (b["side"] == "member").to_numpy().astype(int)
        if m_b.sum() < 2 or (1 - m_b).sum() < 2:
            out["b"].append(
                {"k": k, "not_tested": "fewer than 2 users per side have k fresh texts"}
            )
            continue
        for score in SCORES:
            for how in user_level.AGGREGATORS:
                r = user_level.user_metrics(
                    b[score].to_numpy(),
                    m_b,
                    b["user"].tolist(),
                    how=how,
                    n_boot=cfg.n_boot,
                    seed=seed,
                )
                out["b"].append({"k": k, "score": score, "aggregator": how, **_slim(r)})
    out["texts_per_user"] = {
        "a": user_level.texts_per_user(g_a, m_a),
        "fresh": user_level.texts_per_user(
            fresh["user"].tolist(), (fresh["side"] == "member").to_numpy().astype(int)
        ),
    }
    return out


def _v(m: dict) -> float | None:
    return None if m is None else m.get("value")


def headline(ev: dict) -> dict[str, Any]:
    """User-level vs example-level TPR at 1/5/10 % FPR for the rows fixed in
    :data:`HEADLINE`; a ratio only where both sides are resolvable."""
    ex_score = HEADLINE["example"][0]
    ex = next(r for r in ev["example"] if r["score"] == ex_score)["independent"]
    out = {"example": {"score": ex_score}}
    for fpr in ("0.01", "0.05", "0.1"):
        out["example"][f"tpr_at_fpr_{fpr}"] = ex[f"tpr_at_fpr_{fpr}"]
    for threat in ("a", "b"):
        score, how, k = HEADLINE[threat]
        row = next(
            (
                r
                for r in ev[threat]
                if r.get("score") == score and r.get("aggregator") == how and r.get("k") == k
            ),
            None,
        )
        if row is None:
            out[threat] = {"score": score, "aggregator": how, "k": k, "not_tested": True}
            continue
        item: dict[str, Any] = {"score": score, "aggregator": how, "k": k, "auc": row["auc"]}
        for fpr in ("0.01", "0.05", "0.1"):
            key = f"tpr_at_fpr_{fpr}"
            u, e = _v(row[key]), _v(ex[key])
            item[key] = row[key]
            item[f"ratio_{fpr}"] = (
                None if u is None or e is None else (math.inf if e == 0 else u / e)
            )
        item["n_member_users"], item["n_nonmember_users"] = (
            row["n_member_users"],
            row["n_nonmember_users"],
        )
        out[threat] = item
    return out


def ratio_bootstrap(df, n_boot: int, seed: int, fpr: float = 0.01) -> dict[str, Any]:
    """User-level TPR at ``fpr`` (each :data:`HEADLINE` user row) over the example-level
    TPR at ``fpr`` (the :data:`HEADLINE` example score, texts independent), with a
    95 % percentile interval from a user bootstrap: member users and non-member users
    are resampled with replacement (stratified), a drawn user brings all their texts
    (so the example-level TPR of a replicate is computed on those texts as usual, and
    the cluster structure is kept), and both TPRs are recomputed on the same draw.
    A replicate whose example-level TPR is 0 has ratio +inf (0/0: dropped and counted).
    ``p_at_least_target``: the share of replicates with ratio >= :data:`TARGET_RATIO`.
    ``df``: the per-text table of :func:`evaluate`."""
    from privacy_audit.stats import by_user as user_level
    from privacy_audit.stats.metrics import tpr_at_fpr

    a = df[df["set"] != "fresh"]
    users = sorted(a["user"].unique())
    pos = {u: i for i, u in enumerate(users)}
    side = a.groupby("user")["side"].first()
    member = np.array([side[u] == "member" for u in users])
    idx = a["user"].map(pos).to_numpy()
    m_text = member[idx]
    s_ex = a[HEADLINE["example"][0]].to_numpy(dtype=float)
    order = np.argsort(idx, kind="stable")
    starts = np.r_[0, np.cumsum(np.bincount(idx, minlength=len(users)))]
    texts_of = [order[starts[i] : starts[i + 1]] for i in range(len(users))]
    per_user = {}
    fresh = df[df["set"] == "fresh"]
    for threat in ("a", "b"):
        score, how, k = HEADLINE[threat]
        sub = a
        if k is not None:
            have = fresh.groupby("user")["order"].transform("size")
            sub = fresh[(have >= k) & (fresh["order"] < k)]
        val = np.full(len(users), np.nan)
        if len(sub):
            names, agg = user_level.aggregate(sub[score].to_numpy(), sub["user"].tolist(), how)
            val[[pos[u] for u in names]] = agg
        per_user[threat] = val

    def _tpr(v, m):
        ok = ~np.isnan(v)
        if m[ok].sum() < 1 or (~m[ok]).sum() < 1:
            return np.nan
        return tpr_at_fpr(v[ok], m[ok], fpr)

    def _ratio(u, e):
        if np.isnan(u) or np.isnan(e) or (u == 0 and e == 0):
            return np.nan
        return math.inf if e == 0 else u / e

    ex_point = tpr_at_fpr(s_ex, m_text, fpr)
    rng = np.random.default_rng(seed)
    mem_ids, non_ids = np.flatnonzero(member), np.flatnonzero(~member)
    reps = {t: np.empty(n_boot) for t in per_user}
    for b in range(n_boot):
        pick = np.r_[rng.choice(mem_ids, len(mem_ids)), rng.choice(non_ids, len(non_ids))]
        t_idx = np.concatenate([texts_of[i] for i in pick])
        e = tpr_at_fpr(s_ex[t_idx], m_text[t_idx], fpr)
        for t, val in per_user.items():
            reps[t][b] = _ratio(_tpr(val[pick], member[pick]), e)
    out: dict[str, Any] = {
        "fpr": fpr,
        "n_boot": n_boot,
        "resampled": "users (stratified by side), each with all their texts",
        "example": {"score": HEADLINE["example"][0], "tpr": ex_point},
    }
    for t, val in per_user.items():
        u = _tpr(val, member)
        r = reps[t]
        ok = r[~np.isnan(r)]
        lo, hi = (
            (float(np.quantile(ok, 0.025, method="inverted_cdf")),
             float(np.quantile(ok, 0.975, method="inverted_cdf")))
            if len(ok)
            else (None, None)
        )  # fmt: skip
        point = _ratio(u, ex_point)
        out[t] = {
            "score": HEADLINE[t][0],
            "aggregator": HEADLINE[t][1],
            "k": HEADLINE[t][2],
            "tpr": None if np.isnan(u) else float(u),
            # JSON has no infinity: an infinite ratio or bound is null with a flag
            "ratio": None if np.isnan(point) or np.isinf(point) else point,
            "ratio_infinite": bool(np.isinf(point)),
            "ci_low": lo,
            "ci_high": None if hi is None or np.isinf(hi) else hi,
            "ci_high_infinite": hi is not None and bool(np.isinf(hi)),
            "undefined_replicates": int(np.isnan(r).sum()),
            "p_at_least_target": float((ok >= TARGET_RATIO).mean()) if len(ok) else None,
        }
    return out


def ratio_verdict(ratio: dict, user_row: dict, example_row: dict) -> str:
    """Whether user-level TPR at 1 % FPR >= :data:`TARGET_RATIO` x the example-level
    one: "not resolvable" unless both TPRs pass ``tpr_resolution`` (their rows' value is
    not None); "shown" when the ratio's 95 % interval lies at or above the target, "not
    met" when it lies below, "undecided" when it straddles it."""
    key = "tpr_at_fpr_0.01"
    if user_row is None or _v(user_row.get(key)) is None or _v(example_row[key]) is None:
        return "not resolvable"
    if ratio["ci_low"] is not None and ratio["ci_low"] >= TARGET_RATIO:
        return "shown"
    if ratio["ci_high"] is not None and ratio["ci_high"] < TARGET_RATIO:
        return "not met"
    return "undecided"


def _write_side(path: Path, df) -> None:
    """Atomic write of the per-text scores (gzip CSV)."""
    import io

    from privacy_audit.ground.io import atomic_write_bytes

    buf = io.StringIO()
    drop = ["text", *(c for c in df.columns if c.startswith("nll_"))]
    df.drop(columns=drop).to_csv(buf, index=False, float_format="%.17g")
    atomic_write_bytes(path, gzip.compress(buf.getvalue().encode("utf-8"), mtime=0))


def side_path(out: str | Path) -> Path:
    p = Path(out)
    return p.with_name(p.name.removesuffix(".json") + ".texts.csv.gz")


@dataclass
class _RunData:
    """The cleaned corpus of one run and its split into member, non-member and reference
    users, with the texts each model trains on."""

    entries: list
    texts: dict
    dropped: Any
    split: Any
    n_non: int
    ref_users: list
    ref_texts: list
    members: list
    train: list


def _run_config(settings: BenchSettings) -> UsersConfig:
    """The quick or full configuration with the design asked for (an unknown one refused)."""
    import dataclasses

    cfg = UsersConfig.quick() if settings.quick else UsersConfig()
    design = settings.extra.get("design", cfg.design)
    if design not in DESIGNS:
        raise DataError(f"bench users: unknown design {design!r}; one of {', '.join(DESIGNS)}")
    return dataclasses.replace(cfg, design=design)


def _run_data(settings: BenchSettings, cfg: UsersConfig, seed: int) -> _RunData:
    """Read and clean the changelogs, split the users (a DataError before any training)
    and choose the reference model's texts: prose for all-users, else the reference users'."""
    entries = changelog_entries(settings.extra.get("changelogs", CHANGELOGS))
    texts, dropped = user_texts(entries, cfg.min_words)
    split = split_users(texts, cfg, seed)  # DataError before any training
    n_non = sum(s == "nonmember" for s in split.side.values())
    _log(
        f"{len(entries)} entries, {len(texts)} users, {split.n_eligible} eligible; "
        f"design {cfg.design}: {cfg.n_members} member / {n_non} non-member users"
    )
    ref_users = [u for u, s in split.side.items() if s == "reference"]
    if cfg.design == "all-users":
        # no changelog text in the reference model or its tokenizer
        keys = {comparison_key(t) for v in texts.values() for t in v}
        ref_texts = prose_texts(cfg.prose_texts, seed, exclude=keys)
    else:
        ref_texts = [t for u in ref_users for t in split.fresh[u] + split.rest[u]]
    members = [u for u, s in split.side.items() if s == "member"]
    train = [t for u in members for t in split.rest[u]]
    return _RunData(entries, texts, dropped, split, n_non, ref_users, ref_texts, members, train)


def _score_stage(ck: dict, df, reference, cfg: UsersConfig, seed: int) -> dict:
    """Score every text under one checkpoint of the target and the reference (the scores
    also go into ``df`` as ``score@epochs`` columns), then the user- and example-level
    metrics and the user/example TPR ratio with its verdict per threat model."""
    e = ck["epochs"]
    _log(f"scoring {len(df)} texts under the target at {e} epochs and the reference")
    view = df[["user", "side", "set", "order"]].copy()
    for k, v in text_scores(ck["target"], reference, df["text"].tolist()).items():
        view[k] = v
        df[f"{k}@{e}"] = v
    losses = {
        f"{name}_{model}": float(view.loc[sel, f"nll_{model}"].mean())
        for name, sel in (
            ("member_train", view["set"] == "train"),
            ("member_fresh", (view["side"] == "member") & (view["set"] == "fresh")),
            ("nonmember", view["set"] == "nonmember"),
            ("nonmember_fresh", (view["side"] == "nonmember") & (view["set"] == "fresh")),
        )
        for model in ("target", "reference")
    }
    _log(f"metrics at {e} epochs (user level and example level)")
    ev = evaluate(view, cfg, seed)
    ratio = ratio_bootstrap(view, cfg.n_boot, seed)
    ex_row = next(r for r in ev["example"] if r["score"] == HEADLINE["example"][0])
    for threat in ("a", "b"):
        score, how, k = HEADLINE[threat]
        row = next(
            (
                r
                for r in ev[threat]
                if r.get("score") == score and r.get("aggregator") == how and r.get("k") == k
            ),
            None,
        )
        ratio[threat]["verdict"] = ratio_verdict(ratio[threat], row, ex_row["independent"])
    return {
        "epochs": e,
        "training": ck["training"],
        "loss": losses,
        "metrics": ev,
        "headline": headline(ev),
        "ratio_at_1pct": ratio,
    }


def _run_counts(d: _RunData, df) -> dict:
    """How many entries, users and texts survived each step, per side."""
    split = d.split
    return {
        "entries": len(d.entries),
        "dropped": d.dropped,
        "users_after_cleaning": len(d.texts),
        "texts_after_cleaning": sum(len(v) for v in d.texts.values()),
        "eligible_users": split.n_eligible,
        "member_users": len(d.members),
        "nonmember_users": d.n_non,
        "users_by_texts_after_cap": {
            side: dict(
                sorted(
                    Counter(
                        min(len(split.fresh[u]) + len(split.rest[u]), 3)
                        for u, s2 in split.side.items()
                        if s2 == side
                    ).items()
                )
            )
            for side in ("member", "nonmember")
        },
        "reference_users": len(d.ref_users),
        "reference_texts": len(d.ref_texts),
        "member_training_texts": len(d.train),
        "nonmember_texts": int((df["set"] == "nonmember").sum()),
        "member_fresh_texts": int(((df["side"] == "member") & (df["set"] == "fresh")).sum()),
        "nonmember_fresh_texts": int(((df["side"] == "nonmember") & (df["set"] == "fresh")).sum()),
    }


def _run_notes(d: _RunData, cfg: UsersConfig, stages: list) -> list[str]:
    """What the design implies for reading the figures, how the ratio is computed, and the
    target's fit at each checkpoint."""
    split, n_non = d.split, d.n_non
    fit = "; ".join(
        f"{st['epochs']} epochs: {st['loss']['member_train_target']:.3f} on member training "
        f"texts vs {st['loss']['nonmember_target']:.3f} on non-member texts"
        for st in stages
    )
    if cfg.design == "all-users":
        design_notes = [
            "design all-users: the REFERENCE model and its tokenizer are trained on "
            f"{len(d.ref_texts)} paragraphs of generic English prose (pydoc_data.topics and "
            "stdlib docstrings; no changelog text: a paragraph with a changelog text's "
            "near-duplicate key is dropped), the stand-in for a public base model "
            "(Kandpal et al. 2023); "
            f"{cfg.n_members} member users drawn from the {split.n_eligible} users with "
            f">= {cfg.min_rest + 1} texts; every other user ({n_non}) is a non-member user",
            "the sides differ in texts per user by construction (members >= "
            f"{cfg.min_rest + 1} texts, non-members from 1): per-user counts are in "
            "counts.users_by_texts_after_cap and metrics.texts_per_user. A mean or median "
            "of per-text scores does not depend on the count in expectation (a non-member "
            "text's score has the same distribution whatever its user's count), so the "
            "count does not push the per-user score toward either side; it changes its "
            "variance (a 1-text user's mean is as noisy as one text), which spreads the "
            "non-member tail. The lr-sum of (a) DOES grow with the count, so on (a) it "
            "compares text counts as well as membership; (b) uses exactly k texts per user",
            "threat model (b) takes only users with >= k fresh texts; non-member users with "
            "1 or 2 texts have no fresh text (fresh = min(max_fresh, n//2, n - min_rest)), so "
            "they take part in (a) and the example level only",
        ]
    else:
        design_notes = [
            "TPR at 1% FPR needs >= 300 non-members to be resolvable (stats.metrics."
            "tpr_resolution); this corpus has "
            f"{split.n_eligible} users with >= {cfg.min_rest + 1} texts, so with "
            f"{cfg.n_members} member users and a reference group at most "
            f"{split.n_eligible - cfg.n_members} non-member users exist: the user-level TPR "
            "at 1% is reported as not resolvable and TPR at 5% and 10% are reported beside it",
        ]
    return [
        *design_notes,
        "ratio_at_1pct: user-level TPR@1% (headline rows) / example-level TPR@1% (texts "
        "independent), 95% percentile interval from a stratified user bootstrap; verdict "
        "'shown' only when both TPRs are resolvable and the interval is >= 3",
        f"mean token NLL of the target (nats): {fit}",
        "score columns of the scores file are named score@epochs",
        "headline rows fixed before the run: " + str(HEADLINE),
    ]


def run(settings: BenchSettings) -> BenchResult:
    import pandas as pd
    import torch

    cfg = _run_config(settings)
    design = cfg.design
    seed = settings.seed
    t0 = time.perf_counter()
    d = _run_data(settings, cfg, seed)
    torch.manual_seed(seed)
    models = train_models(d.ref_texts, d.train, cfg, seed)
    df = pd.DataFrame(texts_table(d.split, cfg.max_fresh))
    stages = [_score_stage(ck, df, models["reference"], cfg, seed) for ck in models["checkpoints"]]
    out = settings.extra.get("out")
    side = None
    if out:
        side = side_path(out)
        _write_side(side, df)
    wall = time.perf_counter() - t0
    return BenchResult(
        name="users",
        reference="example-level metrics on the same model (membership_metrics)",
        cases={
            "total": {"median_ms": 1e3 * wall, "q1_ms": 1e3 * wall, "q3_ms": 1e3 * wall, "n": 1}
        },
        ratios={},
        setup={
            "config": asdict(cfg),
            "seed": seed,
            "corpus": CHANGELOGS,
            "design": design,
            "reference_corpus": (
                "generic English prose: pydoc_data.topics + stdlib docstrings"
                if design == "all-users"
                else "changelog texts of the reference users"
            ),
            "cleaning": {
                "min_words": cfg.min_words,
                "near_duplicate_key": "lower-cased letters and spaces only",
                "within_user": "first text of each key kept",
                "across_users": "a key under >= 2 users dropped from all",
            },
            "counts": _run_counts(d, df),
            "vocabulary": models["tokenizer"].vocab_size,
            "reference_training": models["reference_training"],
            "targets": stages,
            "scores_file": None if side is None else side.name,
        },
        targets={"user_vs_example": "user-level TPR at 1% FPR >= 3x the example-level figure"},
        notes=_run_notes(d, cfg, stages),
    )


# --------------------------------------------------------------------------- table
def _fmt(m: dict | None) -> str:
    if m is None:
        return "—"
    if m.get("value") is None:
        return f"not resolvable (needs ~{m.get('needs_nonmembers')})"
    return f"{m['value']:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]"


def markdown(result: dict[str, Any]) -> str:
    """The tables of docs/users.md from a bench JSON's ``users`` result: one per target
    checkpoint."""
    parts = []
    for st in result["setup"]["targets"]:
        parts.append(f"Target fine-tuned {st['epochs']} epochs:\n\n" + _table(st["metrics"]))
    return "\n\n".join(parts)


def _table(ev: dict[str, Any]) -> str:
    head = (
        "| threat | score | aggregator | fresh k | users M/N | texts M/N | AUC [95% CI] "
        "| TPR@1% | TPR@5% | TPR@10% |"
    )
    out = [head, "|---|---|---|---|---|---|---|---|---|---|"]

    def row(threat, score, how, k, m, users, texts):
        out.append(
            f"| {threat} | {score} | {how} | {k} | {users} | {texts} | {_fmt(m['auc'])} "
            f"| {_fmt(m['tpr_at_fpr_0.01'])} | {_fmt(m['tpr_at_fpr_0.05'])} "
            f"| {_fmt(m['tpr_at_fpr_0.1'])} |"
        )

    for r in ev["example"]:
        for kind, lab in (
            ("independent", "texts independent"),
            ("users_resampled", "users resampled"),
        ):
            m = r[kind]
            row(
                f"example ({lab})",
                r["score"],
                "—",
                "—",
                m,
                f"{m.get('n_member_users', '—')}/{m.get('n_nonmember_users', '—')}",
                f"{m['n_members']}/{m['n_nonmembers']}",
            )
    for threat, rows in (("(a) aggregation", ev["a"]), ("(b) fresh texts", ev["b"])):
        for r in rows:
            if "not_tested" in r:
                out.append(
                    f"| {threat} | — | — | {r['k']} | not tested: {r['not_tested']} | | | | | |"
                )
                continue
            row(
                threat,
                r["score"],
                r["aggregator"],
                r.get("k", "—"),
                r,
                f"{r['n_member_users']}/{r['n_nonmember_users']}",
                f"{r['n_member_texts']}/{r['n_nonmember_texts']}",
            )
    return "\n".join(out)
