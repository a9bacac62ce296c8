"""Extraction attacks on a causal LM: canary exposure and prompt-completion extraction.

``canary-exposure`` (Secret Sharer, Carlini et al. 2019). A canary is a training record
holding a random secret: by default, the first run of ≥ ``min_digits`` digits in a record
(the fixture corpus's account, order and phone numbers are drawn uniformly at random by
its generator, so a model can only predict them by memorising the record). For each canary
the secret is ranked by its NLL given the record's prefix among a **reference space** of
``candidates`` − 1 uniformly random digit strings of the same length plus the true one:

    exposure (exact)        = log2 |R| − log2 rank,          at most log2 |R|
    exposure (extrapolated) = −log2 P_{skew-normal fit}(NLL ≤ NLL(secret)),
                              the Secret Sharer's estimate over the full space of 10^L
                              secrets, capped at L·log2 10.

Member records are the canaries; the same statistic on non-member records (which the
model never saw) is the baseline: a random rank has expected exposure 1/ln 2 ≈ 1.44 bits.

``prompt-extraction`` (the DP-BloGS paper's §4.1.2, with the prompt excluded from the
match): the first ``prompt_tokens`` tokens of a record are the prompt; the attack succeeds
when the greedy (or sampled) continuation reproduces at least ``min_chars`` characters of
the record's true continuation verbatim from its start. The baseline is the rate on
non-member records, i.e. the same training procedure without the record (members and
non-members are exchangeable random draws from one corpus).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import torch

from privacy_audit.attacks.base import (
    AttackContext,
    LeakageAttack,
    LeakageResult,
    mean_estimate,
    proportion_estimate,
)
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface


def _require_lm(release: ReleasedModel) -> None:
    if not all(hasattr(release, a) for a in ("model", "tokenizer", "generate_ids")):
        raise ValueError(
            "this attack needs a causal language model release (privacy_audit.targets.lm)"
        )


def find_secret(text: str, min_digits: int) -> tuple[str, str] | None:
    """``(prefix, secret)`` for the first run of ≥ ``min_digits`` digits, or None."""
    m = re.search(r"\d{" + str(int(min_digits)) + ",}", text)
    if m is None or m.start() == 0:
        return None
    return text[: m.start()], m.group(0)


@torch.no_grad()
def secret_nll(release, prefix: str, secrets: list[str]) -> np.ndarray:
    """NLL (nats) of each secret's tokens given the prefix as the release encodes a
    prompt (``<bos> prefix``, or no BOS where the user's tokenizer adds none), one forward
    of the prefix and a key/value cache shared by all candidates."""
    tok, model = release.tokenizer, release.model
    model.eval()
    p_ids = [*getattr(tok, "prefix", [tok.bos_id]), *tok.token_ids(prefix)]
    if not p_ids:
        raise ValueError("the secret's prefix encodes to no token")
    s_ids = [tok.token_ids(s) for s in secrets]
    length = len(s_ids[0])
    if any(len(s) != length for s in s_ids):
        raise ValueError("every candidate secret must have the same number of tokens")
    n_ctx = int(model.config.n_positions)
    if len(p_ids) + length > n_ctx:
        raise ValueError(
            f"prefix of {len(p_ids)} tokens plus a {length}-token secret exceeds the model's "
            f"context length {n_ctx}"
        )
    dev = next(model.parameters()).device
    out = model(input_ids=torch.tensor([p_ids], device=dev), use_cache=True)
    first = torch.log_softmax(out.logits[0, -1].double(), -1).cpu()
    cand = torch.tensor(s_ids, device=dev)
    nll = -first[cand[:, 0].cpu()]
    if length > 1:
        res = []
        for i in range(0, len(cand), 500):
            chunk = cand[i : i + 500]
            cache = model(input_ids=torch.tensor([p_ids], device=dev), use_cache=True)
            cache = cache.past_key_values
            cache.batch_repeat_interleave(len(chunk))
            logits = model(input_ids=chunk[:, :-1], past_key_values=cache).logits.double()
            lp = torch.log_softmax(logits, -1).gather(-1, chunk[:, 1:, None])[..., 0]
            res.append(-lp.sum(1).cpu())
        nll = nll + torch.cat(res)
    return nll.numpy()


def exposure(true_nll: float, cand_nll: np.ndarray, space_bits: float) -> tuple[float, float, int]:
    """``(exact, extrapolated, rank)`` exposure of a secret with NLL ``true_nll`` among
    random candidates with NLLs ``cand_nll`` (lower NLL = more likely)."""
    from scipy.stats import skewnorm

    rank = 1 + int(np.sum(cand_nll < true_nll))
    r = len(cand_nll) + 1
    exact = math.log2(r) - math.log2(rank)
    a, loc, scale = skewnorm.fit(cand_nll)
    logcdf = float(skewnorm.logcdf(true_nll, a, loc, scale))
    extrap = (
        min(space_bits, max(0.0, -logcdf / math.log(2.0))) if np.isfinite(logcdf) else space_bits
    )
    return exact, extrap, rank


def _select(examples: Examples, min_digits: int, n: int, seed: int) -> list[tuple[str, str, str]]:
    found = []
    for i, t in zip(examples.ids, examples.texts, strict=True):
        s = find_secret(t, min_digits)
        if s is not None:
            found.append((i, *s))
    rng = np.random.default_rng(seed)
    if len(found) > n:
        found = [found[k] for k in np.sort(rng.choice(len(found), n, replace=False))]
    return found


class CanaryExposure(LeakageAttack):
    name = "canary-exposure"
    kind = "extraction"
    description = (
        "Secret Sharer exposure of random digit secrets in training records: rank of the true "
        "secret among random candidates (exact) and skew-normal extrapolation to the full space; "
        "non-member records as the baseline."
    )
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Secret Sharer exposure of random digit secrets the suite plants in training records."
    needs = ()
    cost = "1,000 candidate passes per planted secret (20 secrets)"
    OPTIONS = {
        "candidates": (int, 1000),
        "canaries": (int, 20),
        "min_digits": (int, 4),
    }

    def validate(self) -> None:
        if self.options["candidates"] < 10:
            raise ValueError("canary-exposure candidates must be at least 10")
        if self.options["canaries"] < 2:
            raise ValueError("canary-exposure canaries must be at least 2")
        if self.options["min_digits"] < 1:
            raise ValueError("canary-exposure min_digits must be at least 1")

    def _exposures(self, release, records, seed: int) -> list[dict[str, Any]]:
        rng = np.random.default_rng([seed, 0xE1])
        out = []
        for rid, prefix, secret in records:
            k = len(secret)
            cands = set()
            while len(cands) < self.options["candidates"] - 1:
                c = "".join(rng.choice(list("0123456789"), size=k))
                if c != secret:
                    cands.add(c)
            cands = sorted(cands)
            nll = secret_nll(release, prefix, [secret, *cands])
            exact, extrap, rank = exposure(float(nll[0]), nll[1:], k * math.log2(10))
            out.append(
                {"id": rid, "rank": rank, "exact": exact, "extrapolated": extrap, "digits": k}
            )
        return out

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        _require_lm(release)
        o = self.options
        mem = _select(context.members, o["min_digits"], o["canaries"], context.seed)
        non = _select(context.nonmembers, o["min_digits"], o["canaries"], context.seed + 1)
        if len(mem) < 2 or len(non) < 2:
            raise ValueError(
                f"canary-exposure needs at least 2 member and 2 non-member records with a run of "
                f"{o['min_digits']}+ digits; found {len(mem)} and {len(non)}"
            )
        em = self._exposures(release, mem, context.seed)
        en = self._exposures(release, non, context.seed + 1)
        st = context.settings
        max_bits = math.log2(o["candidates"])
        top = sum(e["rank"] == 1 for e in em)
        metrics = {
            "exposure": mean_estimate(
                [e["exact"] for e in em], st.confidence, st.n_boot, st.seed, max=max_bits
            ),
            "exposure_baseline": mean_estimate(
                [e["exact"] for e in en], st.confidence, st.n_boot, st.seed, max=max_bits
            ),
            "exposure_extrapolated": mean_estimate(
                [e["extrapolated"] for e in em], st.confidence, st.n_boot, st.seed
            ),
            "exposure_extrapolated_baseline": mean_estimate(
                [e["extrapolated"] for e in en], st.confidence, st.n_boot, st.seed
            ),
            "rank_one_rate": proportion_estimate(top, len(em), st.confidence),
            "rank_one_rate_baseline": proportion_estimate(
                sum(e["rank"] == 1 for e in en), len(en), st.confidence
            ),
        }
        return LeakageResult(
            self.name,
            self.kind,
            self.description,
            headline="exposure",
            metrics=metrics,
            details={
                "candidates": o["candidates"],
                "max_exposure_exact": max_bits,
                "random_rank_expected_exposure": 1 / math.log(2),
                "member_canaries": len(em),
                "nonmember_canaries": len(en),
            },
            samples=[{"member": True, **e} for e in em] + [{"member": False, **e} for e in en],
        )


def common_prefix_chars(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PromptExtraction(LeakageAttack):
    name = "prompt-extraction"
    kind = "extraction"
    description = (
        "Prompt the LM with a record's first tokens; success when the continuation reproduces "
        "the record's next ≥ min_chars characters verbatim (prompt excluded); non-member "
        "records as the baseline."
    )
    requires = frozenset({Surface.GENERATION})
    summary = "Prompts with a record's first tokens; success when the continuation is verbatim."
    needs = ("member-prefixes", "generation")
    cost = "50 records x 30 generated tokens (greedy)"
    OPTIONS = {
        "records": (int, 50),
        "prompt_tokens": (int, 10),
        "new_tokens": (int, 30),
        "min_chars": (int, 20),
        "greedy": (bool, True),
    }

    def validate(self) -> None:
        for key in ("records", "prompt_tokens", "new_tokens", "min_chars"):
            if self.options[key] < 1:
                raise ValueError(f"prompt-extraction {key} must be at least 1")

    def _rates(self, release, examples: Examples, seed: int) -> tuple[list[int], list[dict]]:
        o, tok = self.options, release.tokenizer
        rng = np.random.default_rng(seed)
        idx = np.arange(len(examples))
        if len(idx) > o["records"]:
            idx = np.sort(rng.choice(len(idx), o["records"], replace=False))
        hits, samples = [], []
        for i in idx:
            ids = tok.token_ids(examples.texts[i])
            if len(ids) <= o["prompt_tokens"]:
                continue
            prompt_ids, rest = ids[: o["prompt_tokens"]], ids[o["prompt_tokens"] :]
            prompt = tok.decode(prompt_ids)
            if tok.token_ids(prompt) != prompt_ids:  # decoding is lossy (e.g. <unk>)
                continue
            gen = release.generate_ids(
                [prompt], o["new_tokens"], greedy=o["greedy"], seed=seed + int(i)
            )[0]
            truth = tok.decode(rest[: o["new_tokens"]])
            made = tok.decode(gen)
            n = common_prefix_chars(made.strip(), truth.strip())
            hits.append(int(n >= o["min_chars"]))
            samples.append(
                {"id": examples.ids[i], "prompt": prompt, "generated": made, "matched_chars": n}
            )
        return hits, samples

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        _require_lm(release)
        n_ctx = int(release.model.config.n_positions)
        if self.options["prompt_tokens"] + 1 + self.options["new_tokens"] > n_ctx:
            raise ValueError(
                f"prompt of {self.options['prompt_tokens']} tokens plus {self.options['new_tokens']} "
                f"new tokens exceeds the model's context length {n_ctx}"
            )
        hm, sm = self._rates(release, context.members, context.seed)
        hn, sn = self._rates(release, context.nonmembers, context.seed + 1)
        if not hm or not hn:
            raise ValueError("prompt-extraction found no record longer than the prompt")
        conf = context.settings.confidence
        return LeakageResult(
            self.name,
            self.kind,
            self.description,
            headline="extraction_rate",
            metrics={
                "extraction_rate": proportion_estimate(sum(hm), len(hm), conf),
                "extraction_rate_baseline": proportion_estimate(sum(hn), len(hn), conf),
            },
            details={k: v for k, v in self.options.items()},
            samples=[{"member": True, **s} for s in sm[:20]]
            + [{"member": False, **s} for s in sn[:20]],
        )


EXTRACTION_ATTACKS = (CanaryExposure, PromptExtraction)
