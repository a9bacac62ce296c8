"""The figures of docs/split-validity.md: blind baselines on real prose, the false
``split-shifted`` rate, dataset inference's null rejection rate and its power.

    OMP_NUM_THREADS=1 python -m privacy_audit.audit.benchmarks.split_validity --out docs/split-validity.json

Everything is seeded; every rate carries its count and a Clopper-Pearson 95% interval,
every AUC a DeLong 95% interval. Real English text ships with Python: pydoc_data.topics
(the documentation topics) and the docstrings of stdlib modules.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from scipy.stats import beta


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cp_interval(k: int, n: int, confidence: float = 0.95) -> list[float]:
    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return [lo, hi]


def _paras(text: str, max_chars: int = 300) -> list[str]:
    out = []
    for p in text.split("\n\n"):
        p = " ".join(p.split())
        if len(p.split()) >= 12:
            out.append(p[:max_chars])
    return out


def pydoc_paragraphs() -> list[str]:
    import pydoc_data.topics as topics

    return list(dict.fromkeys(p for t in topics.topics.values() for p in _paras(t)))


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
                out += _paras(d)
    return list(dict.fromkeys(out))


def blind_figures(seed: int, n: int, trials: int) -> dict[str, Any]:
    from privacy_audit.audit.split_check import SplitCheck

    pyd, docs = pydoc_paragraphs(), docstring_paragraphs()
    rng = np.random.default_rng(seed)
    p = [pyd[i] for i in rng.permutation(len(pyd))]
    d = [docs[i] for i in rng.permutation(len(docs))]
    n_sh = min(n, len(d))
    _log(f"blind: shifted (pydoc vs docstrings, {n_sh} each)")
    shifted, _ = SplitCheck(seed=seed).run(p[:n_sh], d[:n_sh])
    _log(f"blind: same distribution (pydoc vs pydoc, {n} each)")
    same, _ = SplitCheck(seed=seed).run(p[:n], p[n : 2 * n])
    small = 100
    flagged = 0
    _log(f"blind: false split-shifted rate over {trials} pydoc splits ({small} each)")
    for t in range(trials):
        idx = np.random.default_rng(10_000 + t).permutation(len(pyd))[: 2 * small]
        chk, _ = SplitCheck(seed=t, families=False).run(
            [pyd[i] for i in idx[:small]], [pyd[i] for i in idx[small:]]
        )
        flagged += bool(chk["shifted"])
    return {
        "shifted": {k: shifted[k] for k in ("blind", "duplicates", "shifted")},
        "same_distribution": {k: same[k] for k in ("blind", "duplicates", "shifted")},
        "false_shift": {
            "flagged": flagged,
            "trials": trials,
            "per_class": small,
            "rate_ci": cp_interval(flagged, trials),
        },
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
    from privacy_audit.defenses.targets.loading import load_audit_target, load_causal_lm_release

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
    from privacy_audit.audit.split_check import SplitCheck, delong_auc
    from privacy_audit.defenses.targets.lm import train_lm
    from privacy_audit.defenses.targets.scoring import HFTokenizer

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


def main(argv: list[str] | None = None) -> int:
    from privacy_audit.audit.io import atomic_write_text, dumps_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=300, help="texts per set (blind and DI)")
    ap.add_argument("--blind-trials", type=int, default=100)
    ap.add_argument("--null-trials", type=int, default=1000)
    ap.add_argument("--lm-null-trials", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--subsamples", type=int, default=50)
    ap.add_argument("--parts", default="blind,null,lm", help="comma list: blind, null, lm")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    out = {
        "command": "python -m privacy_audit.audit.benchmarks.split_validity "
        + " ".join(argv or sys.argv[1:])
    }
    if "blind" in parts:
        out["blind"] = blind_figures(args.seed, args.n, args.blind_trials)
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
