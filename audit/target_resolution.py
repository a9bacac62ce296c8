"""The model directories a config names, checked and read before any data, model weights
or output are touched (:func:`resolve_targets`): local directories only (a hub name is
never downloaded), the model kind from config.json, a PEFT adapter's base, the reference
models, ``[shadow] base_dir`` and its population file, and whether each defense can
fine-tune a local causal LM. The config itself is parsed without touching the file system
(audit/config.py)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privacy_audit.attacks import ATTACKS
from privacy_audit.audit.config import AuditConfig
from privacy_audit.ground.errors import AuditError, ConfigError


def default_lm_attacks(with_reference: bool) -> list[str]:
    """Membership attacks run on a causal LM when 'attacks.names' is not given: every
    reference-free signal of one shared forward pass (LOSS, zlib, Min-K%, Min-K%++) and,
    with a reference model (the base of a fine-tune), the attacks that read its one pass
    too: reference, EZ-MIA and InfoRMIA (LiRA / RMIA offline run against it as well)."""
    names = [n for n in ("lm-loss", "zlib", "min-k", "min-k++") if n in ATTACKS]
    if with_reference:
        names += [n for n in ("reference", "ez-mia", "informia") if n in ATTACKS]
    return names


def _same_file(a: str, b: str) -> bool:
    """One file by path (after links), by inode (a hard link) or by content."""
    from privacy_audit.audit.scale.fingerprint import file_sha256

    pa, pb = Path(a), Path(b)
    try:
        if pa.resolve() == pb.resolve() or pa.samefile(pb):
            return True
        return pa.stat().st_size == pb.stat().st_size and file_sha256(pa) == file_sha256(pb)
    except OSError:
        return False


def _same_model(a: str, b: str) -> bool:
    """One model directory: the same directory after links, or identical contents."""
    from privacy_audit.audit.scale.fingerprint import content_digest

    try:
        if Path(a).resolve() == Path(b).resolve() or Path(a).samefile(b):
            return True
    except OSError:
        return False
    return content_digest(a) == content_digest(b)


def _distinct_models(refs: list[str], target: str | None) -> None:
    """Every reference once, and none the audited model (``target``; ``None`` with an
    adapter, whose base is the natural reference): compared after resolving links, then
    by content (a copy of one model scores identically: LiRA's variance is 0)."""
    from privacy_audit.audit.scale.fingerprint import content_digest

    seen: dict[Path, str] = {}
    digests: dict[str, str] = {}
    for r in refs:
        rp = Path(r).resolve()
        if rp in seen:
            raise ConfigError(
                f"reference model {r!r} is {seen[rp]!r} (the same directory through a link); "
                "give each reference once"
            )
        seen[rp] = r
        d = content_digest(r)
        if d in digests:
            raise ConfigError(
                f"reference model {r!r} holds the same files as {digests[d]!r}; give each "
                "reference once"
            )
        digests[d] = r
        if target is not None and _same_model(r, target):
            raise ConfigError(
                f"reference model {r!r} is the audited model (target.audit_dir {target!r}); "
                "a reference must not have seen the audited texts"
            )


def _local_dir(raw_target: dict[str, Any], path, what, key=None) -> Path:
    """The directory, or one line; a missing path written like ``org/name`` (the
    ``[target]`` value under ``key``) is named as a hub name (never downloaded)."""
    from privacy_audit.targets.loading import check_local_dir, looks_like_hub_name

    written = raw_target.get(key) if key else None
    missing = not Path(path).expanduser().is_dir()
    if missing and isinstance(written, str) and looks_like_hub_name(written):
        raise AuditError(
            f"{what} {written!r} is not a local directory; it looks like a Hugging Face "
            "hub name, and hub names are not downloaded: give a local directory (e.g. "
            "one written by save_pretrained or huggingface-cli download)"
        )
    return check_local_dir(path, what)


#: :func:`_local_dir` bound to the config's raw ``[target]`` table
LocalDir = Callable[..., Path]


def resolve_targets(cfg: AuditConfig) -> AuditConfig:
    """Check the model directories a config names and read what they are, before any
    data, model weights or output are touched: local directories only (a hub name is
    never downloaded), the model kind from config.json, a PEFT adapter's base, whether
    each defense can fine-tune a local causal LM. Sets the causal-LM default attacks
    when ``attacks.names`` is not given. Idempotent."""
    if cfg.own_model.get("resolved"):
        return cfg
    raw_target = cfg.raw.get("target") if isinstance(cfg.raw.get("target"), dict) else {}
    local_dir = functools.partial(_local_dir, raw_target)
    try:
        if cfg.own_model:
            return _resolve_own_model(cfg, local_dir)
        _check_trained_target(cfg, local_dir)
        return dataclasses.replace(cfg, own_model={"resolved": True})
    except ConfigError:
        raise
    except AuditError as exc:
        raise ConfigError(str(exc)) from None


def _resolve_own_model(cfg: AuditConfig, local_dir: LocalDir) -> AuditConfig:
    """The user's own model audited as it is: its directory (or an adapter's base), its
    kind, its reference models and ``[shadow]`` base; the causal-LM default attacks."""
    opts = dict(cfg.own_model)
    adapter = opts["adapter_dir"]
    base = _audited_dir(cfg, opts, local_dir)
    kind = _model_kind(base, opts)
    refs, sources = _reference_models(opts, kind, base, adapter, local_dir)
    if adapter is not None and kind != "causal-lm":
        raise ConfigError("'target.adapter_dir' is supported for causal LMs only")
    if cfg.shadow is not None and cfg.shadow["base_dir"] is None and not refs:
        raise ConfigError(
            "'shadow' without 'shadow.base_dir' sets LiRA / RMIA options for given "
            "reference models, and there are none"
        )
    if cfg.shadow is not None and cfg.shadow["base_dir"] is not None:
        _check_shadow_base(cfg, kind, base, adapter, local_dir)
    for k, plain in (("add_bos", "auto"), ("add_eos", False)):
        if opts.get(k, plain) != plain and kind != "causal-lm":
            raise ConfigError(f"'target.{k}' applies to causal LMs only")
    opts.update(
        kind=kind,
        resolved=True,
        reference_dirs=refs,
        reference_dir=refs[0] if refs else None,
        reference_sources=sources,
    )
    attacks = cfg.attacks
    if kind == "causal-lm" and "names" not in (cfg.raw.get("attacks") or {}):
        attacks = tuple(default_lm_attacks(bool(refs)))
        if "extraction-risk" in cfg.attacks:  # [extraction] given
            attacks = (*attacks, "extraction-risk")
    return dataclasses.replace(cfg, classifier_dir=base, own_model=opts, attacks=attacks)


def _audited_dir(cfg: AuditConfig, opts: dict[str, Any], local_dir: LocalDir) -> str:
    """The directory of the audited model: ``target.audit_dir`` (or its alias), else the
    base model an adapter names; the adapter, when given, must be a PEFT adapter."""
    from privacy_audit.targets.loading import adapter_base_dir

    adapter = opts["adapter_dir"]
    if cfg.classifier_dir is not None:
        what = (
            "classifier directory (target.classifier_dir)"
            if opts.get("_fallback_kind")
            else "target.audit_dir"
        )
        key = "classifier_dir" if opts.get("_fallback_kind") else "audit_dir"
        base = str(local_dir(cfg.classifier_dir, what, key))
    else:
        if not Path(adapter).is_dir():
            local_dir(adapter, "target.adapter_dir", "adapter_dir")
        base = str(adapter_base_dir(adapter))
    if adapter is not None:
        if not Path(adapter).is_dir():
            local_dir(adapter, "target.adapter_dir", "adapter_dir")
        adapter_base_dir(adapter)  # a PEFT adapter directory, checked now
    return base


def _model_kind(base: str, opts: dict[str, Any]) -> str:
    """The model kind from config.json; the older ``classifier_dir`` key falls back to a
    classifier when config.json names no head."""
    from privacy_audit.targets.loading import detect_kind

    try:
        return detect_kind(base, opts["kind"])
    except AuditError:
        if not opts.get("_fallback_kind"):
            raise
        return opts["_fallback_kind"]


def _reference_models(
    opts: dict[str, Any], kind: str, base: str, adapter: str | None, local_dir: LocalDir
) -> tuple[list[str], list[str]]:
    """The reference LMs and where each comes from: the given ones, each a distinct local
    causal LM that is not the audited model; else an adapter's base model."""
    from privacy_audit.targets.loading import detect_kind

    reference = opts["reference_dir"]
    refs = list(opts.get("reference_dirs") or [])
    for r in refs:
        what = "target.reference_dir" if r == reference else "reference model"
        local_dir(r, what, "reference_dir" if r == reference else None)
        if kind != "causal-lm":
            raise ConfigError(f"{what} {r!r}: reference models apply to causal LMs only")
        if detect_kind(r, "auto", what) != "causal-lm":
            raise ConfigError(f"{what} {r!r} must hold a causal LM")
    _distinct_models(refs, None if adapter is not None else base)
    sources = ["given"] * len(refs)
    if not refs and adapter is not None and kind == "causal-lm":
        # LoRA-Leak (2025): the adapter's base model, before fine-tuning, is the
        # natural reference for what the adapter learned
        refs, sources = [base], ["the adapter's base model (default)"]
    return refs, sources


def _check_shadow_base(
    cfg: AuditConfig, kind: str, base: str, adapter: str | None, local_dir: LocalDir
) -> None:
    """``[shadow] base_dir`` fine-tunes reference causal LMs: a local causal LM that is not
    the audited model, and a population that is not an audited data file."""
    from privacy_audit.targets.loading import detect_kind

    sb = cfg.shadow["base_dir"]
    local_dir(sb, "shadow.base_dir")
    if kind != "causal-lm" or detect_kind(sb, "auto", "shadow.base_dir") != "causal-lm":
        raise ConfigError(
            "'shadow.base_dir' fine-tunes reference causal LMs: the audited model "
            "and the base must both be causal LMs"
        )
    if adapter is None and _same_model(sb, base):
        raise ConfigError(
            f"shadow.base_dir {sb!r} is the audited model itself "
            f"(target.audit_dir {base!r}); references are fine-tuned from the "
            "model before your fine-tuning (its base)"
        )
    pop = cfg.shadow["population"]
    if isinstance(pop, str) and not Path(pop).exists():
        raise ConfigError(f"shadow.population file {pop!r} does not exist")
    if isinstance(pop, str):
        from privacy_audit.audit.data import check_input_file

        check_input_file(pop, "shadow.population")
        for key in ("members", "nonmembers"):
            d = cfg.data.get(key)
            if isinstance(d, str) and Path(d).is_file() and _same_file(pop, d):
                raise ConfigError(
                    f"shadow.population {pop!r} is the data.{key} file {d!r}; "
                    "the population must be texts that are not audited"
                )
    if isinstance(pop, int) and pop > 0 and cfg.data.get("public") is None:
        raise ConfigError(
            f"shadow.population = {pop} draws from data.public, which is not set; "
            'give a file of population texts: shadow.population = "pop.txt"'
        )


def _check_trained_target(cfg: AuditConfig, local_dir: LocalDir) -> None:
    """A model the suite fine-tunes (``target.model_dir``): a local directory, and for a
    causal LM every defense able to fine-tune it."""
    from privacy_audit.targets.loading import check_lm_defense

    spec = cfg.target
    if spec.model_dir is None:
        return
    local_dir(spec.model_dir, "target.model_dir", "model_dir")
    if not spec.is_causal_lm:
        return
    for d in cfg.defenses:
        reason = check_lm_defense(d.name, spec.model_dir)
        if reason:
            raise ConfigError(
                f"defense '{d.label}' cannot fine-tune the causal LM in "
                f"'target.model_dir': {reason}"
            )
        if d.name == "dp-sgd" and d.params.get("unit", "example") == "user":
            raise ConfigError(
                f"defense '{d.label}' has unit = 'user': user-level DP-SGD trains "
                "classifier targets only, and 'target.model_dir' holds a causal LM "
                "(its DP-SGD is per sequence)"
            )
