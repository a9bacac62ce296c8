"""``privacy-audit bench byo-lm``: scoring a user's causal LM with the suite vs a plain loop.

A GPT-2-small-shaped model (124M parameters: 12 layers, d = 768, 12 heads, a 50,257-token
vocabulary; built from a config, random weights -- the speed does not depend on them)
scores ``--sequences`` texts of ``--seq-len`` tokens (2,000 x 256). Two cases on
the same model, texts and batch size, timed side by side in one run:

- ``suite``: what ``privacy-audit run --model DIR`` does for the LM membership attacks --
  tokenize (as ``tokenizer(text)`` does), one forward pass per text (length-bucketed batches) giving every text's
  :class:`~privacy_audit.defenses.base.TokenStats` (log p, mean and variance of log p per token) and its
  pooled hidden state, then the ``lm-loss``, ``zlib`` and ``min-k`` scores from them;
- ``plain``: a batched ``model(input_ids=..., attention_mask=...)`` loop over the same
  token tensors, already tokenized and padded (the cheapest way to get the logits; it
  computes no statistic).

With ``--extraction`` a third case, ``suite+extraction``, is ``suite`` with
extraction risk on: the same single forward pass also gives each record's suffix
probability under temperature 0.7, top-k 50 and top-p 0.9 (the costliest settings: a top-k
and a full sort per suffix position), with Hayes et al.'s 50-token prefix and suffix, and
the risks within 1, 10, 100 and 1,000 queries (target: at most 1.2x the time of ``suite``).

With ``--lm-reference`` two more cases score against a reference model (a
second model of the same shape, another seed: the user's base): ``plain x2`` is the plain
loop over the target and the reference, and ``suite+reference`` is the audit with a
reference: both models' single forward pass, then lm-loss, zlib, min-k, min-k++,
reference, ez-mia and informia from the two passes' statistics, and LiRA / RMIA offline
from the two losses (target: at most 1.15x the time of ``plain x2``). ``--lm-reference-only``
runs these two cases alone (a third less CPU per round).

The texts are split into chunks; the cases alternate chunk by chunk (and which goes first
rotates too), so load drifts on a shared machine hit all alike. ``--rounds R`` makes R
passes over the texts and reports each round's ratios (``suite_round_ratios``,
``reference_round_ratios``: values, median, min, max), the spread a loaded machine puts on
one figure. Reported: tokens per second of each case and the throughput ratio suite /
plain (target >= 0.9).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, CaseTiming

TARGET_RATIO = 0.9
EXTRACTION_TARGET = 1.2  # suite+extraction time / suite time
REFERENCE_TARGET = 1.15  # suite+reference time / plain x2 time
DEFAULTS = {"sequences": 2000, "seq_len": 256, "batch_size": 8, "rounds": 1}
QUICK = {"sequences": 16, "seq_len": 32, "batch_size": 4, "rounds": 1}


def round_ratios(num: list[float], den: list[float]) -> dict:
    """Per-round time ratios ``num / den`` (one round = one pass over every chunk, the cases
    side by side): the values, their median and range."""
    r = [a / b for a, b in zip(num, den, strict=True)]
    return {
        "values": r,
        "median": statistics.median(r),
        "min": min(r),
        "max": max(r),
        "rounds": len(r),
    }


def _word_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0, "<unk>": 1}
    vocab.update({f"w{i}": i for i in range(2, vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    )


def _model(quick: bool, vocab: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    # quick: a tiny smoke-test shape; otherwise GPT-2 small (124M parameters)
    dims = (
        dict(n_embd=64, n_layer=2, n_head=2, n_positions=64)
        if quick
        else dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024)
    )
    cfg = GPT2Config(vocab_size=vocab, bos_token_id=0, eos_token_id=0, **dims)
    return GPT2LMHeadModel(cfg).eval()


@dataclass(frozen=True)
class _Options:
    """What one run measures: which cases, how many texts of how many tokens, in batches of
    how many, over how many rounds."""

    extraction: bool
    with_reference: bool
    reference_only: bool
    n: int
    seq_len: int
    batch: int
    rounds: int


def _run_options(settings: BenchSettings) -> _Options:
    extra = dict(settings.extra or {})
    extraction = bool(extra.pop("extraction", False))
    with_reference = bool(extra.pop("reference", False))
    # only the two reference cases (plain x2, suite+reference): a third less CPU per round
    reference_only = bool(extra.pop("reference_only", False))
    with_reference = with_reference or reference_only
    sizes = {**(QUICK if settings.quick else DEFAULTS), **extra}
    return _Options(
        extraction=extraction,
        with_reference=with_reference,
        reference_only=reference_only,
        n=int(sizes["sequences"]),
        seq_len=int(sizes["seq_len"]),
        batch=int(sizes["batch_size"]),
        rounds=int(sizes["rounds"]),  # passes over all the texts, the cases side by side
    )


def _case_functions(model, ref_model, tok, o: _Options) -> dict[str, Callable]:
    """The timed work of each case on one chunk: ``plain`` and ``plain x2`` take the chunk's
    pre-encoded batches, ``suite`` (optionally with an extraction spec) and
    ``suite+reference`` its texts."""
    from privacy_audit.attacks.llm_membership import loss_scores, min_k_scores, zlib_scores
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.scoring import HFLMRelease

    if o.extraction:
        from privacy_audit.attacks.extraction_risk import risk_within, sequence_log_prob
    seq_len, batch = o.seq_len, o.batch
    claim = PrivacyClaim.none("bench")

    def plain(chunk_ids):
        with torch.no_grad():
            for ids, mask in chunk_ids:
                model(input_ids=ids, attention_mask=mask)

    def suite(chunk_texts, spec=None):
        rel = HFLMRelease(model, tok, seq_len, claim, batch_size=batch)
        rel.extraction = spec  # set before scoring, as the audit does
        stats = rel.token_stats(chunk_texts)
        logp = [-s.nll for s in stats]
        loss_scores(logp), zlib_scores(logp, chunk_texts), min_k_scores(logp)
        if spec is not None:
            lp = np.array([sequence_log_prob(s) for s in stats], dtype=float)
            assert np.isfinite(lp).any() or np.isneginf(lp).all()
            for q in (1, 10, 100, 1000):
                risk_within(lp, q)

    def plain2(chunk_ids):
        with torch.no_grad():
            for m in (model, ref_model):
                for ids, mask in chunk_ids:
                    m(input_ids=ids, attention_mask=mask)

    def suite_reference(chunk_texts):
        from privacy_audit.attacks.ez_mia import ez_scores
        from privacy_audit.attacks.informia import informia_scores, population_gain, token_gains
        from privacy_audit.attacks.min_k_pp import min_k_pp_scores
        from privacy_audit.attacks.shadow import (
            lira_scores,
            logit_confidence_from_loss,
            rmia_scores,
        )

        rel = HFLMRelease(model, tok, seq_len, claim, batch_size=batch)
        ref = HFLMRelease(ref_model, tok, seq_len, claim, batch_size=batch)
        stats, rstats = rel.token_stats(chunk_texts), ref.token_stats(chunk_texts)
        logp = [-s.nll for s in stats]
        loss_scores(logp), zlib_scores(logp, chunk_texts), min_k_scores(logp)
        min_k_pp_scores(stats)
        t_loss = -loss_scores(logp)
        r_loss = -loss_scores([-s.nll for s in rstats])
        _ = r_loss - t_loss  # reference
        ez_scores(stats, rstats)
        gains = token_gains(stats, rstats)
        informia_scores(gains, population_gain(gains))
        keep = np.zeros((1, len(chunk_texts)), dtype=bool)
        lira_scores(
            logit_confidence_from_loss(t_loss),
            logit_confidence_from_loss(r_loss[None]),
            keep,
            online=False,
            fixed_variance=True,
        )
        rmia_scores(
            np.exp(-t_loss), np.exp(-r_loss[None]), keep, np.arange(len(chunk_texts)), False, 1.0
        )

    return {"plain": plain, "suite": suite, "plain x2": plain2, "suite+reference": suite_reference}


def _extraction_spec(o: _Options):
    """Hayes et al.'s 50-token prefix and suffix (shorter when the texts are) at the
    costliest decoding settings: temperature 0.7, top-k 50, top-p 0.9."""
    if not o.extraction:
        return None
    from privacy_audit.targets.decoding import Decoding, ExtractionSpec

    prefix = min(50, max(1, (o.seq_len - 2) // 2))
    return ExtractionSpec(Decoding(0.7, 50, 0.9), prefix, min(50, o.seq_len - 2 - prefix))


def _chunks(texts: list[str], tok, o: _Options) -> tuple[list, list]:
    """The texts in chunks of four batches, and each chunk encoded and cut into batches for
    the plain loops (which get their tensors for free: outside the clock)."""
    chunk = o.batch * 4
    chunks = [texts[i : i + chunk] for i in range(0, o.n, chunk)]
    encoded = []
    for c in chunks:  # the plain loop gets its tensors for free (outside the clock)
        ids, mask = tok.encode(c, o.seq_len)
        encoded.append(
            [(ids[i : i + o.batch], mask[i : i + o.batch]) for i in range(0, len(c), o.batch)]
        )
    assert encoded[0][0][0].shape[1] == o.seq_len
    return chunks, encoded


def _warm_up(fns: dict, o: _Options, spec, chunks: list, encoded: list) -> list[str]:
    """Run each case once on the first batch, untimed; return the cases' names in order."""
    names = []
    if not o.reference_only:
        fns["plain"](encoded[0][:1]), fns["suite"](chunks[0][: o.batch])  # warm-up, untimed
        names += ["plain", "suite"]
    if spec is not None:
        fns["suite"](chunks[0][: o.batch], spec)
        names.append("suite+extraction")
    if o.with_reference:
        fns["plain x2"](encoded[0][:1]), fns["suite+reference"](chunks[0][: o.batch])
        names += ["plain x2", "suite+reference"]
    return names


def _chunk_order(fns: dict, o: _Options, spec, c: list, e: list) -> list[tuple[str, Callable]]:
    order = []
    if not o.reference_only:
        order.append(("plain", lambda: fns["plain"](e)))
        order.append(("suite", lambda: fns["suite"](c)))
    if spec is not None:
        order.append(("suite+extraction", lambda: fns["suite"](c, spec)))
    if o.with_reference:
        order.append(("plain x2", lambda: fns["plain x2"](e)))
        order.append(("suite+reference", lambda: fns["suite+reference"](c)))
    return order


def _timed_rounds(fns, o: _Options, spec, names, chunks, encoded, clock):
    """The cases chunk by chunk, side by side, the first case rotating from chunk to chunk so
    load drifts hit all alike: each case's timings, wall seconds and CPU seconds per round."""
    times = {k: CaseTiming(k, []) for k in names}
    wall = dict.fromkeys(names, 0.0)
    # per round (one pass over every chunk): each case's CPU seconds, for the spread of the
    # per-round ratios on a loaded machine (the totals alone hide it)
    per_round = {k: [] for k in names}
    step = 0
    for _ in range(o.rounds):
        round_s = dict.fromkeys(names, 0.0)
        for c, e in zip(chunks, encoded, strict=True):
            order = _chunk_order(fns, o, spec, c, e)
            shift = step % len(order)
            step += 1
            for name, fn in order[shift:] + order[:shift]:
                t0, w0 = clock(), time.perf_counter()
                fn()
                dt = clock() - t0
                times[name].times_s.append(dt)
                round_s[name] += dt
                wall[name] += time.perf_counter() - w0
        for k in names:
            per_round[k].append(round_s[k])
    return times, wall, per_round


def _ratios_and_targets(o: _Options, spec, setup: dict, total: dict, per_round: dict, base):
    """Each case's time over the baseline's, with the per-round spread and the targets; the
    setup gains the headline ratios of the cases that ran."""
    ratios, targets = {}, {}
    if not o.reference_only:
        ratios = {"suite": total["suite"] / total["plain"], "plain": 1.0}
        setup["suite_round_ratios"] = round_ratios(per_round["suite"], per_round["plain"])
        targets = {"suite": f"throughput >= {TARGET_RATIO}x plain"}
    if spec is not None:
        ratios["suite+extraction"] = total["suite+extraction"] / total["plain"]
        setup["extraction"] = spec.to_dict() | {"queries": [1, 10, 100, 1000]}
        setup["extraction_time_over_suite"] = total["suite+extraction"] / total["suite"]
        targets["suite+extraction"] = f"time <= {EXTRACTION_TARGET}x suite"
    if o.with_reference:
        ratios["plain x2"] = total["plain x2"] / total[base]
        ratios["suite+reference"] = total["suite+reference"] / total[base]
        setup["reference_time_over_plain_x2"] = total["suite+reference"] / total["plain x2"]
        setup["reference_round_ratios"] = round_ratios(
            per_round["suite+reference"], per_round["plain x2"]
        )
        setup["reference_signals"] = [
            "lm-loss",
            "zlib",
            "min-k",
            "min-k++",
            "reference",
            "ez-mia",
            "informia",
            "lira-offline",
            "rmia-offline",
        ]
        targets["suite+reference"] = f"time <= {REFERENCE_TARGET}x plain x2"
    return ratios, targets


def _notes(o: _Options, full_size: bool) -> list[str]:
    notes = [
        "suite: tokenize + one forward pass per text giving TokenStats (log p, mean and "
        "variance of log p over the vocabulary and the top-1 token, computed in the logits' "
        "dtype, float32 sums of 64 entries added in float64) and pooled hidden states, then lm-loss, zlib and min-k; "
        "plain: model(**batch) on pre-tokenized tensors, no statistics.",
        "Ratio = suite tokens/s over plain tokens/s (>= 0.9 is the target).",
    ]
    if not full_size:
        notes.append(
            f"REDUCED SIZE: {o.n} x {o.seq_len} tokens instead of the issue's "
            f"{DEFAULTS['sequences']} x {DEFAULTS['seq_len']}."
        )
    return notes


def run(settings: BenchSettings) -> BenchResult:
    from privacy_audit.targets.scoring import HFTokenizer

    o = _run_options(settings)
    n, seq_len = o.n, o.seq_len
    vocab = 500 if settings.quick else 50257
    torch.manual_seed(settings.seed)
    model = _model(settings.quick, vocab)
    ref_model = None
    if o.with_reference:
        torch.manual_seed(settings.seed + 1)
        ref_model = _model(settings.quick, vocab)
    tok = HFTokenizer(_word_tokenizer(vocab))
    rng = np.random.default_rng(settings.seed)
    # seq_len tokens as tokenizer(text) encodes them (this GPT-2-like tokenizer adds no
    # special token; the suite scores exactly that encoding)
    words = seq_len - tok.specials
    texts = [" ".join(f"w{int(i)}" for i in rng.integers(2, vocab, size=words)) for _ in range(n)]
    single = torch.get_num_threads() == 1
    clock = time.process_time if single else time.perf_counter
    fns = _case_functions(model, ref_model, tok, o)
    spec = _extraction_spec(o)
    chunks, encoded = _chunks(texts, tok, o)
    names = _warm_up(fns, o, spec, chunks, encoded)
    times, wall, per_round = _timed_rounds(fns, o, spec, names, chunks, encoded, clock)
    tokens = n * seq_len * o.rounds
    total = {k: sum(t.times_s) for k, t in times.items()}
    tps = {k: tokens / v for k, v in total.items()}
    base = "plain x2" if o.reference_only else "plain"
    top = "suite+reference" if o.reference_only else "suite"
    ratio = tps[top] / tps[base]
    params = sum(p.numel() for p in model.parameters())
    setup = {
        "model": "GPT-2 small shape from GPT2Config (random weights)"
        if not settings.quick
        else "tiny GPT-2",
        "parameters": int(params),
        "sequences": n,
        "seq_len": seq_len,
        "batch_size": o.batch,
        "rounds": o.rounds,
        "tokens": tokens,
        "clock": "process CPU time (1 thread)" if single else "wall time",
        "threads": torch.get_num_threads(),
        "seconds": total,
        "wall_seconds": wall,
        "tokens_per_second": tps,
        "signals": ["lm-loss", "zlib", "min-k"],
        "full_size": (n, seq_len) == (DEFAULTS["sequences"], DEFAULTS["seq_len"]),
    }
    if not o.reference_only:
        setup["throughput_ratio_suite_over_plain"] = ratio
    ratios, targets = _ratios_and_targets(o, spec, setup, total, per_round, base)
    notes = _notes(o, setup["full_size"])
    return BenchResult(
        name="byo-lm",
        reference=base,
        cases={k: t.summary() for k, t in times.items()},
        ratios=ratios,
        setup=setup,
        targets=targets,
        notes=notes + ([] if math.isfinite(ratio) else ["ratio is not finite"]),
    )
