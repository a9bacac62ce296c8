"""The audit pipeline: defense → released surfaces → attacks → scores → metrics → results.

``run_audit`` returns the results dictionary that ``results.json`` holds and the report
renders; ``write_outputs`` renders everything in memory first and then writes each file
atomically, so a failure never leaves a half-written report.

Aggregate-only mode (``[report] aggregate_only`` or ``--aggregate-only``): no training
text is ever written, and every example id is replaced by a pseudonym,
``HMAC-SHA256(salt, id)`` truncated to 16 hex digits, where ``salt`` is 32 random bytes
drawn once per invocation (one ``run``/``epsilon``/``score``) and never written anywhere.
Within one results file the same example has the same pseudonym in every run and attack;
pseudonyms from two invocations cannot be joined with each other, nor with the raw ids
(the salt is gone, so guessing an id and hashing it does not help). That is the point.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import platform
import secrets
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from attacks import (
    ATTACKS,
    LEAKAGE_ATTACKS,
    AttackContext,
    AttackResult,
    LeakageResult,
    MetricSettings,
    run_attack,
    run_leakage_attack,
)
from audit import __version__
from audit.config import AuditConfig
from audit.data import AuditData
from audit.errors import AuditError, DataError
from audit.io import atomic_write_json, dumps_json
from defenses.base import PrivacyClaim, ReleasedModel

SCHEMA_VERSION = 1
PACKAGES = (
    "torch",
    "transformers",
    "opacus",
    "dp-accounting",
    "numpy",
    "scipy",
    "scikit-learn",
    "matplotlib",
    "jinja2",
)


def environment() -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
    }


def new_id_salt() -> bytes:
    """A fresh random salt for :func:`pseudonymise_ids`; keep it in memory only."""
    return secrets.token_bytes(32)


def pseudonymise_ids(ids: list[str], salt: bytes) -> list[str]:
    """``HMAC-SHA256(salt, id)`` as 16 hex digits, for aggregate-only outputs."""
    return [hmac.new(salt, str(i).encode("utf-8"), hashlib.sha256).hexdigest()[:16] for i in ids]


def _log(msg: str, progress: bool) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


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
    utility = release.evaluate_utility(data.test)
    results: list[AttackResult] = []
    leakage: list[LeakageResult] = []
    for attack_name in attack_names:
        if attack_name in LEAKAGE_ATTACKS:
            options = (attack_options or {}).get(attack_name, {})
            leak = LEAKAGE_ATTACKS[attack_name](**options)
            _log(f"  attack {attack_name} on {name}", progress)
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
            leakage.append(run_leakage_attack(leak, release, context))
            continue
        kwargs = {
            **(attack_options or {}).get(attack_name, {}),  # [attacks.options.<name>]
            **(attack_kwargs or {}).get(attack_name, {}),
        }
        attack = ATTACKS[attack_name](**kwargs)
        if hasattr(attack, "prepare"):  # attacks that need side data (a reference model, ...)
            attack.prepare(public=data.public, seed=settings.seed)
        _log(f"  attack {attack_name} on {name}", progress)
        try:
            results.append(run_attack(attack, release, examples, settings))
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


def run_record(
    name: str,
    defense: str,
    claim: PrivacyClaim,
    utility: dict[str, Any] | None,
    results: list[AttackResult],
    training: dict[str, Any] | None = None,
    aggregate_only: bool = False,
    id_salt: bytes | None = None,
    leakage: list[LeakageResult] | None = None,
) -> dict[str, Any]:
    """One run's record. With ``aggregate_only`` the example ids are pseudonymised with
    ``id_salt`` (a fresh random salt when not given; see the module docstring) and leakage
    results drop their text samples."""
    ok = [r for r in results if r.status == "ok"]
    strongest = max(ok, key=lambda r: r.metrics["auc"]["value"]).attack if ok else None
    attacks = [r.to_dict() for r in results]
    if aggregate_only:
        salt = id_salt if id_salt is not None else new_id_salt()
        for att in attacks:
            if "examples" in att:
                att["examples"]["ids"] = pseudonymise_ids(att["examples"]["ids"], salt)
    return {
        "name": name,
        "defense": defense,
        "claim": claim.to_dict(),
        "utility": utility,
        "training": training or {},
        "attacks": attacks,
        "leakage": [r.to_dict(aggregate_only) for r in leakage or []],
        "strongest_attack": strongest,
    }


def assemble_results(
    runs: list[dict[str, Any]],
    title: str,
    seed: int,
    config: dict[str, Any],
    aggregate_only: bool = False,
) -> dict[str, Any]:
    """The results dictionary (results.json); verdicts are computed from the numbers in it."""
    from reports.verdict import compare_runs, verdict_for_run

    for run in runs:
        run["verdict"] = verdict_for_run(run)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "privacy-audit", "version": __version__},
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "title": title,
        "seed": seed,
        "config": config,
        "environment": environment(),
        "aggregate_only": aggregate_only,
        "runs": runs,
        "comparison": compare_runs(runs),
    }


def _byo_label_names(model, data_cfg: dict[str, Any]) -> list[str]:
    """Map data labels onto the model's output indices: by name, or as integer indices."""
    from audit.data import read_table

    n = int(model.config.num_labels)
    id2label = {int(k): str(v) for k, v in (model.config.id2label or {}).items()}
    names = [id2label.get(i, str(i)) for i in range(n)]
    cols = (data_cfg["text_column"], data_cfg["label_column"], data_cfg["id_column"])
    seen = {r["label"] for r in read_table(data_cfg["members"], *cols)}
    if seen <= set(names):
        return names
    if all(s.lstrip("-").isdigit() and 0 <= int(s) < n for s in seen):
        return [str(i) for i in range(n)]
    bad = sorted(seen - set(names))[0]
    raise DataError(
        f"label {bad!r} matches neither the model's label names ({', '.join(names)}) nor an index 0..{n - 1}"
    )


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
    from audit.epsilon_audit import EpsilonAuditSettings

    return EpsilonAuditSettings(
        gradient_trials=cfg.epsilon.get("gradient_trials", 100_000),
        canaries=cfg.epsilon.get("canaries", 200),
        canary_kind=cfg.epsilon.get("canary_kind", "random-token"),
        canary_repeat=cfg.epsilon.get("canary_repeat", 1),
        white_box_canaries=cfg.epsilon.get("white_box_canaries", 1000),
        delta=float(cfg.metrics["delta"]),
        confidence=float(cfg.metrics["confidence"]),
        seed=cfg.seed,
    )


def run_audit(
    cfg: AuditConfig,
    progress: bool = True,
    epsilon: bool | None = None,
    executor=None,
    run_dir: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the audit. ``epsilon`` turns the claimed-vs-audited ε audits on or off
    (default: the config's ``epsilon.enabled``). ``executor`` (an
    ``audit.executors.ExecutorSpec``; default: the config's ``[executor]``) runs the
    training tasks; ``run_dir`` keeps each finished task, and ``resume`` reuses them."""
    from audit.config import resolve_targets
    from audit.epsilon_audit import epsilon_audit

    cfg = resolve_targets(cfg)
    do_epsilon = cfg.epsilon.get("enabled", False) if epsilon is None else epsilon
    id_salt = new_id_salt() if cfg.aggregate_only else None  # never written anywhere
    eps_settings = epsilon_settings(cfg)
    settings = metric_settings(cfg)
    runs: list[dict[str, Any]] = []
    if cfg.classifier_dir is not None:  # target.audit_dir: the user's model as it is
        from audit.own_model import audit_own_model

        run, release = audit_own_model(cfg, settings, progress, id_salt, executor)
        if do_epsilon:
            _log(
                "  epsilon audits (no input canaries: the model was trained outside the suite)",
                progress,
            )
            run["epsilon_audit"] = epsilon_audit(run, release, None, eps_settings)
        runs.append(run)
    else:
        # Training audits run as tasks (audit/scaleout.py): in-process by default, or on a
        # process pool or Ray, resumable from a run directory.
        from audit.scaleout import run_planned

        return run_planned(cfg, progress, epsilon, executor, run_dir, resume)
    return assemble_results(runs, cfg.title, cfg.seed, cfg.to_dict(), cfg.aggregate_only)


def score_file(
    path: str | Path,
    delta: float,
    n_boot: int = 1000,
    seed: int = 0,
    aggregate_only: bool = False,
) -> dict[str, Any]:
    """Bring-your-own scores: a CSV with columns ``score,member`` and optional ``id``.

    ``aggregate_only`` pseudonymises the ids (see the module docstring)."""
    import csv
    import io

    p = Path(path)
    if not p.is_file():
        raise DataError(f"scores file {str(p)!r} does not exist")
    if not 0 < delta < 1:
        raise AuditError(f"--delta must be in (0, 1), got {delta}")
    try:
        # newline="": str.splitlines() would also split quoted ids on \x0c, \x85, \u2028 ...
        text = p.read_bytes().decode("utf-8-sig")
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except UnicodeDecodeError:
        raise DataError(f"scores file {str(p)!r} is not UTF-8 text") from None
    except csv.Error as exc:  # e.g. a field over the csv module's 128 KiB limit
        raise DataError(f"scores file {str(p)!r} is not valid CSV: {exc}") from None
    if not rows:
        raise DataError(f"scores file {str(p)!r} has no rows")
    for col in ("score", "member"):
        if col not in rows[0]:
            raise DataError(
                f"scores file {str(p)!r} has no column {col!r}; expected columns: score,member[,id]"
            )
    scores, members, ids = [], [], []
    for i, r in enumerate(rows, start=2):
        try:
            scores.append(float(r["score"]))
        except (TypeError, ValueError):
            raise DataError(
                f"scores file {str(p)!r} line {i}: score {r['score']!r} is not a number"
            ) from None
        m = (r["member"] or "").strip().lower()
        if m not in ("0", "1", "true", "false"):
            raise DataError(
                f"scores file {str(p)!r} line {i}: member must be 0/1 or true/false, got {r['member']!r}"
            )
        members.append(1 if m in ("1", "true") else 0)
        ids.append(r.get("id") or str(i - 2))
    if len(set(ids)) != len(ids):
        from collections import Counter

        dup = next(i for i, c in Counter(ids).items() if c > 1)
        raise DataError(f"scores file {str(p)!r} has duplicate id {dup!r}; ids must be unique")
    s = np.asarray(scores)
    if not np.all(np.isfinite(s)):
        raise DataError(
            f"scores file {str(p)!r} has {int((~np.isfinite(s)).sum())} NaN or infinite score(s)"
        )
    settings = MetricSettings(delta=delta, n_boot=n_boot, seed=seed)
    try:
        result = AttackResult.from_scores(
            "user-scores", s, members, ids, settings, "Scores supplied by the user."
        )
    except ValueError as exc:
        raise DataError(f"scores file {str(p)!r}: {exc}") from None
    run = run_record(
        p.stem,
        "user-scores",
        PrivacyClaim.none("Scores supplied by the user; no claim stated."),
        None,
        [result],
        aggregate_only=aggregate_only,
    )
    config = {
        "source": str(p),
        "command": "score",
        "delta": delta,
        "bootstrap": n_boot,
        "seed": seed,
        "aggregate_only": aggregate_only,
    }
    return assemble_results([run], f"Privacy audit of {p.name}", seed, config, aggregate_only)


def write_outputs(results: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Render the report and JSON in memory, then publish them as a pair: both
    temporaries are written first, then report.html is renamed into place and
    results.json last, so **results.json marks a finished output** (see
    :func:`audit.io.publish_together`)."""
    from audit.io import publish_together
    from reports import render_html
    from reports.html import REPORT_FILENAME

    out = Path(out_dir)
    html = render_html(results)
    payload = dumps_json(results)
    try:
        html_path, json_path = publish_together(
            out, [(REPORT_FILENAME, html), ("results.json", payload)]
        )
    except OSError as exc:
        raise AuditError(
            f"cannot write to output directory {str(out)!r}: {exc.strerror or exc}"
        ) from None
    return html_path, json_path


def check_output_dir(out_dir: str | Path) -> None:
    """Fail before any work if the output directory cannot be created or written."""
    import tempfile

    from audit.io import remove_stale_temporaries

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(out)  # left by a run killed while publishing
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise AuditError(
            f"cannot write to output directory {str(out)!r}: {exc.strerror or exc}"
        ) from None


__all__ = ["run_audit", "score_file", "write_outputs", "evaluate_release", "atomic_write_json"]
