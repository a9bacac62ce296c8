"""Stacked membership inference on a causal LM: the DP-BloGS paper's evaluation (§4.1.1),
with its calibration leak fixed.

Features per example (all from the released model, white-box for the gradient norm):
the LOSS, zlib, Min-K% and reference-model signals (``privacy_audit.attacks.llm_membership``), and over
the sequence's positions the mean confidence (max next-token probability), mean predictive
entropy, mean logit margin (true token's logit minus the best other logit) and the L2 norm
of the sequence-loss gradient.

Pipeline (``imblearn.pipeline.Pipeline``, so SMOTE touches training folds only):
median imputation → StandardScaler → mutual-information feature selection → SMOTE
(imbalanced-learn) → a scikit-learn ``StackingClassifier`` (logistic-regression
meta-learner) over a random forest, a logistic regression and an MLP, each tuned by
``RandomizedSearchCV`` (ROC AUC, stratified folds) → sigmoid calibration.

Cross-fitting keeps every split honest: the examples are cut into ``folds`` stratified
folds; for each, the model is **fitted** on part of the other folds, **calibrated** on the
remaining part of the other folds, and scores the held-out fold (**evaluation**). So the
calibration split is never the evaluation split (the paper's code fitted
``CalibratedClassifierCV(cv="prefit")`` on its test split), and every example gets a score
from a model that never saw it. ``last_splits`` records the indices for inspection.
Scores are calibrated member probabilities (higher = member).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from privacy_audit.attacks.base import Attack
from privacy_audit.attacks.llm_membership import (
    ReferenceAttack,
    loss_scores,
    min_k_scores,
    token_log_probs,
    zlib_scores,
)
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface

FEATURES = (
    "loss",
    "zlib",
    "min_k",
    "reference",
    "confidence",
    "entropy",
    "logit_margin",
    "gradient_norm",
)


@torch.no_grad()
def _position_features(release, texts: list[str]) -> np.ndarray:
    """Per text: mean max-probability, mean entropy, mean (true logit − best other logit)."""
    from privacy_audit.targets.lm import trim

    model, rows = release.model, []
    model.eval()
    for i in range(0, len(texts), 32):
        ids, mask = release.encode(texts[i : i + 32])
        ids, mask = trim(ids, mask)
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].double()
        target = ids[:, 1:]
        valid = mask[:, 1:].double()
        logp = torch.log_softmax(logits, -1)
        conf = logp.max(-1).values.exp()
        ent = -(logp.exp() * logp).sum(-1)
        true = logits.gather(-1, target[..., None])[..., 0]
        other = logits.scatter(-1, target[..., None], -torch.inf).max(-1).values
        margin = true - other
        n = valid.sum(1).clamp(min=1)
        rows.append(
            torch.stack(
                [(conf * valid).sum(1) / n, (ent * valid).sum(1) / n, (margin * valid).sum(1) / n],
                1,
            ).numpy()
        )
    return np.concatenate(rows)


def _gradient_norms(release, texts: list[str]) -> np.ndarray:
    from privacy_audit.attacks.grad_norm import gradient_norms

    return gradient_norms(release, texts)


def membership_features(
    release: ReleasedModel, examples: Examples, reference: ReleasedModel | None
) -> tuple[np.ndarray, list[str]]:
    """Feature matrix (n, k) and feature names; ``reference`` None drops that feature."""
    texts = list(examples.texts)
    logp = token_log_probs(release, texts)
    cols = [loss_scores(logp), zlib_scores(logp, texts), min_k_scores(logp)]
    names = ["loss", "zlib", "min_k"]
    if reference is not None:
        cols.append(cols[0] - loss_scores(token_log_probs(reference, texts)))
        names.append("reference")
    pos = _position_features(release, texts)
    cols += [pos[:, 0], pos[:, 1], pos[:, 2], _gradient_norms(release, texts)]
    names += ["confidence", "entropy", "logit_margin", "gradient_norm"]
    return np.column_stack(cols), names


def _stratified_folds(members: np.ndarray, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    folds: list[list[int]] = [[] for _ in range(k)]
    for cls in (0, 1):
        idx = rng.permutation(np.flatnonzero(members == cls))
        for j, part in enumerate(np.array_split(idx, k)):
            folds[j].extend(part.tolist())
    return [np.sort(np.array(f, dtype=np.int64)) for f in folds]


def _split_fit_calibration(
    idx: np.ndarray, members: np.ndarray, frac: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    fit, cal = [], []
    for cls in (0, 1):
        part = rng.permutation(idx[members[idx] == cls])
        n_cal = max(1, int(round(frac * len(part))))
        cal.extend(part[:n_cal].tolist())
        fit.extend(part[n_cal:].tolist())
    return np.sort(np.array(fit, np.int64)), np.sort(np.array(cal, np.int64))


class StackedAttack(Attack):
    name = "stacked"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "Stacked MIA (the DP-BloGS paper's, leak fixed): 8 LM features, imputation, scaling, "
        "MI feature selection, SMOTE, RF/LR/MLP tuned by randomised search, stacking, sigmoid "
        "calibration on a split disjoint from the evaluation fold (cross-fitted)."
    )
    requires = frozenset({Surface.PROBABILITIES})
    summary = (
        "Cross-fitted stacked classifier over 8 LM signals (DP-BloGS's evaluation, leak fixed)."
    )
    needs = ("gradients",)
    cost = "1 forward + 1 backward pass per text (and a reference pass when given), then a randomised model search (minutes)"

    def __init__(
        self,
        folds: int = 3,
        n_iter: int = 4,
        select_k: int = 6,
        calibration_fraction: float = 0.25,
        reference: ReleasedModel | None = None,
        seed: int = 0,
        inner_folds: int = 3,
    ) -> None:
        if folds < 2:
            raise ValueError(f"stacked MIA needs at least 2 folds, got {folds}")
        if not 0 < calibration_fraction < 1:
            raise ValueError("calibration_fraction must be in (0, 1)")
        if inner_folds < 2:
            raise ValueError(f"stacked MIA needs at least 2 inner folds, got {inner_folds}")
        self.folds, self.n_iter, self.select_k = folds, n_iter, select_k
        self.inner_folds = inner_folds
        self.calibration_fraction = calibration_fraction
        self._reference = ReferenceAttack(reference)
        self.seed = seed
        self.last_splits: list[dict[str, np.ndarray]] = []
        self.feature_names: list[str] = []

    def prepare(self, public: Examples | None = None, seed: int = 0) -> None:
        self._reference.prepare(public, seed)
        self.seed = seed

    def _model(self, n_features: int, seed: int):
        from imblearn.over_sampling import SMOTE
        from imblearn.pipeline import Pipeline
        from scipy.stats import loguniform, randint
        from sklearn.ensemble import RandomForestClassifier, StackingClassifier
        from sklearn.feature_selection import SelectKBest, mutual_info_classif
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import RandomizedSearchCV, StratifiedKFold
        from sklearn.neural_network import MLPClassifier
        from sklearn.preprocessing import StandardScaler

        cv = StratifiedKFold(self.inner_folds, shuffle=True, random_state=seed)

        def search(est, dist):
            return RandomizedSearchCV(
                est, dist, n_iter=self.n_iter, scoring="roc_auc", cv=cv, random_state=seed
            )

        rf = search(
            RandomForestClassifier(n_estimators=40, random_state=seed),
            {"max_depth": [3, 5, 8, None], "min_samples_leaf": randint(1, 10)},
        )
        lr = search(LogisticRegression(max_iter=2000), {"C": loguniform(1e-3, 1e2)})
        mlp = search(
            MLPClassifier(max_iter=300, random_state=seed),
            {"hidden_layer_sizes": [(16,), (32,), (16, 16)], "alpha": loguniform(1e-5, 1e-1)},
        )
        stack = StackingClassifier(
            [("rf", rf), ("lr", lr), ("mlp", mlp)],
            final_estimator=LogisticRegression(max_iter=2000),
            cv=StratifiedKFold(self.inner_folds, shuffle=True, random_state=seed + 1),
        )
        mi = lambda X, y: mutual_info_classif(X, y, random_state=seed)  # noqa: E731
        return Pipeline(
            [
                ("impute", SimpleImputer(strategy="median")),
                ("scale", StandardScaler()),
                ("select", SelectKBest(mi, k=min(self.select_k, n_features))),
                ("smote", SMOTE(random_state=seed, k_neighbors=3)),
                ("stack", stack),
            ]
        )

    def score_features(self, X: np.ndarray, members: np.ndarray) -> np.ndarray:
        """Cross-fitted, calibrated member probabilities for a feature matrix."""
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.frozen import FrozenEstimator

        members = np.asarray(members, dtype=np.int64)
        if len(np.unique(members)) != 2:
            raise ValueError("stacked MIA needs both members and non-members")
        if min(np.bincount(members)) < 4 * self.folds:
            raise ValueError(f"stacked MIA needs at least {4 * self.folds} members and non-members")
        rng = np.random.default_rng([self.seed, 0x57AC])
        out = np.full(len(members), np.nan)
        self.last_splits = []
        for k, evaluation in enumerate(_stratified_folds(members, self.folds, rng)):
            rest = np.setdiff1d(np.arange(len(members)), evaluation)
            fit, cal = _split_fit_calibration(rest, members, self.calibration_fraction, rng)
            model = self._model(X.shape[1], self.seed + k)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X[fit], members[fit])
                calibrated = CalibratedClassifierCV(FrozenEstimator(model), method="sigmoid")
                calibrated.fit(X[cal], members[cal])
                out[evaluation] = calibrated.predict_proba(X[evaluation])[:, 1]
            self.last_splits.append({"fit": fit, "calibration": cal, "evaluation": evaluation})
        return out

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        if examples.members is None:
            raise ValueError("stacked MIA needs the member labels of the audit examples")
        try:
            ref = self._reference.reference_for(release)
        except ValueError:
            ref = None  # no public split: the reference feature is left out
        X, self.feature_names = membership_features(release, examples, ref)
        return self.score_features(X, examples.members)


def splits_are_disjoint(splits: list[dict[str, np.ndarray]], n: int) -> bool:
    """Fit, calibration and evaluation disjoint in every fold; evaluation folds partition
    the n examples."""
    seen = np.concatenate([s["evaluation"] for s in splits])
    if len(seen) != n or len(np.unique(seen)) != n:
        return False
    for s in splits:
        f, c, e = (set(s[k].tolist()) for k in ("fit", "calibration", "evaluation"))
        if f & c or f & e or c & e:
            return False
    return True


__all__ = ["FEATURES", "StackedAttack", "membership_features", "splits_are_disjoint"]
