"""``privacy-audit bench frontier``: the 2026 attack battery on a fine-tune and its base.

The user's usual case, built from real text that ships with Python and its packages:

1. **Text.** Paragraphs (≥ 20 words, cut to ``words`` words) of Python's documentation
   (``pydoc_data.topics``) and of the installed packages' ``METADATA`` descriptions are
   the fine-tuning domain: shuffled with the seed, ``members`` of them are fine-tuned on
   and ``nonmembers`` others are held out (same distribution by construction). The
   standard library's docstrings (read with ``ast``, nothing imported) and Debian
   changelogs are the pretraining corpus, with the domain paragraphs left over.
2. **Bases.** A byte-level BPE tokenizer is trained on the pretraining corpus; a
   GPT-2-shaped and a Llama-shaped causal LM (``d``, ``layers``; built from configs) are
   pretrained on it (the "public base").
3. **Fine-tunes.** Each base is fine-tuned on the members fully and with LoRA (peft).
4. **Attacks.** Every LM attack of the suite on the fine-tune with its base as the
   reference: lm-loss, zlib (as cited), zlib-total (the old variant), min-k, min-k++,
   reference, ez-mia, informia, con-recall, samia, and LiRA / RMIA offline against the base
   (the CLI's ``reference_attacks`` code); offline RMIA also at a ∈ {0, 0.3, 0.5, 0.7,
   0.9, 1} (the measurement behind :data:`~privacy_audit.audit.references.LM_RMIA_OFFLINE_A`).
   Each with AUC and TPR at 1% and 0.1% FPR and their intervals
   (:func:`~privacy_audit.stats.metrics.membership_metrics`), and EZ-MIA's TPR at 1% FPR
   over lm-loss's and the reference attack's, with a 95% stratified-bootstrap interval.

Sizes (default): 1,000 members and 1,000 non-members (1% FPR resolved by 10 non-members,
0.1% by 1), texts of at most 48 words cut to 48 tokens (half the 96-token context, room
for Con-ReCall's prefixes), d = 64, 2 layers, a 1,024-token BPE, SaMIA with 3 samples
(CPU time; the attack's default is 10). ``extra = {"kinds": [...], "modes": [...]}`` runs a
subset of the four cases (for running them as parallel processes). ``--quick`` runs a
smoke-test size whose figures are not to be reported. No GPU was used (none was lent).
"""

from __future__ import annotations

import ast
import gzip
import re
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import numpy as np

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, CaseTiming

DEFAULTS = {
    "members": 1000,
    "nonmembers": 1000,
    "words": 48,
    "max_length": 96,
    "d": 64,
    "layers": 2,
    "vocab": 1024,
    "pretrain_texts": 4000,
    "pretrain_epochs": 2,
    "finetune_epochs": 4,
    "lora_epochs": 4,
    "samia_samples": 3,
}
QUICK = {
    **DEFAULTS,
    "members": 60,
    "nonmembers": 60,
    "words": 24,
    "max_length": 96,
    "d": 32,
    "layers": 1,
    "vocab": 512,
    "pretrain_texts": 200,
    "pretrain_epochs": 1,
    "finetune_epochs": 2,
    "lora_epochs": 2,
    "samia_samples": 2,
}
A_GRID = (0.0, 0.3, 0.5, 0.7, 0.9, 1.0)
ATTACKS = (
    "lm-loss",
    "zlib",
    "zlib-total",
    "min-k",
    "min-k++",
    "reference",
    "ez-mia",
    "informia",
    "con-recall",
    "samia",
)
#: the papers' figures this benchmark is read beside (docs/frontier.md)
PAPERS = {
    "ez-mia": "EZ-MIA (arXiv 2601.12104): GPT-2 / WikiText full fine-tune, TPR@1%FPR 66.3% vs "
    "17.5% for the best prior attack (3.8x), AUC 0.98; TPR@0.1%FPR 14.0% vs 1.8%; "
    "Llama-2-7B / AG News 46.7% vs 15.8%; XSum full vs LoRA 82.6% vs 1.5% TPR@0.1%FPR.",
    "min-k++": "Min-K%++ (Zhang et al. 2024): beats Min-K% on WikiMIA pretraining detection.",
    "informia": "InfoRMIA (arXiv 2510.05582): beats RMIA with a single reference.",
    "con-recall": "Con-ReCall (Wang et al. 2024): beats ReCaLL and Min-K%++ on WikiMIA.",
    "samia": "SaMIA (Kaneko et al. 2024): generation-only, near likelihood-based attacks on "
    "pretraining data.",
}


def _paragraphs(text: str, words: int) -> list[str]:
    out = []
    for p in re.split(r"\n\s*\n", text):
        w = p.split()
        if len(w) >= 20:
            out.append(" ".join(w[:words]))
    return out


def domain_texts(words: int) -> list[str]:
    """Python's documentation topics and installed packages' descriptions, as paragraphs."""
    import importlib.metadata as md
    import pydoc_data.topics as topics

    texts = []
    for key in sorted(topics.topics):
        texts += _paragraphs(topics.topics[key], words)
    seen_dists = set()
    for d in sorted(md.distributions(), key=lambda d: str(d.metadata.get("Name") or "")):
        name = str(d.metadata.get("Name") or "")
        if name.lower() in seen_dists:
            continue
        seen_dists.add(name.lower())
        body = d.metadata.get_payload() or d.metadata.get("Description") or ""
        texts += _paragraphs(str(body), words)
    return list(dict.fromkeys(texts))


def pretraining_texts(words: int, limit: int) -> list[str]:
    """Standard-library docstrings (parsed, not imported) and Debian changelog entries."""
    out: list[str] = []
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        if "test" in path.parts[-2:][0] or len(out) >= limit:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node)
                if doc:
                    out += _paragraphs(doc, words)
    for path in sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz")):
        if len(out) >= limit:
            break
        try:
            out += _paragraphs(gzip.open(path, "rt", errors="replace").read(), words)
        except OSError:
            continue
    return list(dict.fromkeys(out))[:limit]


def train_tokenizer(texts: list[str], vocab: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )


def build_model(kind: str, vocab: int, d: int, layers: int, n_ctx: int, seed: int):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    if kind == "gpt2":
        cfg = GPT2Config(
            vocab_size=vocab,
            n_embd=d,
            n_layer=layers,
            n_head=max(1, d // 32),
            n_positions=n_ctx,
            bos_token_id=0,
            eos_token_id=0,
        )
        return GPT2LMHeadModel(cfg)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=d,
        intermediate_size=4 * d,
        num_hidden_layers=layers,
        num_attention_heads=max(1, d // 32),
        num_key_value_heads=max(1, d // 32),
        max_position_embeddings=n_ctx,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    return LlamaForCausalLM(cfg)


def _train(model, tok, texts, epochs, lr, max_length, seed, batch=32):
    from privacy_audit.targets.lm import train_lm
    from privacy_audit.targets.scoring import HFTokenizer

    return train_lm(model, HFTokenizer(tok), texts, epochs, batch, lr, max_length, seed=seed)


def tpr_ratio_interval(
    a: np.ndarray, b: np.ndarray, members: np.ndarray, fpr: float, n_boot: int, seed: int
) -> dict[str, Any]:
    """TPR_a / TPR_b at ``fpr`` with a 95% percentile interval from a bootstrap that
    resamples members and non-members separately (the pair of scores of a text together)."""
    from privacy_audit.stats.metrics import tpr_at_fpr

    m = np.asarray(members).astype(bool)
    ta, tb = tpr_at_fpr(a, m, fpr), tpr_at_fpr(b, m, fpr)
    rng = np.random.default_rng(seed)
    inn, out = np.flatnonzero(m), np.flatnonzero(~m)
    reps = []
    for _ in range(n_boot):
        idx = np.r_[rng.choice(inn, inn.size), rng.choice(out, out.size)]
        ra, rb = tpr_at_fpr(a[idx], m[idx], fpr), tpr_at_fpr(b[idx], m[idx], fpr)
        reps.append(ra / rb if rb > 0 else np.inf)
    reps = np.asarray(reps)
    lo, hi = np.quantile(reps, [0.025, 0.975])
    return {
        "fpr": fpr,
        "tpr_ez": ta,
        "tpr_other": tb,
        "ratio": ta / tb if tb > 0 else None,
        "ci_low": float(lo) if np.isfinite(lo) else None,
        "ci_high": float(hi) if np.isfinite(hi) else None,
        "bootstrap": n_boot,
        "method": "stratified bootstrap, percentile; None = unbounded (other TPR 0 in "
        "some resamples)",
    }


def _summ(metrics: dict) -> dict[str, Any]:
    def one(k):
        m = metrics[k]
        return {x: m.get(x) for x in ("value", "ci_low", "ci_high")}

    return {
        "auc": one("auc"),
        "tpr_at_fpr_0.01": one("tpr_at_fpr_0.01"),
        "tpr_at_fpr_0.001": one("tpr_at_fpr_0.001"),
    }


def _log(msg: str) -> None:
    print(f"  [frontier] {msg}", file=sys.stderr, flush=True)


def audit_case(target, base, examples, public, settings, sizes, seed) -> dict[str, Any]:
    """Every attack of :data:`ATTACKS` plus LiRA / RMIA offline on one fine-tune."""
    from privacy_audit.attacks import ATTACKS as REGISTRY
    from privacy_audit.attacks import run_attack
    from privacy_audit.audit.references import OFFLINE
    from privacy_audit.audit.scale.tasks import shadow_attack_record

    out: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    scores: dict[str, np.ndarray] = {}
    for name in ATTACKS:
        kw: dict[str, Any] = {}
        if name in ("reference", "ez-mia", "informia"):
            kw["reference"] = base
        if name == "samia":
            kw["samples"] = sizes["samia_samples"]
        att = REGISTRY[name](**kw)
        if hasattr(att, "prepare"):
            att.prepare(public=public, seed=seed)
        t0 = time.perf_counter()
        res = run_attack(att, target, examples, settings)
        seconds[name] = time.perf_counter() - t0
        scores[name] = res.scores
        out[name] = _summ(res.metrics)
        _log(f"{name}: AUC {res.metrics['auc']['value']:.3f}")
    texts = list(examples.texts)
    t_loss, r_loss = target.loss(texts), base.loss(texts)
    keep = np.zeros((1, len(texts)), dtype=bool)
    metrics = {
        "delta": settings.delta,
        "confidence": settings.confidence,
        "bootstrap": settings.n_boot,
        "seed": settings.seed,
    }
    ids = [str(i) for i in examples.ids]
    members = [int(x) for x in examples.members]
    z = np.arange(len(texts))  # the audited texts, unlabelled (the CLI's default z set)
    for name in OFFLINE:
        for a in (1.0,) if name.startswith("lira") else A_GRID:
            params = {"fixed_variance": True, "rmia_offline_a": a, "rmia_gamma": 1.0}
            rec = shadow_attack_record(
                name, t_loss, r_loss[None], keep, z, ids, members, metrics, params, "base"
            )
            key = name if name.startswith("lira") else f"{name} (a = {a:g})"
            out[key] = _summ(rec["metrics"])
            if name.startswith("lira"):
                scores[name] = np.asarray(rec["examples"]["scores"])
    m = np.asarray(examples.members)
    ratios = {
        f"ez-mia / {other}": tpr_ratio_interval(
            scores["ez-mia"], scores[other], m, 0.01, 1000, seed
        )
        for other in ("lm-loss", "reference")
    }
    return {"attacks": out, "ez_mia_tpr_ratio": ratios, "attack_seconds": seconds}


def run(settings: BenchSettings) -> BenchResult:
    import torch

    from privacy_audit.attacks import MetricSettings
    from privacy_audit.defenses.base import Examples, PrivacyClaim
    from privacy_audit.targets.scoring import HFLMRelease, HFTokenizer

    sizes = {**(QUICK if settings.quick else DEFAULTS), **dict(settings.extra or {})}
    seed = settings.seed
    torch.manual_seed(seed)
    words, max_length = int(sizes["words"]), int(sizes["max_length"])
    pre = pretraining_texts(words, int(sizes["pretrain_texts"]))
    hf_tok = train_tokenizer(pre, int(sizes["vocab"]))  # on the pretraining corpus only
    tok = HFTokenizer(hf_tok)
    vocab = len(hf_tok)
    # every domain text cut to half the context, as the CLI cuts to max_length: the other
    # half leaves room for Con-ReCall's prefixes
    domain = list(dict.fromkeys(tok.truncate_text(t, max_length // 2) for t in domain_texts(words)))
    rng = np.random.default_rng(seed)
    domain = [domain[i] for i in rng.permutation(len(domain))]
    n_in, n_out = int(sizes["members"]), int(sizes["nonmembers"])
    if len(domain) < n_in + n_out:
        raise ValueError(f"only {len(domain)} domain paragraphs ship here; need {n_in + n_out}")
    members, nonmembers = domain[:n_in], domain[n_in : n_in + n_out]
    leftover = domain[n_in + n_out :]
    pre = [t for t in dict.fromkeys(pre + leftover) if t not in set(members + nonmembers)]
    _log(f"{len(members)} members, {len(nonmembers)} non-members, {len(pre)} pretraining texts")
    examples = Examples(
        ids=[f"m{i}" for i in range(n_in)] + [f"n{i}" for i in range(n_out)],
        texts=members + nonmembers,
        labels=np.zeros(n_in + n_out, dtype=np.int64),
        members=np.r_[np.ones(n_in), np.zeros(n_out)].astype(np.int64),
    )
    public = Examples(
        ids=[f"p{i}" for i in range(200)],
        texts=leftover[:200] if len(leftover) >= 200 else pre[:200],
        labels=np.zeros(200, dtype=np.int64),
    )
    ms = MetricSettings(n_boot=200, seed=seed)
    claim = PrivacyClaim.none("bench")
    cases: dict[str, Any] = {}
    timings: dict[str, CaseTiming] = {}
    d, layers = int(sizes["d"]), int(sizes["layers"])
    kinds = tuple(sizes.get("kinds", ("gpt2", "llama")))
    modes = tuple(sizes.get("modes", ("full", "lora")))
    for kind in kinds:
        t0 = time.perf_counter()
        base = build_model(kind, vocab, d, layers, max_length + 8, seed)
        info = _train(base, hf_tok, pre, int(sizes["pretrain_epochs"]), 3e-3, max_length, seed)
        base.eval()
        timings[f"{kind} pretrain"] = CaseTiming(f"{kind} pretrain", [time.perf_counter() - t0])
        _log(f"{kind} base pretrained: final loss {info['final_train_loss']:.3f}")
        state = {k: v.clone() for k, v in base.state_dict().items()}
        for mode in modes:
            t0 = time.perf_counter()
            target = build_model(kind, vocab, d, layers, max_length + 8, seed)
            target.load_state_dict(state)
            if mode == "lora":
                from peft import LoraConfig, get_peft_model

                modules = ["c_attn", "c_fc"] if kind == "gpt2" else ["q_proj", "v_proj", "up_proj"]
                target = get_peft_model(
                    target, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=modules)
                )
                epochs, lr = int(sizes["lora_epochs"]), 3e-3
            else:
                epochs, lr = int(sizes["finetune_epochs"]), 1e-3
            ft = _train(target, hf_tok, members, epochs, lr, max_length, seed + 1)
            if mode == "lora":
                target = target.merge_and_unload()
            target.eval()
            name = f"{kind} {mode}"
            timings[f"{name} fine-tune"] = CaseTiming(
                f"{name} fine-tune", [time.perf_counter() - t0]
            )
            _log(f"{name}: fine-tuned {epochs} epochs, final loss {ft['final_train_loss']:.3f}")
            t_rel = HFLMRelease(target, tok, max_length, claim, batch_size=32)
            b_rel = HFLMRelease(base, tok, max_length, claim, batch_size=32)
            t0 = time.perf_counter()
            case = audit_case(t_rel, b_rel, examples, public, ms, sizes, seed)
            timings[f"{name} attacks"] = CaseTiming(f"{name} attacks", [time.perf_counter() - t0])
            case["fine_tune"] = {"mode": mode, "epochs": epochs, "learning_rate": lr, **ft}
            case["base_final_loss"] = info["final_train_loss"]
            cases[name] = case
    setup = {
        "sizes": sizes,
        "n_members": n_in,
        "n_nonmembers": n_out,
        "pretraining_texts": len(pre),
        "vocab": vocab,
        "text": "members / non-members: pydoc_data.topics + installed packages' METADATA "
        "paragraphs; pretraining: stdlib docstrings + Debian changelogs + leftover paragraphs",
        "models": f"GPT-2- and Llama-shaped, d = {d}, {layers} layers, from configs",
        "metric_bootstrap": ms.n_boot,
        "rmia_offline_a_grid": list(A_GRID),
        "papers": PAPERS,
        "full_size": not settings.quick,
        "device": "cpu (no GPU in this session)",
        "cases": cases,
    }
    return BenchResult(
        name="frontier",
        reference=next(iter(timings)),
        cases={k: t.summary() for k, t in timings.items()},
        ratios={},
        setup=setup,
        targets={},
        notes=[
            "Accuracy benchmark: the timings are stage wall times, not cost ratios.",
            "Intervals: AUC DeLong (logit), TPR exact (order-statistic + Clopper-Pearson); "
            "ratio: stratified bootstrap, 1,000 resamples.",
        ]
        + ([] if not settings.quick else ["QUICK SIZE: smoke test only, do not report."]),
    )


def _pct(m: dict) -> str:
    if m.get("value") is None:
        return "not resolvable"
    lo, hi = m.get("ci_low"), m.get("ci_high")
    return f"{100 * m['value']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def markdown_tables(bench: dict[str, Any]) -> str:
    """The docs' tables from a ``bench frontier`` result (one entry of results' "benchmarks")."""
    setup = bench["setup"]
    lines = []
    for case, res in setup["cases"].items():
        n_in, n_out = setup["n_members"], setup["n_nonmembers"]
        lines += [
            f"### {case} (n = {n_in} members + {n_out} non-members)",
            "",
            "| attack | AUC [95% CI] | TPR @ 1% FPR [95% CI] | TPR @ 0.1% FPR [95% CI] |",
            "|---|---|---|---|",
        ]
        rows = sorted(
            res["attacks"].items(), key=lambda kv: -(kv[1]["tpr_at_fpr_0.01"]["value"] or 0)
        )
        for name, m in rows:
            a = m["auc"]
            lines.append(
                f"| `{name}` | {a['value']:.3f} [{a['ci_low']:.3f}, {a['ci_high']:.3f}] | "
                f"{_pct(m['tpr_at_fpr_0.01'])} | {_pct(m['tpr_at_fpr_0.001'])} |"
            )
        lines.append("")
        for key, r in res["ez_mia_tpr_ratio"].items():
            ratio = "undefined (other TPR 0)" if r["ratio"] is None else f"{r['ratio']:.2f}"
            lo = "—" if r["ci_low"] is None else f"{r['ci_low']:.2f}"
            hi = "∞" if r["ci_high"] is None else f"{r['ci_high']:.2f}"
            lines.append(
                f"- TPR@1%FPR ratio {key}: {100 * r['tpr_ez']:.1f}% / {100 * r['tpr_other']:.1f}% "
                f"= {ratio} [{lo}, {hi}] ({r['bootstrap']} stratified bootstrap resamples)"
            )
        lines.append("")
    return "\n".join(lines)
