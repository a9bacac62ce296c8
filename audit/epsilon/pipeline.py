"""``privacy-audit canaries make | audit``: one-run ε audit of a training pipeline the suite
does not run (make canaries -> the user trains -> audit the trained model).

``make`` writes, into ``--out``:

- ``train_canaries.txt``: the included canaries (each canary included independently with
  probability 1/2, then repeated ``--repeat`` times), one per line, shuffled: mix these
  lines into the training text;
- ``canaries.json``: every canary (prefix and secret), the design and settings; no
  inclusion information;
- ``inclusion.secret.json`` (mode 0600): which canaries were included. Keep it from the
  training pipeline; ``audit`` reads it and never prints or writes any of it;
- ``tokenizer/`` (``new-token`` only): the tokenizer with the new tokens added; train with
  it and call ``model.resize_token_embeddings(len(tokenizer))`` first.

``audit`` scores every canary on the trained model (mean log-probability of its secret
tokens given its prefix) and writes ``results.json`` and ``report.html`` holding only
aggregates: the one-run ε lower bound (Steinke et al. 2023, with group privacy when
repeated) with its ceiling, TPR at 1 % FPR with a bootstrap CI, AUC, and the claim
comparison (VIOLATED / consistent / untestable).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from privacy_audit.audit.epsilon.input_canaries import LM_CANARY_DESIGNS, CanarySet
from privacy_audit.defenses.base import Examples
from privacy_audit.ground.errors import AuditError

SCHEMA = "privacy-audit-canaries/1"
FILES = ("canaries.json", "inclusion.secret.json", "train_canaries.txt")
#: Upper bound of ``canaries make --n``: far beyond what one audit needs (the bound's
#: ceiling grows only with log n) and still minutes, not days, to write.
MAX_CANARIES = 100_000
#: Upper bound of ``--secret-tokens`` / ``--prefix-tokens`` (a canary fits a context).
MAX_CANARY_TOKENS = 512


def _log(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def _atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode if mode is not None else 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _read_lines(path: str | None) -> list[str] | None:
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise AuditError(f"--data {path!r} is not a file")
    try:
        content = p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise AuditError(f"--data {path!r} is not UTF-8 text") from None
    except OSError as exc:
        raise AuditError(f"--data {path!r} cannot be read: {exc.strerror or exc}") from None
    lines = [ln.strip() for ln in content.splitlines() if ln.strip()]
    if not lines:
        raise AuditError(f"--data {path!r} holds no text")
    return lines


def _load_tokenizer(path: str):
    p = Path(path)
    if not p.is_dir():
        raise AuditError(
            f"--tokenizer {path!r} is not a local directory (hub names are not fetched)"
        )
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(p), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise AuditError(f"cannot load a tokenizer from {path!r}: {exc}") from exc


def make(args) -> int:
    from privacy_audit.audit.epsilon.lm_canaries import load_user_lm, make_lm_canaries

    design = args.design
    if design not in LM_CANARY_DESIGNS:
        raise AuditError(f"unknown design {design!r}; allowed: {', '.join(LM_CANARY_DESIGNS)}")
    if not 20 <= args.n <= MAX_CANARIES:
        raise AuditError(f"--n must be in 20..{MAX_CANARIES:,}, got {args.n}")
    if not 1 <= args.repeat <= 64:
        raise AuditError(f"--repeat must be in 1..64, got {args.repeat}")
    for flag, value, low in (
        ("--secret-tokens", args.secret_tokens, 1),
        ("--prefix-tokens", args.prefix_tokens, 0),
    ):
        if not low <= value <= MAX_CANARY_TOKENS:
            raise AuditError(f"{flag} must be in {low}..{MAX_CANARY_TOKENS}, got {value}")
    if not (math.isfinite(args.temperature) and args.temperature > 0):
        raise AuditError(f"--temperature must be a finite positive number, got {args.temperature}")
    out = Path(args.out)
    if out.exists() and any((out / f).exists() for f in FILES) and not args.force:
        raise AuditError(f"{out} already holds canaries; use --force to replace them")
    if design == "bigram" and args.data is None:
        raise AuditError("--design bigram needs --data (the training text, one example per line)")
    base_dir = args.base_model
    if design in ("search-token", "synthetic") and base_dir is None:
        raise AuditError(f"--design {design} needs --base-model DIR (the model before training)")
    from privacy_audit.audit.outputs import check_outputs, dir_outputs

    check_outputs(
        dir_outputs("--out", out, FILES),
        [("--tokenizer", args.tokenizer), ("--data", args.data), ("--base-model", base_dir)],
        [("--out", out / "tokenizer")],
    )
    texts = _read_lines(args.data)
    tokenizer = _load_tokenizer(args.tokenizer)
    base_model = load_user_lm(base_dir, args.tokenizer)[0] if base_dir is not None else None
    try:
        cs = make_lm_canaries(
            args.n,
            design,
            tokenizer,
            texts=texts,
            base_model=base_model,
            seed=args.seed,
            secret_tokens=args.secret_tokens,
            prefix_tokens=args.prefix_tokens,
            repeat=args.repeat,
            temperature=args.temperature,
        )
    except ValueError as exc:
        raise AuditError(str(exc)) from exc
    out.mkdir(parents=True, exist_ok=True)
    if cs.new_tokens:
        tokenizer.add_tokens(list(cs.new_tokens))
        tokenizer.save_pretrained(str(out / "tokenizer"))
    record = {
        "schema": SCHEMA,
        "design": design,
        "n": args.n,
        "repeat": args.repeat,
        "seed": args.seed,
        "secret_tokens": args.secret_tokens,
        "prefix_tokens": args.prefix_tokens,
        "new_tokens": len(cs.new_tokens),
        "canaries": [
            {"id": i, "prefix": p, "text": t}
            for i, p, t in zip(cs.examples.ids, cs.prefixes or [], cs.examples.texts, strict=True)
        ],
    }
    canaries_text = json.dumps(record, indent=1, ensure_ascii=False)
    digest = hashlib.sha256(canaries_text.encode("utf-8")).hexdigest()
    rng = np.random.default_rng([args.seed, 0x5EC])
    lines = [t for t in cs.inserted().texts]
    lines = [lines[i] for i in rng.permutation(len(lines))]
    _atomic_write(out / "canaries.json", canaries_text)
    _atomic_write(
        out / "inclusion.secret.json",
        json.dumps({"canaries_sha256": digest, "included": cs.included.tolist()}),
        mode=0o600,
    )
    _atomic_write(out / "train_canaries.txt", "\n".join(lines) + "\n")
    print(
        f"wrote {args.n} {design} canaries to {out}: mix the {len(lines)} lines of "
        f"{out / 'train_canaries.txt'} into your training text"
        + (
            f"; train with the tokenizer in {out / 'tokenizer'} (resize the embeddings: "
            f"the vocabulary grows by {len(cs.new_tokens):,} tokens, and every new embedding "
            "row is a trained parameter DP-SGD clips and noises)"
            if cs.new_tokens
            else ""
        )
        + f". Keep {out / 'inclusion.secret.json'} away from training."
    )
    return 0


def load_canaries(path: str | Path) -> CanarySet:
    d = Path(path)
    if not d.is_dir() or not all((d / f).is_file() for f in FILES[:2]):
        raise AuditError(
            f"{str(d)!r} is not a canaries directory (run 'privacy-audit canaries make')"
        )
    text = (d / "canaries.json").read_text(encoding="utf-8")
    try:
        rec = json.loads(text)
        secret = json.loads((d / "inclusion.secret.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise AuditError(f"{d}: malformed canaries file: {exc}") from exc
    if rec.get("schema") != SCHEMA:
        raise AuditError(f"{d}/canaries.json is not a {SCHEMA} file")
    if secret.get("canaries_sha256") != hashlib.sha256(text.encode("utf-8")).hexdigest():
        raise AuditError(f"{d}: the inclusion record does not belong to these canaries.json")
    inc = np.asarray(secret["included"], dtype=np.int64)
    rows = rec["canaries"]
    if len(inc) != len(rows) or not np.isin(inc, (0, 1)).all():
        raise AuditError(f"{d}: the inclusion record does not match the canaries")
    ex = Examples([r["id"] for r in rows], [r["text"] for r in rows], np.zeros(len(rows)))
    cs = CanarySet(ex, inc, rec["design"], [r["prefix"] for r in rows], int(rec["repeat"]))
    return cs


def _claim_status(eps_lb: float, ceiling: float, claimed: float | None) -> str:
    if claimed is None:
        return "no-claim"
    if eps_lb > claimed:
        return "VIOLATED"
    if ceiling <= claimed:
        return "untestable"
    return "consistent"


#: what a VIOLATED black-box canary audit points at (docs/dp-bugs.md "How to read the
#: result"): black-box input canaries catch gross errors only
WHERE_TO_LOOK = (
    "the black-box canaries flag gross errors only: check the noise scale first (divided by "
    "the batch size or the accumulation steps?), then that every trainable parameter is "
    "clipped and noised, then the accountant's inputs (sample rate, steps, δ); "
    "privacy-audit dp-check SETUP.py tests each part of your step directly and says where "
    "(docs/dp-check.md)"
)


def _status_guidance(status: str, ceiling: float, n: int) -> str:
    if status == "VIOLATED":
        return WHERE_TO_LOOK
    if status == "untestable":
        return (
            f"with {n} canaries the most any outcome could certify is ε = {ceiling:.3g}, at or "
            "below the claim; the ceiling grows with the number of canaries (canaries make "
            "--n), or test the code itself with privacy-audit dp-check"
        )
    if status == "consistent":
        return (
            "not evidence that the code is right: black-box canaries missed every subtle bug "
            "of the benchmark (docs/dp-bugs.md); test the code with privacy-audit dp-check"
        )
    return ""


def audit_scores(scores, cs: CanarySet, delta: float, confidence: float, claimed, seed=0) -> dict:
    from privacy_audit.stats.canary_bounds import one_run_group_best, tpr_at_1pct_fpr
    from privacy_audit.stats.metrics import auc

    b = one_run_group_best(scores, cs.included, delta, cs.repeat, confidence)
    t = tpr_at_1pct_fpr(scores, cs.included, confidence=confidence, seed=seed)
    both = cs.included.any() and not cs.included.all()
    return {
        "epsilon_lb": b["epsilon"],
        "ceiling": b["ceiling"],
        "method": b.get("method") or "one-run (Steinke et al. 2023)",
        "estimator": b.get("estimator"),
        "guesses": b["guesses"],
        "correct": b["correct"],
        "tpr_at_1pct_fpr": t["tpr"],
        "tpr_at_1pct_fpr_ci": t["ci"],
        "auc": auc(scores, cs.included) if both else float("nan"),
        "claim_status": _claim_status(b["epsilon"], b["ceiling"], claimed),
        "where_to_look": _status_guidance(
            _claim_status(b["epsilon"], b["ceiling"], claimed), b["ceiling"], len(cs.included)
        ),
    }


def _report_html(res: dict) -> str:
    e = html.escape
    rows = [
        ("design", res["design"]),
        (
            "canaries",
            f"{res['canaries']} ({res['n_in']} in / {res['n_out']} out), repeat {res['repeat']}",
        ),
        ("threat model", res["threat_model"]),
        ("score", res.get("score", "raw")),
        (
            "ε lower bound",
            f"{res['epsilon_lb']:.3f} ({res['confidence']:.0%}, δ = {res['delta']:g})",
        ),
        ("ceiling of this design", f"{res['ceiling']:.3f}"),
        ("method", res["method"]),
        (
            "TPR at 1% FPR",
            f"{res['tpr_at_1pct_fpr']:.3f} [{res['tpr_at_1pct_fpr_ci'][0]:.3f}, "
            f"{res['tpr_at_1pct_fpr_ci'][1]:.3f}]",
        ),
        ("AUC", f"{res['auc']:.3f}"),
        ("claimed ε", "none" if res["claimed_epsilon"] is None else f"{res['claimed_epsilon']:g}"),
        ("claim", res["claim_status"]),
        *(
            [
                (
                    "where to look" if res["claim_status"] == "VIOLATED" else "what it means",
                    res["where_to_look"],
                )
            ]
            if res.get("where_to_look")
            else []
        ),
        ("aggregate-only", "yes" if res["aggregate_only"] else "no"),
    ]
    body = "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in rows)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>canary audit</title></head>"
        f"<body><h1>One-run canary audit of {e(res['model'])}</h1><table>{body}</table>"
        f"<p>{e(res['note'])}</p></body></html>\n"
    )


def audit(args) -> int:
    from privacy_audit.audit.epsilon.lm_canaries import (
        calibrated_scores,
        hf_secret_scores,
        load_user_lm,
    )

    model_dir, canaries_dir = args.model, args.canaries
    reference_dir = args.reference
    delta, confidence = args.delta, args.confidence
    if args.config is not None:
        from privacy_audit.audit.config import load_config

        cfg = load_config(args.config)
        model_dir = model_dir or cfg.epsilon.get("model_dir")
        canaries_dir = canaries_dir or cfg.epsilon.get("canaries_dir")
        reference_dir = reference_dir or cfg.epsilon.get("reference_dir")
        delta = delta if delta is not None else float(cfg.metrics["delta"])
        confidence = confidence if confidence is not None else float(cfg.metrics["confidence"])
    if delta is None:  # the bound's δ: the claim's when stated
        delta = args.claimed_delta if args.claimed_delta is not None else 1e-5
    confidence = 0.95 if confidence is None else confidence
    if model_dir is None or canaries_dir is None:
        raise AuditError("need --model and --canaries (or [epsilon] model_dir / canaries_dir)")
    if not 0 < delta < 1 or not 0 < confidence < 1:
        raise AuditError("--delta and --confidence must be in (0, 1)")
    if args.claimed_epsilon is not None and not args.claimed_epsilon > 0:
        raise AuditError("--claimed-epsilon must be positive")
    if args.claimed_delta is not None and not delta >= args.claimed_delta:
        # a bound at a smaller δ tests (ε, δ)-DP, which an (ε, claimed δ) claim never promised
        raise AuditError("--delta must be at least --claimed-delta to test the claim")
    held = [f for f in ("results.json", "report.html") if (Path(args.out) / f).exists()]
    if held and not args.force:
        # a finished audit is a record (a gate's baseline, say): never replaced silently
        raise AuditError(
            f"{args.out} already holds a canary audit ({', '.join(held)}); use --force to "
            "replace it, or another --out"
        )
    from privacy_audit.audit.outputs import check_outputs, dir_outputs

    check_outputs(
        dir_outputs("--out", args.out, ("results.json", "report.html")),
        [
            ("--model", model_dir),
            *[("--canaries", Path(canaries_dir) / f) for f in (*FILES[:2], "tokenizer")],
            ("--tokenizer", args.tokenizer),
            ("--reference", reference_dir),
            ("--config", args.config),
        ],
    )
    cs = load_canaries(canaries_dir)
    tok_dir = args.tokenizer
    if tok_dir is None and (Path(canaries_dir) / "tokenizer").is_dir():
        if not (Path(model_dir) / "tokenizer_config.json").is_file():
            tok_dir = str(Path(canaries_dir) / "tokenizer")
    out = Path(args.out)
    model, tokenizer = load_user_lm(model_dir, tok_dir)
    reference = None
    if reference_dir is not None:  # the model before training, same tokenizer
        try:
            reference = load_user_lm(reference_dir, tok_dir)[0]
        except AuditError as exc:
            raise AuditError(f"--reference: {exc}") from None
    _log(f"scoring {len(cs.included)} canaries on {model_dir}", args.quiet)
    try:
        scores = hf_secret_scores(model, tokenizer, cs)
        if reference is not None:
            # score = log p_after(secret) − log p_before(secret): the texts only, no bits
            _log(f"scoring the same canaries on the reference {reference_dir}", args.quiet)
            scores = calibrated_scores(scores, hf_secret_scores(reference, tokenizer, cs))
    except ValueError as exc:
        raise AuditError(str(exc)) from exc
    res: dict[str, Any] = {
        "schema": SCHEMA,
        "model": Path(model_dir).name,
        "design": cs.kind,
        "canaries": len(cs.included),
        "n_in": int(cs.included.sum()),
        "n_out": int(len(cs.included) - cs.included.sum()),
        "repeat": cs.repeat,
        "delta": delta,
        "confidence": confidence,
        "claimed_epsilon": args.claimed_epsilon,
        "claimed_delta": args.claimed_delta,
        "aggregate_only": bool(args.aggregate_only),
        "threat_model": (
            "black-box: log-probabilities of the released model"
            + (" and of the model before training (--reference)" if reference is not None else "")
            + "; canaries in ONE training run"
        ),
        "score": "calibrated by the reference" if reference is not None else "raw",
        **audit_scores(scores, cs, delta, confidence, args.claimed_epsilon),
        "note": "A lower bound can contradict a claim but never confirm it; 'untestable' means "
        "this design's ceiling is at or below the claim, so no outcome at this number of "
        "canaries could contradict it (the ceiling grows with the number of canaries).",
    }
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(out / "results.json", json.dumps(res, indent=1, ensure_ascii=False))
    _atomic_write(out / "report.html", _report_html(res))
    lo, hi = res["tpr_at_1pct_fpr_ci"]
    print(
        f"{cs.kind} canaries: ε ≥ {res['epsilon_lb']:.3f} ({confidence:.0%}, δ={delta:g}; ceiling "
        f"{res['ceiling']:.3f}); TPR@1%FPR {res['tpr_at_1pct_fpr']:.3f} [{lo:.3f}, {hi:.3f}]; "
        f"claim: {res['claim_status']}. Report: {out / 'report.html'}"
    )
    if res.get("where_to_look"):
        label = "where to look" if res["claim_status"] == "VIOLATED" else "what it means"
        print(f"{label}: {res['where_to_look']}")
    return 0
