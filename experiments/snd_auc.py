"""``privacy-audit experiment snd-auc``: Split-N-Denoise's headline comparison — downstream
AUC (the paper's metric) beside accuracy — against its baselines at equal η:

- ``snd`` (the user-side denoiser on [e_n; X̃; Z]), and the suite's controls ``server``
  (denoiser without Z) and ``local-only`` (denoiser with e_n zeroed);
- ``tokembpriv`` (= SnD's ``none`` variant: dχ noise on token embeddings, no denoiser);
- ``text2text`` (:mod:`privacy_audit.defenses.text2text`: dχ noise then nearest-token replacement; the
  server encodes the sanitised text);
- ``clean`` (η = ∞: the frozen encoder on the clean text), the reference.

RAPT (Li et al. 2023) is not run: it prompt-tunes the server LM and pre-trains a
privatised-token reconstruction head, which does not fit the frozen-server SnD setting nor a
2-core CPU budget; its privatisation step is the Text2Text-style sanitiser measured here.

Every variant feeds the same downstream classifier (the MLP d → d → classes that SnD's
client trains) fit on the privatised training texts; metrics on one held-out test set:
macro one-vs-rest AUC (bootstrap CI over test texts) and accuracy (exact CI), per seed,
then the mean over seeds with a t interval.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from experiments.run import (
    CellStore,
    ExperimentSettings,
    accuracy_estimate,
    auc_estimate,
    fixture_split,
    seed_summary,
)

VARIANTS = ("snd", "server", "local-only", "tokembpriv", "text2text", "clean")
_SND_NAME = {"user": "snd", "server": "server", "local-only": "local-only", "none": "tokembpriv"}


def _setup(settings: ExperimentSettings) -> dict[str, Any]:
    if settings.quick:
        return {
            "n_train": settings.n_train or 32,
            "n_test": settings.n_test or 32,
            "public_examples": 32,
            "denoiser_epochs": 1,
            "classifier_epochs": 3,
            "max_length": 16,
            "etas": [100.0],
        }
    return {
        "n_train": settings.n_train or 300,
        "n_test": settings.n_test or 300,
        "public_examples": 200,
        "denoiser_epochs": 8,
        "classifier_epochs": 30,
        "max_length": 32,
        # one η (the bundled config's middle one) to fit the shared 2-core CPU; η = 30 and
        # 1000 are in the bundled `privacy-audit run split-n-denoise` (accuracy, cosine)
        "etas": [100.0],
    }


def _public(n):
    from privacy_audit import fixtures
    from privacy_audit.defenses.base import Examples

    rows = fixtures.load_corpus("public")[:n]
    labels = sorted({r["label"] for r in fixtures.load_corpus("private")})
    return Examples(
        [r["id"] for r in rows],
        [r["text"] for r in rows],
        np.array([labels.index(r["label"]) for r in rows]),
    )


def _probs(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(1, keepdims=True)


def _metrics(logits, labels, seed) -> dict[str, Any]:
    p = _probs(logits)
    return {"auc": auc_estimate(p, labels, seed=seed), "accuracy": accuracy_estimate(p, labels)}


class _Env:
    """The MiniLM target, data and classifier settings shared by all cells (built lazily)."""

    def __init__(self, setup):
        self.setup = setup
        self.train, self.test, self.labels = fixture_split(setup["n_train"], setup["n_test"])
        self._target = None

    @property
    def target(self):
        if self._target is None:
            from privacy_audit.targets.loading import Target, TargetSpec

            self._target = Target(
                TargetSpec("minilm", None, self.setup["max_length"], 0),
                self.labels,
                _public(self.setup["public_examples"]),
                "cpu",
                False,
            )
        return self._target

    @property
    def training(self):
        from privacy_audit.targets.classifier import TrainingConfig

        return TrainingConfig(
            epochs=self.setup["classifier_epochs"],
            batch_size=32,
            learning_rate=1e-3,
            max_length=self.setup["max_length"],
            progress=False,
        )

    def split(self, seed):
        from privacy_audit.defenses.split_n_denoise import SplitEncoder

        model, tokenizer = self.target.build(seed)
        base = getattr(model, "base_model", model)
        return SplitEncoder(base, tokenizer, self.setup["max_length"], "mean")


def _snd_cell(env: _Env, eta: float, seed: int) -> dict[str, Any]:
    from privacy_audit.defenses.split_n_denoise import SplitNDenoise

    start = time.perf_counter()
    defense = SplitNDenoise(
        eta=eta,
        public_examples=env.setup["public_examples"],
        denoiser_epochs=env.setup["denoiser_epochs"],
    )
    release, report = defense.fit(env.target, env.train, env.training, seed)
    out = release._run(env.test.texts)["out"]
    metrics = {
        _SND_NAME[name]: _metrics(release.classifiers[name](feats), env.test.labels, seed)
        for name, feats in out.items()
    }
    return {
        "variants": metrics,
        "per_token_epsilon": report.info["per_token_epsilon"] if hasattr(report, "info") else None,
        "seconds": time.perf_counter() - start,
    }


def _text2text_cell(env: _Env, eta: float, seed: int) -> dict[str, Any]:
    from privacy_audit.defenses.split_n_denoise import mlp_classifier
    from privacy_audit.defenses.text2text import sanitize_ids

    start = time.perf_counter()
    split = env.split(seed)
    special = set(split.tokenizer.all_special_ids)
    rng = np.random.default_rng(seed + 104729)

    def features(texts):
        ids, mask = split.tokenize(texts)
        new, stats = sanitize_ids(ids, mask, split.vocab, eta, rng, special)
        return split.server_forward(split.local_embed(new), mask), stats

    tr, stats = features(env.train.texts)
    te, _ = features(env.test.texts)
    clf = mlp_classifier(tr, env.train.labels, len(env.labels), env.training, seed)
    return {
        **_metrics(clf(te), env.test.labels, seed),
        "share_tokens_unchanged_train": stats["share_unchanged"],
        "seconds": time.perf_counter() - start,
    }


def _clean_cell(env: _Env, seed: int) -> dict[str, Any]:
    from privacy_audit.defenses.split_n_denoise import mlp_classifier

    split = env.split(seed)

    def features(texts):
        ids, mask = split.tokenize(texts)
        return split.server_forward(split.local_embed(ids), mask)

    clf = mlp_classifier(
        features(env.train.texts), env.train.labels, len(env.labels), env.training, seed
    )
    return _metrics(clf(features(env.test.texts)), env.test.labels, seed)


def run(settings: ExperimentSettings, cells: CellStore) -> dict[str, Any]:
    setup = _setup(settings)
    env = _Env(setup)
    seeds = list(range(settings.seeds))
    clean = [cells.get(f"clean-seed{s}", lambda s=s: _clean_cell(env, s)) for s in seeds]
    table: dict[str, Any] = {
        "clean (eta = inf)": {
            "auc": seed_summary([c["auc"]["value"] for c in clean]),
            "accuracy": seed_summary([c["accuracy"]["value"] for c in clean]),
            "per_seed": clean,
        }
    }
    gaps = {}
    for eta in setup["etas"]:
        snd = [
            cells.get(f"snd-eta{eta:g}-seed{s}", lambda s=s, eta=eta: _snd_cell(env, eta, s))
            for s in seeds
        ]
        t2t = [
            cells.get(
                f"text2text-eta{eta:g}-seed{s}", lambda s=s, eta=eta: _text2text_cell(env, eta, s)
            )
            for s in seeds
        ]
        per_variant = {v: [c["variants"][v] for c in snd] for v in snd[0]["variants"]}
        per_variant["text2text"] = t2t
        for v, cs in per_variant.items():
            table[f"{v} @ eta {eta:g}"] = {
                "variant": v,
                "eta": eta,
                "auc": seed_summary([c["auc"]["value"] for c in cs]),
                "accuracy": seed_summary([c["accuracy"]["value"] for c in cs]),
                "per_seed": cs,
            }
        snd_auc = [c["auc"]["value"] for c in per_variant["snd"]]
        gaps[f"{eta:g}"] = {
            f"snd - {v}": seed_summary(
                [a - c["auc"]["value"] for a, c in zip(snd_auc, per_variant[v], strict=True)]
            )
            for v in per_variant
            if v != "snd"
        }
    return {
        "setup": {
            **setup,
            "target": "all-MiniLM-L6-v2, frozen server, mean pooling",
            "seeds": seeds,
            "metric": "macro one-vs-rest AUC (4 classes) and accuracy",
            "majority_class_rate": float(np.bincount(env.test.labels).max() / len(env.test)),
            "rapt": "not run: needs prompt tuning of the server LM plus a reconstruction "
            "pre-training head (does not fit the frozen-server setting or the CPU budget)",
        },
        "rows": table,
        "snd_auc_minus_baselines": gaps,
        "summary": {
            "paper_claim": "SnD's downstream AUC is 10–22% above TokEmbPriv, Text2Text and "
            "RAPT at equal η",
        },
        "notes": [
            "CPU scale: 200 public texts to train each denoiser (the paper: ~100k), 4-class "
            "fixture task, MiniLM-L6; relative AUC gains are (snd − baseline) / baseline.",
        ],
    }
