"""The report's "cost of privacy" table (``[report] bench``), read from a JSON file that
``privacy-audit bench cost-of-privacy --out FILE`` wrote. The benchmark itself lives in
audit/benchmarks/cost_of_privacy.py; reading its output needs none of it (no torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privacy_audit.ground.errors import AuditError


def cost_table_from_bench_json(path) -> dict[str, Any]:
    """The "cost of privacy" table for the report, from a ``privacy-audit bench`` JSON
    file holding a ``cost-of-privacy`` result. AuditError on a missing or foreign file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AuditError(f"bench file {str(p)!r} (report.bench) does not exist") from None
    except (OSError, ValueError) as exc:
        raise AuditError(f"bench file {str(p)!r} is not readable JSON: {exc}") from None
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    found = [b for b in benches or [] if isinstance(b, dict) and b.get("name") == "cost-of-privacy"]
    if not found or "cost_of_privacy_table" not in (found[0].get("setup") or {}):
        raise AuditError(
            f"bench file {str(p)!r} holds no cost-of-privacy result; write one with "
            "'privacy-audit bench cost-of-privacy --out FILE'"
        )
    res = found[0]
    budget = res["setup"].get("largest_batch_in_budget")
    return {
        "rows": res["setup"]["cost_of_privacy_table"],
        "setup": {
            k: v
            for k, v in res["setup"].items()
            if k not in ("cost_of_privacy_table", "largest_batch_in_budget")
        }
        | ({"largest_batch_in_budget": budget_note(budget)} if budget else {}),
        "quick": bool((data.get("settings") or {}).get("quick", False)),
        "source": str(p),
    }


def budget_note(budget: dict[str, Any]) -> str:
    """The largest-batch-in-budget search (``bench cost-of-privacy --memory-budget-gb``) as one
    line: each method's largest fitting batch, or the bracket the bisection left."""
    parts = []
    for k, r in budget["methods"].items():
        if r["largest_fit"] is None:
            parts.append(f"{k}: none fits")
        else:
            top = "cap" if r["smallest_fail"] is None else r["smallest_fail"] - 1
            b = r["largest_fit"]
            parts.append(f"{k}: B = {b}" if top == b else f"{k}: B = {b}..{top}")
    ratio = budget.get("phantom_over_ghost_largest_batch")
    return (
        f"largest batch in {budget['budget_gb']:g} GiB (CPU peak RSS): "
        + ", ".join(parts)
        + (
            f"; phantom/ghost {ratio['value']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}]"
            if ratio
            else ""
        )
    )
