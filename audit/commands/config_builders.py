"""The config of ``run --model DIR --members F --nonmembers F`` (no config file): the
flags of that audit, the config they make, and ``--attacks`` expanded for the model's
kind."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

from privacy_audit.ground.errors import AuditError


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The one-line audit of a user's model, without a config file."""
    g = p.add_argument_group(
        "audit your own model (no config file)",
        "privacy-audit run --model DIR --members FILE --nonmembers FILE: the membership "
        "attacks that fit the model's kind, the usual report",
    )
    g.add_argument("--model", metavar="DIR", help="local Hugging Face model directory to audit")
    g.add_argument(
        "--members", metavar="FILE", help="training examples (.txt/.jsonl/.csv/.parquet/dataset)"
    )
    g.add_argument("--nonmembers", metavar="FILE", help="held-out examples, same formats")
    g.add_argument("--test", metavar="FILE", help="utility test examples (default: non-members)")
    g.add_argument(
        "--public",
        metavar="FILE",
        help="same-distribution texts the model never saw, outside members and non-members: "
        "ReCaLL's prefixes and DC-PDD's token frequencies",
    )
    g.add_argument(
        "--group-by",
        metavar="COLUMN",
        help="the column naming each text's user (person): adds user-level membership "
        "(each user's texts aggregated) and user-level intervals ([data] group); a "
        "directory of .txt files, one per user, needs no column",
    )
    g.add_argument(
        "--fresh",
        metavar="FILE",
        help="texts of the member and non-member users that the model never saw (same "
        "format and user column): user inference from fresh texts ([data] fresh)",
    )
    g.add_argument(
        "--attacks",
        metavar="NAME,...",
        help="attacks to run, comma-separated (default: lm-loss, zlib, min-k and, with "
        "--reference, the reference attacks); 'llm' = every causal-LM signal whose needs are "
        "met, 'all' = llm plus the extraction attacks; `privacy-audit attacks` lists them",
    )
    g.add_argument(
        "--reference",
        metavar="DIR",
        action="append",
        help="reference causal LM (e.g. the base model); repeat for several: RMIA and offline "
        "LiRA run against them (default with --adapter: the adapter's base model)",
    )
    g.add_argument("--adapter", metavar="DIR", help="PEFT/LoRA adapter on top of --model")
    g.add_argument(
        "--kind", choices=("auto", "causal-lm", "classifier"), help="model kind (default: auto)"
    )
    g.add_argument(
        "--max-length",
        type=int,
        help="tokens per example (default: the model's context length, at most 512)",
    )
    g.add_argument(
        "--add-bos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="score each text with (--add-bos) or without (--no-add-bos) a leading BOS "
        "token, for a model trained that way (default: as tokenizer(text) encodes it)",
    )
    g.add_argument("--device", choices=("auto", "cpu", "cuda"), help="default: auto")
    g.add_argument("--dtype", choices=("auto", "float32", "bfloat16", "float16"))
    g.add_argument(
        "--allow-uninitialized",
        action="store_true",
        help="audit even if loading leaves weights untrained (the report is marked)",
    )
    x = p.add_argument_group(
        "extraction risk at your decoding settings (causal LM; any of these turns it on)",
        "probability that N sampled queries return a record's suffix verbatim given its "
        "prefix ([extraction] in a config); defaults are transformers' generation defaults",
    )
    x.add_argument("--temperature", type=float, help="sampling temperature (default 1.0)")
    x.add_argument("--top-k", type=int, help="top-k cut, 0 = off (default 50)")
    x.add_argument("--top-p", type=float, help="top-p (nucleus) cut, 1 = off (default 1.0)")
    x.add_argument(
        "--queries", metavar="N,N,...", help="numbers of queries (default 1,10,100,1000)"
    )
    x.add_argument("--prefix-tokens", type=int, help="prompt tokens per record (default 32)")
    x.add_argument("--suffix-tokens", type=int, help="suffix tokens to extract (default 32)")
    x.add_argument(
        "--leakage-top",
        type=int,
        help="members in the per-record leakage table and token map (default 10)",
    )
    x.add_argument(
        "--per-token",
        action="store_true",
        help="results.json also gets every member's per-token log-probabilities",
    )


def one_line_config(args, attack_names: list[str] | None = None):
    """The config of ``run --model ...``: an audit of the model as it is (``attack_names``:
    the expanded ``--attacks``)."""
    from privacy_audit.audit.config import parse_config

    if args.config is not None:
        raise AuditError("give either a config file or --model, not both")
    if args.model is None and args.adapter is None:
        given = [
            "--" + k.replace("_", "-")
            for k in (
                "members",
                "nonmembers",
                "reference",
                "test",
                "max_length",
                "device",
                "dtype",
                "kind",
                "public",
                "attacks",
                "group_by",
                "fresh",
            )
            if getattr(args, k, None) is not None and getattr(args, k, None) is not False
        ]
        verb = "needs" if len(given) == 1 else "need"
        raise AuditError(
            f"{'/'.join(given) or 'these flags'} {verb} --model DIR (the model to audit)"
        )
    if args.members is None or args.nonmembers is None:
        raise AuditError("--model needs --members FILE and --nonmembers FILE")
    target: dict = {"audit_dir": args.model} if args.model is not None else {}
    for key, value in (
        ("adapter_dir", args.adapter),
        ("reference_dirs", args.reference),
        ("kind", args.kind),
        ("max_length", args.max_length),
        ("add_bos", args.add_bos),
        ("dtype", args.dtype),
    ):
        if value is not None:
            target[key] = value
    if args.allow_uninitialized:
        target["allow_uninitialized"] = True
    data = {"members": args.members, "nonmembers": args.nonmembers}
    if args.test is not None:
        data["test"] = args.test
    from privacy_audit.audit.data import check_input_file

    for flag, path in (("--members", args.members), ("--nonmembers", args.nonmembers)) + (
        ("--test", args.test),
        ("--public", getattr(args, "public", None)),
        ("--fresh", getattr(args, "fresh", None)),
    ):
        if path is not None:
            check_input_file(path, flag)  # named by the flag typed: not a file, a FIFO, ...
    if getattr(args, "public", None) is not None:
        data["public"] = args.public
    if getattr(args, "group_by", None) is not None:
        data["group"] = args.group_by
    if getattr(args, "fresh", None) is not None:
        data["fresh"] = args.fresh
    raw: dict = {"title": f"Privacy audit of {Path(args.model or args.adapter).name}"}
    raw.update({"target": target, "data": data})
    if attack_names is not None:
        raw["attacks"] = {"names": attack_names}
    extraction = extraction_flags(args)
    if extraction is not None:
        raw["extraction"] = extraction
    report = {}
    if args.leakage_top is not None:
        report["leakage_top"] = args.leakage_top
    if args.per_token:
        report["per_token"] = True
    if report:
        raw["report"] = report
    if args.device is not None:
        raw["device"] = args.device
    return parse_config(raw, source="command line (--model)", base_dir=Path.cwd())


EXTRACTION_FLAGS = ("temperature", "top_k", "top_p", "queries", "prefix_tokens", "suffix_tokens")


def extraction_flags(args) -> dict | None:
    """``--temperature ... --suffix-tokens`` as an ``[extraction]`` table (None: none given)."""
    given = {k: getattr(args, k) for k in EXTRACTION_FLAGS if getattr(args, k, None) is not None}
    if not given:
        return None
    out: dict = {}
    decoding = {k: given.pop(k) for k in ("temperature", "top_k", "top_p") if k in given}
    if decoding:
        out["decoding"] = decoding
    if "queries" in given:
        try:
            out["queries"] = [int(q) for q in str(given.pop("queries")).split(",")]
        except ValueError:
            raise AuditError(
                f"--queries takes comma-separated integers (e.g. 1,10,100), got {args.queries!r}"
            ) from None
        bad = [q for q in out["queries"] if not 1 <= q <= 10**12]
        if bad:
            raise AuditError(
                f"--queries takes integers from 1 to 10^12 (numbers of queries), got {bad[0]}"
            )
    out.update(given)
    return out


def peek_kind(model_dir: str | None) -> str | None:
    """ "causal-lm" or "classifier" from a model folder's config.json (no torch), else None."""
    import json

    if not model_dir:
        return None
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    arch = " ".join(cfg.get("architectures") or []) if isinstance(cfg, dict) else ""
    if re.search(r"ForCausalLM|LMHeadModel", arch):
        return "causal-lm"
    if "ForSequenceClassification" in arch:
        return "classifier"
    return None


def check_attack_names(spec: str, model_dir: str | None = None, kind: str | None = None) -> None:
    from privacy_audit.attacks.catalog import check_names

    if kind not in ("causal-lm", "classifier"):
        kind = peek_kind(model_dir)
    try:
        check_names(spec, kind)
    except ValueError as exc:
        raise AuditError(str(exc)) from None


def with_attacks(args, cfg):
    """The one-line config again with ``--attacks`` expanded for the model's kind and the
    inputs given (--reference, --public); the offline reference attacks (LiRA, RMIA) run
    only when named (or with ``all``)."""
    from privacy_audit.attacks.catalog import expand
    from privacy_audit.audit.target_resolution import resolve_targets

    if args.model is None and args.adapter is None:
        raise AuditError("--attacks applies to run --model; in a config use [attacks] names")
    opts = cfg.own_model or {}
    kind = opts.get("kind", "classifier")
    have = set()
    if opts.get("reference_dirs") or opts.get("reference_dir"):
        have.add("reference")
    if getattr(args, "public", None) is not None:
        have |= {"nonmember-prefixes", "population"}
    try:
        names, refs = expand(args.attacks, kind, have)
    except ValueError as exc:
        raise AuditError(str(exc)) from None
    if refs and "reference" not in have:
        raise AuditError(f"--attacks {refs[0]} needs --reference DIR (a reference model)")
    if not names:
        raise AuditError(
            f"--attacks {args.attacks!r} selects no membership attack for a {kind} model "
            "(lira-offline / rmia-offline run beside one, e.g. --attacks lm-loss,rmia-offline)"
        )
    cfg = resolve_targets(one_line_config(args, names))
    return dataclasses.replace(cfg, own_model={**cfg.own_model, "reference_attacks": refs})
