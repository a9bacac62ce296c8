"""The figures of docs/split-validity.md: the split check's false ``split-shifted`` rate
on real, clustered text, its power on shifted pairs, dataset inference's null rejection
rate and its power.

    privacy-audit experiment split-validity [--quick] [--checkpoint-dir DIR]
    OMP_NUM_THREADS=1 python -m experiments.split_validity --out docs/records/split-validity.json

Everything is seeded; every rate carries its count and a Clopper-Pearson 95% interval.
Real text only, all of it shipped with Python, the installed packages or Debian (no
download): paragraphs of ``pydoc_data.topics`` (clustered by topic), of stdlib docstrings
(by module), of installed packages' long descriptions (``*.dist-info/METADATA``, by
package) and Debian changelog entries (``/usr/share/doc/*/changelog.Debian.gz``, by
package; dated by their signature line, which is not part of the text) and the comment
blocks of the same stdlib modules' source files (by module).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from scipy.stats import beta

from privacy_audit.audit.benchmarks.split_check_cost import dedup_pairs, package_corpus, paragraphs


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cp_interval(k: int, n: int, confidence: float = 0.95) -> list[float]:
    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return [lo, hi]


def pydoc_corpus() -> list[tuple[str, str]]:
    """(topic, paragraph) of Python's documentation topics (``pydoc_data.topics``)."""
    import pydoc_data.topics as topics

    return dedup_pairs([(k, p) for k, v in sorted(topics.topics.items()) for p in paragraphs(v)])


STDLIB_MODULES = (
    "json", "os", "collections", "email", "logging", "argparse", "inspect", "pathlib",
    "subprocess", "threading", "asyncio", "unittest", "http.client", "csv", "decimal",
    "fractions", "statistics", "textwrap", "shutil", "tarfile", "zipfile", "typing",
    "functools", "itertools", "datetime", "calendar", "random", "string", "re", "socket",
    "ssl", "urllib.request", "urllib.parse", "xml.etree.ElementTree", "sqlite3", "pickle",
    "copy", "enum", "dataclasses", "contextlib", "abc", "io", "codecs", "locale", "gettext",
    "heapq", "bisect", "difflib", "pprint", "configparser", "smtplib", "imaplib", "ftplib",
    "mailbox", "multiprocessing", "concurrent.futures", "queue", "sched", "selectors",
    "tempfile", "glob", "fnmatch", "gzip", "bz2", "lzma", "hashlib", "hmac", "secrets",
    "base64", "binascii", "struct", "array", "weakref", "types", "operator", "numbers",
    "cmath", "math", "timeit", "trace", "pdb", "doctest", "pydoc", "ast", "dis", "tokenize",
    "importlib", "pkgutil", "zipimport", "site", "sysconfig", "warnings", "traceback",
)  # fmt: skip


def docstring_corpus() -> list[tuple[str, str]]:
    """(module, paragraph) of the docstrings of stdlib modules and their members."""
    import importlib
    import warnings

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated members (typing.io) warn when read
        out = _docstrings(importlib)
    return dedup_pairs(out)


def _docstrings(importlib) -> list[tuple[str, str]]:
    out = []
    for name in STDLIB_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for obj in [mod, *vars(mod).values()]:
            d = getattr(obj, "__doc__", None)
            if isinstance(d, str):
                out += [(name, p) for p in paragraphs(d)]
            if isinstance(obj, type):
                for m in vars(obj).values():
                    d = getattr(m, "__doc__", None)
                    if isinstance(d, str):
                        out += [(name, p) for p in paragraphs(d)]
    return out


def comment_corpus() -> list[tuple[str, str]]:
    """(module, comment block) of the ``#`` comments in the source files of
    ``STDLIB_MODULES`` (a package: the ``.py`` files of its directory): consecutive
    comment lines joined, >= 12 words, cut to 300 characters, exact repeats dropped."""
    import importlib.util
    import os
    import warnings

    out = []
    for name in STDLIB_MODULES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                continue
        origin = getattr(spec, "origin", None) if spec else None
        if not origin or not origin.endswith(".py"):
            continue
        files = [origin]
        if spec.submodule_search_locations:
            d = os.path.dirname(origin)
            files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".py"))
        for path in files:
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            block: list[str] = []
            for ln in [*lines, ""]:
                st = ln.strip()
                if st.startswith("#") and not st.startswith("#!"):
                    block.append(st.lstrip("#").strip())
                    continue
                if block:
                    out += [(name, p) for p in paragraphs(" ".join(block))]
                block = []
    return dedup_pairs(out)


def debian_corpus() -> list[tuple[str, int, str]]:
    """(package, year, entry text) of Debian changelog entries on this machine: the bullet
    text of one upload, without its header and its signature line (so no date in the text)."""
    import re

    from privacy_audit.audit.benchmarks.users import changelog_blocks

    out = []
    seen: set[str] = set()
    for pkg, block, body in changelog_blocks():
        m = re.search(r"^ -- .*?\b(\d{4}) \d\d:\d\d", block, re.M)
        if not m:
            continue
        entry = body[:300]
        if len(entry.split()) >= 12 and entry not in seen:
            seen.add(entry)
            out.append((pkg, int(m.group(1)), entry))
    return out


def pydoc_paragraphs() -> list[str]:
    import pydoc_data.topics as topics

    return list(dict.fromkeys(p for t in topics.topics.values() for p in paragraphs(t)))


def docstring_paragraphs() -> list[str]:
    import importlib

    out = []
    for name in (
        "json", "os", "collections", "email", "logging", "argparse", "inspect",
        "pathlib", "subprocess", "threading", "asyncio", "unittest", "http.client", "csv",
        "decimal", "fractions", "statistics", "textwrap", "shutil", "tarfile", "zipfile",
    ):  # fmt: skip
        mod = importlib.import_module(name)
        for obj in [mod, *vars(mod).values()]:
            d = getattr(obj, "__doc__", None)
            if isinstance(d, str):
                out += paragraphs(d)
    return list(dict.fromkeys(out))


#: Real-text corpora of the false-alarm figure: name -> (loader, what a cluster is).
CORPORA = {
    "package descriptions": ("package_corpus", "package"),
    "stdlib docstrings": ("docstring_corpus", "module"),
    "pydoc topics": ("pydoc_corpus", "topic"),
    "Debian changelog entries": ("debian_texts", "package"),
    "stdlib source comments": ("comment_corpus", "module"),
}
#: Shifted pairs of the power figure (members, non-members).
SHIFTED_PAIRS = (
    "Debian old (<= 2006) vs recent (>= 2022)",
    "package descriptions vs stdlib docstrings",
)


def debian_texts() -> list[tuple[str, str]]:
    return [(p, t) for p, _, t in debian_corpus()]


def _load(name: str) -> list[tuple[str, str]]:
    return globals()[CORPORA[name][0]]()


def _pair(name: str) -> tuple[list[str], list[str]]:
    if name.startswith("Debian"):
        deb = debian_corpus()
        return [t for _, y, t in deb if y <= 2006], [t for _, y, t in deb if y >= 2022]
    return [t for _, t in package_corpus()], [t for _, t in docstring_corpus()]


def false_alarms(
    corpus: str, trials: int, per_class: int, seed: int = 0, first: int = 0
) -> dict[str, Any]:
    """``trials`` random ``per_class`` + ``per_class`` splits of one corpus (so the split
    is random by construction): how often the check says ``split-shifted``, how often its
    two-sided interval misses 0.5, and the AUC's spread against the SE it reported.
    Splits ``first .. first + trials - 1`` (so that parts can run apart and be merged by
    :func:`merge_false_alarms`)."""
    from privacy_audit.stats.split_check import SplitCheck

    items = _load(corpus)
    texts = [t for _, t in items]
    per_split = []
    for t in range(first, first + trials):
        idx = np.random.default_rng([seed, 31, t]).permutation(len(texts))[: 2 * per_class]
        chk, _ = SplitCheck(seed=t, families=False).run(
            [texts[i] for i in idx[:per_class]], [texts[i] for i in idx[per_class:]]
        )
        a = chk["blind"]["auc"]
        per_split.append(
            {
                "split": t,
                "shifted": bool(chk["shifted"]),
                "missed": not a["ci_low"] <= 0.5 <= a["ci_high"],
                **{
                    k: a[k]
                    for k in ("value", "ci_low", "ci_high", "se", "delong_se", "p_value", "null_sd")
                },
            }
        )
    base = {
        "corpus": corpus,
        "clustered_by": CORPORA[corpus][1],
        "texts": len(texts),
        "clusters": len({g for g, _ in items}),
        "per_class": per_class,
    }
    return summarise_false_alarms(base, per_split)


def summarise_false_alarms(base: dict[str, Any], per_split: list[dict]) -> dict[str, Any]:
    from scipy.stats import kstest

    n = len(per_split)
    shifted = sum(r["shifted"] for r in per_split)
    missed = sum(r["missed"] for r in per_split)
    aucs = np.array([r["value"] for r in per_split])
    sd = float(np.std(aucs, ddof=1))
    delong = float(np.mean([r["delong_se"] for r in per_split]))
    p_025 = sum(r["p_value"] <= 0.025 for r in per_split)
    return {
        **base,
        "trials": n,
        "split_shifted": shifted,
        "split_shifted_rate_ci": cp_interval(shifted, n),
        # the old decision's main part (p <= 0.025), for comparison with the 1% level
        "p_at_most_0.025": p_025,
        "p_at_most_0.025_ci": cp_interval(p_025, n),
        "interval_misses_0.5": missed,
        "interval_miss_rate_ci": cp_interval(missed, n),
        "auc_mean": float(aucs.mean()),
        "auc_sd_over_splits": sd,
        "mean_reported_se": float(np.mean([r["se"] for r in per_split])),
        "mean_delong_se": delong,
        "sd_over_mean_delong_se": sd / delong,
        "p_uniform_ks": float(kstest([r["p_value"] for r in per_split], "uniform").pvalue),
        "per_split": per_split,
    }


def merge_false_alarms(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary per corpus from parts run apart (``--first-trial``)."""
    by: dict[str, list[dict]] = {}
    for p in parts:
        by.setdefault(p["corpus"], []).append(p)
    out = []
    for ps in by.values():
        splits = sorted((r for p in ps for r in p["per_split"]), key=lambda r: r["split"])
        assert len({r["split"] for r in splits}) == len(splits), "overlapping parts"
        base = {k: ps[0][k] for k in ("corpus", "clustered_by", "texts", "clusters", "per_class")}
        out.append(summarise_false_alarms(base, splits))
    return out


def power(pair: str, per_class: int, draws: int, seed: int = 0) -> dict[str, Any]:
    """``draws`` random draws of ``per_class`` texts from each side of a shifted pair:
    how often the check flags it; the verdict's blind AUC beside its word + char part."""
    from privacy_audit.stats.split_check import SplitCheck

    a, b = _pair(pair)
    flagged = 0
    combined, ngram, pvals = [], [], []
    for r in range(draws):
        g = np.random.default_rng([seed, 77, per_class, r])
        ia, ib = (
            g.choice(len(a), per_class, replace=False),
            g.choice(len(b), per_class, replace=False),
        )
        chk, _ = SplitCheck(seed=r).run([a[i] for i in ia], [b[i] for i in ib])
        flagged += bool(chk["shifted"])
        pvals.append(chk["blind"]["auc"]["p_value"])
        combined.append(chk["blind"]["auc"]["value"])
        ngram.append(chk["blind"]["families"]["word + char n-grams"])
    return {
        "pair": pair,
        "per_class": per_class,
        "draws": draws,
        "flagged": flagged,
        "power_ci": cp_interval(flagged, draws),
        # the old level's main part, for the power the 1% level costs
        "p_at_most_0.025": int(sum(p <= 0.025 for p in pvals)),
        "p_values": pvals,
        "mean_blind_auc": float(np.mean(combined)),
        "mean_word_char_auc": float(np.mean(ngram)),
        "combined_minus_word_char": float(np.mean(combined) - np.mean(ngram)),
        "pool_sizes": [len(a), len(b)],
    }


def di_null_synthetic(trials: int) -> dict[str, Any]:
    from privacy_audit.attacks.dataset_inference import DatasetInference

    mix = np.random.default_rng(99).normal(size=(5, 5))
    rej05 = rej01 = 0
    for t in range(trials):
        rng = np.random.default_rng(t)
        xs = rng.standard_t(4, size=(100, 5)) @ mix + rng.exponential(size=(100, 1))
        xv = rng.standard_t(4, size=(100, 5)) @ mix + rng.exponential(size=(100, 1))
        p = DatasetInference(seed=t).test(xs, xv)["p_value"]
        rej05 += p <= 0.05
        rej01 += p <= 0.01
    return {
        "trials": trials,
        "rejected_at_0.05": rej05,
        "ci_0.05": cp_interval(rej05, trials),
        "rejected_at_0.01": rej01,
        "ci_0.01": cp_interval(rej01, trials),
    }


def _tokenizer(corpus: list[str]):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>", "<unk>"])
    tok.train_from_iterator(corpus, trainer)
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<unk>",
    )


def _model(vocab: int, seed: int):
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.GPT2Config(
        n_embd=64, n_layer=2, n_head=2, n_positions=64, vocab_size=vocab, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    return tf.GPT2LMHeadModel(cfg)


def _release(model, tok, max_length: int):
    import tempfile

    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release

    d = tempfile.mkdtemp(prefix="split-validity-")
    model.save_pretrained(d)
    tok.save_pretrained(d)
    loaded = load_audit_target(d, "causal-lm", device="cpu")
    return load_causal_lm_release(loaded, max_length, PrivacyClaim.none(), "cpu", batch_size=32)


def di_lm(seed: int, n: int, epochs: int, null_trials: int, subsamples: int) -> dict[str, Any]:
    """A GPT-2 (2 layers, d = 64, BPE from stdlib docstrings) pretrained on docstrings and
    fine-tuned on ``n`` pydoc paragraphs (the suspect set); ``n`` other pydoc paragraphs
    are the validation set. Null trials: random partitions of a third pydoc set the model
    never saw. Power: random subsamples of k suspect and k validation texts."""
    from privacy_audit.attacks.dataset_inference import DatasetInference, lm_features
    from privacy_audit.attacks.llm_membership import loss_scores, min_k_scores, zlib_scores
    from privacy_audit.attacks.min_k_pp import min_k_pp_scores
    from privacy_audit.stats.blind_baseline import delong_auc
    from privacy_audit.stats.split_check import SplitCheck
    from privacy_audit.targets.lm import train_lm
    from privacy_audit.targets.scoring import HFTokenizer

    pyd, docs = pydoc_paragraphs(), docstring_paragraphs()
    rng = np.random.default_rng(seed)
    p = [pyd[i] for i in rng.permutation(len(pyd))]
    suspect, validation, unseen = p[:n], p[n : 2 * n], p[2 * n : 4 * n]
    tok = _tokenizer(docs)
    model = _model(len(tok), seed)
    max_length = 64
    t0 = time.time()
    _log(f"di: pretraining on {len(docs)} docstring paragraphs")
    train_lm(model, HFTokenizer(tok), docs, 3, 16, 3e-3, max_length, seed=seed)
    _log(f"di: fine-tuning on {n} suspect paragraphs for {epochs} epochs")
    train_lm(model, HFTokenizer(tok), suspect, epochs, 16, 1e-3, max_length, seed=seed)
    train_s = time.time() - t0
    rel = _release(model, tok, max_length)
    check, _ = SplitCheck(seed=seed).run(suspect, validation)
    xs, names = lm_features(rel, suspect)
    xv, _ = lm_features(rel, validation)
    st = rel.token_stats(suspect + validation)
    texts = suspect + validation
    logp = [s.log_probs for s in st]
    y = np.r_[np.ones(n), np.zeros(n)]
    singles = {
        "lm-loss": loss_scores(logp),
        "zlib": zlib_scores(logp, texts),
        "min-k": min_k_scores(logp, 0.2),
        "min-k++": min_k_pp_scores(st, 0.2),
    }
    aucs = {k: delong_auc(v, y) for k, v in singles.items()}
    best = max(aucs, key=lambda k: aucs[k]["value"])
    full = DatasetInference(seed=seed).test(xs, xv, names)
    power = []
    for k in (10, 20, 40, 80, 160, 320):
        if k > n:
            break
        ps = []
        for r in range(subsamples):
            g = np.random.default_rng(50_000 + 1000 * k + r)
            a, b = g.choice(n, k, replace=False), g.choice(n, k, replace=False)
            ps.append(DatasetInference(seed=r).test(xs[a], xv[b])["p_value"])
        ps = np.asarray(ps)
        hit = int((ps < 0.01).sum())
        power.append(
            {
                "texts_per_set": k,
                "median_p": float(np.median(ps)),
                "p_below_0.01": hit,
                "subsamples": subsamples,
                "power_ci": cp_interval(hit, subsamples),
            }
        )
        _log(f"di: k = {k}: median p {np.median(ps):.3g}, p < 0.01 in {hit}/{subsamples}")
    needed = next(
        (r["texts_per_set"] for r in power if r["p_below_0.01"] >= 0.8 * subsamples), None
    )
    needed_median = next((r["texts_per_set"] for r in power if r["median_p"] < 0.01), None)
    xu, _ = lm_features(rel, unseen)
    rej = 0
    for t in range(null_trials):
        perm = np.random.default_rng(20_000 + t).permutation(len(unseen))
        h = len(unseen) // 2
        rej += DatasetInference(seed=t).test(xu[perm[:h]], xu[perm[h:]])["p_value"] <= 0.05
    return {
        "setting": f"GPT-2 2 layers d=64, BPE 2000 from stdlib docstrings, pretrained 3 epochs "
        f"on docstrings, fine-tuned {epochs} epochs on {n} pydoc paragraphs; max_length "
        f"{max_length}",
        "train_seconds": round(train_s, 1),
        "split_check_blind_auc": check["blind"]["auc"],
        "single_attack_auc": aucs,
        "best_single_attack": best,
        "di_all_texts": {k: full[k] for k in ("p_value", "effect_size", "n_test", "n_fit")},
        "power": power,
        "texts_needed_power_0.8": needed,
        "texts_needed_median_p": needed_median,
        "null_real_lm": {
            "trials": null_trials,
            "texts_per_set": len(unseen) // 2,
            "rejected_at_0.05": rej,
            "ci": cp_interval(rej, null_trials),
        },
    }


def experiment(settings, cells) -> dict[str, Any]:
    """``privacy-audit experiment split-validity``: the false-alarm table (every corpus,
    ``TRIALS`` random 100 + 100 splits), the power table (each shifted pair at 20, 50 and
    100 texts per side, ``DRAWS`` draws) and "no part beats the whole". One resumable
    cell per corpus and per (pair, size). ``--quick``: 10 splits and 4 draws."""
    trials, draws = (10, 4) if settings.quick else (TRIALS, DRAWS)
    false = [
        cells.get("false-" + "-".join(c.lower().split()), lambda c=c: false_alarms(c, trials, 100))
        for c in CORPORA
    ]
    pw = [
        cells.get(f"power-{p.split()[0].lower()}-{n}", lambda p=p, n=n: power(p, n, draws))
        for p in SHIFTED_PAIRS
        for n in (20, 50, 100)
    ]
    return {
        "false_alarms": false,
        "power": pw,
        "settings": {
            "decision": DECISION,
            "splits_per_corpus": trials,
            "draws_per_power_cell": draws,
        },
    }


def _pct(k: int, n: int) -> str:
    lo, hi = cp_interval(k, n)
    return f"{k}/{n} = {100 * k / n:.1f}% [{100 * lo:.1f}%, {100 * hi:.1f}%]"


def markdown_tables(doc: dict[str, Any]) -> str:
    """The false-alarm and power tables of docs/split-validity.md from the JSON."""
    out = [
        "| Corpus (clustered by) | texts / clusters | `split-shifted` (p ≤ 0.01, 98% interval "
        "above 0.5) | 98% interval misses 0.5 | AUC SD over splits / mean reported SE (/ mean "
        "DeLong SE) | KS p (p-values uniform) |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc.get("false_alarms", []):
        out.append(
            f"| {r['corpus']} ({r['clustered_by']}) | {r['texts']} / {r['clusters']} | "
            f"{_pct(r['split_shifted'], r['trials'])} | "
            f"{_pct(r['interval_misses_0.5'], r['trials'])} | "
            f"{r['auc_sd_over_splits']:.3f} / {r['mean_reported_se']:.3f} "
            f"(/ {r['mean_delong_se']:.3f}) | {r['p_uniform_ks']:.2f} |"
        )
    out += [
        "",
        "| Shifted pair | per side | flagged `split-shifted` (1% level) | p ≤ 0.025 (the old "
        "2.5% level) | mean blind AUC | mean word + char AUC | difference |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc.get("power", []):
        out.append(
            f"| {r['pair']} | {r['per_class']} | {_pct(r['flagged'], r['draws'])} | "
            + (f"{r['p_at_most_0.025']}/{r['draws']} | " if "p_at_most_0.025" in r else "— | ")
            + f"{r['mean_blind_auc']:.3f} | {r['mean_word_char_auc']:.3f} | "
            f"{r['combined_minus_word_char']:+.3f} |"
        )
    return "\n".join(out)


#: Sizes of the reported figures (``--quick`` uses 10 and 4).
TRIALS, DRAWS = 800, 50
#: The decision the figures measure (stats/split_check.py ``SHIFT_CONFIDENCE``).
DECISION = (
    "split-shifted when the one-sided permutation p-value <= 0.01 and the 98% interval "
    "(the same test inverted) lies above 0.5"
)


def main(argv: list[str] | None = None) -> int:
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tables", help="print the markdown tables of this JSON and exit")
    ap.add_argument("--n", type=int, default=300, help="texts per set (DI)")
    ap.add_argument("--blind-trials", type=int, default=TRIALS, help="splits per corpus")
    ap.add_argument("--draws", type=int, default=DRAWS, help="draws per power cell")
    ap.add_argument("--corpora", help="comma list of corpus numbers (1-5) for 'false'")
    ap.add_argument("--first-trial", type=int, default=0, help="first split number ('false')")
    ap.add_argument("--null-trials", type=int, default=1000)
    ap.add_argument("--lm-null-trials", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--subsamples", type=int, default=50)
    ap.add_argument(
        "--parts", default="false,power,null,lm", help="comma list: false, power, null, lm"
    )
    args = ap.parse_args(argv)
    if args.tables:
        import json

        with open(args.tables, encoding="utf-8") as f:
            print(markdown_tables(json.load(f)))
        return 0
    parts = set(args.parts.split(","))
    out: dict[str, Any] = {
        "command": "python -m experiments.split_validity " + " ".join(argv or sys.argv[1:])
    }
    if "false" in parts:
        out["false_alarms"] = []
        names = list(CORPORA)
        if args.corpora:
            names = [names[int(i) - 1] for i in args.corpora.split(",")]
        for c in names:
            _log(f"false alarms: {c}, {args.blind_trials} splits of 100 + 100")
            out["false_alarms"].append(
                false_alarms(c, args.blind_trials, 100, args.seed, args.first_trial)
            )
            atomic_write_text(args.out, dumps_json(out))
    if "power" in parts:
        out["power"] = []
        for p in SHIFTED_PAIRS:
            for n in (20, 50, 100):
                _log(f"power: {p}, {n} per side, {args.draws} draws")
                out["power"].append(power(p, n, args.draws, args.seed))
                atomic_write_text(args.out, dumps_json(out))
    if "null" in parts:
        out["di_null_synthetic"] = di_null_synthetic(args.null_trials)
        atomic_write_text(args.out, dumps_json(out))
    if "lm" in parts:
        out["di_lm"] = di_lm(args.seed, args.n, args.epochs, args.lm_null_trials, args.subsamples)
        atomic_write_text(args.out, dumps_json(out))
    _log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
