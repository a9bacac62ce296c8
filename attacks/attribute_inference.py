"""Sensitive attribute inference from released representations (DP-Forward paper §6.4).

The adversary queries the release for the representations of an auxiliary labelled set
(the audit's public split, which it owns), trains an MLP (three tanh hidden layers, as in
the paper) to predict the sensitive attribute, and applies it to the representations of
the targets (members and non-members). Works on any release exposing
:attr:`Surface.HIDDEN`. Skewed attributes are rebalanced with imbalanced-learn's random
over-sampler before training.

Headline: balanced accuracy (mean per-class recall; chance = 1/K whatever the skew), with
a bootstrap interval; also overall accuracy and per-class recall with exact intervals, next
to the majority-class baseline (always predict the auxiliary set's most frequent value).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from privacy_audit.attacks.base import (
    AttackContext,
    LeakageAttack,
    LeakageResult,
    estimate,
    proportion_estimate,
)
from privacy_audit.defenses.base import ReleasedModel, Surface


def balanced_accuracy_estimate(
    y_true: np.ndarray, y_pred: np.ndarray, classes: list, confidence: float, n_boot: int, seed: int
) -> dict:
    """Mean per-class recall with a percentile bootstrap interval over the targets."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)

    def bal(t, p):
        rec = [np.mean(p[t == c] == c) for c in classes if np.any(t == c)]
        return float(np.mean(rec))

    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        i = rng.integers(0, len(y_true), len(y_true))
        boots.append(bal(y_true[i], y_pred[i]))
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return estimate(bal(y_true, y_pred), lo, hi, int(len(y_true)))


class AttributeInference(LeakageAttack):
    name = "attribute-inference"
    kind = "attribute-inference"
    description = (
        "Sensitive attribute inference: an MLP trained on released representations of the "
        "auxiliary (public) split predicts the targets' attribute (balanced accuracy vs chance)."
    )
    requires = frozenset({Surface.HIDDEN})
    summary = "Predicts a sensitive attribute from released representations (MLP fitted on the public split)."
    needs = ("population", "labels")
    cost = "1 forward pass per text and a small MLP fit"
    OPTIONS = {
        "n_aux": (int, 2000),
        "n_targets": (int, 1000),
        "hidden_units": (int, 64),
        "max_iter": (int, 200),
    }

    def validate(self) -> None:
        for key in self.OPTIONS:
            if self.options[key] < 1:
                raise ValueError(f"{key} must be >= 1, got {self.options[key]}")

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        from imblearn.over_sampling import RandomOverSampler
        from sklearn.neural_network import MLPClassifier
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        aux = context.public
        if aux is None or aux.attributes is None or len(aux) == 0:
            raise ValueError("attribute inference needs auxiliary (public) data with attributes")
        targets = context.members.concat(context.nonmembers)
        if targets.attributes is None:
            raise ValueError("attribute inference needs the sensitive attribute of the targets")
        rng = np.random.default_rng(context.seed)
        if len(aux) > self.options["n_aux"]:
            aux = aux.subset(np.sort(rng.choice(len(aux), self.options["n_aux"], replace=False)))
        if len(targets) > self.options["n_targets"]:
            targets = targets.subset(
                np.sort(rng.choice(len(targets), self.options["n_targets"], replace=False))
            )
        y_aux = np.asarray(aux.attributes)
        y_t = np.asarray(targets.attributes)
        classes = sorted(set(y_aux))
        if len(classes) < 2:
            raise ValueError("the auxiliary set has a single attribute value; nothing to learn")
        x_aux = release.hidden(aux.texts)
        x_t = release.hidden(targets.texts)
        counts = Counter(y_aux)
        skew = max(counts.values()) / min(counts.values())
        resampled = skew > 1.2
        if resampled:
            x_aux, y_aux = RandomOverSampler(random_state=context.seed).fit_resample(x_aux, y_aux)
        h = self.options["hidden_units"]
        clf = make_pipeline(
            StandardScaler(),
            MLPClassifier(
                hidden_layer_sizes=(h, h, h),
                activation="tanh",
                alpha=1e-3,
                max_iter=self.options["max_iter"],
                early_stopping=True,
                random_state=context.seed,
            ),
        )
        clf.fit(x_aux, y_aux)
        pred = clf.predict(x_t)
        s = context.settings
        majority = counts.most_common(1)[0][0]
        metrics = {
            "balanced_accuracy": balanced_accuracy_estimate(
                y_t, pred, classes, s.confidence, s.n_boot, context.seed
            ),
            "chance_balanced_baseline": estimate(1.0 / len(classes), n=int(len(y_t))),
            "accuracy": proportion_estimate(int((pred == y_t).sum()), len(y_t), s.confidence),
            "majority_accuracy_baseline": proportion_estimate(
                int((y_t == majority).sum()), len(y_t), s.confidence, majority=str(majority)
            ),
        }
        for c in classes:
            sel = y_t == c
            if sel.any():
                metrics[f"recall[{c}]"] = proportion_estimate(
                    int((pred[sel] == c).sum()), int(sel.sum()), s.confidence
                )
        return LeakageResult(
            self.name,
            self.kind,
            headline="balanced_accuracy",
            metrics=metrics,
            details={
                "n_aux": int(len(aux)),
                "n_targets": int(len(y_t)),
                "classes": len(classes),
                "oversampled": bool(resampled),
                "aux_skew": float(skew),
            },
        )
