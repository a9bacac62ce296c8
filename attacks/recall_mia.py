"""ReCaLL (Xie et al. 2024, "ReCaLL: Membership inference via relative conditional
log-likelihoods").

    score(x) = LL(x | P) / LL(x),

where LL is the average next-token log-likelihood of x's scored tokens (negative),
unconditional (x as the release encodes it) or conditioned on a prefix P of ``shots`` known **non-member** texts.
The paper's finding: a non-member prefix lowers the likelihood of member text more than
that of non-member text, so LL(x|P) ≪ LL(x) for members and the ratio (both logs
negative) is larger: higher = member, as in the paper.

The prefix is drawn from the audit's **public split** (data.public): texts disjoint from
the members and non-members that are never scored, so the prefix cannot carry a scored
example. When prefix + x would exceed the release's context (``max_length``), the prefix
is cut from the left by whole words (all scored texts share the same shots). LL(x) is read
from the shared forward pass; the conditioned text costs one more forward pass per text.
Token alignment assumes the tokenizer splits ``prefix + " " + x`` at the boundary (true for
word- and character-level tokenizers); a mismatch is reported as an error, never guessed.
"""

from __future__ import annotations

import numpy as np

from privacy_audit.attacks.base import Attack
from privacy_audit.attacks.llm_membership import count_tokens, token_stats
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface


def recall_ratio(conditional_ll: np.ndarray, unconditional_ll: np.ndarray) -> np.ndarray:
    """LL(x|P) / LL(x) from per-text average log-likelihoods (both < 0)."""
    c = np.asarray(conditional_ll, dtype=np.float64)
    u = np.asarray(unconditional_ll, dtype=np.float64)
    return c / np.minimum(u, -1e-12)


def fit_prefix(release: ReleasedModel, shots: list[str], text: str, max_length: int) -> str:
    """The shots joined by spaces, cut from the left by words to fit ``max_length`` with
    the text and the special tokens of the release's encoding."""
    words = " ".join(shots).split()
    specials = getattr(getattr(release, "tokenizer", None), "specials", 2)  # <bos> .. <eos>
    budget = max_length - specials - count_tokens(release, text)
    lo = 0
    while lo < len(words) and count_tokens(release, " ".join(words[lo:])) > budget:
        lo += 1
    return " ".join(words[lo:])


class RecallAttack(Attack):
    name = "recall"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "ReCaLL (Xie et al. 2024): average log-likelihood of x after a prefix of known "
        "non-member (public-split) texts divided by its unconditional average log-likelihood."
    )
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Log-likelihood after known non-member prefixes over the unconditional one (ReCaLL, Xie et al. 2024)."
    needs = ("nonmember-prefixes",)
    cost = "1 forward pass of prefix + text per text, beyond the shared pass"
    OPTIONS = {"shots": (int, 3)}

    def __init__(self, shots: int = 3, prefix: list[str] | None = None) -> None:
        if shots < 1:
            raise ValueError(f"recall shots must be at least 1, got {shots}")
        self.shots = shots
        self.prefix_texts = list(prefix) if prefix is not None else None
        self.seed = 0

    def prepare(self, public: Examples | None = None, seed: int = 0) -> None:
        if self.prefix_texts is None and public is not None and len(public):
            rng = np.random.default_rng([seed, 0x2ECA])
            pick = rng.permutation(len(public))[: self.shots]
            self.prefix_texts = [public.texts[i] for i in pick]
        self.seed = seed

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        if not self.prefix_texts:
            raise ValueError("recall needs non-member prefix texts: a public split (data.public)")
        texts = list(examples.texts)
        max_length = int(getattr(release, "max_length", 512))
        base = token_stats(release, texts)
        joined, by_budget = [], {}
        for t in texts:
            n = count_tokens(release, t)
            if n not in by_budget:  # the prefix depends on the text only through its length
                by_budget[n] = fit_prefix(release, self.prefix_texts, t, max_length)
            p = by_budget[n]
            if not p:
                raise ValueError(
                    f"recall: no prefix fits the release's context of {max_length} tokens"
                )
            joined.append(p + " " + t)
        cond = token_stats(release, joined)
        c_ll, u_ll = [], []
        for b, c in zip(base, cond, strict=True):
            n = len(b)
            if n == 0 or len(c) < n or not np.array_equal(c.token_ids[-n:], b.token_ids):
                raise ValueError("recall: the prefixed text does not tokenize as prefix + text")
            c_ll.append(float(c.log_probs[-n:].mean()))
            u_ll.append(float(b.log_probs.mean()))
        return recall_ratio(np.array(c_ll), np.array(u_ll))
