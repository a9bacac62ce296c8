"""``privacy-audit dataset-inference [CONFIG | --model DIR --suspect F --validation F]``:
was this set of texts used to train the model? The flags and outputs; the test itself
(loading, split check, scoring) is :mod:`privacy_audit.audit.dataset_inference_pipeline`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from privacy_audit.audit.commands.common import (
    AGGREGATE_HELP,
    EXIT_OK,
    RUN_LOG,
    capture_library_output,
    check_dir_option,
    check_seed,
    named_by_flags,
    no_folder_left_on_interrupt,
    one_line_text,
)
from privacy_audit.ground.errors import AuditError

NAME = "dataset-inference"


def add_parser(sub) -> None:
    """``dataset-inference``: a p-value for "was this set of texts trained on?"."""
    d = sub.add_parser(
        "dataset-inference",
        help="test whether a suspect set of texts was used to train a causal LM (Maini et al. "
        "2024): p-value, effect size, after a split check of suspect vs validation",
    )
    d.add_argument("config", nargs="?", help="TOML config with [target] and [dataset_inference]")
    d.add_argument("--model", metavar="DIR", help="local Hugging Face causal LM directory")
    d.add_argument("--suspect", metavar="FILE", help="texts that may have been trained on")
    d.add_argument(
        "--validation", metavar="FILE", help="same-distribution texts known not to be trained on"
    )
    d.add_argument("--reference", metavar="DIR", help="reference causal LM (adds a feature)")
    d.add_argument("--adapter", metavar="DIR", help="PEFT/LoRA adapter on top of --model")
    d.add_argument(
        "--max-length",
        type=int,
        help="tokens per text (default: the model's context length, at most 512)",
    )
    d.add_argument("--device", choices=("auto", "cpu", "cuda"), help="default: auto")
    d.add_argument("--dtype", choices=("auto", "float32", "bfloat16", "float16"))
    d.add_argument("--seed", type=int, help="fixes the one aggregator/test split (default 0)")
    d.add_argument("--fit-fraction", type=float, help="share fitting the aggregator (0.5)")
    d.add_argument("--alpha", type=float, help="significance level of the verdict (0.01)")
    d.add_argument(
        "--group-by",
        metavar="COLUMN",
        help="the column naming each text's user: users become the unit (split, test, a "
        "p-value per suspect user); per-user .txt directories need no column",
    )
    d.add_argument("--fdr", type=float, help="with users: FDR of the users found (0.05)")
    d.add_argument("--out", default="di-out", help="output directory (default: di-out)")
    d.add_argument("--quiet", action="store_true", help="no progress output")
    d.add_argument("--aggregate-only", action="store_true", help=AGGREGATE_HELP)
    d.add_argument("--executor", choices=("local", "ray"), help="where texts are scored")
    d.add_argument("--address", help="Ray cluster address (with --executor ray)")


def run(args) -> int:
    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.dataset_inference_pipeline import (
        load_di_config,
        parse_section,
        render_html,
        run_dataset_inference,
    )
    from privacy_audit.audit.results import check_output_dir
    from privacy_audit.audit.scale.executors import ExecutorSpec
    from privacy_audit.audit.target_resolution import resolve_targets
    from privacy_audit.ground.io import dumps_json, publish_together

    flags = ("model", "suspect", "validation", "reference", "adapter", "max_length", "dtype")
    if args.config is not None:
        if any(getattr(args, k) is not None for k in flags):
            raise AuditError("give either a config file or --model/--suspect/--validation")
        cfg, options = load_di_config(args.config)
    else:
        if args.model is None or args.suspect is None or args.validation is None:
            raise AuditError("dataset-inference needs --model DIR --suspect F --validation F")
        from privacy_audit.audit.data import check_input_file

        check_input_file(args.suspect, "--suspect")
        check_input_file(args.validation, "--validation")
        target: dict = {"audit_dir": args.model, "kind": "causal-lm"}
        for key, value in (
            ("adapter_dir", args.adapter),
            ("reference_dir", args.reference),
            ("max_length", args.max_length),
            ("dtype", args.dtype),
        ):
            if value is not None:
                target[key] = value
        raw: dict = {"title": f"Dataset inference on {Path(args.model).name}", "target": target}
        raw["data"] = {"members": args.suspect, "nonmembers": args.validation}
        if args.device is not None:
            raw["device"] = args.device
        cfg = parse_config(raw, source="command line (--model)", base_dir=Path.cwd())
        options = parse_section({"suspect": args.suspect, "validation": args.validation})
    for key, value in (
        ("fit_fraction", args.fit_fraction),
        ("alpha", args.alpha),
        ("group", args.group_by),
        ("fdr", args.fdr),
    ):
        if value is not None:
            options = {**options, **parse_section({**options, key: value})}
    if args.fdr is not None and not options.get("group") and not Path(options["suspect"]).is_dir():
        raise AuditError(
            "--fdr is the false-discovery rate of the users found; it needs users "
            "(--group-by COLUMN, or one .txt file per user)"
        )
    if args.seed is not None:
        check_seed(args.seed)
        cfg = dataclasses.replace(cfg, seed=args.seed)
    if args.aggregate_only:
        cfg = dataclasses.replace(cfg, aggregate_only=True)
    cfg = resolve_targets(cfg)
    spec = ExecutorSpec.from_config(cfg.executor, kind=args.executor, address=args.address)
    if spec.address and spec.kind != "ray":
        raise AuditError("--address applies only with --executor ray")
    if spec.kind == "ray":
        from privacy_audit.audit.scale.executors import import_ray

        import_ray()
    check_dir_option(args.out, "--out")
    from privacy_audit.audit.outputs import check_outputs, config_input_paths, dir_outputs

    check_outputs(
        dir_outputs("--out", args.out, ("report.html", "results.json", RUN_LOG)),
        [("--suspect", options.get("suspect")), ("--validation", options.get("validation"))]
        + config_input_paths(cfg, flags=args.config is None),
    )
    created = not Path(args.out).exists()
    check_output_dir(args.out)
    flags = {"--suspect": cfg.data.get("members"), "--validation": cfg.data.get("nonmembers")}
    with (
        no_folder_left_on_interrupt(args.out, created),
        named_by_flags(flags if args.config is None else {}),
    ):
        with capture_library_output(Path(args.out) / RUN_LOG):
            results = run_dataset_inference(cfg, options, not args.quiet, spec)
    try:
        html, js = publish_together(
            Path(args.out),
            [("report.html", render_html(results)), ("results.json", dumps_json(results))],
        )
    except OSError as exc:
        raise AuditError(f"cannot write to {args.out!r}: {exc.strerror or exc}") from None
    r = results["dataset_inference"]
    p = r.get("p_value")
    print(
        f"DATASET INFERENCE: {str(r['status']).upper()}; "
        + (f"p = {p:.3g}; d = {r['effect_size']:.3f}; " if p is not None else "no p-value; ")
        + one_line_text(r["text"])
    )
    if not args.quiet:
        print(f"report:  {html}")
        print(f"results: {js}")
    return EXIT_OK
