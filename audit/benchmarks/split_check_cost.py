"""``privacy-audit bench split-check``: the split check's share of a default own-model audit.

Issue 34: the check runs before every audit of a user's model, so it must cost at most
about 10% of that audit on 1,000 + 1,000 texts; and its growth to 10,000 + 10,000 is
shown. Two cases, on the same real texts (Debian changelog bullets and installed
packages' description paragraphs, shuffled; random halves, so no shift):

- ``audit``: ``privacy-audit run --model DIR --members M --nonmembers N`` in process, with
  every default (attacks lm-loss, zlib, min-k from one forward pass, their bootstrap
  intervals, the split check itself, results.json and the HTML report), on a
  GPT-2-small-shaped model (124M parameters, random weights: the time does not depend on
  them) with a byte-level BPE tokenizer trained on the texts;
- ``split-check``: :meth:`SplitCheck.run` alone on the same texts (near-duplicates, the
  cross-fitted blind classifier and its 999-permutation test).

Reported: each case's wall time (``--repeats`` rounds, alternating which runs first) and
the ratio split-check / audit. ``--sequences`` sets the texts per side (default 1,000);
the check alone is also timed at ten times that many texts per side, where it reads a
seeded sample of ``MAX_BLIND_PER_CLASS`` texts per class (audit/split_check.py). The
audit at that size is not run here: its forward pass is linear in the number of texts,
so the note gives ten times the measured audit time as an extrapolation, labelled so.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, CaseTiming

TARGET = 0.10  # split-check time / audit time at 1,000 + 1,000 texts


def cost_texts(n: int, seed: int) -> list[str]:
    """``n`` distinct real texts: Debian changelog bullets and package description
    paragraphs (>= 8 words, cut to 300 characters), shuffled with ``seed``."""
    import glob
    import gzip
    import re

    from privacy_audit.audit.benchmarks.split_validity import package_corpus

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
    from privacy_audit.audit.integrations.cli import main as cli_main
    from privacy_audit.audit.split_check import MAX_BLIND_PER_CLASS, SplitCheck

    per_side = int(settings.extra.get("sequences", 30 if settings.quick else 1000))
    large = 10 * per_side
    texts = cost_texts(2 * large, settings.seed)
    members, nonmembers = texts[:per_side], texts[per_side : 2 * per_side]
    root = Path(tempfile.mkdtemp(prefix="split-check-cost-"))
    model = _save_model(texts[: 2 * per_side], root, settings.quick, settings.seed)
    (root / "m.txt").write_text("\n".join(members) + "\n", encoding="utf-8")
    (root / "n.txt").write_text("\n".join(nonmembers) + "\n", encoding="utf-8")
    argv = ["run", "--model", str(model), "--members", str(root / "m.txt")]
    argv += ["--nonmembers", str(root / "n.txt"), "--quiet"]

    def audit(k: int) -> None:
        code = cli_main([*argv, "--out", str(root / f"out{k}")])
        if code != 0:
            raise RuntimeError(f"the audit exited {code}")

    def check() -> None:
        SplitCheck(seed=settings.seed).run(members, nonmembers)

    times = {"audit": CaseTiming("audit", []), "split-check": CaseTiming("split-check", [])}
    for k in range(settings.warmup + settings.repeats):
        order = [("audit", lambda k=k: audit(k)), ("split-check", check)]
        for name, fn in order if k % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            fn()
            if k >= settings.warmup:
                times[name].times_s.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    big, _ = SplitCheck(seed=settings.seed).run(texts[:large], texts[large:])
    t_large = time.perf_counter() - t0
    audit_s = times["audit"].median_s
    check_s = times["split-check"].median_s
    return BenchResult(
        name="split-check",
        reference="audit",
        cases={k: v.summary() for k, v in times.items()},
        ratios={"split-check": check_s / audit_s, "audit": 1.0},
        setup={
            "texts_per_side": per_side,
            "model": "tiny GPT-2 (quick)" if settings.quick else "GPT-2 small shape, 124M",
            "large_texts_per_side": large,
            "large_split_check_s": t_large,
            "large_blind_texts_per_class": [
                big["blind"]["n_members"],
                big["blind"]["n_nonmembers"],
            ],
            "large_subsampled": big["blind"]["subsampled"],
            "max_blind_per_class": MAX_BLIND_PER_CLASS,
            "large_audit_s_extrapolated": 10 * audit_s,
            "large_share_extrapolated": t_large / (10 * audit_s),
        },
        targets={"split-check": f"<= {TARGET:.0%} of the audit at 1,000 + 1,000 texts"},
        notes=[
            "the audit case includes the split check itself",
            "large: the check alone at 10x the texts per side; the audit time there is 10x "
            "the measured audit time (linear extrapolation, not measured)",
        ],
    )
