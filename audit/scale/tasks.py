"""The task functions the executors run: ``fn(payload, deps) -> dict`` (audit/scale/executors.py).

- :func:`audit_trial`: train one target under one defense (one sweep point) and run its
  attacks and ε audits; returns the run record, plus the target's outputs on the shadow
  pool when shadow attacks are on.
- :func:`train_shadow`: train one shadow model on its half of the pool (same defense and
  recipe as the target: the adversary knows the training algorithm); returns its
  per-example loss on the pool.
- :func:`score_shadow_attack`: one LiRA/RMIA attack from a trial's and its shadow models'
  outputs; returns an ``AttackResult`` record.

Each function rebuilds what it needs (config, data split, pool, inclusion design) from its
payload and the seed, so it can run in any process on any node. Aggregate-only
pseudonymisation happens later, in the driver, under one per-invocation salt.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from privacy_audit.audit.timing import stage

# Set by the driver for in-process runs (never part of a payload: it changes no number).
SHOW_PROGRESS = False
_PUBLIC_STAGE: dict[str, dict] = {}  # per-process cache of public pretraining results
DATA_CACHE: dict[str, Any] = {}  # per-process cache of loaded audit data (read-only use)


def task_data(cfg):
    """The audit data for a config, loaded once per process (tasks never modify it)."""
    from privacy_audit.audit.data import load_audit_data

    stamps = []
    for k in ("corpus", "members", "nonmembers", "test", "public"):
        p = cfg.data.get(k)
        if p and p != "fixtures" and Path(p).is_file():
            st = Path(p).stat()
            stamps.append([p, st.st_mtime_ns, st.st_size])
    key = json.dumps([cfg.data, cfg.seed, stamps], sort_keys=True, default=str)
    if key not in DATA_CACHE:
        DATA_CACHE.clear()  # keep one: a process serves one audit at a time
        from privacy_audit.audit.textcap import cap_audit_data

        labels = "optional" if cfg.target.is_causal_lm else True  # LMs need no label column
        DATA_CACHE[key] = cap_audit_data(
            load_audit_data(cfg.data, cfg.seed, train=True, labels=labels), cfg.target.max_length
        )
    return DATA_CACHE[key]


def _config(payload: dict[str, Any]):
    from privacy_audit.audit.config import parse_config

    base = payload.get("base_dir")
    return parse_config(payload["config"], payload["source"], Path(base) if base else None)


def task_target(cfg, data):
    """A Target whose public pretraining (when configured) runs once per process."""
    from privacy_audit.targets.loading import Target

    target = Target(cfg.target, tuple(data.label_names), data.public, cfg.device, SHOW_PROGRESS)
    return target


def _build_with_cache(target, seed: int, inputs=None):
    if target.spec.public_epochs > 0:
        # ``inputs``: the content fingerprints of the task's inputs (model_dir weights
        # among them): other weights under the same path never reuse a pretraining
        key = hashlib.sha256(
            json.dumps(
                [repr(target.spec), list(target.label_names), seed, target.public.ids, inputs],
                default=str,
                sort_keys=True,
            ).encode()
        ).hexdigest()
        if key in _PUBLIC_STAGE:
            target._pretrained[seed] = copy.deepcopy(_PUBLIC_STAGE[key])
        model_tok = target.build(seed)
        _PUBLIC_STAGE[key] = copy.deepcopy(target._pretrained[seed])
        return model_tok
    return target.build(seed)


class _CachedTarget:
    """Wraps Target.build with the per-process public-stage cache; same interface."""

    def __init__(self, target, inputs=None):
        self._t = target
        self._inputs = inputs

    def __getattr__(self, name):
        return getattr(self._t, name)

    def build(self, seed: int):
        return _build_with_cache(self._t, seed, self._inputs)


def task_defense(cfg, payload):
    from privacy_audit.defenses import DEFENSES

    dcfg = cfg.defenses[payload["defense"]]
    return dcfg, DEFENSES[dcfg.name](**{**dcfg.params, **payload.get("params", {})})


def task_training(cfg, dcfg):
    from privacy_audit.targets.classifier import TrainingConfig

    return TrainingConfig(
        **{**cfg.train, **dcfg.train_overrides},
        max_length=cfg.target.max_length,
        device=cfg.device,
        progress=SHOW_PROGRESS,
    )


def shadow_pool(data, population: int, seed: int):
    """The population pool: the attack set (members, then non-members) followed by
    ``population`` public examples drawn with ``seed``; and the index of the latter."""
    from privacy_audit.ground.errors import DataError

    attack = data.attack_set()
    if population == 0:
        return attack, np.zeros(0, dtype=np.int64)
    if data.public is None or len(data.public) < population:
        have = 0 if data.public is None else len(data.public)
        raise DataError(
            f"shadow.population = {population} needs that many public examples (data.public); "
            f"the data has {have}"
        )
    pick = np.sort(np.random.default_rng(seed).permutation(len(data.public))[:population])
    pub = data.public.subset(pick)
    pub.members = np.zeros(len(pub), dtype=np.int64)
    pool = attack.concat(pub)
    return pool, np.arange(len(attack), len(pool), dtype=np.int64)


def _lm_canaries(target, data, eps_settings, seed: int):
    """Designed LM canaries made from the target before training (its init at the audit's
    seed, or the public-pretrained model), and the target that adds new tokens if any."""
    from privacy_audit.audit.epsilon.lm_canaries import CanaryTarget, make_lm_canaries
    from privacy_audit.ground.errors import ConfigError
    from privacy_audit.targets.lm import is_lm_target

    if not is_lm_target(target):
        raise ConfigError(
            f"'epsilon.canary_kind' = {eps_settings.canary_kind!r} is an LM canary design; "
            "the target is not a causal LM"
        )
    base_model, tokenizer = target.build(seed)
    canaries = make_lm_canaries(
        eps_settings.canaries,
        eps_settings.canary_kind,
        tokenizer,
        texts=list(data.members.texts),
        base_model=base_model,
        seed=seed,
        repeat=eps_settings.canary_repeat,
    )
    return canaries, (CanaryTarget(target, canaries.new_tokens) if canaries.new_tokens else target)


def audit_trial(payload: dict[str, Any], deps: list[dict]) -> dict[str, Any]:
    from privacy_audit.audit.epsilon.claimed_vs_audited import epsilon_audit
    from privacy_audit.audit.epsilon.input_canaries import (
        CANARY_KINDS,
        make_canaries,
        with_canaries,
    )
    from privacy_audit.audit.evaluate import epsilon_settings, evaluate_release, metric_settings
    from privacy_audit.defenses.base import Surface

    cfg = _config(payload)
    data = task_data(cfg)
    dcfg, defense = task_defense(cfg, payload)
    eps_settings = epsilon_settings(cfg)
    settings = metric_settings(cfg)
    canaries = None
    target = _CachedTarget(task_target(cfg, data), payload.get("inputs"))
    if payload["epsilon"] and eps_settings.canaries:
        if eps_settings.canary_kind in CANARY_KINDS and eps_settings.canary_repeat == 1:
            canaries = make_canaries(
                eps_settings.canaries,
                eps_settings.canary_kind,
                len(data.label_names),
                data.members.texts + data.nonmembers.texts,
                cfg.seed,
            )
        else:  # LM canary designs (audit/epsilon/lm_canaries.py), from the model before training
            canaries, target = _lm_canaries(target, data, eps_settings, cfg.seed)
            if eps_settings.canary_reference:
                # the reference: the very init the trainer starts from (its seed, new rows)
                canaries.reference = target.build(payload["seed"])[0]
    train_set = with_canaries(data.members, canaries) if canaries is not None else data.members
    start = time.perf_counter()
    training = task_training(cfg, dcfg)
    if payload["epsilon"] and eps_settings.white_box_canaries:
        # DP-SGD trainers carry Dirac gradient canaries in their real updates (one-run audit)
        training = dataclasses.replace(training, gradient_canaries=eps_settings.white_box_canaries)
    with stage("train"):
        release, report = defense.fit(target, train_set, training, payload["seed"])
    info = {**report.info, "wall_seconds": time.perf_counter() - start}
    if payload.get("sweep_seed") is not None:
        info["training_seed"] = payload["seed"]
    run = evaluate_release(
        payload["label"],
        dcfg.name,
        release,
        data,
        cfg.attacks,
        settings,
        info,
        False,  # aggregate-only pseudonymisation happens in the driver, under one salt
        SHOW_PROGRESS,
        None,
        cfg.attack_options,
    )
    if payload["epsilon"]:
        with stage("ε audits"):
            run["epsilon_audit"] = epsilon_audit(run, release, canaries, eps_settings)
    out: dict[str, Any] = {"run": run}
    shadow = payload.get("shadow")
    if shadow is not None:
        pool, _ = shadow_pool(data, shadow["population"], cfg.seed)
        if Surface.LOSS in release.surfaces:
            out["pool"] = {"loss": release.loss(pool.texts, pool.labels)}
        else:
            out["pool"] = {"unavailable": "needs loss"}
    return out


def train_shadow(payload: dict[str, Any], deps: list[dict]) -> dict[str, Any]:
    from privacy_audit.attacks.shadow import inclusion_design
    from privacy_audit.defenses.base import Surface

    cfg = _config(payload)
    data = task_data(cfg)
    dcfg, defense = task_defense(cfg, payload)
    shadow = payload["shadow"]
    pool, _ = shadow_pool(data, shadow["population"], cfg.seed)
    keep = inclusion_design(shadow["n_models"], len(pool), shadow["design_seed"])[payload["index"]]
    train = pool.subset(np.flatnonzero(keep))
    target = _CachedTarget(task_target(cfg, data), payload.get("inputs"))
    release, report = defense.fit(target, train, task_training(cfg, dcfg), payload["seed"])
    if Surface.LOSS not in release.surfaces:
        return {"unavailable": "needs loss"}
    return {"loss": release.loss(pool.texts, pool.labels), "n_train": int(keep.sum())}


def score_shadow_attack(payload: dict[str, Any], deps: list[dict]) -> dict[str, Any]:
    """``deps`` = [the audit trial, shadow model 0, 1, ...]."""
    from privacy_audit.attacks import AttackResult
    from privacy_audit.attacks.shadow import DESCRIPTIONS, inclusion_design

    name = payload["attack"]
    trial, shadows = deps[0], deps[1:]
    if "loss" not in trial.get("pool", {}) or any("loss" not in s for s in shadows):
        return AttackResult(
            name, DESCRIPTIONS[name], ["loss"], "not_applicable", "not applicable: needs loss"
        ).to_dict()
    shadow = payload["shadow"]
    n_attack = payload["n_attack"]
    target_loss = np.asarray(trial["pool"]["loss"], dtype=np.float64)
    shadow_loss = np.asarray([s["loss"] for s in shadows], dtype=np.float64)
    keep = inclusion_design(shadow["n_models"], target_loss.size, shadow["design_seed"])
    return shadow_attack_record(
        name,
        target_loss,
        shadow_loss,
        keep,
        np.arange(n_attack, target_loss.size),
        payload["ids"],
        payload["members"],
        payload["metrics"],
        shadow,
        f"{shadow['n_models']} shadow models",
    )


def shadow_attack_record(
    name: str,
    target_loss: np.ndarray,
    shadow_loss: np.ndarray,
    keep: np.ndarray,
    population: np.ndarray,
    ids: list[str],
    members: list[int],
    metrics: dict[str, Any],
    shadow: dict[str, Any],
    models: str,
) -> dict[str, Any]:
    """One LiRA / RMIA attack's ``AttackResult`` record from per-example losses: the
    target's and each shadow (reference) model's on the pool (the attack set first, its
    ``len(ids)`` examples scored), ``keep`` the inclusion mask, ``population`` the pool
    indices of RMIA's z samples. ``models`` says which models served, for the description."""
    from privacy_audit.attacks import AttackResult, MetricSettings
    from privacy_audit.attacks.shadow import (
        DESCRIPTIONS,
        lira_scores,
        logit_confidence_from_loss,
        rmia_scores,
    )

    surfaces = ["loss"]
    n_attack = len(ids)
    try:
        if name.startswith("lira"):
            scores = lira_scores(
                logit_confidence_from_loss(target_loss),
                logit_confidence_from_loss(shadow_loss),
                keep,
                online=name == "lira-online",
                fixed_variance=shadow["fixed_variance"],
            )
        else:
            scores, _ = rmia_scores(
                np.exp(-target_loss),
                np.exp(-shadow_loss),
                keep,
                population,
                online=name == "rmia-online",
                a=shadow["rmia_offline_a"],
                gamma=shadow["rmia_gamma"],
            )
        m = metrics
        result = AttackResult.from_scores(
            name,
            scores[:n_attack],
            members,
            ids,
            MetricSettings(m["delta"], m["confidence"], m["bootstrap"], m["seed"]),
            description=f"{DESCRIPTIONS[name]} {models}"
            + (
                ", fixed variance." if shadow["fixed_variance"] and name.startswith("lira") else "."
            ),
            surfaces=surfaces,
        )
    except ValueError as exc:
        return AttackResult(name, DESCRIPTIONS[name], surfaces, "error", str(exc)).to_dict()
    return result.to_dict()
