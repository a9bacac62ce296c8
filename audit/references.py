"""Reference models for the user's own causal LM: RMIA and LiRA on their checkpoint.

Two sources of references (``[target] audit_dir`` only):

- **given** (``[target] reference_dirs``, ``--reference`` repeated, or by default with
  ``adapter_dir`` the adapter's base model, LoRA-Leak 2025): none of them saw the audited
  texts, so every reference is an OUT model and the attacks are the offline ones,
  ``lira-offline`` and ``rmia-offline``;
- **trained** (``[shadow] base_dir``): ``n_models`` references fine-tuned from the user's
  base model (LoRA by default, or full fine-tuning) on random halves of the pool = the
  audited candidate texts (members and non-members, unlabelled) + the ``[shadow]
  population`` texts. The inclusion design (:func:`privacy_audit.attacks.shadow.inclusion_design`) puts
  every pool text in exactly half of the references, so each audited text has IN and OUT
  references and online LiRA / RMIA run as well. Each fine-tuning is a task of the
  resumable runner (:mod:`privacy_audit.audit.scale.executors`): a run directory keeps every finished
  reference's losses, ``--resume`` reuses them, and ``[executor] kind = "ray"`` runs them
  on Ray.

The attack math is :mod:`privacy_audit.attacks.shadow` (Carlini et al. 2022; Zarifzadeh et al. 2024),
scored by :func:`privacy_audit.audit.scale.tasks.shadow_attack_record` exactly as for the suite's own
shadow models; every model (target and references) is scored by the same release code
(:func:`privacy_audit.targets.loading.load_causal_lm_release`), so every loss is taken over
the same encoding of the same text.

RMIA's z samples: the population texts when there are any (trained references), else the
audit's test texts that are not audited texts, else the audited texts themselves
(unlabelled: RMIA never sees a membership label). With γ = 1 the RMIA score is a monotone
function of the target/reference likelihood ratio, so the z set sets only its resolution.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from privacy_audit.ground.errors import AuditError, DataError

#: the offline attacks run against given references (none of them trained on the texts)
OFFLINE = ("lira-offline", "rmia-offline")
DEFAULT_LR = {"lora": 1e-3, "full": 5e-5}


def _log(msg: str, progress: bool) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


#: Offline RMIA's ``a`` on a causal LM unless ``[shadow] rmia_offline_a`` is given. RMIA's
#: p(x) = ½((1 + a)·p_OUT(x) + 1 − a) was fitted to classifier confidences near 1; a
#: sequence probability exp(−mean NLL) is ~0.01-0.3, so at the classifier default a = 0.3
#: the constant (1 − a)/2 swamps p_OUT and the score ranks like lm-loss (AUC 0.506 on a
#: LoRA fine-tune). Measured on `privacy-audit bench frontier` (docs/frontier.md,
#: a ∈ {0, 0.3, 0.5, 0.7, 0.9, 1}, 1,000 + 1,000 texts, GPT-2- and Llama-shaped, full and
#: LoRA): the AUC rises with a and both AUC and TPR at 1% FPR are highest at a = 1 in all
#: four fine-tunes (Llama full: AUC 0.765 at a = 0, 0.857 at a = 1), where p(x) = p_OUT(x)
#: and the score is the target/reference likelihood ratio.
LM_RMIA_OFFLINE_A = 1.0


def shadow_params(
    shadow: dict[str, Any] | None, n_models: int, a_given: bool = True
) -> dict[str, Any]:
    """LiRA / RMIA settings (``[shadow]`` or the defaults) for ``n_models`` references;
    ``a_given = False`` (the user set no ``rmia_offline_a``) takes the LM default
    :data:`LM_RMIA_OFFLINE_A`."""
    from privacy_audit.audit.config_schema import SCHEMA
    from privacy_audit.audit.scale.plan import lira_fixed_variance

    d = {k: v[1] for k, v in SCHEMA["shadow"].items()}
    s = {**d, **(shadow or {})}
    a = float(s["rmia_offline_a"]) if a_given else LM_RMIA_OFFLINE_A
    return {
        "n_models": n_models,
        "fixed_variance": lira_fixed_variance(s["fixed_variance"], n_models),
        "rmia_offline_a": a,
        "rmia_offline_a_source": "shadow.rmia_offline_a" if a_given else "LM default",
        "rmia_gamma": float(s["rmia_gamma"]),
    }


def _a_given(cfg) -> bool:
    return "rmia_offline_a" in ((getattr(cfg, "raw", None) or {}).get("shadow") or {})


def read_population(path: str, data_cfg: dict[str, Any]) -> list[str]:
    """The population texts of ``[shadow] population`` (a data file in any format
    :func:`privacy_audit.audit.data.read_table` reads, ``text_column`` of ``[data]``)."""
    from privacy_audit.audit.data import read_table

    rows = read_table(path, data_cfg["text_column"], None, data_cfg["id_column"])
    texts = [r["text"] for r in rows if r["text"].strip()]
    if not texts:
        raise DataError(f"shadow.population file {path!r} holds no text")
    return texts


def reference_attacks(
    target_loss: np.ndarray,
    ref_loss: np.ndarray,
    keep: np.ndarray,
    population: np.ndarray,
    attack,
    names: tuple[str, ...],
    params: dict[str, Any],
    settings,
    models: str,
) -> list[dict[str, Any]]:
    """``AttackResult`` records of ``names`` on the attack set (the pool's first
    ``len(attack)`` texts) from per-text losses of the target and the references."""
    from privacy_audit.audit.scale.tasks import shadow_attack_record

    metrics = {
        "delta": settings.delta,
        "confidence": settings.confidence,
        "bootstrap": settings.n_boot,
        "seed": settings.seed,
    }
    return [
        shadow_attack_record(
            name,
            np.asarray(target_loss, dtype=np.float64),
            np.asarray(ref_loss, dtype=np.float64),
            keep,
            population,
            [str(i) for i in attack.ids],
            [int(x) for x in attack.members],
            metrics,
            params,
            models,
        )
        for name in names
    ]


def z_pool(data, attack_texts: list[str]) -> tuple[list[str], str]:
    """Extra pool texts for RMIA's z samples when no population is given (module doc)."""
    seen = set(attack_texts)
    test = [t for t in dict.fromkeys(data.test.texts) if t not in seen] if data.test else []
    if test:
        return test, f"{len(test)} test texts that are not audited texts"
    return [], f"the {len(attack_texts)} audited texts themselves (unlabelled)"


def given_reference_attacks(
    cfg,
    release,
    refs: list[tuple[str, str, Any]],
    data,
    settings,
    executor,
    progress: bool,
    names: tuple[str, ...] = OFFLINE,
) -> tuple[list[dict], dict[str, Any]]:
    """RMIA and offline LiRA (``names``: a subset of them) against the given references
    ``(path, source, release)``."""
    from privacy_audit.audit.scale.distributed import prefill_token_stats

    attack = data.attack_set()
    texts = list(attack.texts)
    extra, z_what = z_pool(data, texts)
    pool = texts + extra
    z = np.arange(len(texts), len(pool)) if extra else np.arange(len(texts))
    ref_loss = []
    for _, _, ref in refs:
        prefill_token_stats(ref, pool, executor, progress)
        ref_loss.append(ref.loss(pool))
    target_loss = release.loss(pool)
    keep = np.zeros((len(refs), len(pool)), dtype=bool)  # every reference is OUT
    params = shadow_params(cfg.shadow, len(refs), _a_given(cfg))
    k = len(refs)
    results = reference_attacks(
        target_loss,
        np.asarray(ref_loss),
        keep,
        z,
        attack,
        tuple(n for n in OFFLINE if n in names),
        params,
        settings,
        f"against {k} given reference model{'s' if k > 1 else ''} (all OUT).",
    )
    info = {
        "kind": "given",
        "models": [{"path": p, "source": s} for p, s, _ in refs],
        "attacks": [n for n in OFFLINE if n in names],
        "rmia_z_samples": z_what,
        **{k_: v for k_, v in params.items() if k_ != "n_models"},
    }
    return results, info


# --------------------------------------------------------------------------- #
# references the suite fine-tunes from the user's base model
# --------------------------------------------------------------------------- #
def reference_tasks(cfg, pool: list[str], keep: np.ndarray, max_length: int):
    """One resumable task per reference: fine-tune reference ``i`` from ``[shadow]
    base_dir`` on ``pool[keep[i]]``, return its per-text loss on the whole pool."""
    from privacy_audit.audit.scale.executors import Task

    sh = cfg.shadow
    lr = sh["learning_rate"] or DEFAULT_LR[sh["finetune"]]
    recipe = {
        "finetune": sh["finetune"],
        "learning_rate": float(lr),
        "epochs": int(sh["epochs"]),
        "batch_size": int(sh["batch_size"]),
        "lora_rank": int(sh["lora_rank"]),
        "lora_alpha": float(sh["lora_alpha"]),
    }
    from privacy_audit.audit.scale.fingerprint import content_digest

    # the base's contents (weights, tokenizer, config) key each task: other weights under
    # the same path train other references instead of reusing stale ones
    base_content = content_digest(sh["base_dir"])
    tasks = []
    for i in range(keep.shape[0]):
        payload = {
            "base_dir": str(Path(sh["base_dir"]).resolve()),
            "base_content": base_content,
            "recipe": recipe,
            "texts": pool,
            "train": [int(j) for j in np.flatnonzero(keep[i])],
            "seed": int(cfg.seed) * 1000 + i,
            "max_length": int(max_length),
            "device": cfg.device,
            "dtype": cfg.own_model.get("dtype", "auto"),
            "batch_size": int(cfg.own_model.get("batch_size", 32)),
        }
        label = f"reference {i + 1}/{keep.shape[0]} ({recipe['finetune']})"
        tasks.append(
            Task(
                "train-reference",
                "privacy_audit.audit.references:train_reference",
                payload,
                (),
                label,
            )
        )
    return tasks, recipe


def train_reference(payload: dict[str, Any], deps: list[dict]) -> dict[str, Any]:
    """Task: fine-tune one reference from the base model; its loss on every pool text."""
    import torch

    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.lm import train_lm
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release
    from privacy_audit.targets.scoring import HFTokenizer

    r = payload["recipe"]
    loaded = load_audit_target(payload["base_dir"], "causal-lm", dtype="float32", device="cpu")
    model = loaded.model
    torch.manual_seed(payload["seed"])  # LoRA's A matrices
    if r["finetune"] == "lora":
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise AuditError(
                "shadow.finetune = 'lora' needs the 'peft' package (pip install "
                "'privacy-audit[hf]'), or set shadow.finetune = 'full'"
            ) from None
        try:
            model = get_peft_model(
                model,
                LoraConfig(
                    r=r["lora_rank"],
                    lora_alpha=r["lora_alpha"],
                    lora_dropout=0.0,
                    task_type="CAUSAL_LM",
                ),
            )
        except ValueError as exc:
            raise AuditError(
                f"LoRA cannot wrap the base model in {payload['base_dir']!r}: {exc}; set "
                "shadow.finetune = 'full'"
            ) from None
    texts = payload["texts"]
    train_texts = [texts[j] for j in payload["train"]]
    device = payload["device"]
    model.train()
    info = train_lm(
        model,
        HFTokenizer(loaded.tokenizer),
        train_texts,
        r["epochs"],
        r["batch_size"],
        r["learning_rate"],
        payload["max_length"],
        seed=payload["seed"],
        device=device,
    )
    if r["finetune"] == "lora":
        model = model.merge_and_unload()
    loaded.model = model.eval()
    release = load_causal_lm_release(
        loaded,
        payload["max_length"],
        PrivacyClaim.none("reference model"),
        device,
        batch_size=payload["batch_size"],
    )
    loss = release.loss(texts)
    return {
        "loss": [float(x) for x in loss],
        "n_train": len(train_texts),
        "final_train_loss": info["final_train_loss"],
    }


def trained_reference_attacks(
    cfg, release, data, settings, executor, run_dir, resume: bool, progress: bool
) -> tuple[list[dict], dict[str, Any]]:
    """Fine-tune ``[shadow] n_models`` references (resumable tasks), then LiRA and RMIA
    (``[shadow] attacks``; online ones too: every audited text is IN half of them)."""
    from privacy_audit.attacks.shadow import inclusion_design
    from privacy_audit.audit.scale.executors import ExecutorSpec, RunDir, make_executor, run_tasks

    sh = cfg.shadow
    attack = data.attack_set()
    texts = list(attack.texts)
    seen = set(texts)
    pop = sh["population"]
    if isinstance(pop, str):
        pop_texts = read_population(pop, cfg.data)
        pop_what = f"{pop} "
    elif pop > 0:
        if data.public is None or len(data.public) < pop:
            have = 0 if data.public is None else len(data.public)
            raise DataError(
                f"shadow.population = {pop} needs that many public examples (data.public) or "
                f"a file of population texts; the data has {have}"
            )
        pick = np.random.default_rng(cfg.seed).permutation(len(data.public))[:pop]
        pop_texts = [data.public.texts[i] for i in sorted(pick)]
        pop_what = "data.public "
    else:
        pop_texts, pop_what = [], ""
    tok, n_tok = release.tokenizer, release.max_length
    pop_texts = [t for t in dict.fromkeys(tok.truncate_text(x, n_tok) for x in pop_texts)]
    dropped = sum(t in seen for t in pop_texts)
    pop_texts = [t for t in pop_texts if t not in seen]  # an audited text is a candidate
    pool = texts + pop_texts
    z = np.arange(len(texts), len(pool))
    if any(n.startswith("rmia") for n in sh["attacks"]) and z.size == 0:
        raise DataError("RMIA needs population texts (shadow.population) beside the audited ones")
    k = int(sh["n_models"])
    keep = inclusion_design(k, len(pool), cfg.seed)
    tasks, recipe = reference_tasks(cfg, pool, keep, n_tok)
    spec = (
        executor if isinstance(executor, ExecutorSpec) else ExecutorSpec.from_config(cfg.executor)
    )
    rd = RunDir(run_dir) if run_dir is not None else None
    if rd is not None and not resume:
        rd.clear()  # a fresh run: no stale reference reused
    _log(
        f"  fine-tuning {k} reference models ({recipe['finetune']}) from {sh['base_dir']} on "
        f"random halves of {len(pool)} texts; executor {spec.kind}",
        progress,
    )
    ex = make_executor(spec)
    try:
        out = run_tasks(tasks, ex, rd, (lambda m: _log("  " + m, True)) if progress else None)
    finally:
        ex.close()
    ref_loss = np.asarray([out[t.key]["loss"] for t in tasks], dtype=np.float64)
    target_loss = release.loss(pool)
    params = shadow_params(sh, k, _a_given(cfg))
    results = reference_attacks(
        target_loss,
        ref_loss,
        keep,
        z,
        attack,
        tuple(sh["attacks"]),
        params,
        settings,
        f"against {k} reference models fine-tuned ({recipe['finetune']}) from "
        f"{Path(sh['base_dir']).name} on random halves of the audited and population texts.",
    )
    info = {
        "kind": "trained",
        "base_dir": sh["base_dir"],
        "n_models": k,
        "recipe": recipe,
        "pool": {
            "audited_texts": len(texts),
            "population_texts": len(pop_texts),
            "population_source": pop_what.strip() or None,
            "population_dropped_as_audited": int(dropped),
        },
        "inclusion": {
            "design": "each pool text is in the training set of exactly n_models / 2 references",
            "seed": cfg.seed,
            "audited_in": [int(x) for x in keep[:, : len(texts)].sum(axis=1)],
            "n_train": [int(out[t.key]["n_train"]) for t in tasks],
        },
        "final_train_loss": [float(out[t.key]["final_train_loss"]) for t in tasks],
        "attacks": list(sh["attacks"]),
        "rmia_z_samples": f"{z.size} population texts",
        **{k_: v for k_, v in params.items() if k_ != "n_models"},
    }
    return results, info


def add_to_run(run: dict, results: list[dict], aggregate_only: bool, id_salt) -> None:
    """Append reference-attack records to a run record (pseudonymised ids in
    aggregate-only mode, like every other attack) and re-pick the strongest attack."""
    from privacy_audit.audit.results import pseudonymise_ids
    from privacy_audit.audit.scale.plan import finish_run

    if aggregate_only and id_salt is not None:
        for att in results:
            if "examples" in att:
                att["examples"]["ids"] = pseudonymise_ids(att["examples"]["ids"], id_salt)
    finish_run(run, results)


__all__ = [
    "OFFLINE",
    "add_to_run",
    "given_reference_attacks",
    "read_population",
    "reference_attacks",
    "train_reference",
    "trained_reference_attacks",
]
