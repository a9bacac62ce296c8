"""Untargeted training-data extraction (Carlini et al. 2021, "Extracting training data
from large language models", §4–5).

1. Sample ``samples`` generations of ``new_tokens`` tokens from the model with no prompt
   (top-k sampling at ``temperature``).
2. Rank them by the paper's membership metrics, each oriented so that the first-ranked
   generation is the likeliest memorised one (all read from one shared forward pass of the
   generations, except the lowercase and reference ratios, which need one more pass):
   ``perplexity`` (lowest first), ``zlib`` (log-perplexity / zlib entropy, lowest first),
   ``lowercase`` (NLL(lowercased) / NLL, highest first; skipped on a lowercasing tokenizer)
   and ``reference`` (log-perplexity ratio against a reference LM trained on the public
   split, lowest first; skipped without a public split).
3. A generation is **extracted** when it contains ``min_tokens`` consecutive tokens that
   occur verbatim in a member text: an index of every member ``min_tokens``-gram (a hash
   set, O(total tokens) to build and O(generated tokens) to query, not a quadratic scan).
   n-grams that also occur in the public split are removed from the index
   (``exclude_public``): on templated text such as the fixture corpus they are generic
   phrasing, not a training record.

Reported: precision in the top ``top`` (default 100) of each ranking with its exact
(Clopper–Pearson) interval, and the **non-member control**: the same precision against an
index over the non-member texts, which the model never saw (matches there are what
sampling produces by chance or from shared phrasing). The matched strings are samples,
shown only when the run is not aggregate-only.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from privacy_audit.attacks.base import (
    AttackContext,
    LeakageAttack,
    LeakageResult,
    proportion_estimate,
)
from privacy_audit.attacks.llm_membership import text_token_ids, token_stats, zlib_bits
from privacy_audit.defenses.base import ReleasedModel, Surface

RANKINGS = ("perplexity", "zlib", "lowercase", "reference")


@torch.no_grad()
def sample_unprompted(
    release, n: int, new_tokens: int, top_k: int, temperature: float, seed: int, batch: int = 64
) -> list[list[int]]:
    """``n`` top-k samples of up to ``new_tokens`` tokens after ``<bos>`` (cut at ``<eos>``;
    ``<pad>``/``<bos>`` never sampled), all in lock-step batches with a key/value cache: the
    same distribution as ``release.generate_ids([""] * n, greedy=False, ...)`` at a fraction
    of its cost. Falls back to ``generate_ids`` for a release without a cached HF model."""
    tok, model = getattr(release, "tokenizer", None), getattr(release, "model", None)
    ids_ok = all(hasattr(tok, a) for a in ("bos_id", "eos_id", "pad_id"))
    if model is None or not ids_ok or not hasattr(model, "config"):
        return release.generate_ids(
            [""] * n, new_tokens, greedy=False, temperature=temperature, top_k=top_k, seed=seed
        )
    n_ctx = int(getattr(model.config, "n_positions", 1 << 30))
    if 1 + new_tokens > n_ctx:
        raise ValueError(f"{new_tokens} new tokens exceed the model's context length {n_ctx}")
    dev = next(model.parameters()).device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    model.eval()
    out: list[list[int]] = []
    for start in range(0, n, batch):
        b = min(batch, n - start)
        x = torch.full((b, 1), tok.bos_id, dtype=torch.long, device=dev)
        past, rows = None, [[] for _ in range(b)]
        done = torch.zeros(b, dtype=torch.bool)
        for _ in range(new_tokens):
            # transformers 5 names the key/value cache ``cache`` (``past_key_values`` before)
            res = model(
                input_ids=x, use_cache=True, **({"cache": past} if past is not None else {})
            )
            past = res["cache"] if "cache" in res else res.past_key_values
            logits = res.logits[:, -1].double().cpu() / temperature
            logits[:, tok.pad_id] = logits[:, tok.bos_id] = -math.inf
            kth = torch.topk(logits, min(top_k, logits.shape[1]), dim=-1).values[:, -1:]
            logits[logits < kth] = -math.inf
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)[:, 0]
            for i in range(b):
                if not done[i]:
                    if int(nxt[i]) == tok.eos_id:
                        done[i] = True
                    else:
                        rows[i].append(int(nxt[i]))
            if bool(done.all()):
                break
            x = nxt[:, None].to(dev)
        out.extend(rows)
    return out


def ngram_index(token_lists: list[list[int]], n: int, exclude: set | None = None) -> set:
    """Every n-gram (as a tuple) of the token lists, minus ``exclude``."""
    out = set()
    for ids in token_lists:
        for i in range(len(ids) - n + 1):
            out.add(tuple(ids[i : i + n]))
    return out - exclude if exclude else out


def first_match(ids: list[int], index: set, n: int) -> int | None:
    """Start of the first n-gram of ``ids`` found in ``index``, or None."""
    for i in range(len(ids) - n + 1):
        if tuple(ids[i : i + n]) in index:
            return i
    return None


def rank_order(score: np.ndarray) -> np.ndarray:
    """Indices from most to least likely memorised (higher score first, stable)."""
    return np.argsort(-np.asarray(score, dtype=np.float64), kind="stable")


class UntargetedExtraction(LeakageAttack):
    name = "extraction-untargeted"
    kind = "extraction"
    description = (
        "Untargeted extraction (Carlini et al. 2021): sample unprompted generations, rank by "
        "perplexity, zlib, lowercase and reference-model ratios; extracted = a verbatim "
        "≥ min_tokens match with a member text; non-member texts as the control."
    )
    requires = frozenset({Surface.GENERATION, Surface.PROBABILITIES})
    summary = "Samples unprompted generations and ranks them by perplexity, zlib and reference (Carlini et al. 2021)."
    needs = ("generation",)
    cost = "200 samples x 48 generated tokens, then 1 scoring pass each"
    OPTIONS = {
        "samples": (int, 200),
        "new_tokens": (int, 48),
        "top_k": (int, 40),
        "temperature": (float, 1.0),
        "min_tokens": (int, 10),
        "top": (int, 100),
        "exclude_public": (bool, True),
        "reference": (bool, True),
    }

    def validate(self) -> None:
        o = self.options
        for key in ("samples", "new_tokens", "top_k", "min_tokens", "top"):
            if o[key] < 1:
                raise ValueError(f"extraction-untargeted {key} must be at least 1")
        if not o["temperature"] > 0:
            raise ValueError("extraction-untargeted temperature must be positive")

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        from privacy_audit.attacks.llm_membership import loss_scores, train_reference

        tok = getattr(release, "tokenizer", None)
        if not (
            hasattr(release, "generate_ids")
            and (hasattr(tok, "token_ids") or hasattr(tok, "encode"))
        ):
            raise ValueError("extraction-untargeted needs a causal LM release with a tokenizer")
        o = self.options
        gen_ids = sample_unprompted(
            release, o["samples"], o["new_tokens"], o["top_k"], o["temperature"], context.seed
        )
        texts = [tok.decode(g) for g in gen_ids]
        keep = [i for i, t in enumerate(texts) if t.strip()]
        if not keep:
            raise ValueError("extraction-untargeted: every generation was empty")
        texts = [texts[i] for i in keep]
        ids = [text_token_ids(release, t) for t in texts]
        stats = token_stats(release, texts)
        logp = [s.log_probs for s in stats]
        scores: dict[str, np.ndarray] = {
            "perplexity": loss_scores(logp),
            "zlib": np.array(
                [x.sum() / np.log(2.0) / zlib_bits(t) for x, t in zip(logp, texts, strict=True)]
            ),
        }
        skipped: dict[str, str] = {}
        lowered = token_stats(release, [t.lower() for t in texts])
        if all(
            np.array_equal(a.token_ids, b.token_ids) for a, b in zip(stats, lowered, strict=True)
        ):
            skipped["lowercase"] = "the tokenizer lowercases"
        else:
            scores["lowercase"] = np.array(
                [
                    b.nll.mean() / max(a.nll.mean(), 1e-12)
                    for a, b in zip(stats, lowered, strict=True)
                ]
            )
        if o["reference"] and context.public is not None and len(context.public):
            ref = train_reference(release, context.public, context.seed)
            ref_nll = -loss_scores([s.log_probs for s in token_stats(ref, texts)])
            # log-perplexity ratio target/reference, lowest first
            scores["reference"] = -(-scores["perplexity"] / np.maximum(ref_nll, 1e-12))
        else:
            skipped["reference"] = "no public split for a reference model"

        n = o["min_tokens"]
        public_grams = set()
        if o["exclude_public"] and context.public is not None:
            public_grams = ngram_index(
                [text_token_ids(release, t) for t in context.public.texts], n
            )
        mem_index = ngram_index(
            [text_token_ids(release, t) for t in context.members.texts], n, public_grams
        )
        non_index = ngram_index(
            [text_token_ids(release, t) for t in context.nonmembers.texts], n, public_grams
        )
        hit_m = np.array([first_match(g, mem_index, n) is not None for g in ids])
        hit_n = np.array([first_match(g, non_index, n) is not None for g in ids])

        conf = context.settings.confidence
        top = min(o["top"], len(texts))
        metrics = {
            "extracted_rate": proportion_estimate(int(hit_m.sum()), len(texts), conf),
            "extracted_rate_baseline": proportion_estimate(int(hit_n.sum()), len(texts), conf),
        }
        for r, s in scores.items():
            order = rank_order(s)[:top]
            metrics[f"precision_top_{r}"] = proportion_estimate(
                int(hit_m[order].sum()), top, conf, top=top
            )
            metrics[f"precision_top_{r}_baseline"] = proportion_estimate(
                int(hit_n[order].sum()), top, conf, top=top
            )
        samples = []
        for i in np.flatnonzero(hit_m):
            j = first_match(ids[i], mem_index, n)
            samples.append(
                {
                    "member": True,
                    "generated": texts[i],
                    "matched": tok.decode(ids[i][j : j + n]),
                    "perplexity": float(np.exp(-scores["perplexity"][i])),
                }
            )
        return LeakageResult(
            self.name,
            self.kind,
            self.description,
            headline="extracted_rate",
            metrics=metrics,
            details={
                **{k: v for k, v in o.items()},
                "generations": len(texts),
                "distinct_extracted": int(
                    len(
                        {
                            tuple(ids[i][first_match(ids[i], mem_index, n) :][:n])
                            for i in np.flatnonzero(hit_m)
                        }
                    )
                ),
                "member_ngrams": len(mem_index),
                "nonmember_ngrams": len(non_index),
                "rankings": sorted(scores),
                "rankings_skipped": skipped,
            },
            samples=samples[:50],
        )
