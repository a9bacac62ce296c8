"""Plan an audit as tasks, run them on an executor, assemble ``results.json``.

The config expands into independent *audit trials* (one per defense, per sweep point
ε × seed) and, with ``[shadow]``, ``n_models`` *shadow trainings* per trial; a second
stage *scores* each shadow attack from a trial's and its shadow models' outputs. All of
them are :class:`privacy_audit.audit.scale.executors.Task` objects keyed by a hash of their inputs, so a run
directory resumes them and any executor runs them.

Sweeps: ``[sweep] defenses`` (labels), ``epsilons`` and ``seeds``. A defense that takes an
``epsilon`` parameter runs once per ε value and seed; one that does not runs once per seed.
The seed varies the model's initialisation, batches and noise; the data split, canaries
and bootstrap stay at the config's ``seed``. ``results["sweep"]`` then holds, per defense
and ε, the mean utility and attack success across seeds with a 95% Student-t interval.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privacy_audit.audit.config import AuditConfig, Trial, expand_sweep
from privacy_audit.audit.scale.executors import ExecutorSpec, RunDir, Task, make_executor, run_tasks
from privacy_audit.ground.errors import AuditError

_NOT_IN_TASKS = ("executor", "sweep", "shadow")  # never change what one task computes


def lira_fixed_variance(setting, n_models: int) -> bool:
    """``[shadow] fixed_variance``: ``"auto"`` uses one median σ below 64 shadow models,
    where per-example σ from n/2 models per side is too noisy (Carlini et al. 2022)."""
    return bool(n_models < 64) if setting == "auto" else bool(setting)


def _task_config(cfg: AuditConfig) -> dict[str, Any]:
    return {k: v for k, v in cfg.raw.items() if k not in _NOT_IN_TASKS}


def _shadow_seed(seed: int, index: int) -> int:
    h = hashlib.sha256(f"shadow:{seed}:{index}".encode()).hexdigest()
    return int(h[:8], 16)


@dataclass
class Plan:
    trials: list[Trial]
    trial_tasks: list[Task]
    shadow_tasks: dict[str, list[Task]]  # trial key -> its shadow trainings
    score_tasks: dict[str, list[Task]]  # trial key -> its shadow attacks

    @property
    def all_tasks(self) -> list[Task]:
        out = list(self.trial_tasks)
        for k in self.shadow_tasks:
            out += self.shadow_tasks[k] + self.score_tasks[k]
        return out


def plan(cfg: AuditConfig, epsilon: bool, data=None, inputs: dict | None = None) -> Plan:
    """The task graph for a config (``data``: the loaded AuditData, for shadow payloads;
    ``inputs``: :func:`privacy_audit.audit.scale.fingerprint.input_fingerprints`, computed when not
    given). Every task's key covers the contents of every input file and model directory,
    so a changed input re-runs its tasks on ``--resume``."""
    from privacy_audit.audit.scale.fingerprint import input_fingerprints, task_inputs

    if inputs is None:
        inputs = input_fingerprints(cfg)
    base = {
        "config": _task_config(cfg),
        "source": cfg.source,
        "base_dir": str(Path(cfg.source).resolve().parent) if Path(cfg.source).is_file() else None,
        "inputs": task_inputs(inputs),
    }
    shadow = None
    if cfg.shadow is not None:
        shadow = {
            "n_models": cfg.shadow["n_models"],
            "population": cfg.shadow["population"],
            "design_seed": cfg.seed,
            "fixed_variance": lira_fixed_variance(
                cfg.shadow["fixed_variance"], cfg.shadow["n_models"]
            ),
            "rmia_offline_a": float(cfg.shadow["rmia_offline_a"]),
            "rmia_gamma": float(cfg.shadow["rmia_gamma"]),
        }
    trials = expand_sweep(cfg)
    p = Plan(trials, [], {}, {})
    for tr in trials:
        payload = {
            **base,
            "defense": tr.defense,
            "params": tr.params,
            "label": tr.label,
            "seed": tr.seed,
            "sweep_seed": tr.seed if cfg.sweep is not None else None,
            "epsilon": bool(epsilon),
            "shadow": None if shadow is None else {"population": shadow["population"]},
        }
        t = Task(
            "audit-trial", "privacy_audit.audit.scale.tasks:audit_trial", payload, label=tr.label
        )
        p.trial_tasks.append(t)
        if shadow is None:
            continue
        shadows = []
        for i in range(shadow["n_models"]):
            sp = {
                **base,
                "defense": tr.defense,
                "params": tr.params,
                "seed": _shadow_seed(tr.seed, i),
                "index": i,
                "shadow": shadow,
            }
            shadows.append(
                Task(
                    "train-shadow",
                    "privacy_audit.audit.scale.tasks:train_shadow",
                    sp,
                    label=f"{tr.label} shadow {i + 1}/{shadow['n_models']}",
                )
            )
        attack = data.attack_set()
        scores = []
        for name in cfg.shadow["attacks"]:
            sp = {
                "attack": name,
                "shadow": shadow,
                "n_attack": len(attack),
                "ids": list(attack.ids),
                "members": [int(x) for x in attack.members],
                "metrics": {
                    "delta": float(cfg.metrics["delta"]),
                    "confidence": float(cfg.metrics["confidence"]),
                    "bootstrap": int(cfg.metrics["bootstrap"]),
                    "seed": cfg.seed,
                },
            }
            scores.append(
                Task(
                    "score-attack",
                    "privacy_audit.audit.scale.tasks:score_shadow_attack",
                    sp,
                    deps=(t.key, *(s.key for s in shadows)),
                    label=f"{tr.label} {name}",
                )
            )
        p.shadow_tasks[t.key] = shadows
        p.score_tasks[t.key] = scores
    return p


def _mean_ci(values: list[float]) -> dict[str, Any]:
    """Mean across seeds with a two-sided 95% Student-t interval (None for one seed)."""
    from scipy import stats

    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    if v.size == 0:
        return {"value": None, "ci_low": None, "ci_high": None, "n": 0}
    mean = float(v.mean())
    if v.size < 2:
        return {"value": mean, "ci_low": None, "ci_high": None, "n": 1}
    half = float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return {"value": mean, "ci_low": mean - half, "ci_high": mean + half, "n": int(v.size)}


def _best(run: dict, metric: str) -> float | None:
    vals = [
        a["metrics"][metric]["value"]
        for a in run.get("attacks", [])
        if a.get("status") == "ok" and a.get("metrics", {}).get(metric, {}).get("value") is not None
    ]
    return max(vals) if vals else None


def sweep_summary(cfg: AuditConfig, trials: list[Trial], runs: list[dict]) -> dict[str, Any]:
    """Privacy-utility curves: per defense and ε, means across seeds with 95% t-intervals."""
    curves: dict[str, dict] = {}
    for tr, run in zip(trials, runs, strict=True):
        c = curves.setdefault(tr.group, {"defense": tr.group, "points": {}})
        claim_eps = (run.get("claim") or {}).get("epsilon")
        key = tr.epsilon if tr.epsilon is not None else claim_eps
        pt = c["points"].setdefault(
            repr(key), {"epsilon": key, "runs": [], "utility": [], "auc": [], "tpr": []}
        )
        pt["runs"].append(run["name"])
        pt["utility"].append((run.get("utility") or {}).get("value"))
        pt["auc"].append(_best(run, "auc"))
        pt["tpr"].append(_best(run, "tpr_at_fpr_0.01"))
    out = []
    for c in curves.values():
        points = []
        for pt in c["points"].values():
            points.append(
                {
                    "epsilon": pt["epsilon"],
                    "runs": pt["runs"],
                    "utility": _mean_ci(pt["utility"]),
                    "best_auc": _mean_ci(pt["auc"]),
                    "best_tpr_at_fpr_0.01": _mean_ci(pt["tpr"]),
                }
            )
        points.sort(key=lambda p: (p["epsilon"] is None, p["epsilon"] or 0.0))
        out.append({"defense": c["defense"], "points": points})
    return {
        "seeds": list(cfg.sweep["seeds"]),
        "epsilons": cfg.sweep["epsilons"],
        "interval": "two-sided 95% Student-t interval of the mean across seeds",
        "curves": out,
    }


def finish_run(run: dict, shadow_attacks: list[dict]) -> dict:
    run["attacks"] = list(run["attacks"]) + shadow_attacks
    from privacy_audit.audit.results import battery_chance_test, pick_strongest

    picked = pick_strongest(run["attacks"])
    run["battery_chance"] = battery_chance_test(run["attacks"])
    run["strongest_attack"] = picked["attack"]
    run["strongest_attack_by_auc"] = picked["by_auc"]
    run["strongest_attack_low_fpr"] = picked["low_fpr"]
    return run


def trained_users_section(run: dict, data, cfg: AuditConfig, salt, progress: bool) -> dict:
    """The ``users`` section of a run the suite trained on data that names users
    (audit/users.py, as for an own-model audit): in place, every per-text attack (shadow
    attacks included) gets intervals that resample users; each attack is aggregated per
    user; the claim's unit decides the group-privacy note. Fresh texts are not supported
    here (the release stays in its training task), so user inference is "not tested"."""
    from privacy_audit.audit.evaluate import metric_settings
    from privacy_audit.audit.users import users_section

    examples = data.attack_set()

    def no_fresh() -> tuple[list, dict[str, Any]]:
        return [], {
            "reason": "no fresh texts (user inference from texts the model never saw runs "
            "only when auditing your own model): not tested"
        }

    return users_section(
        run,
        list(examples.groups),
        np.asarray(examples.members, dtype=np.int64),
        data.group_column,
        metric_settings(cfg),
        no_fresh,
        cfg.aggregate_only,
        salt,
        progress,
        run.get("claim"),
    )


def _aggregate_only(runs: list[dict], salt: bytes | None = None) -> None:
    from privacy_audit.audit.results import new_id_salt, pseudonymise_ids

    salt = salt or new_id_salt()  # never written anywhere
    for run in runs:
        run.pop("example_texts", None)  # training text
        for att in run["attacks"]:
            if "examples" in att:
                att["examples"]["ids"] = pseudonymise_ids(att["examples"]["ids"], salt)
        for leak in run.get("leakage", []):
            if "samples" in leak:
                leak["samples"] = []
        for a in (run.get("epsilon_audit") or {}).get("audits", []):
            if a.get("name", "").startswith("input-canaries"):
                a.pop("examples", None)  # per-canary inclusion bits: the secret record


def run_planned(
    cfg: AuditConfig,
    progress: bool = True,
    epsilon: bool | None = None,
    executor: ExecutorSpec | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Run a training audit as tasks; return the results dictionary."""
    import sys

    from privacy_audit.audit.data import load_audit_data
    from privacy_audit.audit.results import assemble_results, new_id_salt
    from privacy_audit.audit.scale import tasks as task_module
    from privacy_audit.audit.timing import Phases

    def log(msg: str) -> None:
        if progress:
            print(msg, file=sys.stderr, flush=True)

    do_epsilon = cfg.epsilon.get("enabled", False) if epsilon is None else epsilon
    labels = "optional" if cfg.target.is_causal_lm else True  # LMs need no label column
    phases = Phases()
    phases.go("load", "data")
    data = load_audit_data(cfg.data, cfg.seed, train=True, labels=labels)  # fails before any task
    if cfg.shadow is not None:
        task_module.shadow_pool(data, cfg.shadow["population"], cfg.seed)
    from privacy_audit.audit.scale.fingerprint import input_fingerprints, record_inputs

    inputs = input_fingerprints(cfg)
    the_plan = plan(cfg, do_epsilon, data, inputs)
    spec = executor or ExecutorSpec.from_config(cfg.executor)
    rd = RunDir(run_dir) if run_dir is not None else None
    if rd is not None and not resume:
        rd.clear()
    n_shadow = sum(len(v) for v in the_plan.shadow_tasks.values())
    log(
        f"data: {len(data.members)} members, {len(data.nonmembers)} non-members, "
        f"{len(data.test)} test, {len(data.public) if data.public else 0} public; "
        f"target {cfg.target.describe()}; {len(the_plan.trial_tasks)} audit trial(s)"
        + (f", {n_shadow} shadow model(s)" if n_shadow else "")
        + f"; executor {spec.kind}"
        + (f" ({spec.workers} workers)" if spec.workers else "")
    )
    from privacy_audit.audit.data import log_duplicates

    log_duplicates(data, progress)
    ex = make_executor(spec)
    task_module.DATA_CACHE.clear()  # in-process tasks reload the data once per run
    task_module.SHOW_PROGRESS = progress and spec.kind == "local" and (spec.workers or 1) <= 1
    fresh_dir = rd is not None and not rd.path.exists()
    try:
        record_inputs(rd, inputs, resume, log)
        phases.go(
            "train + attack",
            f"{len(the_plan.trial_tasks)} trial(s)"
            + (f", {n_shadow} shadow model(s)" if n_shadow else ""),
        )
        stage1 = list(the_plan.trial_tasks)
        for v in the_plan.shadow_tasks.values():
            stage1 += v
        results = run_tasks(stage1, ex, rd, log if progress else None)
        stage2 = [t for v in the_plan.score_tasks.values() for t in v]
        if stage2:
            phases.go("shadow scoring")
            results = run_tasks(stage2, ex, rd, log if progress else None, results)
    except AuditError:
        # bad input found inside a task: leave no run directory behind if nothing finished
        if fresh_dir and not any(rd.tasks.glob("*.json")):
            shutil.rmtree(rd.path, ignore_errors=True)
        raise
    finally:
        task_module.SHOW_PROGRESS = False
        ex.close()
        phases.done()
    phases.go("verdicts")
    runs = []
    salt = new_id_salt() if cfg.aggregate_only else None  # never written anywhere
    for t in the_plan.trial_tasks:
        run = results[t.key]["run"]
        shadow = [results[s.key] for s in the_plan.score_tasks.get(t.key, [])]
        run = finish_run(run, shadow)
        run["exact_duplicates"] = data.exact_duplicates
        if data.members.groups is not None:  # [data] group: the users section, as own-model
            run["users"] = trained_users_section(run, data, cfg, salt, progress)
        runs.append(run)
    if cfg.aggregate_only:
        _aggregate_only(runs, salt)
    out = assemble_results(runs, cfg.title, cfg.seed, cfg.to_dict(), cfg.aggregate_only)
    if cfg.sweep is not None:
        out["sweep"] = sweep_summary(cfg, the_plan.trials, runs)
    phases.go("utility floor")
    _lm_utility_floor(cfg, data, out)
    if cfg.bench:
        from privacy_audit.audit.cost_of_privacy_table import cost_table_from_bench_json

        out["cost_of_privacy"] = cost_table_from_bench_json(cfg.bench)
    phases.done()
    return out


def pretrained_only_utility(cfg, data=None) -> dict | None:
    """Perplexity of the public-pretrained model (seed ``cfg.seed``) on the test texts;
    None when the config has no public pretraining. ``data`` (the audit's loaded data)
    avoids loading it again."""
    from privacy_audit.audit.data import load_audit_data
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.lm import LMRelease
    from privacy_audit.targets.loading import Target

    if cfg.target.public_epochs <= 0:
        return None
    if data is None:
        data = load_audit_data(cfg.data, cfg.seed, train=True)
    target = Target(cfg.target, tuple(data.label_names), data.public, cfg.device, False)
    model, tokenizer = target.build(cfg.seed)
    release = LMRelease(
        model,
        tokenizer,
        cfg.target.max_length,
        PrivacyClaim.none("public pretraining only"),
        cfg.device,
    )
    return release.evaluate_utility(data.test)


def _lm_utility_floor(cfg, data, out: dict) -> None:
    """For an LM target the suite trains: the unigram perplexity floor on the test texts
    (defenses/lm_baselines.py) and, per run, whether its perplexity CI is below it."""
    from privacy_audit.targets.lm import LM_PRESETS, build_lm_target

    if cfg.target.preset not in LM_PRESETS or cfg.target.model_dir:
        return
    from privacy_audit.defenses.lm_baselines import beats_floor, utility_floor

    _, tokenizer = build_lm_target(cfg.target.preset, cfg.seed)
    public = list(data.public.texts) if data.public is not None else []
    floor = utility_floor(
        tokenizer, public, list(data.members.texts), list(data.test.texts), cfg.target.max_length
    )
    floor["public_pretraining_epochs"] = cfg.target.public_epochs
    floor["claims_scope"] = (
        "DP claims cover the private fine-tuning data (members) only; the public pretraining "
        "data is not covered and needs no protection"
        if cfg.target.public_epochs > 0
        else "no public pretraining: DP models are trained from random initialisation"
    )
    start = None
    if cfg.target.public_epochs > 0:
        # the model every run starts from: a private fine-tuning must end below it to have
        # learned anything from the members (the utility floor for pretrained targets)
        start = pretrained_only_utility(cfg, data)
        floor["public_start"] = start
    out["utility_floor"] = floor
    for run in out["runs"]:
        u = run.get("utility")
        if isinstance(u, dict):
            u["unigram_floor"] = floor["floor"]
            u["beats_unigram_floor"] = beats_floor(u, floor["floor"])
            if start is not None:
                u["public_start"] = {k: start.get(k) for k in ("value", "ci_low", "ci_high")}
                hi = u.get("ci_high")
                u["beats_public_start"] = bool(
                    isinstance(hi, (int, float))
                    and start.get("ci_low") is not None
                    and hi < start["ci_low"]
                )
