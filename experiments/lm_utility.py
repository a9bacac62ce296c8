"""Utility of the bundled LM audit (``privacy-audit run lm``): test perplexity of every
model with its 95% bootstrap CI over test sequences, the unigram floor every model must
beat, and the public-pretrained starting point, recorded for the docs.

    python -m experiments.lm_utility --out docs/records/lm-utility.json

It runs the bundled ``lm`` config (or ``--config FILE``) through the ordinary runner,
keeping finished training tasks in ``<out>.rundir`` so an interrupted run resumes, or
reads an existing results.json (``--results``). The reference "public-pretrained only"
row is the model every defense starts from, before any private training: a private
fine-tuning that ends above it has made the model worse.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any


def pretrained_only_utility(cfg, data=None) -> dict[str, Any] | None:
    """Perplexity of the public-pretrained model on the test texts (see
    :func:`privacy_audit.audit.scale.plan.pretrained_only_utility`, which the runner uses)."""
    from privacy_audit.audit.scale.plan import pretrained_only_utility as start

    return start(cfg, data)


def summarise(results: dict[str, Any], pretrained: dict | None) -> dict[str, Any]:
    floor = results.get("utility_floor")
    if not isinstance(floor, dict):
        raise ValueError("results carry no utility_floor: not an LM audit the suite trained")
    rows = []
    for run in results["runs"]:
        u = run.get("utility") or {}
        claim = run.get("claim") or {}
        rows.append(
            {
                "run": run.get("name"),
                "defense": run.get("defense"),
                "perplexity": u.get("value"),
                "ci_low": u.get("ci_low"),
                "ci_high": u.get("ci_high"),
                "n_test_sequences": u.get("n"),
                "test_tokens": u.get("tokens"),
                "epsilon": claim.get("epsilon"),
                "delta": claim.get("delta"),
                "beats_unigram_floor": u.get("beats_unigram_floor"),
                "attack_auc": {
                    a.get("attack"): {
                        k: (a.get("metrics") or {}).get("auc", {}).get(k)
                        for k in ("value", "ci_low", "ci_high")
                    }
                    for a in run.get("attacks") or []
                    if isinstance((a.get("metrics") or {}).get("auc"), dict)
                },
                "below_pretrained_start": None
                if pretrained is None or u.get("ci_high") is None
                else bool(u["ci_high"] < pretrained["ci_low"]),
            }
        )
    return {
        "title": results.get("title"),
        "rows": rows,
        "unigram_floor": floor,
        "public_pretrained_only": pretrained,
        "claims_scope": floor.get("claims_scope"),
        "config": results.get("config", {}).get("target"),
        "train": results.get("config", {}).get("train"),
    }


def main(argv=None) -> int:
    import json

    from privacy_audit.audit.config import load_config
    from privacy_audit.audit.runner import run_audit
    from privacy_audit.ground.errors import AuditError
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="lm", help="bundled config name or TOML file")
    ap.add_argument("--out", default="lm-utility.json")
    ap.add_argument("--results", help="summarise this results.json instead of running")
    args = ap.parse_args(argv)
    out = Path(args.out)
    try:
        if not out.parent.is_dir():
            raise AuditError(f"output directory {str(out.parent)!r} does not exist")
        cfg = load_config(args.config)
        load = os.getloadavg()
        start = time.perf_counter()
        if args.results:
            p = Path(args.results)
            if not p.is_file():
                raise AuditError(f"results file {str(p)!r} does not exist")
            results = json.loads(p.read_text(encoding="utf-8"))
        else:
            rd = out.with_name(out.name + ".rundir")
            results = run_audit(cfg, progress=True, run_dir=rd, resume=rd.exists())
        summary = summarise(results, pretrained_only_utility(cfg))
    except (AuditError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary["command"] = f"python -m experiments.lm_utility --config {args.config} --out {args.out}"
    summary["seconds"] = time.perf_counter() - start
    summary["load_average_at_start"] = [round(x, 2) for x in load]
    summary["device"] = "cpu (no GPU)"
    atomic_write_text(out, dumps_json(summary))
    for r in summary["rows"]:
        print(
            f"{r['run']:<40} perplexity {r['perplexity']:.2f} [{r['ci_low']:.2f}, "
            f"{r['ci_high']:.2f}]  beats floor: {r['beats_unigram_floor']}"
        )
    f = summary["unigram_floor"]
    print(f"unigram floor {f['floor']:.2f}")
    if summary["public_pretrained_only"]:
        print(f"public-pretrained only {summary['public_pretrained_only']['value']:.2f}")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
