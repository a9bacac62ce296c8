"""One release -> attack results: ``evaluate_release`` runs the attacks on a released
model's surfaces and builds its run record; ``metric_settings`` and ``epsilon_settings``
read the config's ``[metrics]`` and ``[epsilon]`` sections."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from privacy_audit.attacks import (
    ATTACKS,
    LEAKAGE_ATTACKS,
    AttackContext,
    AttackResult,
    LeakageResult,
    MetricSettings,
    run_attack,
    run_leakage_attack,
)
from privacy_audit.audit.results import run_record
from privacy_audit.audit.timing import stage
from privacy_audit.defenses.base import ReleasedModel
from privacy_audit.stats.scores import bootstrap_progress

if TYPE_CHECKING:  # annotations only: importing config loads torch
    from privacy_audit.audit.config import AuditConfig
    from privacy_audit.audit.data import AuditData

#: From this many bootstrap resamples each attack's metrics take long enough to announce.
LONG_BOOTSTRAP = 10_000


def log_progress(msg: str, progress: bool) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


def tenths(prefix: str):
    """A bootstrap progress callback that prints one line per tenth done (a terminal and a
    CI log alike), e.g. ``attack lm-loss: bootstrap 30% (30,000 of 100,000)``."""
    shown = [0]

    def report(done: int, total: int) -> None:
        tenth = 10 * done // max(total, 1)
        if tenth > shown[0]:
            shown[0] = tenth
            print(f"{prefix} {10 * tenth}% ({done:,} of {total:,})", file=sys.stderr, flush=True)

    return report


def evaluate_release(
    name: str,
    defense: str,
    release: ReleasedModel,
    data: AuditData,
    attack_names: tuple[str, ...],
    settings: MetricSettings,
    training: dict[str, Any] | None = None,
    aggregate_only: bool = False,
    progress: bool = True,
    id_salt: bytes | None = None,
    attack_options: dict[str, dict[str, Any]] | None = None,
    attack_kwargs: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run every attack on one released model and assemble its run record.
    ``attack_kwargs`` are constructor arguments of membership attacks by name (e.g. the
    user's reference model for ``reference``)."""
    examples = data.attack_set()
    with stage("utility"):
        utility = release.evaluate_utility(data.test)
    results: list[AttackResult] = []
    leakage: list[LeakageResult] = []
    for attack_name in attack_names:
        if attack_name in LEAKAGE_ATTACKS:
            options = (attack_options or {}).get(attack_name, {})
            leak = LEAKAGE_ATTACKS[attack_name](**options)
            log_progress(f"  attack {attack_name} on {name}", progress)
            context = AttackContext(
                data.members,
                data.nonmembers,
                data.public,
                data.test,
                settings,
                settings.seed,
                dict(leak.options),
                aggregate_only,
            )
            with stage(f"attack {attack_name}"):
                leakage.append(run_leakage_attack(leak, release, context))
            continue
        kwargs = {
            **(attack_options or {}).get(attack_name, {}),  # [attacks.options.<name>]
            **(attack_kwargs or {}).get(attack_name, {}),
        }
        attack = ATTACKS[attack_name](**kwargs)
        if hasattr(attack, "prepare"):  # attacks that need side data (a reference model, ...)
            attack.prepare(public=data.public, seed=settings.seed)
        boot = getattr(settings, "n_boot", 0) or 0
        log_progress(
            f"  attack {attack_name} on {name}"
            + (f" (scores, then {boot:,} bootstrap resamples)" if boot >= LONG_BOOTSTRAP else ""),
            progress,
        )
        with stage(f"attack {attack_name}"):  # its statistics (scores, metrics, bootstrap)
            try:
                if boot >= LONG_BOOTSTRAP and progress:
                    with bootstrap_progress(tenths(f"  attack {attack_name}: bootstrap")):
                        results.append(run_attack(attack, release, examples, settings))
                else:
                    results.append(run_attack(attack, release, examples, settings))
                if boot >= LONG_BOOTSTRAP:
                    log_progress(f"  attack {attack_name} on {name}: metrics done", progress)
            except ValueError as exc:  # e.g. a surface returned NaN: record it, keep the run
                results.append(
                    AttackResult(
                        attack.name,
                        attack.description,
                        [s.value for s in attack.requires],
                        "error",
                        str(exc),
                    )
                )
    run = run_record(
        name, defense, release.claim, utility, results, training, aggregate_only, id_salt, leakage
    )
    if not aggregate_only:  # the report's most-exposed table shows each example's text
        run["example_texts"] = dict(zip(examples.ids, examples.texts, strict=True))
    return run


def metric_settings(cfg: AuditConfig) -> MetricSettings:
    """The ``[metrics]`` section as the attacks' :class:`MetricSettings`."""
    return MetricSettings(
        delta=float(cfg.metrics["delta"]),
        confidence=float(cfg.metrics["confidence"]),
        n_boot=int(cfg.metrics["bootstrap"]),
        seed=cfg.seed,
    )


def epsilon_settings(cfg: AuditConfig):
    """The ``[epsilon]`` section (with ``[metrics]`` δ and confidence) for the ε audits."""
    from privacy_audit.audit.epsilon.claimed_vs_audited import EpsilonAuditSettings

    return EpsilonAuditSettings(
        gradient_trials=cfg.epsilon.get("gradient_trials", 100_000),
        canaries=cfg.epsilon.get("canaries", 200),
        canary_kind=cfg.epsilon.get("canary_kind", "random-token"),
        canary_repeat=cfg.epsilon.get("canary_repeat", 1),
        canary_reference=cfg.epsilon.get("canary_reference", False),
        white_box_canaries=cfg.epsilon.get("white_box_canaries", 1000),
        delta=float(cfg.metrics["delta"]),
        confidence=float(cfg.metrics["confidence"]),
        seed=cfg.seed,
    )
