"""Auditing the user's own trained model as it is (``[target] audit_dir``; no training).

The model (a local causal LM or sequence classifier, optionally with a PEFT adapter) is
loaded by :func:`privacy_audit.targets.loading.load_audit_target`, which refuses weights the
checkpoint does not hold unless ``allow_uninitialized``; then the membership attacks that
fit its kind run on the members / non-members, and one run record comes back. For a
causal LM every text is first cut to the prefix that ``max_length`` tokens cover, so every
signal (loss, zlib, min-k, ...) sees exactly the scored text, and the token statistics of
all texts are computed once (locally or sharded over Ray actors) before any attack runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from privacy_audit.audit.config import MAX_LENGTH_CAP
from privacy_audit.audit.data import (
    AuditData,
    check_users_kept,
    distinct_records,
    drop_cross_duplicates,
    load_audit_data,
    log_duplicates,
    with_sets,
)
from privacy_audit.audit.scale.distributed import prefill_token_stats  # noqa: F401 - re-export
from privacy_audit.audit.scale.stream import prefill as stream_prefill
from privacy_audit.audit.textcap import cap_audit_data
from privacy_audit.defenses.base import Examples, PrivacyClaim
from privacy_audit.ground.errors import AuditError, DataError

#: membership attacks that read the first given reference model's forward pass
REFERENCE_USERS = ("reference", "ez-mia", "informia")


def _log(msg: str, progress: bool) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


def _claim(cfg) -> PrivacyClaim:
    c = cfg.claim or {}
    if not c:
        return PrivacyClaim.none("No claim stated for this model.")
    return PrivacyClaim(
        c["epsilon"], c["delta"], c["unit"], c["notion"], None, c["proven"], c["note"]
    )


def _cut(ex: Examples | None, tokenizer, max_length: int) -> Examples | None:
    if ex is None:
        return None
    return Examples(
        ids=list(ex.ids),
        texts=[tokenizer.truncate_text(t, max_length) for t in ex.texts],
        labels=ex.labels,
        members=ex.members,
        attributes=ex.attributes,
        groups=ex.groups,
    )


def cut_to_max_length(data: AuditData, tokenizer, max_length: int) -> tuple[AuditData, int]:
    """The data with every text cut to what ``max_length`` tokens cover; and how many
    texts were cut."""
    out = AuditData(
        _cut(data.members, tokenizer, max_length),
        _cut(data.nonmembers, tokenizer, max_length),
        _cut(data.test, tokenizer, max_length),
        data.label_names,
        _cut(data.public, tokenizer, max_length),
        data.exact_duplicates,
        _cut(data.fresh, tokenizer, max_length),
        data.group_column,
    )
    n_cut = sum(
        a != b
        for old, new in ((data.members, out.members), (data.nonmembers, out.nonmembers))
        for a, b in zip(old.texts, new.texts, strict=True)
    )
    return out, int(n_cut)


def resolve_max_length(model, max_length: int) -> int:
    """Tokens per text: ``max_length`` (the default is :data:`MAX_LENGTH_CAP`), never past
    the model's context length."""
    from privacy_audit.targets.lm import context_length

    try:
        return min(int(max_length), context_length(model))
    except ValueError:  # a config that names no context length
        return int(max_length)


def count_cut_classifier(data: AuditData, tokenizer, max_length: int) -> int:
    """How many member / non-member texts the classifier's tokenizer cuts at
    ``max_length`` tokens (special tokens included)."""
    n = 0
    for ex in (data.members, data.nonmembers):
        for t in ex.texts:
            n += len(tokenizer(t, truncation=False)["input_ids"]) > max_length
    return n


def _encoding_line(enc: dict) -> str:
    return (
        f"{enc.get('encoding')}; first token {enc.get('first_token')}; "
        f"max_length {enc.get('max_length')}"
    )


def drop_unscored(data: AuditData, release) -> tuple[AuditData, int]:
    """The data without member / non-member texts in which no token is predicted (one
    token and no BOS, or none at all): a score of nothing would read as a perfect fit."""

    def scored(t: str) -> bool:
        row = release.tokenizer.row(t, release.max_length)
        return len(row) >= 2

    def keep(ex: Examples) -> Examples:
        return ex.subset([i for i, t in enumerate(ex.texts) if scored(t)])

    if not hasattr(release.tokenizer, "row"):
        return data, 0
    m, n = keep(data.members), keep(data.nonmembers)
    dropped = len(data.members) - len(m) + len(data.nonmembers) - len(n)
    if not dropped:
        return data, 0
    if len(m) < 2 or len(n) < 2:
        raise DataError(
            "fewer than 2 members or non-members have a token the model predicts "
            "(texts of one token without a BOS are not scored)"
        )
    return with_sets(data, m, n), dropped


def load_reference(cfg, target_tokenizer, max_length: int, path: str | None = None):
    """The user's reference LM (``path``, default ``[target] reference_dir``) as a release;
    exit 2 when its tokenizer differs from the target's (the loss difference would compare
    different token sequences). It scores every text on the target's encoding (the target's
    tokenizer object, so the same ids at the same positions)."""
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release
    from privacy_audit.targets.scoring import same_tokenizer

    opts = cfg.own_model
    path = path or opts["reference_dir"]
    ref = load_audit_target(
        path,
        "causal-lm",
        device=cfg.device,
        dtype=opts["dtype"],
        device_map=opts["device_map"],
    )
    release = load_causal_lm_release(
        ref,
        max_length,
        PrivacyClaim.none("reference model"),
        cfg.device,
        add_bos=opts.get("add_bos", "auto"),
        add_eos=opts.get("add_eos", False),
        batch_size=opts["batch_size"],
    )
    diff = same_tokenizer(target_tokenizer, release.tokenizer)
    if diff is not None:
        raise AuditError(
            f"reference model {path!r} (target.reference_dirs) has a different tokenizer from the "
            f"target ({diff}); the reference attack needs the same tokenizer"
        )
    release.tokenizer = target_tokenizer  # the target's encoding, token for token
    return release


def check_shadow_base(cfg, release) -> None:
    """``[shadow] base_dir`` is checked as ``--reference`` is: its tokenizer must map every
    text to the same ids as the target's (a base with another vocabulary trains references
    whose losses are over other token sequences: LiRA / RMIA numbers that mean nothing).
    Missing weights stop the first reference task when it loads the base, before it trains;
    a base that is the audited model itself, or a population file that is an audited data
    file, is refused by :func:`privacy_audit.audit.target_resolution.resolve_targets`."""
    sb = (cfg.shadow or {}).get("base_dir")
    if not sb:
        return
    from transformers import AutoTokenizer

    from privacy_audit.targets.loading import tokenizer_dir
    from privacy_audit.targets.scoring import HFTokenizer, same_tokenizer

    opts = cfg.own_model
    try:
        hf = AutoTokenizer.from_pretrained(
            str(tokenizer_dir([Path(sb)])), local_files_only=True, trust_remote_code=False
        )
        tok = HFTokenizer(hf, opts.get("add_bos", "auto"), opts.get("add_eos", False))
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AuditError(
            f"shadow.base_dir {sb!r}: its tokenizer cannot be loaded: {first}"
        ) from None
    diff = same_tokenizer(release.tokenizer, tok)
    if diff is not None:
        raise AuditError(
            f"shadow.base_dir {sb!r} has a different tokenizer from the target ({diff}); the "
            "references it trains must tokenize every text as the target does"
        )


def audit_own_model(
    cfg,
    settings,
    progress: bool = True,
    id_salt: bytes | None = None,
    executor=None,
    run_dir=None,
    resume: bool = False,
) -> tuple[dict[str, Any], Any]:
    """Load and audit ``cfg.audit_dir``; returns ``(run record, release)``."""
    from privacy_audit.audit.timing import Phases

    with Phases() as phase:
        return _audit_own_model(
            cfg, settings, progress, id_salt, executor, run_dir, resume, phase.go
        )


def _audit_own_model(cfg, settings, progress, id_salt, executor, run_dir, resume, phase):
    """:func:`audit_own_model`; ``phase(name)`` starts each timed stage (audit/timing.py)."""
    from privacy_audit.audit.evaluate import evaluate_release

    phase("load", "model and data")
    kind = cfg.own_model.get("kind", "classifier")
    loaded = _load_own_model(cfg, kind)
    claim = _claim(cfg)
    name = Path(cfg.audit_dir).name or "model"
    if cfg.own_model.get("adapter_dir"):
        name = f"{name}+{Path(cfg.own_model['adapter_dir']).name}"
    attack_kwargs: dict[str, dict[str, Any]] = {}
    notes: dict[str, Any] = {}
    refs: list[tuple[str, str, Any]] = []  # (path, source, release) of reference LMs
    max_length = resolve_max_length(loaded.model, cfg.target.max_length)
    if kind == "classifier":
        data, release, n_cut, users_at_load = _classifier_release(
            cfg, loaded, max_length, claim, notes
        )
        phase("split check")
        data, split, blind = run_split_check(data, cfg, progress)
        check_users_after_cleaning(users_at_load, data)
    else:
        data, release, n_cut, users_at_load = _causal_lm_release(
            cfg, loaded, max_length, claim, notes, progress
        )
    _note_cut(cfg, notes, n_cut, max_length, progress)
    if kind != "classifier":
        data, split, blind = _drop_unscorable_and_check(
            cfg, data, release, n_cut, users_at_load, notes, progress, phase
        )
        phase("load", "reference models")
        refs = _load_references(cfg, release, progress)
        attack_kwargs = _score_causal_lm(
            cfg, data, release, refs, notes, executor, progress, run_dir, resume, phase
        )
    _log_before_attacks(cfg, kind, loaded, data, notes, progress)
    phase("attacks")  # each attack's statistics are their own stage (audit/evaluate.py)
    run = evaluate_release(
        name,
        "as-is",
        release,
        data,
        cfg.attacks,
        settings,
        {"trained_by_suite": False},
        cfg.aggregate_only,
        progress,
        id_salt,
        cfg.attack_options,
        attack_kwargs=attack_kwargs,
    )
    if (refs and cfg.own_model.get("reference_attacks", True)) or (
        cfg.shadow is not None and cfg.shadow.get("base_dir")
    ):
        phase("reference attacks", "RMIA and LiRA")
    _reference_attacks(
        cfg, run, release, refs, data, settings, executor, run_dir, resume, progress, id_salt, notes
    )
    # before the leakage map: it ranks by the strongest attack, which user-resampled
    # intervals can change
    if data.members.groups is not None:
        from privacy_audit.audit.users import user_level_section

        phase("users", "user-level membership and user inference")
        run["users"] = user_level_section(
            run,
            data,
            settings,
            release if kind == "causal-lm" else None,
            refs[0][2] if refs else None,
            cfg.aggregate_only,
            id_salt,
            progress,
            run.get("claim"),
        )
    if kind == "causal-lm" and cfg.leakage_map.get("leakage_top", 10) >= 0:
        phase("leakage map")
        _leakage_map(cfg, run, release, data, attack_kwargs)
    _record_target(run, loaded, kind, notes)
    if blind is not None:
        from privacy_audit.stats.split_check import compare_attacks

        phase("split check", "attacks against the blind baseline")
        split["attacks"] = compare_attacks(split, run["attacks"], blind, data.attack_set().groups)
    run["split_check"] = split
    run["exact_duplicates"] = data.exact_duplicates
    return run, release


def _load_own_model(cfg, kind: str):
    """The user's model (and adapter) as ``load_audit_target`` loads it; a GPT-2-style
    classifier without a pad token pads with its EOS token."""
    from privacy_audit.targets.loading import load_audit_target

    opts = cfg.own_model
    loaded = load_audit_target(
        cfg.audit_dir,
        kind,
        opts.get("adapter_dir"),
        opts.get("allow_uninitialized", False),
        cfg.device,
        opts.get("dtype", "auto"),
        opts.get("device_map", "none"),
    )
    if kind == "classifier":
        tok = loaded.tokenizer
        if tok.pad_token_id is None and tok.eos_token_id is not None:
            tok.pad_token = tok.eos_token  # GPT-2-style classifiers have no pad token
            loaded.model.config.pad_token_id = tok.eos_token_id
    return loaded


def _classifier_release(cfg, loaded, max_length: int, claim, notes: dict):
    """A classifier's data (labels mapped onto the model's outputs) and release; how many
    texts its tokenizer cuts, and the users at loading."""
    from privacy_audit.targets.classifier import ClassifierRelease

    tok = loaded.tokenizer
    label_names = _byo_label_names(loaded.model, cfg.data)
    data = cap_audit_data(  # bounded work: never tokenize megabytes (audit/textcap.py)
        load_audit_data(cfg.data, cfg.seed, train=False, label_names=label_names),
        max_length,
    )
    users_at_load = user_sets(data)
    release = ClassifierRelease(loaded.model, tok, max_length, claim, label_names, cfg.device)
    n_cut = count_cut_classifier(data, tok, max_length)
    notes["encoding"] = {
        "encoding": "tokenizer(text, truncation=True, max_length=max_length)",
        "max_length": max_length,
    }
    return data, release, n_cut, users_at_load


def _causal_lm_release(cfg, loaded, max_length: int, claim, notes: dict, progress: bool):
    """A causal LM's data (no labels) and release, ``[shadow] base_dir``'s tokenizer
    checked before any scoring; every text cut to what ``max_length`` tokens cover."""
    from privacy_audit.targets.loading import load_causal_lm_release

    opts = cfg.own_model
    data = cap_audit_data(
        load_audit_data(cfg.data, cfg.seed, train=False, labels=False), max_length
    )
    users_at_load = user_sets(data)
    release = load_causal_lm_release(
        loaded,
        max_length,
        claim,
        cfg.device,
        add_bos=opts.get("add_bos", "auto"),
        add_eos=opts.get("add_eos", False),
        batch_size=opts["batch_size"],
    )
    check_shadow_base(cfg, release)  # before any scoring or training
    data, n_cut = cut_to_max_length(data, release.tokenizer, release.max_length)
    notes["encoding"] = release.encoding()
    _log(f"  encoding: {_encoding_line(notes['encoding'])}", progress)
    return data, release, n_cut, users_at_load


def _note_cut(cfg, notes: dict, n_cut: int, max_length: int, progress: bool) -> None:
    notes["encoding"]["max_length_source"] = (
        f"the model's context length, at most {MAX_LENGTH_CAP}"
        if cfg.own_model.get("max_length_auto")
        else "target.max_length"
    )
    notes["texts_cut_to_max_length"] = n_cut
    if n_cut:
        _log(f"  {n_cut} text(s) cut to max_length = {max_length} tokens", progress)


def _drop_unscorable_and_check(cfg, data, release, n_cut, users_at_load, notes, progress, phase):
    """A causal LM's texts as scored: duplicates the cut made and texts without a
    predicted token left out, then the split check on them."""
    if n_cut:
        data = drop_cross_duplicates(data)  # texts that differ only past the cut
    data, n_empty = drop_unscored(data, release)
    if n_empty:
        notes["texts_without_scored_token"] = n_empty
        _log(
            f"  {n_empty} text(s) left out: no token is predicted in them "
            "(a single token and no BOS)",
            progress,
        )
    phase("split check")
    data, split, blind = run_split_check(data, cfg, progress)  # on the texts as scored
    check_users_after_cleaning(users_at_load, data)
    return data, split, blind


def _load_references(cfg, release, progress: bool) -> list[tuple[str, str, Any]]:
    """(path, source, release) of each reference LM, all checked before any scoring."""
    opts = cfg.own_model
    refs = []
    ref_dirs = opts.get("reference_dirs") or (
        [opts["reference_dir"]] if opts.get("reference_dir") else []
    )
    sources = opts.get("reference_sources") or ["given"] * len(ref_dirs)
    for path, source in zip(ref_dirs, sources, strict=True):
        _log(f"  reference model {path} ({source})", progress)
        refs.append(
            (path, source, load_reference(cfg, release.tokenizer, release.max_length, path))
        )
    return refs


def _score_causal_lm(
    cfg, data, release, refs, notes, executor, progress, run_dir, resume, phase
) -> dict[str, dict[str, Any]]:
    """One forward pass per text, of the first reference (when a reference attack runs)
    and of the target, cached for every attack; returns the attacks' keyword arguments."""
    attack_kwargs: dict[str, dict[str, Any]] = {}
    users = [n for n in REFERENCE_USERS if n in cfg.attacks]
    if refs and users:
        ref = refs[0][2]  # the reference attacks calibrate by the first reference
        for n in users:  # all read the same cached reference pass (no extra one)
            attack_kwargs[n] = {"reference": ref}
        texts = data.members.texts + data.nonmembers.texts
        phase("score reference", "one forward pass per text")
        # in chunks, checkpointed under the run directory (audit/scale/stream.py)
        stream_prefill(ref, texts, executor, progress, run_dir, resume, "reference")
    if "extraction-risk" in cfg.attacks:  # the same pass gives the suffix's decoding probs
        from privacy_audit.attacks.extraction_risk import ExtractionRisk

        release.extraction = ExtractionRisk(**cfg.attack_options.get("extraction-risk", {})).spec()
    texts = data.members.texts + data.nonmembers.texts + data.test.texts
    phase("score", f"{len(set(texts))} texts, one forward pass each")
    _log(f"  scoring {len(set(texts))} texts (one forward pass each)", progress)
    notes["scoring"] = stream_prefill(release, texts, executor, progress, run_dir, resume)
    notes["batch_size"] = release.batch_size
    return attack_kwargs


def _log_before_attacks(cfg, kind: str, loaded, data, notes: dict, progress: bool) -> None:
    """Attacks meant for the other kind of target, random weights, duplicates; the count
    of texts scored."""
    from privacy_audit.attacks import ATTACKS

    for attack_name in cfg.attacks:
        cls = ATTACKS.get(attack_name)
        wanted = "lm" if kind == "causal-lm" else "classifier"
        if cls is not None and getattr(cls, "target_kind", "classifier") != wanted:
            _log(f"  note: attack {attack_name} is meant for a {cls.target_kind} target", progress)
    if loaded.uninitialized:
        _log(
            f"  WARNING: {len(loaded.uninitialized)} weight(s) were not in the checkpoint and are "
            "random (allow_uninitialized = true): " + ", ".join(loaded.uninitialized[:8]),
            progress,
        )
    log_duplicates(data, progress)
    notes["texts_scored"] = len(data.members) + len(data.nonmembers)
    _log(f"auditing {cfg.audit_dir} as it is (no training)", progress)


def _leakage_map(cfg, run, release, data, attack_kwargs) -> None:
    from privacy_audit.audit.leakage_map import build_leakage_map

    ref_release = next(
        (kw["reference"] for n, kw in attack_kwargs.items() if n in REFERENCE_USERS), None
    )
    build_leakage_map(
        run,
        release,
        data.members,
        ref_release,
        cfg.leakage_map.get("leakage_top", 10),
        cfg.leakage_map.get("per_token", False),
        cfg.aggregate_only,
    )


def _record_target(run: dict, loaded, kind: str, notes: dict) -> None:
    run["target"] = {
        "path": loaded.path,
        "kind": kind,
        **loaded.info,
        **notes,
        "uninitialized_weights": list(loaded.uninitialized),
    }
    if loaded.uninitialized:
        run["uninitialized_weights"] = list(loaded.uninitialized)


def _reference_attacks(
    cfg, run, release, refs, data, settings, executor, run_dir, resume, progress, id_salt, notes
) -> None:
    """RMIA and LiRA against the reference models (audit/references.py): the given ones
    (offline attacks) and those ``[shadow] base_dir`` fine-tunes (online ones too)."""
    from privacy_audit.audit.references import (
        OFFLINE,
        add_to_run,
        given_reference_attacks,
        trained_reference_attacks,
    )

    named = []
    trained = cfg.shadow is not None and cfg.shadow.get("base_dir")
    if refs and trained:  # LiRA / RMIA run against the fine-tuned references (one set)
        notes["references"] = {
            "kind": "given",
            "models": [{"path": p, "source": s} for p, s, _ in refs],
            "attacks": ["reference"] if "reference" in cfg.attacks else [],
        }
        named += [f"{p} ({s})" for p, s, _ in refs]
    elif refs and cfg.own_model.get("reference_attacks", OFFLINE):  # --attacks may name none
        wanted = tuple(cfg.own_model.get("reference_attacks", OFFLINE))
        _log(f"  {', '.join(wanted)} against {len(refs)} reference model(s)", progress)
        results, info = given_reference_attacks(
            cfg, release, refs, data, settings, executor, progress, wanted
        )
        add_to_run(run, results, cfg.aggregate_only, id_salt)
        notes["references"] = info
        named += [f"{p} ({s})" for p, s, _ in refs]
    if trained:
        results, info = trained_reference_attacks(
            cfg, release, data, settings, executor, run_dir, resume, progress
        )
        add_to_run(run, results, cfg.aggregate_only, id_salt)
        notes["trained_references"] = info
        named.append(
            f"{info['n_models']} fine-tuned ({info['recipe']['finetune']}) from {info['base_dir']}"
        )
    if named:  # shown in the report's run table
        run["training"]["reference_models"] = "; ".join(named)


def user_sets(data: AuditData) -> tuple[set[str], set[str]] | None:
    """The member and the non-member users (None: the data names no users)."""
    if data.members.groups is None or data.nonmembers.groups is None:
        return None
    return set(data.members.groups), set(data.nonmembers.groups)


def check_users_after_cleaning(before, data: AuditData) -> None:
    """Refuse (exit 2) when cutting, duplicate removal or unscorable texts left a user with
    no text: that user would silently leave every user-level statistic."""
    if before is not None:
        check_users_kept(
            before,
            user_sets(data),
            data.group_column or "file",
            "after cleaning (texts cut to max_length, duplicates removed, unscorable texts "
            "left out)",
        )


def collapse_within_sides(data):
    """``data`` with each side's duplicates collapsed to one record
    (:func:`distinct_records`), and the counts as ``within_members`` /
    ``within_nonmembers``. Refuses (DataError) when a side keeps fewer than 2 records."""
    out = {}
    sets = {}
    for side, ex in (("members", data.members), ("nonmembers", data.nonmembers)):
        keep, info = distinct_records(list(ex.texts), ex.groups)
        if info["distinct"] < 2:
            raise DataError(
                f"the {info['texts']} {side[:-1]} text(s) hold {info['distinct']} distinct "
                "record(s) after collapsing exact and near-duplicates: every statistic needs "
                "at least 2 distinct records per side"
            )
        out[f"within_{side}"] = info
        sets[side] = ex.subset(keep) if info["removed"] else ex
    if any(v["removed"] for v in out.values()):
        data = with_sets(data, sets["members"], sets["nonmembers"])
    return data, out


def check_audit_data(data, seed: int, aggregate_only: bool, dedupe: bool = True):
    """The split check of an ``AuditData``'s members and non-members. Returns the data
    with near-duplicate pairs removed (both sides), the check's dict, and the blind scores
    in attack-set order (members then non-members of the returned data)."""
    from privacy_audit.stats.split_check import SplitCheck

    within = {}
    if dedupe:
        data, within = collapse_within_sides(data)
    members, nonmembers = data.members, data.nonmembers
    try:
        users = (
            members.groups + nonmembers.groups
            if members.groups is not None and nonmembers.groups is not None
            else None
        )
        check, scores = SplitCheck(seed=seed, aggregate_only=aggregate_only).run(
            members.texts, nonmembers.texts, dedupe, users=users
        )
    except ValueError as exc:
        raise DataError(str(exc)) from None
    d = check["duplicates"]
    d.update(within)
    if dedupe and (d["members_removed"] or d["nonmembers_removed"]):
        dm, dn = set(d["member_index"]), set(d["nonmember_index"])
        keep_m = [i for i in range(len(members)) if i not in dm]
        keep_n = [j for j in range(len(nonmembers)) if j not in dn]
        if len(keep_m) < 2 or len(keep_n) < 2:
            raise DataError(
                f"after removing {d['pairs']} near-duplicate member/non-member pair(s) fewer "
                "than 2 members or non-members are left; the two sets hold the same texts"
            )
        data = with_sets(data, members.subset(keep_m), nonmembers.subset(keep_n))
    # indices are of the input sets; keep them out of results.json (counts say it all)
    d.pop("member_index")
    d.pop("nonmember_index")
    return data, check, scores


def run_split_check(data: AuditData, cfg, progress: bool):
    """The split check (stats/split_check.py) before any attack: near-duplicates across the
    sets are removed from the attack set, and the blind baseline is measured."""
    _log("  split check: near-duplicates and blind baseline (model-free classifier)", progress)
    data, split, blind = check_audit_data(data, cfg.seed, cfg.aggregate_only)
    d = split["duplicates"]
    for side in ("members", "nonmembers"):
        w = d.get(f"within_{side}") or {}
        if w.get("removed"):
            _log(
                f"  {w['removed']} duplicate {side[:-1]} text(s) collapsed: {w['distinct']} distinct "
                f"of {w['texts']} (largest group {w['largest']} copies); statistics count distinct records",
                progress,
            )
    if d["pairs"]:
        _log(
            f"  {d['pairs']} near-duplicate member/non-member pair(s): removed "
            f"{d['members_removed']} member(s) and {d['nonmembers_removed']} non-member(s)",
            progress,
        )
    auc = (split.get("blind") or {}).get("auc")
    if auc:
        flag = "SHIFTED" if split["shifted"] else "ok"
        _log(
            f"  blind AUC {auc['value']:.3f} [{auc['ci_low']:.3f}, {auc['ci_high']:.3f}]: {flag}",
            progress,
        )
    return data, split, blind


def _byo_label_names(model, data_cfg: dict[str, Any]) -> list[str]:
    """Map data labels onto the model's output indices: by name, or as integer indices."""
    from privacy_audit.audit.data import read_table

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
