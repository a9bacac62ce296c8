"""``privacy-audit bench split-check``: the split check's share of a default own-model audit.

The check runs before every audit of a user's model, so it must cost at most
about 10% of that audit on 1,000 + 1,000 texts; its growth to 10,000 + 10,000 is shown
too. Real texts (Debian changelog bullets and installed packages' description
paragraphs, shuffled; random halves, so no shift). Time is the process CPU time of one
thread (``--threads 1``; OMP_NUM_THREADS=1), which other jobs on a shared machine do not
inflate.

- ``split-check n+n``: :meth:`SplitCheck.run` alone (near-duplicates, the cross-fitted
  blind classifier and its 999-permutation test), timed at the full sizes: ``--sequences``
  texts per side (default 1,000) and ten times that (where it reads a seeded sample of
  ``MAX_BLIND_PER_CLASS`` texts per class, stats/split_check.py);
- ``audit k+k``: ``privacy-audit run --model DIR --members M --nonmembers N`` in process,
  every default (lm-loss, zlib, min-k from one forward pass, their bootstrap intervals,
  the split check itself, results.json and the HTML report) on a GPT-2-small-shaped model
  (124M parameters, random weights: the time does not depend on them) with a byte-level
  BPE tokenizer trained on the texts, at two small sizes (``AUDIT_TEXTS`` and half).

The audit's part other than the check (loading, one forward pass per text, per-text
statistics, bootstrap, report) is fitted as ``fixed + per_text x texts`` from the two
sizes and extrapolated: ``audit(n) = fixed + per_text x 2n + check(n)``. The reported
share is ``check(n) / audit(n)``. The extrapolation is stated in the result's notes.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, CaseTiming

TARGET = 0.10  # split-check time / audit time at 1,000 + 1,000 texts
#: Texts per side of the audit actually run (its non-check cost is linear in the texts).
AUDIT_TEXTS = 40


def paragraphs(text: str, max_chars: int = 300) -> list[str]:
    out = []
    for p in text.split("\n\n"):
        p = " ".join(p.split())
        if len(p.split()) >= 12:
            out.append(p[:max_chars])
    return out


def dedup_pairs(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[str] = set()
    out = []
    for g, t in items:
        if t not in seen:
            seen.add(t)
            out.append((g, t))
    return out


def package_corpus() -> list[tuple[str, str]]:
    """(package, paragraph) of installed packages' long descriptions (``METADATA``)."""
    from importlib import metadata

    out = []
    for dist in sorted(metadata.distributions(), key=lambda d: d.metadata["Name"] or ""):
        name = dist.metadata["Name"] or "?"
        body = dist.metadata.get_payload() or ""
        if not isinstance(body, str):
            continue
        for p in paragraphs(body):
            if sum(c.isalpha() for c in p) > 0.6 * len(p):  # prose, not tables or code
                out.append((name, p))
    return dedup_pairs(out)


def cost_texts(n: int, seed: int) -> list[str]:
    """``n`` distinct real texts: Debian changelog bullets and package description
    paragraphs (>= 8 words, cut to 300 characters), shuffled with ``seed``."""
    import glob
    import gzip
    import re

    out = [t for _, t in package_corpus()]
    for path in sorted(glob.glob("/usr/share/doc/*/changelog.Debian.gz")):
        try:
            text = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for bullet in re.split(r"\n\s+[*+-] ", text):
            b = " ".join(bullet.split("\n -- ")[0].split())
            if len(b.split()) >= 8 and not re.match(r"^\S+ \(", b):
                out.append(b[:300])
    out = list(dict.fromkeys(out))
    if len(out) < n:
        raise ValueError(f"only {len(out)} distinct texts on this machine, {n} asked for")
    rng = np.random.default_rng(seed)
    return [out[i] for i in rng.permutation(len(out))[:n]]


def _save_model(texts: list[str], root: Path, quick: bool, seed: int) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    vocab = 500 if quick else 8000
    tok.train_from_iterator(
        texts, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>", "<unk>"])
    )
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    )
    dims = (
        dict(n_embd=32, n_layer=2, n_head=2, n_positions=128, vocab_size=vocab)
        if quick
        else dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257)
    )
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(bos_token_id=0, eos_token_id=0, **dims)).eval()
    path = root / "model"
    model.save_pretrained(path)
    hf.save_pretrained(path)
    return path


def run(settings: BenchSettings) -> BenchResult:
    from privacy_audit.audit.cli import main as cli_main
    from privacy_audit.stats.split_check import MAX_BLIND_PER_CLASS, SplitCheck

    per_side = int(settings.extra.get("sequences", 30 if settings.quick else 1000))
    small = min(per_side, 10 if settings.quick else AUDIT_TEXTS)
    large = 10 * per_side
    texts = cost_texts(2 * large, settings.seed)
    root = Path(tempfile.mkdtemp(prefix="split-check-cost-"))
    model = _save_model(texts[: 2 * per_side], root, settings.quick, settings.seed)
    half = small // 2
    for n in (half, small):
        (root / f"m{n}.txt").write_text("\n".join(texts[:n]) + "\n", encoding="utf-8")
        (root / f"n{n}.txt").write_text("\n".join(texts[n : 2 * n]) + "\n", encoding="utf-8")
    clock = time.process_time  # CPU time: other jobs on a shared machine do not inflate it

    def timed(fn) -> float:
        t0 = clock()
        fn()
        return clock() - t0

    def audit(n: int, k: int):
        def go() -> None:
            argv = ["run", "--model", str(model), "--members", str(root / f"m{n}.txt")]
            argv += ["--nonmembers", str(root / f"n{n}.txt"), "--quiet"]
            code = cli_main([*argv, "--out", str(root / f"out{n}-{k}")])
            if code != 0:
                raise RuntimeError(f"the audit exited {code}")

        return go

    def check(n: int):
        return lambda: SplitCheck(seed=settings.seed).run(texts[:n], texts[n : 2 * n])

    cases = {
        f"audit {small}+{small}": CaseTiming("audit", []),
        f"audit {half}+{half}": CaseTiming("audit-half", []),
        f"split-check {small}+{small}": CaseTiming("check-small", []),
        f"split-check {half}+{half}": CaseTiming("check-half", []),
        f"split-check {per_side}+{per_side}": CaseTiming("check", []),
    }
    keys = list(cases)
    for k in range(settings.warmup + settings.repeats):
        runs = [audit(small, k), audit(half, k), check(small), check(half), check(per_side)]
        for key, fn in zip(keys, runs, strict=True):
            t = timed(fn)
            if k >= settings.warmup:
                cases[key].times_s.append(t)
    big: dict = {}

    def run_big() -> None:
        big["check"], _ = SplitCheck(seed=settings.seed).run(texts[:large], texts[large:])

    t_large = timed(run_big)
    med = [cases[k].median_s for k in keys]
    t_audit_small, t_audit_half, t_check_small, t_check_half, t_check = med
    # the audit's part other than the check: fixed + per_text x texts, from two sizes
    rest_small, rest_half = t_audit_small - t_check_small, t_audit_half - t_check_half
    per_text = max(rest_small - rest_half, 0.0) / (2 * (small - half))
    fixed = max(rest_small - per_text * 2 * small, 0.0)
    audit_at = {n: fixed + per_text * 2 * n + t for n, t in ((per_side, t_check), (large, t_large))}
    return BenchResult(
        name="split-check",
        reference=keys[0],
        cases={k: v.summary() for k, v in cases.items()},
        ratios={k: v.median_s / t_audit_small for k, v in cases.items()},
        setup={
            "clock": "process CPU time, one thread",
            "model": "tiny GPT-2 (quick)" if settings.quick else "GPT-2 small shape, 124M",
            "audit_texts_per_side_measured": small,
            "audit_cpu_s_per_text_without_check": per_text,
            "audit_cpu_s_fixed": fixed,
            "texts_per_side": per_side,
            "split_check_cpu_s": t_check,
            "share": t_check / audit_at[per_side],
            "large_share": t_large / audit_at[large],
            "audit_cpu_s_estimated": audit_at[per_side],
            "large_texts_per_side": large,
            "large_split_check_cpu_s": t_large,
            "large_audit_cpu_s_estimated": audit_at[large],
            "large_blind_texts_per_class": [
                big["check"]["blind"]["n_members"],
                big["check"]["blind"]["n_nonmembers"],
            ],
            "max_blind_per_class": MAX_BLIND_PER_CLASS,
        },
        targets={"split-check": f"<= {TARGET:.0%} of the audit at 1,000 + 1,000 texts"},
        notes=[
            "the check is timed at full size (its cost is not linear in the texts); the "
            "audit is run in full (CLI, every default) at two smaller sizes, and its part "
            "other than the check is fitted as fixed + per-text cost (one forward pass per "
            "text, per-text statistics) and extrapolated: audit(n) = fixed + per-text x 2n "
            "+ check(n)",
        ],
    )
