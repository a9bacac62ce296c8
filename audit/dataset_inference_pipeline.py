"""Dataset inference (``privacy-audit dataset-inference``, whose flags and outputs are
:mod:`privacy_audit.audit.commands.dataset_inference`): was this set of documents used to
train the model?

Loads the user's causal LM (and optional reference LM) as ``run --model`` does, reads the
suspect and validation texts, cuts them to ``max_length`` tokens (the texts as scored),
runs the split check on suspect vs validation (a shifted pair gets no p-value: the test's
assumption fails), computes every text's token statistics once (locally or on Ray actors
with ``--executor ray``) and runs :class:`privacy_audit.attacks.dataset_inference.DatasetInference`.

Config form (``privacy-audit dataset-inference CONFIG``)::

    [target]
    audit_dir = "my-model"          # and optionally reference_dir, max_length, dtype ...

    [dataset_inference]
    suspect = "suspect.txt"         # texts that may have been trained on
    validation = "validation.txt"   # same-distribution texts known not to be
    fit_fraction = 0.5              # share of each set that fits the aggregator
    alpha = 0.01
    group = "user"                  # optional: the column naming each text's user
    fdr = 0.05                      # with users: the FDR of the per-user list (BH)

With ``group`` (``--group-by COLUMN``), or with suspect and validation each a directory
of per-user ``.txt`` files, the unit is the user (attacks/dataset_inference.py
:class:`UserDatasetInference`): users, not texts, are split into fit and test parts, the
set-level test compares users, and each held-out suspect user gets a p-value.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from privacy_audit.ground.errors import AuditError, ConfigError, DataError

#: Keys of ``[dataset_inference]``: name -> (types, check, allowed).
KEYS = {
    "suspect": (str,),
    "validation": (str,),
    "fit_fraction": (float, int),
    "alpha": (float, int),
    "group": (str,),
    "fdr": (float, int),
}


def _log(msg: str, progress: bool) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


def parse_section(raw: Any, base_dir: Path | None = None) -> dict[str, Any]:
    """Validate ``[dataset_inference]``; paths are resolved against ``base_dir``."""
    if not isinstance(raw, dict):
        raise ConfigError("config key 'dataset_inference' must be a table ([dataset_inference])")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ConfigError(
            f"unknown config key 'dataset_inference.{unknown[0]}'; allowed: {', '.join(KEYS)}"
        )
    out: dict[str, Any] = {"fit_fraction": 0.5, "alpha": 0.01, "fdr": 0.05}
    for key, types in KEYS.items():
        if key not in raw:
            if key in ("suspect", "validation"):
                raise ConfigError(f"config key 'dataset_inference.{key}' is required")
            continue
        v = raw[key]
        if isinstance(v, bool) or not isinstance(v, types):
            raise ConfigError(f"config key 'dataset_inference.{key}' has the wrong type")
        if key in ("suspect", "validation"):
            p = Path(v)
            out[key] = str(p if p.is_absolute() or base_dir is None else base_dir / p)
        elif key == "group":
            if not v.strip():
                raise ConfigError("config key 'dataset_inference.group' must be a column name")
            out[key] = v
        else:
            v = float(v)
            if not (math.isfinite(v) and 0 < v < 1):
                raise ConfigError(f"config key 'dataset_inference.{key}' must be in (0, 1)")
            out[key] = v
    return out


def load_di_config(path: str | Path):
    """``(AuditConfig, [dataset_inference] options)`` of a TOML config: ``[target]`` etc.
    as for ``run``; the suspect / validation files stand in for members / non-members."""
    import tomllib

    from privacy_audit.audit.config import parse_config

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
    if "dataset_inference" not in raw:
        raise ConfigError(f"config file {str(p)!r} has no [dataset_inference] section")
    di = parse_section(raw.pop("dataset_inference"), p.parent)
    raw.setdefault("data", {})
    if not isinstance(raw["data"], dict):
        raise ConfigError("config key 'data' must be a table ([data])")
    raw["data"].update({"members": di["suspect"], "nonmembers": di["validation"]})
    if di.get("group"):
        raw["data"]["group"] = di["group"]
    raw["data"].pop("corpus", None)
    return parse_config(raw, source=str(p), base_dir=p.parent), di


#: the [data] keys dataset inference reads (the rest, e.g. the bundled corpus's sizes,
#: never apply to it)
_DATA_KEYS = ("text_column", "id_column")
#: the [target] keys that apply (the suite's own presets and training do not)
_TARGET_KEYS = (
    "audit_dir",
    "adapter_dir",
    "reference_dir",
    "max_length",
    "kind",
    "dtype",
    "device_map",
    "batch_size",
)


def applied_config(cfg, options: dict[str, Any]) -> dict[str, Any]:
    """The settings this command used, and only those: the config's defaults for the
    suite's own training (corpus, sizes, epochs, defenses) do not apply and are left out
    of the record."""
    d = cfg.to_dict()
    target = d.get("target") or {}
    data = d.get("data") or {}
    return {
        "source": d.get("source"),
        "seed": d.get("seed"),
        "device": d.get("device"),
        "target": {k: target.get(k) for k in _TARGET_KEYS if k in target},
        "data": {
            "suspect": options.get("suspect"),
            "validation": options.get("validation"),
            **{k: data.get(k) for k in _DATA_KEYS if k in data},
        },
        "dataset_inference": {
            k: options.get(k) for k in ("fit_fraction", "alpha", "group", "fdr") if k in options
        },
        "aggregate_only": bool((d.get("report") or {}).get("aggregate_only")),
    }


def run_dataset_inference(
    cfg, options: dict[str, Any], progress: bool = True, executor=None
) -> dict[str, Any]:
    """Load the model, check the split, score once, test. Returns the results dict
    (``results.json`` of this command)."""
    import datetime as _dt

    from privacy_audit.attacks.dataset_inference import result_text
    from privacy_audit.audit import __version__
    from privacy_audit.audit.results import environment

    opts = cfg.own_model
    if opts.get("kind", "causal-lm") != "causal-lm":
        raise AuditError("dataset inference needs a causal language model (--kind causal-lm)")
    data, grouped, column, test = _sides_and_test(cfg, options)
    loaded, release = _load_model(cfg, opts)
    from privacy_audit.audit.own_model import cut_to_max_length

    data, n_cut = cut_to_max_length(data, release.tokenizer, release.max_length)
    suspect, validation = list(data.members.texts), list(data.nonmembers.texts)
    g_suspect = list(data.members.groups) if grouped else None
    g_validation = list(data.nonmembers.groups) if grouped else None
    users_before = (set(g_suspect), set(g_validation)) if grouped else None
    within = _collapse_within(suspect, validation, g_suspect, g_validation, progress)
    _log(f"dataset inference: {len(suspect)} suspect, {len(validation)} validation texts", progress)
    check, suspect, validation, g_suspect, g_validation = _check_split(
        cfg, suspect, validation, g_suspect, g_validation, within, users_before, column
    )
    result = _result_head(cfg, options, loaded, release, opts, check, n_cut, grouped, column)
    _log_split_check(check, progress)
    if check.get("shifted"):
        result["status"] = "split-shifted"
        result["p_value"] = None
    elif check.get("status") != "ok" or (not grouped and (len(suspect) < 4 or len(validation) < 4)):
        result["status"] = "not-measured"
        result["reason"] = check.get("reason") or "fewer than 4 texts per set"
        result["p_value"] = None
    else:
        _score_and_test(
            cfg, opts, release, test, result, (suspect, g_suspect), (validation, g_validation),
            executor, progress,
        )  # fmt: skip
    result["text"] = result_text(result)
    return {
        "schema_version": 1,
        "tool": {"name": "privacy-audit", "version": __version__},
        "command": "dataset-inference",
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "config": applied_config(cfg, options),
        "environment": environment(),
        "aggregate_only": cfg.aggregate_only,
        "dataset_inference": result,
    }


def _sides_and_test(cfg, options: dict[str, Any]):
    """The suspect and validation sides (capped to the model's length) and the test that
    fits them: per user when both sides name users, else per text. A user split that
    cannot leave 2 users per side is refused here, before the model is loaded."""
    from privacy_audit.attacks.dataset_inference import (
        DatasetInference,
        UserDatasetInference,
        users_needed,
    )
    from privacy_audit.audit.data import load_audit_data
    from privacy_audit.audit.textcap import cap_audit_data

    data_cfg = dict(cfg.data)
    if options.get("group"):
        data_cfg["group"] = options["group"]
    try:
        loaded_data = load_audit_data(
            data_cfg, cfg.seed, train=False, labels=False, user_counts=False
        )
    except DataError as exc:
        raise DataError(_as_di_sides(str(exc))) from None
    data = cap_audit_data(loaded_data, cfg.target.max_length)
    grouped = data.members.groups is not None and data.nonmembers.groups is not None
    column = data.group_column or "file"
    if not grouped:
        return (
            data,
            grouped,
            column,
            DatasetInference(options["fit_fraction"], cfg.seed, options["alpha"]),
        )
    test = UserDatasetInference(
        options["fit_fraction"], cfg.seed, options["alpha"], options.get("fdr", 0.05)
    )
    need = users_needed(options["fit_fraction"])
    for side, groups in (
        ("suspect", data.members.groups),
        ("validation", data.nonmembers.groups),
    ):
        n_users = len(set(groups))
        if n_users < need:
            raise DataError(
                f"{n_users} {side} user(s) of group column {column!r}: user-level dataset "
                f"inference needs at least 2 users per side after the fit split, so at "
                f"least {need} users per side at fit_fraction {options['fit_fraction']:g}"
            )
    return data, grouped, column, test


def _load_model(cfg, opts: dict[str, Any]):
    """The user's causal LM (every weight from the checkpoint) and its scoring release."""
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release

    loaded = load_audit_target(
        cfg.audit_dir,
        "causal-lm",
        opts.get("adapter_dir"),
        opts.get("allow_uninitialized", False),
        cfg.device,
        opts.get("dtype", "auto"),
        opts.get("device_map", "none"),
    )
    if loaded.uninitialized:
        raise AuditError(
            f"{len(loaded.uninitialized)} weight(s) are not in the checkpoint; dataset "
            "inference on partly random weights measures nothing"
        )
    release = load_causal_lm_release(
        loaded,
        cfg.target.max_length,
        PrivacyClaim.none("dataset inference"),
        cfg.device,
        batch_size=opts["batch_size"],
    )
    return loaded, release


def _collapse_within(suspect, validation, g_suspect, g_validation, progress: bool) -> dict:
    """Copies of one text inside a set are one text (in place): counted twice, they would
    make the test's sample look larger than it is (with users: copies within one user
    only; two people who wrote the same text are two users). Returns the counts per set."""
    from privacy_audit.audit.data import distinct_records

    within = {}
    for side, texts, groups in (
        ("suspect", suspect, g_suspect),
        ("validation", validation, g_validation),
    ):
        keep, counts = distinct_records(texts, groups)
        if counts["distinct"] < 2:
            raise DataError(
                f"the {counts['texts']} {side} texts hold {counts['distinct']} distinct text(s) "
                "after collapsing exact and near-duplicates; the test needs at least 2 per set"
            )
        within[f"within_{side}"] = counts
        if counts["removed"]:
            _log(
                f"  {counts['removed']} duplicate {side} text(s) collapsed: {counts['distinct']} "
                f"distinct of {counts['texts']}",
                progress,
            )
        texts[:] = [texts[i] for i in keep]
        if groups is not None:
            groups[:] = [groups[i] for i in keep]
    return within


def _check_split(cfg, suspect, validation, g_suspect, g_validation, within, users_before, column):
    """The split check on the two sets, then the sets without their cross-set
    near-duplicates. With users, the check's folds and relabellings move whole users (a
    user's texts are one cluster: split across folds, a user's style would look like a
    shift), and a user whose every text was a copy of the other side's is refused rather
    than silently leaving the test."""
    from privacy_audit.audit.data import check_users_kept
    from privacy_audit.stats.split_check import SplitCheck

    grouped = g_suspect is not None
    try:
        check, _ = SplitCheck(seed=cfg.seed, aggregate_only=cfg.aggregate_only).run(
            suspect,
            validation,
            dedupe=True,
            users=g_suspect + g_validation if grouped else None,
        )
    except ValueError as exc:
        raise DataError(str(exc)) from None
    dups = check["duplicates"]
    dups.update(within)
    dm, dn = set(dups.pop("member_index")), set(dups.pop("nonmember_index"))
    suspect = [t for i, t in enumerate(suspect) if i not in dm]
    validation = [t for j, t in enumerate(validation) if j not in dn]
    if grouped:
        g_suspect = [g for i, g in enumerate(g_suspect) if i not in dm]
        g_validation = [g for j, g in enumerate(g_validation) if j not in dn]
        check_users_kept(
            users_before,
            (set(g_suspect), set(g_validation)),
            column,
            "after removing suspect/validation near-duplicates",
        )
    return check, suspect, validation, g_suspect, g_validation


def _result_head(cfg, options, loaded, release, opts, check, n_cut, grouped, column) -> dict:
    """What the result states whatever the test's outcome: model, split check, setting."""
    from privacy_audit.attacks.dataset_inference import split_guard

    result: dict[str, Any] = {
        "model": loaded.path,
        "reference": opts.get("reference_dir"),
        "texts_cut_to_max_length": n_cut,
        "max_length": release.max_length,
        "split_check": check,
        "split_guard": split_guard(check),
        "fit_fraction": options["fit_fraction"],
        "seed": cfg.seed,
        "unit": "user" if grouped else "text",
    }
    if grouped:
        result["group_column"] = column
    return result


def _log_split_check(check: dict, progress: bool) -> None:
    auc = (check.get("blind") or {}).get("auc")
    if auc:
        dups = check["duplicates"]
        _log(
            f"  split check: blind AUC {auc['value']:.3f} [{auc['ci_low']:.3f}, "
            f"{auc['ci_high']:.3f}]; {dups['pairs']} near-duplicate pair(s) removed",
            progress,
        )


def _score_and_test(cfg, opts, release, test, result, suspect_side, validation_side,
                    executor, progress: bool) -> None:  # fmt: skip
    """Score every text once (and under the reference model, if given), then the test;
    its outcome goes into ``result``."""
    from privacy_audit.attacks.dataset_inference import lm_features
    from privacy_audit.audit.own_model import load_reference, prefill_token_stats

    (suspect, g_suspect), (validation, g_validation) = suspect_side, validation_side
    grouped = g_suspect is not None
    reference = None
    if opts.get("reference_dir"):
        _log(f"  reference model {opts['reference_dir']}", progress)
        reference = load_reference(cfg, release.tokenizer, release.max_length)
        prefill_token_stats(reference, suspect + validation, executor, progress)
    where = prefill_token_stats(release, suspect + validation, executor, progress)
    result["scoring"] = where
    xs, names = lm_features(release, suspect, reference)
    xv, _ = lm_features(release, validation, reference)
    try:
        if grouped:
            result.update(test.test(xs, g_suspect, xv, g_validation, names))
        else:
            result.update(test.test(xs, xv, names))
    except ValueError as exc:
        result.update(status="not-measured", reason=str(exc), p_value=None)
    else:
        result["status"] = "ok"
        if grouped and cfg.aggregate_only:
            _drop_user_ids(result)


def _as_di_sides(msg: str) -> str:
    """The data layer's words for the two sides (members / non-members) as this command
    names them (suspect / validation)."""
    return msg.replace(
        "the member and the non-member side", "the suspect and the validation side"
    ).replace("a user is a member or not", "a user is a suspect or a validation user")


def _drop_user_ids(result: dict[str, Any]) -> None:
    """Aggregate-only: no user name leaves the run; the per-user rows keep their score,
    p-value, finding and text count, ordered by score (not by name)."""
    for key in ("users", "null_users"):
        rows = [{k: v for k, v in r.items() if k != "user"} for r in result.get(key) or []]
        result[key] = sorted(rows, key=lambda r: -r["score"])
    result["found"] = None


def render_html(results: dict[str, Any]) -> str:
    """The dataset-inference report: the main report's template environment and styles
    (reports/dataset_inference_view.py), every value escaped."""
    from privacy_audit.reports.dataset_inference_view import render_dataset_inference

    return render_dataset_inference(results)
