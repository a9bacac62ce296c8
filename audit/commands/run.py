"""``privacy-audit run [CONFIG | --model DIR ...]``: train or wrap the targets, run the
attacks, write report.html and results.json, print one VERDICT line per run."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path

from privacy_audit.audit.commands.common import (
    AGGREGATE_HELP,
    EXIT_OK,
    QUICK_HELP,
    RUN_LOG,
    add_executor_args,
    capture_library_output,
    check_dir_option,
    inside,
    named_by_flags,
    no_folder_left_on_interrupt,
    verdict_line,
)
from privacy_audit.audit.commands.config_builders import (
    EXTRACTION_FLAGS,
    add_model_args,
    check_attack_names,
    one_line_config,
    with_attacks,
)
from privacy_audit.ground.errors import AuditError

NAME = "run"


def add_parser(sub) -> None:
    r = sub.add_parser(
        "run", help="train/wrap targets, run the attacks, write report.html and results.json"
    )
    r.add_argument(
        "config", nargs="?", help="TOML config (default: the bundled non-private vs DP-SGD audit)"
    )
    r.add_argument("--out", default="audit-out", help="output directory (default: audit-out)")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    r.add_argument("--aggregate-only", action="store_true", help=AGGREGATE_HELP)
    r.add_argument("--quick", action="store_true", help=QUICK_HELP)
    add_model_args(r)
    add_executor_args(r)


def run(args, epsilon: bool | None = None) -> int:
    one_line = (
        any(
            # identity, not ==: 0 == False, so `--max-length 0` read as "not given" and
            # ran the bundled default audit
            getattr(args, k, None) is not None and getattr(args, k, None) is not False
            for k in ("model", "members", "nonmembers", "test", "reference", "adapter", "kind")
            + ("max_length", "device", "dtype", "allow_uninitialized")
            + (*EXTRACTION_FLAGS, "leakage_top", "per_token", "public", "attacks")
        )
        or getattr(args, "add_bos", None) is not None
    )  # --no-add-bos is False, still given
    if getattr(args, "attacks", None) is not None:
        # exit 2 on an unknown name before any work, and before torch is imported
        check_attack_names(args.attacks, getattr(args, "model", None), getattr(args, "kind", None))
    from privacy_audit.audit.config import load_config
    from privacy_audit.audit.results import check_output_dir, write_outputs
    from privacy_audit.audit.runner import run_audit

    quick = getattr(args, "quick", False)
    if one_line:
        if quick:
            raise AuditError("--quick applies to a bundled config (run NAME --quick), not --model")
        cfg, bundled = one_line_config(args), None
    else:
        from privacy_audit.audit.configs.costs import bundled_name, load_quick

        bundled = bundled_name(args.config)
        if quick and bundled is None:
            raise AuditError(f"--quick applies to the bundled configs only, not to {args.config!r}")
        cfg = load_quick(bundled) if quick else load_config(args.config)
    from privacy_audit.audit.target_resolution import resolve_targets

    cfg = resolve_targets(cfg)  # model directories checked before any work or output
    if getattr(args, "attacks", None) is not None:
        cfg = with_attacks(args, cfg)
    if args.aggregate_only:
        cfg = dataclasses.replace(cfg, aggregate_only=True)
    from privacy_audit.audit.scale.executors import ExecutorSpec

    if args.workers is not None and args.workers < 1:
        raise AuditError(f"--workers must be at least 1, got {args.workers}")
    spec = ExecutorSpec.from_config(
        cfg.executor, kind=args.executor, address=args.address, workers=args.workers
    )
    if spec.address and spec.kind != "ray":
        raise AuditError("--address applies only with --executor ray")
    if spec.kind == "ray":
        from privacy_audit.audit.scale.executors import import_ray

        import_ray()  # the missing extra is named before any work
    run_dir = args.run_dir
    if run_dir is None and not cfg.aggregate_only:
        run_dir = str(Path(args.out) / "run")
    if args.resume and run_dir is None:
        raise AuditError("--resume with --aggregate-only needs --run-dir (it keeps raw ids)")
    check_dir_option(args.out, "--out")
    if run_dir is not None:
        check_dir_option(run_dir, "--run-dir")
    from privacy_audit.audit.outputs import check_outputs, config_input_paths, dir_outputs

    check_outputs(  # no output may be an input
        dir_outputs("--out", args.out, ("report.html", "results.json", RUN_LOG))
        + dir_outputs("--run-dir", run_dir, ("inputs.json", "events.log")),
        config_input_paths(cfg, flags=one_line),
    )
    if bundled is not None and not args.quiet:  # what a bundled config costs, before any work
        from privacy_audit.audit.configs.costs import COSTS, expected_time_line

        if bundled in COSTS:
            print(expected_time_line(bundled, quick), file=sys.stderr, flush=True)
    from privacy_audit.ground.lock import DirLock

    created = not Path(args.out).exists()
    with no_folder_left_on_interrupt(args.out, created), contextlib.ExitStack() as locks:
        # one live run per directory: a second run is refused before it clears or writes
        locks.enter_context(DirLock(args.out, "--out"))
        if run_dir is not None and not inside(run_dir, args.out):
            locks.enter_context(DirLock(run_dir, "--run-dir"))
        check_output_dir(args.out)
        flags = {f: cfg.data.get(k) for f, k in (("--members", "members"), ("--test", "test"))}
        flags["--nonmembers"] = cfg.data.get("nonmembers")
        flags["--fresh"] = cfg.data.get("fresh")
        from privacy_audit.audit.timing import StageTimer, active
        from privacy_audit.audit.timing import one_line as timing_line

        # "setup": imports (torch, transformers) and the glue between the named stages
        with (
            named_by_flags(flags if one_line else {}),
            active(StageTimer(progress=not args.quiet, root="setup")),
        ):
            with capture_library_output(Path(args.out) / RUN_LOG):
                results = run_audit(
                    cfg,
                    progress=not args.quiet,
                    epsilon=epsilon,
                    executor=spec,
                    run_dir=run_dir,
                    resume=args.resume,
                )
            html, js = write_outputs(results, args.out)
    for run in results["runs"]:
        print(verdict_line(run))
    if results.get("timing") and not args.quiet:  # --quiet: the VERDICT lines only
        print(timing_line(results["timing"]))
    if not args.quiet:
        print(f"report:  {html}")
        print(f"results: {js}")
    return EXIT_OK
