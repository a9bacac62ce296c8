"""Which records, and which parts of them, leak: the per-record leakage table and the
per-token map of a causal-LM audit.

Members are ranked by exposure: with a reference model, by the target-minus-reference
log-likelihood of the record, sum_t [log p_target(x_t | x_<t) - log p_ref(x_t | x_<t)]
(the likelihood-ratio signal; InfoRMIA, Tao and Shokri 2026, read it per token); without
one, by the score of the run's strongest membership attack. Each listed record's tokens
carry the same difference per token (or the target log-probability alone without a
reference), so memorised spans (names, numbers, identifiers) stand out, and its
extraction risk when ``[extraction]`` ran.

Everything is read from the token statistics the audit already computed (one forward
pass per text and model; nothing is scored again). Text goes only into
``run["leakage_map"]``, which aggregate-only runs never get; ``run["leakage_ranking"]``
(ids and scores, no text) is what ``privacy-audit export-risky`` reads.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Tokens shown per record in the map (a record's first tokens; the scored text is
#: already cut to max_length).
MAX_MAP_TOKENS = 512


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(float(x)) else None


def _token_pieces(release, ids) -> list[str]:
    hf = getattr(release.tokenizer, "hf", None)
    if hf is None:  # the suite's own LM tokenizer
        return [release.tokenizer.decode([int(i)]) for i in ids]
    return [hf.decode([int(i)]) for i in ids]


def _risk_by_id(run: dict) -> tuple[dict[str, dict[str, float | None]], list[int]]:
    for rec in run.get("leakage") or []:
        if rec.get("attack") == "extraction-risk" and rec.get("status") == "ok":
            records = rec["details"]["records"]
            queries = list(rec["details"]["queries"])
            out = {}
            for k, ident in enumerate(records["ids"]):
                out[str(ident)] = {str(n): records[f"risk@{n}"][k] for n in queries}
            return out, queries
    return {}, []


def build_leakage_map(
    run: dict[str, Any],
    release,
    members,
    reference=None,
    top: int = 10,
    per_token: bool = False,
    aggregate_only: bool = False,
) -> None:
    """Add ``leakage_ranking`` (and, unless ``aggregate_only``, ``leakage_map`` and with
    ``per_token`` ``per_token``) to ``run``, in place. ``members`` are the audited member
    :class:`~privacy_audit.defenses.base.Examples` (texts as scored)."""
    ids = [str(i) for i in members.ids]
    texts = list(members.texts)
    if not ids:
        return
    target = release.token_stats(texts)
    ref = reference.token_stats(texts) if reference is not None else None
    if ref is not None:
        scores = np.array(
            [float(t.log_probs.sum() - r.log_probs.sum()) for t, r in zip(target, ref, strict=True)]
        )
        by = "target - reference log-likelihood"
        shade = "target - reference log-probability per token (nats)"
    else:
        from privacy_audit.reports.verdict import strongest_attack

        best = strongest_attack(run)
        if best is None or not isinstance(best.get("examples"), dict):
            run["leakage_ranking"] = {
                "by": None,
                "reason": "no membership attack was measured, so no record can be ranked",
            }
            return
        ex = best["examples"]
        score_of = {
            str(i): s for i, s, m in zip(ex["ids"], ex["scores"], ex["members"], strict=True) if m
        }
        scores = np.array(
            [np.nan if score_of.get(i) is None else score_of[i] for i in ids], dtype=float
        )
        by = f"strongest attack: {best.get('attack')} (score)"
        shade = "target log-probability per token (nats)"
    if aggregate_only:  # no record ids, no text: nothing a reader could act on or join
        run["leakage_ranking"] = {"by": by, "withheld": "aggregate-only run: no record ids"}
        return
    valid = np.flatnonzero(np.isfinite(scores))
    order = valid[np.argsort(-scores[valid], kind="mergesort")]
    run["leakage_ranking"] = {
        "by": by,
        "ids": [ids[i] for i in order],
        "scores": [float(scores[i]) for i in order],
    }
    risks, queries = _risk_by_id(run)
    rows = []
    for i in order[: max(0, int(top))]:
        t = target[i]
        tok_ids = t.token_ids[:MAX_MAP_TOKENS]
        values = t.log_probs[:MAX_MAP_TOKENS]
        if ref is not None:
            values = values - ref[i].log_probs[:MAX_MAP_TOKENS]
        rows.append(
            {
                "id": ids[i],
                "score": float(scores[i]),
                "text": texts[i],
                "tokens": _token_pieces(release, tok_ids),
                "values": [_finite(v) for v in values],
                "extraction_risk": risks.get(ids[i]),
            }
        )
    run["leakage_map"] = {
        "ranked_by": by,
        "shade": shade,
        "reference": ref is not None,
        "queries": queries,
        "records": rows,
    }
    if per_token:
        run["per_token"] = {
            "ids": ids,
            "target_log_probs": [[_finite(v) for v in t.log_probs] for t in target],
            **(
                {"reference_log_probs": [[_finite(v) for v in r.log_probs] for r in ref]}
                if ref is not None
                else {}
            ),
        }


__all__ = ["build_leakage_map"]
