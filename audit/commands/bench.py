"""``privacy-audit bench [NAME ...]``: the cost of privacy measured on this machine (each
defense's training-step time and memory beside non-private training, the suite's own
costs); prints ratios and writes JSON. The only command that loads
:mod:`privacy_audit.audit.benchmarks`."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from privacy_audit.audit.commands.common import EXIT_OK, check_writable
from privacy_audit.ground.errors import AuditError

NAME = "bench"


def add_parser(sub) -> None:
    from privacy_audit.audit.benchmarks import BENCHMARKS

    b = sub.add_parser(
        "bench",
        help="measure the cost of privacy: training-step time (and memory) of each defense "
        "beside non-private training, in one run; prints ratios and writes JSON",
    )
    b.add_argument(
        "names", nargs="*", help=f"benchmarks to run (default: all): {', '.join(BENCHMARKS)}"
    )
    b.add_argument("--out", default="bench.json", help="JSON output file (default: bench.json)")
    b.add_argument("--repeats", type=int, default=10, help="timed steps per case (default: 10)")
    b.add_argument("--warmup", type=int, default=2, help="untimed steps per case (default: 2)")
    b.add_argument(
        "--quick", action="store_true", help="small shapes for a smoke run (not for reporting)"
    )
    b.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument(
        "--seeds",
        type=int,
        help="dp-check: seeds per setup (default 20; 3 with --quick)",
    )
    b.add_argument(
        "--sequences",
        type=int,
        help="byo-lm: texts to score (default 2000; --quick 16); split-check: texts per side",
    )
    b.add_argument("--seq-len", type=int, help="byo-lm: tokens per text (default 256)")
    b.add_argument("--lm-batch", type=int, help="byo-lm: scoring batch size (default 8)")
    b.add_argument(
        "--rounds",
        type=int,
        help="byo-lm: passes over all the texts, the cases side by side in each; reports "
        "each round's ratio (default 1)",
    )
    b.add_argument(
        "--extraction",
        action="store_true",
        help="byo-lm: add a case with extraction risk on (target: <= 1.2x the suite's time)",
    )
    b.add_argument(
        "--lm-reference",
        action="store_true",
        help="byo-lm: add cases with a reference model (suite+reference vs plain x2; "
        "target: <= 1.15x)",
    )
    b.add_argument(
        "--users-design",
        choices=("disjoint-reference", "all-users"),
        help="users: disjoint-reference (default; reference model on disjoint changelog "
        "users, 200 non-member users) or all-users (reference model on generic prose, every "
        "user not drawn as a member is a non-member user)",
    )
    b.add_argument(
        "--lm-reference-only",
        action="store_true",
        help="byo-lm: only the two reference cases (plain x2, suite+reference)",
    )
    b.add_argument(
        "--cost-cases",
        metavar="A,B",
        help="cost-of-privacy: private cases to run beside non-private (default all: "
        "phantom,explicit,ghost,opacus; phantom is required)",
    )
    b.add_argument(
        "--largest-only",
        action="store_true",
        help="cost-of-privacy: only the largest-vocabulary (GPT-2-small-shaped) case",
    )
    b.add_argument(
        "--memory-budget-gb",
        type=float,
        metavar="N",
        help="cost-of-privacy: also find, per method, the largest batch whose step fits in N "
        "GiB of process peak RSS (one fresh process per probe; the paper's max-batch metric)",
    )
    b.add_argument(
        "--memory-max-batch",
        type=int,
        metavar="B",
        help="cost-of-privacy: cap of the --memory-budget-gb search (default 512)",
    )
    _add_scale_bench_args(b)


def _add_scale_bench_args(b) -> None:
    """``bench scale``: the own-model audit at growing n beside a plain loop."""
    b.add_argument(
        "--scale-sizes",
        metavar="N,N,...",
        help="scale: texts per side (default 100,1000,10000; 100000 as an option)",
    )
    b.add_argument(
        "--scale-tokens", metavar="T,T,...", help="scale: tokens per text (default 64,256,512)"
    )
    b.add_argument(
        "--scale-workdir",
        metavar="DIR",
        help="scale: keep the model, texts, outputs and scale-progress.json here "
        "(default: a temporary directory, removed)",
    )
    b.add_argument(
        "--scale-suite-only",
        action="store_true",
        help="scale: no plain loop (peak RSS of the suite alone, e.g. at 100000 per side)",
    )
    b.add_argument(
        "--scale-model",
        metavar="4x256|tiny",
        help="scale: the model (default 4x256: 4 layers x 256; tiny: 1 layer x 64), "
        "vocabulary 4,096 for both",
    )


def _scale_options(args, names) -> dict:
    """The ``bench scale`` options, checked before anything runs."""
    extra: dict = {}
    for flag, key, lo, hi in (
        ("scale_sizes", "sizes", 2, 10**6),
        ("scale_tokens", "tokens", 8, 512),
    ):
        raw = getattr(args, flag, None)
        if raw is None:
            continue
        if "scale" not in names:
            raise AuditError(f"--{flag.replace('_', '-')} applies to the scale benchmark only")
        try:
            vals = [int(v) for v in raw.split(",") if v.strip()]
        except ValueError:
            vals = []
        if not vals or any(not lo <= v <= hi for v in vals):
            raise AuditError(
                f"--{flag.replace('_', '-')} must be integers in [{lo}, {hi}], comma-separated; "
                f"got {raw!r}"
            )
        extra[key] = vals
    for flag, key in (
        ("scale_workdir", "workdir"),
        ("scale_suite_only", "suite_only"),
        ("scale_model", "model"),
    ):
        val = getattr(args, flag, None)
        if val is not None and val is not False:  # identity: 0 == False
            if "scale" not in names:
                raise AuditError(f"--{flag.replace('_', '-')} applies to the scale benchmark only")
            extra[key] = val
    if extra.get("model") not in (None, "4x256", "tiny"):
        raise AuditError(f"--scale-model must be 4x256 or tiny; got {extra['model']!r}")
    return extra


def _cost_options(args, names) -> dict:
    """The cost-of-privacy options, checked before anything runs."""
    from privacy_audit.audit.benchmarks.cost_of_privacy import CASES

    extra: dict = {}
    given = [
        a
        for a, v in (
            ("--cost-cases", args.cost_cases),
            ("--largest-only", args.largest_only),
            ("--memory-budget-gb", args.memory_budget_gb),
            ("--memory-max-batch", args.memory_max_batch),
        )
        if v is not None and v is not False  # identity: 0 == False
    ]
    if not given:
        return extra
    if "cost-of-privacy" not in names:
        raise AuditError(f"{given[0]} applies to the cost-of-privacy benchmark only")
    if args.cost_cases is not None:
        cases = [c.strip() for c in args.cost_cases.split(",") if c.strip()]
        bad = [c for c in cases if c not in CASES]
        if bad or "phantom" not in cases:
            raise AuditError(
                f"--cost-cases must name phantom and only cases from {', '.join(CASES)}; "
                f"got {args.cost_cases!r}"
            )
        extra["cases"] = cases
    if args.largest_only:
        extra["largest_only"] = True
    if args.memory_budget_gb is not None:
        gb = args.memory_budget_gb
        if not (gb == gb and 0 < gb < 1e4):
            raise AuditError(f"--memory-budget-gb must be a positive size in GiB, got {gb}")
        extra["memory_budget_gb"] = gb
    if args.memory_max_batch is not None:
        if args.memory_budget_gb is None:
            raise AuditError("--memory-max-batch needs --memory-budget-gb")
        if args.memory_max_batch < 1:
            raise AuditError(f"--memory-max-batch must be at least 1, got {args.memory_max_batch}")
        extra["memory_max_batch"] = args.memory_max_batch
    return extra


def run(args) -> int:
    import importlib
    import platform

    import torch

    from privacy_audit.audit.benchmarks import BENCHMARKS
    from privacy_audit.audit.benchmarks.timing import BenchSettings
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    names = args.names or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise AuditError(f"unknown benchmark {unknown[0]!r}; allowed: {', '.join(BENCHMARKS)}")
    if args.repeats < 1:
        raise AuditError(f"--repeats must be at least 1, got {args.repeats}")
    if args.warmup < 0:
        raise AuditError(f"--warmup must be >= 0, got {args.warmup}")
    if args.threads is not None:
        if args.threads < 1:
            raise AuditError(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    from privacy_audit.audit.outputs import check_outputs

    check_outputs([("--out", args.out)])
    check_writable(args.out, "--out")
    extra = {}
    for key, value in (
        ("sequences", args.sequences),
        ("seq_len", args.seq_len),
        ("batch_size", args.lm_batch),
        ("rounds", getattr(args, "rounds", None)),
    ):
        if value is not None:
            if value < (3 if key == "seq_len" else 1):
                raise AuditError(f"--{key.replace('_', '-')} is too small: {value}")
            extra[key] = value
    if "rounds" in extra and "byo-lm" not in names:
        raise AuditError("--rounds applies to the byo-lm benchmark only")
    if getattr(args, "lm_reference", False):
        if "byo-lm" not in names:
            raise AuditError("--lm-reference applies to the byo-lm benchmark only")
        extra["reference"] = True
    if getattr(args, "lm_reference_only", False):
        if "byo-lm" not in names:
            raise AuditError("--lm-reference-only applies to the byo-lm benchmark only")
        extra["reference_only"] = True
    if args.extraction:
        if "byo-lm" not in names:
            raise AuditError("--extraction applies to the byo-lm benchmark only")
        extra["extraction"] = True
    if args.seeds is not None:
        if "dp-check" not in names:
            raise AuditError("--seeds applies to the dp-check benchmark only")
        if args.seeds < 1:
            raise AuditError(f"--seeds must be at least 1, got {args.seeds}")
        extra["seeds"] = args.seeds
    extra |= _cost_options(args, names)
    extra |= _scale_options(args, names)
    if getattr(args, "users_design", None):
        if "users" not in names:
            raise AuditError("--users-design applies to the users benchmark only")
        extra["design"] = args.users_design
    if "users" in names:  # its per-text scores file goes beside the JSON record
        extra["out"] = args.out
    settings = BenchSettings(
        args.repeats, args.warmup, args.quick, args.seed, "cpu", args.threads, extra
    )
    results = []
    for name in names:
        module, func = BENCHMARKS[name].split(":")
        print(f"bench {name} ...", file=sys.stderr, flush=True)
        res = getattr(importlib.import_module(module), func)(settings).to_dict()
        results.append(res)
        print(f"\n{name} (reference: {res['reference']})")
        for case, t in res["cases"].items():
            ratio = res["ratios"].get(case)
            target = res.get("targets", {}).get(case, "")
            ratio_txt = f"{ratio:6.2f}x" if ratio is not None else "       "
            print(
                f"  {case:<28} {t['median_ms']:10.2f} ms  [{t['q1_ms']:.2f}, {t['q3_ms']:.2f}]"
                f"  {ratio_txt}  {target}"
            )
        for case, mem in (res.get("memory") or {}).items():
            print(f"  memory {case:<21} {mem}")
    payload = {
        "schema": "privacy-audit-bench/1",
        "settings": dataclasses.asdict(settings),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
        "benchmarks": results,
    }
    atomic_write_text(Path(args.out), dumps_json(payload))
    print(f"\nresults: {args.out}")
    return EXIT_OK
