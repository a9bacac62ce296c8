"""Con-ReCall (Wang et al. 2024, "Con-ReCall: Detecting pre-training data in LLMs via
contrastive decoding"): ReCaLL's conditional likelihood, contrasted between a prefix of
known **member** texts and a prefix of known **non-member** texts.

    Con-ReCall(x) = (LL(x | P_non) − γ · LL(x | P_mem)) / LL(x),

with LL the average next-token log-likelihood of x's scored tokens (negative), LL(x) read
from the shared forward pass and γ = 0.5 (the contrast weight; Fast-MIA's default). A
member prefix raises a member's likelihood and a non-member prefix lowers it, so the
numerator is more negative for members and, divided by the negative LL(x), the score is
higher: higher = member.

Threat model: the adversary knows a few members and a few non-members (``needs`` says
so). The ``shots`` member prefixes are drawn from the audited members and the non-member
prefixes from the public split (data.public, never scored) or, without one, from the
audited non-members. A prefix never holds the text it conditions: a text that is itself
one of the drawn prefix texts is conditioned on the other ``shots`` of a pool of
``shots + 1`` (leave one out), so its own label never reaches its score. The prefix is cut
from the left by words to fit the release's context with the text (as in ReCaLL).

Cost: 2 extra forward passes per text (x after each prefix), each over prefix + text.
"""

from __future__ import annotations

import numpy as np

from privacy_audit.attacks.base import Attack
from privacy_audit.attacks.llm_membership import count_tokens, text_token_ids, token_stats
from privacy_audit.attacks.recall_mia import fit_prefix
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface

GAMMA = 0.5


def con_recall_score(
    ll_nonmember_prefix: np.ndarray,
    ll_member_prefix: np.ndarray,
    ll_unconditional: np.ndarray,
    gamma: float = GAMMA,
) -> np.ndarray:
    """(LL(x|P_non) − γ LL(x|P_mem)) / LL(x) from per-text average log-likelihoods."""
    non = np.asarray(ll_nonmember_prefix, dtype=np.float64)
    mem = np.asarray(ll_member_prefix, dtype=np.float64)
    unc = np.asarray(ll_unconditional, dtype=np.float64)
    return (non - gamma * mem) / np.minimum(unc, -1e-12)


def _pool(texts: list[str], k: int, rng) -> list[str]:
    pick = rng.permutation(len(texts))[: k + 1]
    return [texts[i] for i in pick]


def _leave_one_out(pool: list[str], text: str, k: int) -> list[str]:
    return [t for t in pool if t != text][:k]


def _fit(release, shots: list[str], text: str, max_length: int) -> str:
    """ReCaLL's :func:`fit_prefix`, then words dropped from the left until the joined text
    itself fits (a BPE can spend a token more on x's first word after a space)."""
    prefix = fit_prefix(release, shots, text, max_length)
    specials = getattr(getattr(release, "tokenizer", None), "specials", 2)
    words = prefix.split()
    while words and count_tokens(release, " ".join(words) + " " + text) + specials > max_length:
        words = words[1:]
    return " ".join(words)


def x_start(release, joined: str, prefix: str, targets: np.ndarray) -> int:
    """Index of the first of x's targets in the scored targets of ``prefix + " " + x``:
    the tokens after the prefix's own encoding (as Fast-MIA counts them; a byte-level BPE
    may split x's first word differently alone and after a space, so x's own encoding is
    not a suffix of the joined one). Raises when the prefix does not tokenize alone as it
    does at the head of the joined text."""
    ids = text_token_ids(release, joined)
    pre = text_token_ids(release, prefix)
    if ids[: len(pre)] != pre or len(ids) == len(pre):
        raise ValueError("con-recall: the prefixed text does not tokenize as prefix + text")
    xs = np.asarray(ids[len(pre) :])
    t = np.asarray(targets)
    for k in range(t.size - xs.size, -1, -1):  # x's tokens, then any trailing special
        if np.array_equal(t[k : k + xs.size], xs):
            return k
    raise ValueError("con-recall: the prefixed text does not tokenize as prefix + text")


class ConRecallAttack(Attack):
    name = "con-recall"
    target_kind = "lm"
    description = (
        "Con-ReCall (Wang et al. 2024): (LL(x | non-member prefix) − 0.5·LL(x | member "
        "prefix)) / LL(x), prefixes of known members and non-members (leave-one-out)."
    )
    summary = "Con-ReCall: likelihood after member vs non-member prefixes (Wang et al. 2024)"
    needs = ("member-prefixes", "nonmember-prefixes")
    cost = "2 extra forward passes per text (one per prefix)"
    requires = frozenset({Surface.PROBABILITIES})
    OPTIONS = {"shots": (int, 3), "gamma": (float, GAMMA)}

    def __init__(self, shots: int = 3, gamma: float = GAMMA) -> None:
        if shots < 1:
            raise ValueError(f"con-recall shots must be at least 1, got {shots}")
        if not np.isfinite(gamma) or gamma < 0:
            raise ValueError(f"con-recall gamma must be a number >= 0, got {gamma}")
        self.shots, self.gamma = int(shots), float(gamma)
        self.public: Examples | None = None
        self.seed = 0

    def prepare(self, public: Examples | None = None, seed: int = 0) -> None:
        self.public, self.seed = public, seed

    def prefix_pools(self, examples: Examples) -> tuple[list[str], list[str]]:
        """(member pool, non-member pool), ``shots + 1`` texts each, drawn with the seed."""
        if examples.members is None:
            raise ValueError("con-recall needs known members for its member prefix")
        m = np.asarray(examples.members)
        members = [t for t, y in zip(examples.texts, m, strict=True) if y == 1]
        rng = np.random.default_rng([self.seed, 0xC0DE])
        if self.public is not None and len(self.public) > self.shots:
            nonmembers = list(self.public.texts)
        else:
            nonmembers = [t for t, y in zip(examples.texts, m, strict=True) if y == 0]
        if len(members) <= self.shots or len(nonmembers) <= self.shots:
            raise ValueError(
                f"con-recall needs more than shots = {self.shots} members and non-members"
            )
        return _pool(members, self.shots, rng), _pool(nonmembers, self.shots, rng)

    def _conditional_ll(self, release, texts: list[str], pool: list[str]) -> np.ndarray:
        max_length = int(getattr(release, "max_length", 512))
        specials = getattr(getattr(release, "tokenizer", None), "specials", 2)
        joined, cache, prefixes = [], {}, {}
        for t in texts:
            shots = _leave_one_out(pool, t, self.shots)
            key = (count_tokens(release, t), tuple(shots))
            if key not in cache:  # the prefix depends on the text mostly through its length
                cache[key] = _fit(release, shots, t, max_length)
            prefix = cache[key]
            if prefix and count_tokens(release, prefix + " " + t) + specials > max_length:
                prefix = _fit(release, shots, t, max_length)  # x's first word costs a token more
            if not prefix:
                raise ValueError(
                    f"con-recall: no prefix fits the release's context of {max_length} tokens"
                )
            joined.append(prefix + " " + t)
            prefixes[joined[-1]] = prefix
        out = []
        for j, c in zip(joined, token_stats(release, joined), strict=True):
            k = x_start(release, j, prefixes[j], c.token_ids)
            out.append(float(c.log_probs[k:].mean()))
        return np.array(out)

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        texts = list(examples.texts)
        mem_pool, non_pool = self.prefix_pools(examples)
        base = token_stats(release, texts)
        unc = np.array([float(b.log_probs.mean()) for b in base])
        ll_mem = self._conditional_ll(release, texts, mem_pool)
        ll_non = self._conditional_ll(release, texts, non_pool)
        return con_recall_score(ll_non, ll_mem, unc, self.gamma)
