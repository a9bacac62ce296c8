"""Membership signals for causal language models, on the probability surface.

Every score is oriented so that **higher = member**:

- ``lm-loss``: −mean next-token NLL of the sequence (Yeom et al. 2018 / Carlini et al. 2021);
- ``zlib``: −(mean token NLL, the log-perplexity) / (zlib-compressed length in bytes): the
  loss relative to a model-free measure of how predictable the text is (Carlini et al.
  2021, as MIMIR computes it); ``zlib-total``, total NLL bits over zlib bits, is the
  suite's earlier variant, kept for comparison;
- ``min-k``: mean log-probability of the k % least likely tokens (Min-K% Prob, Shi et al.
  2024; k = 20 %);
- ``reference``: NLL under a reference model minus NLL under the target (Carlini et al.
  2021/2022, "reference model" calibration): the model you give as ``--reference`` (e.g.
  the base before fine-tuning) or, without one, a model with the target's architecture and
  tokenizer, freshly initialised and trained non-privately on the **public** split only
  (never on members or non-members), so it calibrates away how easy a text is.

They need a release exposing per-token log-probabilities (``privacy_audit.targets.lm.LMRelease``).
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

import numpy as np

from privacy_audit.attacks.base import Attack
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface, TokenStats

#: Reference models by (architecture, tokenizer, public data, recipe, seed): one per run.
_REFERENCE_CACHE: dict[str, Any] = {}

REFERENCE_RECIPE = dict(epochs=5, batch_size=32, learning_rate=3e-3, max_texts=500)


def token_stats(release: ReleasedModel, texts: list[str]) -> list[TokenStats]:
    """The release's one cached forward pass per text (``ReleasedModel.token_stats``)."""
    fn = getattr(release, "token_stats", None)
    if fn is None:
        raise ValueError("this attack needs a causal language model release (per-token statistics)")
    return fn(list(texts))


def token_log_probs(release: ReleasedModel, texts: list[str]) -> list[np.ndarray]:
    """log p(x_t | x_<t) per text, read from the shared forward pass."""
    return [s.log_probs for s in token_stats(release, texts)]


def text_token_ids(release: ReleasedModel, text: str) -> list[int]:
    """Token ids of ``text`` without special tokens, from the release's tokenizer (the
    suite's ``LMTokenizer`` or a Hugging Face tokenizer); no forward pass."""
    tok = getattr(release, "tokenizer", None)
    if hasattr(tok, "token_ids"):
        return list(tok.token_ids(text))
    if hasattr(tok, "encode"):
        return list(tok.encode(text, add_special_tokens=False))
    raise ValueError("this attack needs the release's tokenizer")


def count_tokens(release: ReleasedModel, text: str) -> int:
    """Number of tokens of ``text`` without special tokens (no forward pass)."""
    return len(text_token_ids(release, text))


def loss_scores(logp: list[np.ndarray]) -> np.ndarray:
    """−mean NLL = mean log p(x_t | x_<t) per sequence."""
    return np.array([x.mean() if x.size else 0.0 for x in logp])


def zlib_bits(text: str) -> float:
    return 8.0 * len(zlib.compress(text.encode("utf-8")))


def zlib_entropy(text: str) -> int:
    """The zlib entropy of Carlini et al. 2021 (and MIMIR): the length in bytes of
    ``zlib.compress(text.encode("utf-8"))`` at the default level."""
    return len(zlib.compress(text.encode("utf-8")))


def zlib_scores(logp: list[np.ndarray], texts: list[str]) -> np.ndarray:
    """−log-perplexity / zlib entropy, as cited (Carlini et al. 2021; MIMIR's zlib attack):
    (1/T) Σ_t log p(x_t | x_<t) / zlib bytes(text), higher = member."""
    return np.array(
        [(x.mean() if x.size else 0.0) / zlib_entropy(t) for x, t in zip(logp, texts, strict=True)]
    )


def zlib_total_scores(logp: list[np.ndarray], texts: list[str]) -> np.ndarray:
    """The suite's earlier variant, kept under its own name ``zlib-total``:
    Σ_t log2 p(x_t | x_<t) / zlib bits(text) = −(total NLL in bits) / (zlib length in
    bits). It multiplies the cited score by the token count (and a constant)."""
    return np.array(
        [x.sum() / np.log(2.0) / zlib_bits(t) for x, t in zip(logp, texts, strict=True)]
    )


def min_k_scores(logp: list[np.ndarray], k: float = 0.2) -> np.ndarray:
    """Mean of the ⌈k·T⌉ *smallest* log p(x_t | x_<t) per sequence (Shi et al. 2024)."""
    if not 0 < k <= 1:
        raise ValueError(f"min-k fraction must be in (0, 1], got {k}")
    out = []
    for x in logp:
        if x.size == 0:
            out.append(0.0)
            continue
        n = max(1, int(np.ceil(k * x.size)))
        out.append(float(np.sort(x)[:n].mean()))
    return np.array(out)


class LMLossAttack(Attack):
    name = "lm-loss"
    target_kind = "lm"  # needs a causal LM release
    description = "−mean next-token NLL of the sequence (LOSS attack on a causal LM)."
    summary = "LOSS: mean token log-likelihood"
    cost = "shared forward pass"
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Mean next-token log-likelihood of the text (LOSS on a causal LM)."
    needs = ()
    cost = "1 forward pass per text, shared with zlib and min-k"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        return loss_scores(token_log_probs(release, examples.texts))


class ZlibAttack(Attack):
    name = "zlib"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "−mean token NLL (log-perplexity) / zlib-compressed length in bytes "
        "(Carlini et al. 2021, as MIMIR computes it)."
    )
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Log-likelihood relative to the zlib-compressed length (Carlini et al. 2021)."
    needs = ()
    cost = "none beyond lm-loss's forward pass"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        return zlib_scores(token_log_probs(release, examples.texts), examples.texts)


class ZlibTotalAttack(Attack):
    name = "zlib-total"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "−(total sequence NLL in bits) / (zlib-compressed length in bits): the suite's "
        "earlier zlib variant (the cited score times the token count), kept for comparison."
    )
    summary = "earlier zlib variant: total NLL bits over zlib bits (not the cited formula)"
    cost = "shared forward pass"
    requires = frozenset({Surface.PROBABILITIES})

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        return zlib_total_scores(token_log_probs(release, examples.texts), examples.texts)


class MinKAttack(Attack):
    name = "min-k"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "Mean log-probability of the 20% least likely tokens (Min-K% Prob, Shi et al. 2024)."
    )
    summary = "Min-K%: mean log-probability of the 20% least likely tokens"
    cost = "shared forward pass"
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Mean log-probability of the 20% least likely tokens (Min-K%, Shi et al. 2024)."
    needs = ()
    cost = "none beyond lm-loss's forward pass"
    k = 0.2

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        return min_k_scores(token_log_probs(release, examples.texts), self.k)


def _reference_key(release, public: Examples, seed: int) -> str:
    h = hashlib.sha256()
    h.update(release.model.config.to_json_string().encode())
    h.update("\x00".join(release.tokenizer.vocab).encode())
    h.update("\x00".join(public.texts).encode())
    h.update(repr(sorted(REFERENCE_RECIPE.items())).encode())
    h.update(str(seed).encode())
    return h.hexdigest()


def train_reference(release, public: Examples, seed: int = 0):
    """A reference LM: the target's architecture and tokenizer, fresh initialisation,
    trained non-privately on (at most ``max_texts`` of) the public split. Cached."""
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.lm import LMRelease, train_lm

    if public is None or len(public) == 0:
        raise ValueError("the reference-model attack needs a public split (data.public)")
    key = _reference_key(release, public, seed)
    if key in _REFERENCE_CACHE:
        return _REFERENCE_CACHE[key]
    import torch

    rng = np.random.default_rng([seed, 0x5EF])
    n = min(len(public), REFERENCE_RECIPE["max_texts"])
    texts = [public.texts[i] for i in np.sort(rng.choice(len(public), n, replace=False))]
    torch.manual_seed(seed + 7919)
    model = type(release.model)(release.model.config)
    train_lm(
        model,
        release.tokenizer,
        texts,
        epochs=REFERENCE_RECIPE["epochs"],
        batch_size=REFERENCE_RECIPE["batch_size"],
        learning_rate=REFERENCE_RECIPE["learning_rate"],
        max_length=release.max_length,
        seed=seed + 7919,
        device="cpu",
    )
    ref = LMRelease(
        model, release.tokenizer, release.max_length, PrivacyClaim.none("reference model")
    )
    _REFERENCE_CACHE[key] = ref
    return ref


class ReferenceAttack(Attack):
    """Needs the public split: the runner calls :meth:`prepare` with it; tests may pass a
    trained reference release directly."""

    name = "reference"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "NLL under a reference LM (the model you gave as --reference, e.g. the base before "
        "fine-tuning; without one, a small LM the suite trains on the public split) minus NLL "
        "under the target (reference-model calibration, Carlini et al. 2021)."
    )
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Target log-likelihood minus a reference LM's (Carlini et al. 2021)."
    needs = ("reference",)
    cost = "1 reference forward pass per text (the target's is shared)"

    def __init__(self, reference: ReleasedModel | None = None) -> None:
        self.reference = reference
        self.public: Examples | None = None
        self.seed = 0

    def prepare(self, public: Examples | None = None, seed: int = 0) -> None:
        self.public, self.seed = public, seed

    def reference_for(self, release) -> ReleasedModel:
        if self.reference is None:
            if self.public is None:
                raise ValueError("the reference-model attack needs a public split (data.public)")
            return train_reference(release, self.public, self.seed)
        return self.reference

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        target = loss_scores(token_log_probs(release, examples.texts))
        ref = loss_scores(token_log_probs(self.reference_for(release), examples.texts))
        return target - ref  # = NLL_ref − NLL_target


LLM_ATTACKS = (LMLossAttack, ZlibAttack, ZlibTotalAttack, MinKAttack, ReferenceAttack)
