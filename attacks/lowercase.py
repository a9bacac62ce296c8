"""Lowercase ratio (Carlini et al. 2021, "Extracting training data from large language
models", §5.2): the loss of the lowercased text divided by the loss of the original,

    score(x) = NLL(lower(x)) / NLL(x),          NLL = mean next-token NLL,

higher = member: a memorised text is much likelier in its exact casing than lowercased.
The original's NLL is read from the shared forward pass; the lowercased text costs one
more forward pass (it is a different token sequence). On a tokenizer that lowercases
(the bundled ``tiny-gpt2-word``), lower(x) and x are the same token sequence, every score
is 1 and the signal is void: the attack then reports an error instead of a chance AUC.
"""

from __future__ import annotations

import numpy as np

from privacy_audit.attacks.base import Attack
from privacy_audit.attacks.llm_membership import token_stats
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface, TokenStats


def lowercase_ratio(original: list[TokenStats], lowered: list[TokenStats]) -> np.ndarray:
    """NLL(lower(x)) / NLL(x) per text, both mean next-token NLL."""
    out = []
    for o, w in zip(original, lowered, strict=True):
        nll_o = float(np.mean(o.nll)) if len(o) else 0.0
        nll_w = float(np.mean(w.nll)) if len(w) else 0.0
        out.append(nll_w / max(nll_o, 1e-12))
    return np.array(out)


class LowercaseAttack(Attack):
    name = "lowercase"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "NLL of the lowercased text divided by the NLL of the original "
        "(lowercase ratio, Carlini et al. 2021); void on case-insensitive tokenizers."
    )
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Loss of the lowercased text over the original's (Carlini et al. 2021)."
    needs = ()
    cost = "1 forward pass of the lowercased text per text, beyond the shared pass"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        texts = list(examples.texts)
        original = token_stats(release, texts)
        lowered = token_stats(release, [t.lower() for t in texts])
        if all(
            np.array_equal(o.token_ids, w.token_ids) for o, w in zip(original, lowered, strict=True)
        ):
            raise ValueError(
                "lowercase attack is uninformative here: the tokenizer lowercases, so every "
                "text and its lowercased form are the same token sequence"
            )
        return lowercase_ratio(original, lowered)
