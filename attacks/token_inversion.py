"""Nearest-neighbour token inversion and attribute inference on released representations.

``token-inversion`` (Mai et al. Eq. 14; Qu et al. 2021): for every released per-token
embedding the adversary guesses the vocabulary token whose public embedding is nearest
in L2, x̂_t = argmin_k ‖w_k − x̃_t‖₂. Reported: the share of tokens recovered (exact
Clopper–Pearson CI, tokens treated as independent trials) and the share of texts' token
multisets recovered, against the baseline of always guessing the most frequent token of
the adversary's public data.

``output-attribute-inference``: the adversary trains a logistic-regression probe on the
released pooled output (``hidden``) of its own public examples, which it privatises
through the same release, and predicts the sensitive attribute of the audited examples;
the baseline is the majority attribute of the public data.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from attacks.base import (
    AttackContext,
    LeakageAttack,
    LeakageResult,
    mean_estimate,
    proportion_estimate,
)
from defenses.base import ReleasedModel, Surface


def nearest_token(rows: np.ndarray, vocab: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Index of the nearest vocabulary row (L2) for every row of ``rows``."""
    rows = np.asarray(rows, dtype=np.float32)
    vocab = np.asarray(vocab, dtype=np.float32)
    if rows.ndim != 2 or vocab.ndim != 2 or rows.shape[1] != vocab.shape[1]:
        raise ValueError(
            f"released token rows (shape {rows.shape}) and the vocabulary (shape "
            f"{vocab.shape}) must be 2-d with the same dimension"
        )
    v2 = np.einsum("ij,ij->i", vocab, vocab)
    out = np.empty(len(rows), dtype=np.int64)
    for i in range(0, len(rows), chunk):
        r = rows[i : i + chunk]
        # ‖w‖² − 2 w·x (‖x‖² is constant per row)
        out[i : i + chunk] = np.argmin(v2[None, :] - 2.0 * (r @ vocab.T), axis=1)
    return out


class TokenInversionAttack(LeakageAttack):
    name = "token-inversion"
    kind = "reconstruction"
    description = (
        "Nearest-neighbour inversion of released token embeddings against the public "
        "vocabulary (share of tokens recovered)."
    )
    requires = frozenset({Surface.TOKEN_HIDDEN})
    OPTIONS = {"max_texts": (int, 200), "samples": (int, 3)}

    def validate(self) -> None:
        if self.options["max_texts"] < 1:
            raise ValueError("max_texts must be >= 1")
        if self.options["samples"] < 0:
            raise ValueError("samples must be >= 0")

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        texts = (context.members.texts + context.nonmembers.texts)[: self.options["max_texts"]]
        if not texts:
            raise ValueError("token inversion needs at least one text")
        rows = release.token_hidden(texts)
        truth = release.token_ids(texts)
        vocab = release.vocabulary_embeddings()
        flat = nearest_token(np.concatenate(rows), vocab)
        bounds = np.cumsum([0] + [len(r) for r in rows])
        guesses = [flat[bounds[i] : bounds[i + 1]] for i in range(len(rows))]
        hits = np.concatenate([g == t for g, t in zip(guesses, truth, strict=True)])
        per_text = [float(np.mean(g == t)) for g, t in zip(guesses, truth, strict=True) if len(t)]
        metrics = {
            "token_recovery": proportion_estimate(int(hits.sum()), int(hits.size)),
            "text_mean_recovery": mean_estimate(per_text, seed=context.seed),
        }
        if context.public is not None and len(context.public):
            pub_ids = np.concatenate(release.token_ids(context.public.texts[:200]))
            top = Counter(pub_ids.tolist()).most_common(1)[0][0]
            all_truth = np.concatenate(truth)
            metrics["token_recovery_baseline"] = proportion_estimate(
                int((all_truth == top).sum()), int(all_truth.size)
            )
        samples = []
        for g, t in list(zip(guesses, truth, strict=True))[: self.options["samples"]]:
            samples.append(
                {
                    "original": " ".join(release.decode_tokens(t)),
                    "reconstructed": " ".join(release.decode_tokens(g)),
                }
            )
        return LeakageResult(
            self.name,
            self.kind,
            headline="token_recovery",
            metrics=metrics,
            details={"texts": len(texts), "tokens": int(hits.size), "vocabulary": int(len(vocab))},
            samples=samples,
        )


class OutputAttributeAttack(LeakageAttack):
    name = "output-attribute-inference"
    kind = "attribute-inference"
    description = (
        "Logistic-regression probe on the released pooled output, trained on the "
        "adversary's public data, predicting the sensitive attribute."
    )
    requires = frozenset({Surface.HIDDEN})
    OPTIONS = {"max_public": (int, 400)}

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        public = context.public
        target = context.members.concat(context.nonmembers)
        if public is None or public.attributes is None or target.attributes is None:
            raise ValueError("attribute inference needs public and audited data with attributes")
        pub = public.subset(np.arange(min(len(public), self.options["max_public"])))
        if len(set(pub.attributes)) < 2:
            raise ValueError("the public data has a single attribute value")
        x_pub = release.hidden(pub.texts)
        x_tgt = release.hidden(target.texts)
        scaler = StandardScaler().fit(x_pub)
        probe = LogisticRegression(max_iter=2000, C=0.05).fit(
            scaler.transform(x_pub), pub.attributes
        )
        pred = probe.predict(scaler.transform(x_tgt))
        truth = np.asarray(target.attributes)
        majority = Counter(pub.attributes).most_common(1)[0][0]
        return LeakageResult(
            self.name,
            self.kind,
            headline="attribute_accuracy",
            metrics={
                "attribute_accuracy": proportion_estimate(int((pred == truth).sum()), len(truth)),
                "attribute_accuracy_baseline": proportion_estimate(
                    int((truth == majority).sum()), len(truth)
                ),
            },
            details={"public_examples": len(pub), "classes": sorted(set(pub.attributes))},
        )


__all__ = ["OutputAttributeAttack", "TokenInversionAttack", "nearest_token"]
