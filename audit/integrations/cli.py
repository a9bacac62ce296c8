"""Command line: ``privacy-audit run | epsilon | score | gate | bench | compare | experiment | claims | dataset-inference``.

Exit codes: 0 success; 1 the gate found a threshold exceeded or a regression against the
baseline; 2 bad input (one line on stderr naming the problem, nothing written); 3 an
internal error (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import math
import os
import re
import sys
from pathlib import Path

from privacy_audit.audit import __version__
from privacy_audit.ground.errors import AuditError

EXIT_OK, EXIT_GATE, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's default exit code is also 2; keep one line
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\n")


_AGGREGATE_HELP = (
    "write no training text and no raw example ids: ids become HMAC-SHA256 pseudonyms under a "
    "random salt that is never written, so they cannot be joined across runs "
    "(overrides [report] aggregate_only)"
)


_QUICK_HELP = (
    "a bundled config's small variant (within 5 minutes on a 2-core CPU), for trying it out "
    "and for CI; its numbers are not for reporting"
)


def _executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        help="where training tasks run (overrides [executor] kind): local (default) or ray",
    )
    p.add_argument(
        "--address",
        help="Ray cluster address (host:port, ray://host:port or auto); default: a local Ray",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="local: process-pool size (1 = in-process); ray: tasks in flight",
    )
    p.add_argument(
        "--run-dir",
        help="where finished tasks are kept (default: OUT/run; none with --aggregate-only)",
    )
    p.add_argument(
        "--resume", action="store_true", help="reuse finished tasks in the run directory"
    )


def _model_args(p: argparse.ArgumentParser) -> None:
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
    extraction = _extraction_flags(args)
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


def _extraction_flags(args) -> dict | None:
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


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="privacy-audit",
        description="Privacy auditing and attack evaluation for language models.",
    )
    p.add_argument("--version", action="version", version=f"privacy-audit {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser(
        "run", help="train/wrap targets, run the attacks, write report.html and results.json"
    )
    r.add_argument(
        "config", nargs="?", help="TOML config (default: the bundled non-private vs DP-SGD audit)"
    )
    r.add_argument("--out", default="audit-out", help="output directory (default: audit-out)")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    r.add_argument("--aggregate-only", action="store_true", help=_AGGREGATE_HELP)
    r.add_argument("--quick", action="store_true", help=_QUICK_HELP)
    _model_args(r)
    _executor_args(r)

    e = sub.add_parser(
        "epsilon",
        help="run plus the claimed-vs-audited ε audits (gradient canaries, one-run canaries, trade-off test)",
    )
    e.add_argument(
        "config", nargs="?", help="TOML config naming the defenses (default: the bundled audit)"
    )
    e.add_argument("--out", default="audit-out", help="output directory (default: audit-out)")
    e.add_argument("--quiet", action="store_true", help="no progress output")
    e.add_argument("--aggregate-only", action="store_true", help=_AGGREGATE_HELP)
    e.add_argument("--quick", action="store_true", help=_QUICK_HELP)
    _executor_args(e)

    c = sub.add_parser(
        "compare",
        help="one HTML page comparing finished runs (privacy-utility, AUC and TPR@low FPR per "
        "attack, claimed vs audited ε) and a table of the differences",
    )
    c.add_argument("runs", nargs="+", help="run output directories or results.json files")
    c.add_argument("--out", default="compare-out", help="output directory (default: compare-out)")

    s = sub.add_parser(
        "score", help="metrics, ε bound and report for your own scores (CSV: score,member[,id])"
    )
    s.add_argument("scores", help="CSV file with columns score,member and optionally id")
    s.add_argument(
        "--delta", type=float, default=1e-5, help="δ for the empirical ε lower bound (default 1e-5)"
    )
    s.add_argument(
        "--bootstrap", type=int, default=1000, help="bootstrap resamples for CIs (default 1000)"
    )
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default="audit-out", help="output directory (default: audit-out)")
    s.add_argument("--aggregate-only", action="store_true", help=_AGGREGATE_HELP)
    s.add_argument(
        "--group-by",
        metavar="COLUMN",
        help="the column naming each row's user (person): intervals resample users and each "
        "user's scores are aggregated per user (at least 4 users a side, each on one side)",
    )

    g = sub.add_parser(
        "gate",
        help="exit 1 if any attack exceeds a threshold or regressed against a baseline (for CI)",
    )
    g.add_argument("results", help="results.json written by 'run', 'epsilon' or 'score'")
    g.add_argument("--max-auc", type=float, help="a fraction in [0, 1]")
    g.add_argument("--max-tpr-at-1pct-fpr", type=float, help="a fraction in [0, 1]")
    g.add_argument(
        "--max-epsilon-lb",
        type=float,
        help="ε >= 0; holds every attack's empirical ε lower bound and every ε audit's bound "
        "(gradient canaries, one-run canaries, trade-off test), each by name",
    )
    g.add_argument(
        "--max-leakage",
        action="append",
        metavar="NAME=VALUE",
        help="threshold on a leakage headline (repeatable): inversion-recall, extraction-rate, "
        "extraction-risk@N (largest member risk within N queries), "
        "attribute-accuracy (fractions in [0, 1]), exposure (bits), mi (nats/token), "
        "attention-epsilon, or a leakage attack's name",
    )
    g.add_argument(
        "--allow-empty",
        action="store_true",
        help="pass when nothing was measured (default: zero measured results fail the gate)",
    )
    g.add_argument(
        "--strict",
        action="store_true",
        help="compare the upper end of each metric's CI; an inconclusive verdict fails",
    )
    g.add_argument(
        "--allow-shifted-split",
        action="store_true",
        help="pass a run whose member / non-member split is shifted (blind AUC above 0.5); "
        "by default it fails: its attack numbers are not about the model",
    )
    g.add_argument(
        "--baseline",
        metavar="BASELINE.json",
        help="a committed results.json: fail when a metric rose beyond its CI (see docs/gate.md)",
    )
    g.add_argument(
        "--tolerance",
        type=float,
        metavar="T",
        help="absolute slack a rise must also exceed to count as a regression (default 0)",
    )
    g.add_argument(
        "--fail-on-missing",
        action="store_true",
        help="fail when a run or attack of the baseline is missing from the results",
    )
    g.add_argument(
        "--match",
        action="append",
        metavar="NEW=BASE",
        help="compare the results run NEW with the baseline run BASE (repeatable); runs "
        "otherwise pair by name, or as the only run of each file",
    )
    g.add_argument(
        "--junit", metavar="FILE", help="write a JUnit XML report (testsuite privacy-gate)"
    )
    g.add_argument("--summary", metavar="FILE", help="write a JSON summary of the gate decision")

    from privacy_audit.audit.benchmarks import BENCHMARKS

    x = sub.add_parser(
        "export-risky",
        help="write the ids of the most exposed training records (to scrub or unlearn)",
        description="Read a results.json of a causal-LM audit and write the ids of its top K "
        "members, one per line: ranked by exposure (target - reference log-likelihood, or the "
        "strongest attack's score) or by extraction risk within N queries.",
    )
    x.add_argument("results", help="results.json written by 'run' (not --aggregate-only)")
    x.add_argument("--top", type=int, required=True, metavar="K", help="how many records")
    x.add_argument(
        "--by",
        default="exposure",
        metavar="exposure|extraction-risk@N",
        help="ranking (default exposure: the report's leakage table order)",
    )
    x.add_argument(
        "--by-user",
        action="store_true",
        help="write the K member users most at risk instead (an audit with [data] group / "
        "--group-by): ranked by the strongest user-level attack's score",
    )
    x.add_argument("--run", metavar="NAME", help="which run (default: the only one)")
    x.add_argument("--out", required=True, metavar="FILE", help="ids file to write (atomically)")

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
    _add_experiment_and_claims(sub)
    _add_dataset_inference(sub)
    sub.add_parser(
        "attacks",
        help="list every registered attack: what it does, what it needs, its cost in forward "
        "passes (the names run --model --attacks takes)",
    )

    from privacy_audit.audit.epsilon.pipeline import add_parser as _canaries_parser

    _canaries_parser(sub)
    from privacy_audit.audit.epsilon.dp_check.command import add_parser as _dp_check_parser

    _dp_check_parser(sub)
    return p


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


#: what ``experiment`` and ``claims`` say from an installed wheel
NO_CHECKOUT = (
    "the paper experiments and their recorded results (experiments/, docs/) are not "
    "installed with the package; run this from a source checkout of privacy-audit"
)


def checkout_root() -> Path | None:
    """The source checkout this CLI runs from (the folder holding pyproject.toml and
    experiments/ above the package), or None from an installed wheel."""
    root = Path(__file__).resolve().parents[2]  # <root>/audit/integrations/cli.py
    ok = (root / "pyproject.toml").is_file() and (root / "experiments" / "run.py").is_file()
    return root if ok else None


def _checkout_experiments():
    """The checkout's ``experiments.run`` module (the experiment registry), loaded only by
    the ``experiment`` command at run time; no product module imports an experiment."""
    import importlib
    import importlib.util

    root = checkout_root()
    if root is None:
        raise AuditError(NO_CHECKOUT + " (then: python -m experiments.run NAME --out FILE)")
    if "experiments" not in sys.modules:
        # the package by its path: putting the checkout's root on sys.path would let its
        # other folders (fixtures/, audit/, ...) shadow top-level packages
        folder = root / "experiments"
        spec = importlib.util.spec_from_file_location(
            "experiments", folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules["experiments"] = package
        spec.loader.exec_module(package)
    return importlib.import_module("experiments.run")


def _add_experiment_and_claims(sub) -> None:
    """``experiment`` (long utility runs behind the paper-claims table, resumable; from a
    checkout) and ``claims`` (the table itself, read from recorded JSON under docs/)."""
    e = sub.add_parser(
        "experiment",
        help="train and evaluate one paper-claim experiment (resumable per cell); writes JSON "
        "(from a source checkout: experiments/ is not installed)",
    )
    names = list(_checkout_experiments().EXPERIMENTS) if checkout_root() else None
    e.add_argument("name", choices=names, help="the experiment to run")
    e.add_argument("--out", required=True, help="JSON output file")
    e.add_argument(
        "--checkpoint-dir",
        help="directory for finished cells; a rerun with the same settings resumes from it",
    )
    e.add_argument("--seeds", type=int, default=3, help="training seeds per cell (default 3)")
    e.add_argument("--n-train", type=int, help="training examples (default: the experiment's)")
    e.add_argument("--n-test", type=int, help="test examples (default: the experiment's)")
    e.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    e.add_argument("--quick", action="store_true", help="tiny shapes (smoke run, not reported)")
    c = sub.add_parser(
        "claims",
        help="print the paper-claims table (paper's number, ours with CI, verdict, command) "
        "from the recorded results under docs/",
    )
    c.add_argument("--docs", default=None, help="folder of recorded results (default: docs/)")
    c.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    c.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")


def _add_dataset_inference(sub) -> None:
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
    d.add_argument("--aggregate-only", action="store_true", help=_AGGREGATE_HELP)
    d.add_argument("--executor", choices=("local", "ray"), help="where texts are scored")
    d.add_argument("--address", help="Ray cluster address (with --executor ray)")


def _cmd_dataset_inference(args) -> int:
    from privacy_audit.audit.config import parse_config, resolve_targets
    from privacy_audit.audit.dataset_inference_command import (
        load_di_config,
        parse_section,
        render_html,
        run_dataset_inference,
    )
    from privacy_audit.audit.results import check_output_dir
    from privacy_audit.audit.scale.executors import ExecutorSpec
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
        _check_seed(args.seed)
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
    _check_dir_option(args.out, "--out")
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
        _no_folder_left_on_interrupt(args.out, created),
        _named_by_flags(flags if args.config is None else {}),
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


def _peek_kind(model_dir: str | None) -> str | None:
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


def _check_attack_names(spec: str, model_dir: str | None = None, kind: str | None = None) -> None:
    from privacy_audit.attacks.catalog import check_names

    if kind not in ("causal-lm", "classifier"):
        kind = _peek_kind(model_dir)
    try:
        check_names(spec, kind)
    except ValueError as exc:
        raise AuditError(str(exc)) from None


def _with_attacks(args, cfg):
    """The one-line config again with ``--attacks`` expanded for the model's kind and the
    inputs given (--reference, --public); the offline reference attacks (LiRA, RMIA) run
    only when named (or with ``all``)."""
    from privacy_audit.attacks.catalog import expand
    from privacy_audit.audit.config import resolve_targets

    if args.model is None and args.adapter is None:
        raise AuditError("--attacks applies to run --model; in a config use [attacks] names")
    opts = cfg.audit or {}
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
    return dataclasses.replace(cfg, audit={**cfg.audit, "reference_attacks": refs})


def one_line_text(text: str) -> str:
    from privacy_audit.audit.integrations.gate import one_line

    return one_line(text)


def _cmd_run(args, epsilon: bool | None = None) -> int:
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
        _check_attack_names(args.attacks, getattr(args, "model", None), getattr(args, "kind", None))
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
    from privacy_audit.audit.config import resolve_targets

    cfg = resolve_targets(cfg)  # model directories checked before any work or output
    if getattr(args, "attacks", None) is not None:
        cfg = _with_attacks(args, cfg)
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
    _check_dir_option(args.out, "--out")
    if run_dir is not None:
        _check_dir_option(run_dir, "--run-dir")
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
    with _no_folder_left_on_interrupt(args.out, created), contextlib.ExitStack() as locks:
        # one live run per directory: a second run is refused before it clears or writes
        locks.enter_context(DirLock(args.out, "--out"))
        if run_dir is not None and not _inside(run_dir, args.out):
            locks.enter_context(DirLock(run_dir, "--run-dir"))
        check_output_dir(args.out)
        flags = {f: cfg.data.get(k) for f, k in (("--members", "members"), ("--test", "test"))}
        flags["--nonmembers"] = cfg.data.get("nonmembers")
        flags["--fresh"] = cfg.data.get("fresh")
        from privacy_audit.audit.timing import StageTimer, active
        from privacy_audit.audit.timing import one_line as timing_line

        # "setup": imports (torch, transformers) and the glue between the named stages
        with (
            _named_by_flags(flags if one_line else {}),
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


#: Where warnings and transformers' log records (load reports, deprecations) go, inside
#: the output directory, instead of raw (and ANSI-coloured) on the console.
RUN_LOG = "run.log"

#: what an interrupted run may leave in an --out folder it created that no rerun can use:
#: the library log, and a run directory's bookkeeping without any finished task
_UNUSABLE_LEFTOVERS = {RUN_LOG, "run/events.log", "run/inputs.json"}


@contextlib.contextmanager
def _no_folder_left_on_interrupt(out: str, created: bool):
    """On ^C, remove the ``--out`` folder this invocation created when it holds nothing a
    rerun can use (:data:`_UNUSABLE_LEFTOVERS` and empty folders), so an interrupted
    command leaves no folder that looks like a result. A folder with finished tasks (which
    ``--resume`` reuses) or any other file is kept as it is."""
    try:
        yield
    except KeyboardInterrupt:
        root = Path(out)
        if created and root.is_dir():
            entries = list(root.rglob("*"))
            files = {p.relative_to(root).as_posix() for p in entries if not p.is_dir()}
            if files <= _UNUSABLE_LEFTOVERS:
                for f in files:
                    (root / f).unlink(missing_ok=True)
                for d in sorted((p for p in entries if p.is_dir()), key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):
                        d.rmdir()
                with contextlib.suppress(OSError):
                    root.rmdir()
        raise


def verdict_line(run: dict) -> str:
    """One line per run for CI logs: verdict, strongest attack, AUC with CI, TPR@1%FPR (or
    why this n cannot resolve it, and the lowest FPR it does), the run's headline ε lower
    bound with any larger one beside it (reports/verdict.py ``epsilon_headline``: the
    report's number) and the claim status."""
    from privacy_audit.audit.integrations.gate import one_line
    from privacy_audit.reports import sentences as S
    from privacy_audit.reports.formatting import ci
    from privacy_audit.reports.resolution import lead_tpr, tpr_view
    from privacy_audit.reports.user_verdict import user_view
    from privacy_audit.reports.verdict import (
        TPR_1,
        epsilon_headline,
        headline_text,
        metric,
        strongest_attack,
        verdict_for_run,
    )

    def attack_parts(best: dict | None, prefix: str = "") -> list[str]:
        if best is None:
            return [prefix + S.LINE_NO_ATTACK()]
        out = [prefix + S.LINE_STRONGEST(attack=one_line(str(best.get("attack"))))]
        out.append(S.AUC_SLOT(auc=ci(metric(best, "auc"))))
        one = tpr_view(best, 0.01)
        if one["resolvable"]:
            out.append(S.LINE_TPR(fpr="1%", tpr=ci(metric(best, TPR_1))))
        else:
            why = one["text"]
            if prefix.startswith("per user"):
                why = why.replace("non-members)", "non-member users)")
            out.append(S.LINE_TPR(fpr="1%", tpr=why))
            lead = lead_tpr(best)
            if lead is not None:
                out.append(S.LINE_TPR(fpr=f"{100 * lead['fpr']:g}%", tpr=lead["text"]))
        return out

    v = run.get("verdict") if isinstance(run.get("verdict"), dict) else verdict_for_run(run)
    run_name = one_line(str(run.get("name")))
    parts = [S.LINE_HEAD(run=run_name, level=str(v.get("level", "?")).upper())]
    uview = user_view(run)
    if uview is not None:  # both units, each named (reports/user_verdict.py)
        by_unit = v.get("by_unit") or {}
        parts += attack_parts(
            strongest_attack(run), f"per text {str(by_unit.get('example', '?')).upper()}: "
        )
        counts = (run.get("users") or {}).get("counts") or {}
        n_in = (counts.get("members") or {}).get("users")
        n_out = (counts.get("nonmembers") or {}).get("users")
        ubest = strongest_attack(uview)
        parts += attack_parts(
            ubest,
            f"per user ({n_in} member / {n_out} non-member users) "
            f"{str(by_unit.get('user', '?')).upper()}: ",
        )
        ulb = metric(ubest, "epsilon_lower_bound") if ubest is not None else None
        if isinstance(ulb, dict) and isinstance(ulb.get("value"), (int, float)):
            parts.append(f"ε_lb per user ≥ {ci({'value': ulb['value']})}")
    else:
        parts += attack_parts(strongest_attack(run))
    head = epsilon_headline(run)  # the report's and the verdict's headline ε, the same number
    if head is not None and not (v.get("level") == "split-shifted" and head["kind"] == "attack"):
        parts.append(one_line(headline_text(head)).replace("ε ≥", "ε_lb ≥", 1))
    else:
        parts.append(S.LINE_NO_EPSILON())
    status = v.get("claim_status") or "?"
    parts.append(S.LINE_CLAIM(status=str(status).upper() if status == "violated" else status))
    if v.get("level") == "inconclusive" and v.get("inconclusive"):
        parts.append(one_line(str(v["inconclusive"])))
    split = run.get("split_check") if isinstance(run.get("split_check"), dict) else {}
    blind = (split.get("blind") or {}).get("auc")
    if blind:
        shifted = S.LINE_SHIFTED() if split.get("shifted") else ""
        parts.append(S.LINE_BLIND(auc=ci(blind), shifted=shifted))
    if v.get("level") == "invalid-attack" and v.get("invalid"):
        parts.append(one_line(str(v["invalid"])))
    return S.join_parts(parts)


class _StripAnsi(logging.Formatter):
    _ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

    def format(self, record: logging.LogRecord) -> str:
        return self._ANSI.sub("", super().format(record))


@contextlib.contextmanager
def capture_library_output(path: Path):
    """Route Python warnings and transformers' logging (load reports, deprecations) into
    ``path``, without ANSI codes, so the console carries only the suite's own lines. The
    records are kept in memory and written when the block ends, except after bad input
    (an ``AuditError``: nothing may be left in the output directory then)."""
    import io
    import warnings

    from privacy_audit.ground.io import atomic_write_text

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(_StripAnsi("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    loggers = [logging.getLogger("py.warnings"), logging.getLogger("transformers")]
    saved = [(lg, lg.handlers[:], lg.propagate, lg.level) for lg in loggers]
    try:
        import transformers

        tf_logging = transformers.utils.logging
        tf_logging.disable_default_handler()
        tf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - a hard dependency
        tf_logging = None
    for lg in loggers:
        lg.handlers = [handler]
        lg.propagate = False
        lg.setLevel(logging.INFO)
    logging.captureWarnings(True)
    bad_input = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            yield
    except AuditError:
        bad_input = True
        raise
    finally:
        logging.captureWarnings(False)
        for lg, handlers, propagate, level in saved:
            lg.handlers = handlers
            lg.propagate = propagate
            lg.setLevel(level)
        if tf_logging is not None:
            tf_logging.enable_default_handler()
            tf_logging.enable_progress_bar()
        text = buf.getvalue()
        if text and not bad_input:
            try:
                atomic_write_text(path, text)
            except OSError:
                pass


def _cmd_epsilon(args) -> int:
    return _cmd_run(args, epsilon=True)


def _cmd_compare(args) -> int:
    from privacy_audit.audit.compare_command import compare_runs_cli

    html, table = compare_runs_cli(args.runs, args.out)
    print(f"compare: {html}")
    print(f"differences: {table}")
    return EXIT_OK


def _cmd_score(args) -> int:
    from privacy_audit.audit.results import check_output_dir, write_outputs
    from privacy_audit.audit.runner import score_file
    from privacy_audit.stats.scores import MAX_BOOTSTRAP

    _check_seed(args.seed)
    if not 100 <= args.bootstrap <= MAX_BOOTSTRAP:
        raise AuditError(
            f"--bootstrap must be an integer in [100, {MAX_BOOTSTRAP:,}], got {args.bootstrap}"
        )
    if args.group_by is not None and not args.group_by.strip():
        raise AuditError("--group-by needs a column name, got an empty one")
    from privacy_audit.audit.outputs import check_outputs, dir_outputs

    check_outputs(
        dir_outputs("--out", args.out, ("report.html", "results.json")),
        [("the scores file", args.scores)],
    )
    created = not Path(args.out).exists()
    check_output_dir(args.out)
    try:
        results = score_file(
            args.scores,
            args.delta,
            args.bootstrap,
            args.seed,
            aggregate_only=args.aggregate_only,
            group_column=args.group_by,
        )
    except (AuditError, KeyboardInterrupt):  # bad input or ^C: leave no empty folder behind
        if created:
            with contextlib.suppress(OSError):
                Path(args.out).rmdir()
        raise
    html, js = write_outputs(results, args.out)
    dup = results["runs"][0].get("exact_duplicates") or {}
    if dup.get("removed_nonmembers"):
        print(
            f"removed {dup['removed_nonmembers']} non-member row(s) whose text is an exact copy "
            "of a member's",
            file=sys.stderr,
        )
    split_dups = (results["runs"][0].get("split_check") or {}).get("duplicates") or {}
    for side in ("members", "nonmembers"):
        w = split_dups.get(f"within_{side}") or {}
        if w.get("removed"):
            print(
                f"collapsed {w['removed']} {side[:-1]} row(s) that copy another {side[:-1]}'s "
                f"text: {w['distinct']} distinct of {w['texts']} (largest group {w['largest']}); "
                "statistics count distinct records",
                file=sys.stderr,
            )
    from privacy_audit.reports.formatting import ci as ci_text
    from privacy_audit.reports.resolution import tpr_view

    attack = results["runs"][0]["attacks"][0]
    m = attack["metrics"]
    one = tpr_view(attack, 0.01)  # the report's and the gate's standing of this number
    tpr_text = ci_text(one["metric"]) if one["resolvable"] else one["text"]
    # the bound only: epsilon_point_estimate is no bound and is not printed here
    print(
        ("per text (intervals resample users): " if "users" in results["runs"][0] else "")
        + f"AUC {m['auc']['value']:.3f} [{m['auc']['ci_low']:.3f}, {m['auc']['ci_high']:.3f}]  "
        f"TPR@1%FPR {tpr_text}  "
        f"ε lower bound {m['epsilon_lower_bound']['value']:.3f} (δ={args.delta:g}, 95%)"
    )
    if "users" in results["runs"][0]:  # both units, each named (reports/user_verdict.py)
        print(verdict_line(results["runs"][0]))
    split = results["runs"][0].get("split_check")
    if isinstance(split, dict) and split.get("text"):
        print(("SPLIT SHIFTED: " if split.get("shifted") else "split check: ") + split["text"])
        if split.get("shifted"):
            print(f"what to do: {split.get('advice')}")
    print(f"report:  {html}")
    print(f"results: {js}")
    return EXIT_OK


@contextlib.contextmanager
def _named_by_flags(flags: dict[str, str | None]):
    """A data error about a file given by a flag names the flag typed (``--members 'x.csv':
    column 'text' is empty ...``) rather than "data file"."""
    try:
        yield
    except AuditError as exc:
        msg = str(exc)
        for flag, path in flags.items():
            for what in ("data file", "data path", "data directory"):
                if isinstance(path, str) and f"{what} {path!r}" in msg:
                    raise type(exc)(msg.replace(f"{what} {path!r}", f"{flag} {path!r}")) from None
        raise


def _check_seed(seed: int, option: str = "--seed") -> None:
    """A seed numpy accepts: an integer in [0, 2^32 - 1]."""
    if not 0 <= seed < 2**32:
        raise AuditError(f"{option} must be an integer from 0 to 2^32 - 1, got {seed}")


def _check_dir_option(path: str, option: str) -> None:
    """A directory option must not name an existing file (or a path through one)."""
    p = Path(path)
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                what = "is" if q == p else f"is inside {str(q)!r}, which is"
                raise AuditError(f"{option} {path!r} {what} a file, not a directory")
            break


def _inside(path: str, parent: str) -> bool:
    """Whether ``path`` is ``parent`` or lies below it (after resolving)."""
    p, q = Path(path).resolve(), Path(parent).resolve()
    return p == q or q in p.parents


def _check_writable(path: str, option: str) -> None:
    """Fail before any output if ``path`` cannot be written (nothing is left behind)."""
    import tempfile

    p = Path(path)
    if p.is_dir():
        raise AuditError(f"{option} {path!r} is a directory; give a file name")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p.parent, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise AuditError(f"cannot write {option} file {path!r}: {exc.strerror or exc}") from None


def _cmd_gate(args) -> int:
    from privacy_audit.audit.integrations.gate import (
        NOT_COMPARABLE,
        RATE_THRESHOLDS,
        Failure,
        GateOutcome,
        check_all,
        check_threshold,
        compare,
        epsilon_headlines,
        format_table,
        junit_xml,
        load_baseline,
        load_results,
        one_line,
        parse_leakage_thresholds,
        parse_match,
        summary,
    )
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    thresholds = {
        "max_auc": args.max_auc,
        "max_tpr_at_1pct_fpr": args.max_tpr_at_1pct_fpr,
        "max_epsilon_lb": args.max_epsilon_lb,
    }
    if args.baseline is None:
        for flag, given in (
            ("--tolerance", args.tolerance is not None),
            ("--fail-on-missing", args.fail_on_missing),
            ("--match", bool(args.match)),
        ):
            if given:
                raise AuditError(f"{flag} only applies together with --baseline")
    if (
        args.baseline is None
        and all(v is None for v in thresholds.values())
        and not args.max_leakage
    ):
        raise AuditError(
            "gate needs --baseline or at least one of --max-auc, --max-tpr-at-1pct-fpr, "
            "--max-epsilon-lb, --max-leakage"
        )
    for key, value in thresholds.items():
        if value is not None:
            option = "--" + key.replace("_", "-")
            check_threshold(option, value, "rate" if key in RATE_THRESHOLDS else "nonnegative")
    leakage = parse_leakage_thresholds(args.max_leakage)
    match = parse_match(args.match)
    tolerance = 0.0 if args.tolerance is None else args.tolerance
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise AuditError(f"--tolerance must be a finite number >= 0, got {args.tolerance}")
    from privacy_audit.audit.outputs import check_outputs, results_family

    check_outputs(
        [("--junit", args.junit), ("--summary", args.summary)],
        results_family(args.results) + [("--baseline", args.baseline)],
    )
    results = load_results(args.results)
    baseline = load_baseline(args.baseline, results) if args.baseline is not None else None
    violations, failures = check_all(
        results,
        thresholds,
        strict=args.strict,
        leakage=leakage,
        allow_empty=args.allow_empty,
        allow_shifted_split=args.allow_shifted_split,
    )
    diff = compare(results, baseline, tolerance, match) if baseline is not None else None
    if diff is not None and not any(c.base.value is not None for c in diff.comparisons):
        # a baseline gate that compared no number has checked nothing
        if not args.allow_empty:
            failures.append(
                Failure(
                    "",
                    "",
                    "baseline",
                    "nothing-compared",
                    "no metric was compared with the baseline (runs paired "
                    f"{diff.pairing}; {len(diff.missing)} in the baseline only, "
                    f"{len(diff.added)} in the results only): pair runs with --match "
                    "NEW=BASE, or pass --allow-empty to accept",
                )
            )
    if diff is not None:
        for c in diff.comparisons:  # measured in the baseline, not now: never "not comparable"
            if c.new.value is None and c.base.value is not None:
                failures.append(
                    Failure(
                        c.run,
                        c.attack,
                        c.metric,
                        "unmeasured",
                        f"{c.metric} of attack '{c.attack}' on '{c.run}' is null or not finite "
                        f"in the results but was measured in the baseline ({c.base.text()})",
                    )
                )
    for option, path in (("--junit", args.junit), ("--summary", args.summary)):
        if path is not None:
            _check_writable(path, option)
    outcome = GateOutcome(
        violations,
        diff,
        failures=failures,
        leakage=leakage,
        fail_on_missing=args.fail_on_missing,
        tolerance=tolerance if baseline is not None else None,
        thresholds=thresholds,
        strict=args.strict,
        results_path=str(args.results),
        baseline_path=None if args.baseline is None else str(args.baseline),
        headlines=epsilon_headlines(results),
    )
    # render everything before writing anything
    files = []
    if args.summary is not None:
        files.append((args.summary, dumps_json(summary(outcome))))
    if args.junit is not None:
        files.append((args.junit, junit_xml(outcome, results)))

    written: list[str] = []
    for path, text in files:
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            for done in written:  # all or nothing
                Path(done).unlink(missing_ok=True)
            raise AuditError(f"cannot write {path!r}: {exc.strerror or exc}") from None
        written.append(path)

    if diff is not None:
        print(f"baseline: {args.baseline} (tolerance {tolerance:g}; runs paired {diff.pairing})")
        if diff.comparisons:
            print(format_table(diff.comparisons))
        else:
            print("no attack result is present and measured in both files")
        for m in diff.missing:
            print(f"{'FAIL' if args.fail_on_missing else 'MISSING'}: {one_line(str(m))}")
        for m in diff.added:
            print(f"NEW: {one_line(str(m))}")
        for c in diff.regressions:
            print(f"FAIL: {one_line(str(c))}")
    for v in violations:
        print(f"FAIL: {one_line(str(v))}")
    for f in failures:
        print(f"FAIL: {one_line(str(f))}")
    n_ok = sum(1 for r in results["runs"] for a in r.get("attacks", []) if a.get("status") == "ok")
    n_ok += sum(1 for r in results["runs"] for a in r.get("leakage", []) if a.get("status") == "ok")
    if outcome.passed:
        parts = []
        if diff is not None:
            n_cmp = sum(1 for c in diff.comparisons if c.verdict != NOT_COMPARABLE)
            n_null = len(diff.comparisons) - n_cmp
            parts.append(
                f"{n_cmp} metric(s) compared with the baseline"
                + (f" ({n_null} null on a side, not comparable)" if n_null else "")
                + ", no regression"
            )
            if n_cmp == 0:
                parts.append("nothing compared (--allow-empty)")
        if any(v is not None for v in thresholds.values()) or leakage:
            parts.append(f"{n_ok} attack result(s) within every threshold")
        if n_ok == 0:
            parts.append("nothing was measured (--allow-empty)")
        print(f"privacy gate passed: {'; '.join(parts)}")
        return EXIT_OK
    parts = []
    if diff is not None and diff.regressions:
        parts.append(f"{len(diff.regressions)} regression(s) against the baseline")
    if violations:
        parts.append(f"{len(violations)} threshold(s) exceeded")
    if outcome.failed_missing:
        parts.append(f"{len(outcome.failed_missing)} baseline result(s) missing")
    for kind, text in (
        ("nothing-measured", "nothing was measured"),
        ("nothing-compared", "nothing was compared with the baseline"),
        ("unmeasured", "{n} requested metric(s) not measured"),
        ("claim-violated", "{n} privacy claim(s) VIOLATED"),
        ("inconclusive", "{n} inconclusive verdict(s) under --strict"),
        ("split-shifted", "{n} shifted member/non-member split(s)"),
        ("invalid-attack", "{n} invalid-attack verdict(s) (scores point the wrong way)"),
    ):
        n = sum(1 for f in failures if f.kind == kind)
        if n:
            parts.append(text.format(n=n))
    print(f"privacy gate failed: {', '.join(parts)}")
    return EXIT_GATE


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


def _cmd_bench(args) -> int:
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
    _check_writable(args.out, "--out")
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


def _users_by_exposure(run: dict) -> list[str]:
    """Member users ranked by the run's strongest user-level attack (highest score first;
    ties keep the record's order)."""
    users = run.get("users")
    if not isinstance(users, dict):
        raise AuditError(
            f"run {run['name']!r} names no users; audit with [data] group (--group-by COLUMN) "
            "to rank users"
        )
    best = next(
        (
            a
            for a in users.get("attacks") or []
            if isinstance(a, dict)
            and a.get("attack") == users.get("strongest_attack")
            and a.get("status") == "ok"
        ),
        None,
    )
    ex = (best or {}).get("examples")
    if not isinstance(ex, dict):
        raise AuditError(f"run {run['name']!r} has no measured user-level attack to rank users by")
    rows = [
        (float(sc), str(i))
        for i, sc, mem in zip(ex["ids"], ex["scores"], ex["members"], strict=True)
        if mem
    ]
    rows.sort(key=lambda t: -t[0])
    return [i for _, i in rows]


def _cmd_export_risky(args) -> int:
    from privacy_audit.audit.integrations.gate import load_results
    from privacy_audit.ground.io import atomic_write_text

    if args.top < 1:
        raise AuditError(f"--top must be at least 1, got {args.top}")
    by = args.by
    m = re.fullmatch(r"extraction-risk@([1-9][0-9]*)", by)
    if by != "exposure" and m is None:
        raise AuditError(f"--by must be exposure or extraction-risk@N, got {by!r}")
    from privacy_audit.audit.outputs import check_outputs, results_family

    check_outputs([("--out", args.out)], results_family(args.results))
    _check_writable(args.out, "--out")
    results = load_results(args.results)
    if results.get("aggregate_only"):
        raise AuditError(
            f"{args.results!r} is an aggregate-only run: its record ids are one-way pseudonyms; "
            "rerun without --aggregate-only to export ids"
        )
    runs = results["runs"]
    if args.run is not None:
        runs = [r for r in runs if r.get("name") == args.run]
        if not runs:
            names = ", ".join(str(r.get("name")) for r in results["runs"])
            raise AuditError(f"no run named {args.run!r} in {args.results!r}; runs: {names}")
    if len(runs) != 1:
        raise AuditError(f"{args.results!r} holds {len(runs)} runs; name one with --run")
    run = runs[0]
    if getattr(args, "by_user", False):
        if m is not None:
            raise AuditError(
                "--by-user ranks users by exposure; it takes no --by extraction-risk@N"
            )
        ids = _users_by_exposure(run)
        by = "user-level exposure"
    elif m is None:
        ranking = run.get("leakage_ranking")
        if not isinstance(ranking, dict) or not isinstance(ranking.get("ids"), list):
            why = ranking.get("reason") if isinstance(ranking, dict) else None
            raise AuditError(
                f"run {run['name']!r} has no per-record leakage ranking"
                + (f" ({why})" if why else " (a causal-LM audit of your own model writes one)")
            )
        ids = [str(i) for i in ranking["ids"]]
    else:
        n = m[1]
        rec = next(
            (
                r
                for r in run.get("leakage") or []
                if r.get("attack") == "extraction-risk" and r.get("status") == "ok"
            ),
            None,
        )
        records = (rec or {}).get("details", {}).get("records") if rec else None
        if not isinstance(records, dict) or f"risk@{n}" not in records:
            raise AuditError(
                f"run {run['name']!r} has no extraction risk within {n} queries "
                "(run with [extraction] and that n in queries)"
            )
        rows = [
            (r, str(i))
            for i, r, mem in zip(
                records["ids"], records[f"risk@{n}"], records["members"], strict=True
            )
            if mem and r is not None
        ]
        rows.sort(key=lambda t: -t[0])  # stable: ties keep the members' order
        ids = [i for _, i in rows]
    chosen = ids[: args.top]
    if any("\n" in i or "\r" in i for i in chosen):
        raise AuditError("a record id holds a line break; it cannot be written one per line")
    atomic_write_text(Path(args.out), "".join(f"{i}\n" for i in chosen))
    what = "user id(s)" if getattr(args, "by_user", False) else "record id(s)"
    print(f"{len(chosen)} {what} ranked by {by} written to {args.out}")
    return EXIT_OK


def _cmd_experiment(args) -> int:
    import torch

    from privacy_audit.ground.io import atomic_write_text, dumps_json

    experiments = _checkout_experiments()  # one line and exit 2 from an installed wheel
    ExperimentSettings, run_experiment = experiments.ExperimentSettings, experiments.run_experiment

    for flag, value in (
        ("--seeds", args.seeds),
        ("--n-train", args.n_train),
        ("--n-test", args.n_test),
        ("--threads", args.threads),
    ):
        if value is not None and value < 1:
            raise AuditError(f"{flag} must be at least 1, got {value}")
    from privacy_audit.audit.outputs import check_outputs

    cells = None if args.checkpoint_dir is None else Path(args.checkpoint_dir) / args.name
    check_outputs([("--out", args.out)], [("--checkpoint-dir", cells)])  # its finished cells
    _check_writable(args.out, "--out")
    if args.checkpoint_dir is not None:
        ck = Path(args.checkpoint_dir)
        if ck.exists() and not ck.is_dir():
            raise AuditError(f"--checkpoint-dir {args.checkpoint_dir!r} is not a directory")
        _check_writable(str(ck / args.name / "check"), "--checkpoint-dir")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    settings = ExperimentSettings(args.seeds, args.quick, args.n_train, args.n_test, args.threads)
    print(f"experiment {args.name} ...", file=sys.stderr, flush=True)
    payload = run_experiment(args.name, settings, args.checkpoint_dir)
    atomic_write_text(Path(args.out), dumps_json(payload))
    print(f"results: {args.out}")
    return EXIT_OK


def _cmd_claims(args) -> int:
    _checkout_experiments()  # one line and exit 2 from an installed wheel
    import importlib

    claims = importlib.import_module("experiments.claims")  # the checkout's, not installed
    build_claims, format_table, to_markdown = (
        claims.build_claims,
        claims.format_table,
        claims.to_markdown,
    )

    docs = Path(args.docs) if args.docs else None
    if docs is not None and not docs.is_dir():
        raise AuditError(f"--docs {str(docs)!r} is not a folder")
    if docs is None and checkout_root() is None:
        raise AuditError(NO_CHECKOUT + " (or give --docs FOLDER of recorded results)")
    from privacy_audit.audit.outputs import check_outputs

    check_outputs(
        [("--json", args.json), ("--markdown", args.markdown)], claims.recorded_inputs(docs)
    )
    if args.json:
        _check_writable(args.json, "--json")
    if args.markdown:
        _check_writable(args.markdown, "--markdown")
    rows = build_claims(docs)
    print(format_table(rows))
    if args.json:
        from privacy_audit.ground.io import atomic_write_text, dumps_json

        atomic_write_text(Path(args.json), dumps_json({"claims": rows}))
    if args.markdown:
        from privacy_audit.ground.io import atomic_write_text

        atomic_write_text(Path(args.markdown), to_markdown(rows))
    return EXIT_OK


def _cmd_attacks(args) -> int:
    from privacy_audit.attacks.catalog import catalog, format_catalog

    print(format_catalog(catalog()))
    return EXIT_OK


def _cmd_dp_check(args) -> int:
    from privacy_audit.audit.epsilon.dp_check.command import run

    return run(args)


def _cmd_canaries(args) -> int:
    from privacy_audit.audit.epsilon.pipeline import run

    return run(args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = {
        "run": _cmd_run,
        "epsilon": _cmd_epsilon,
        "score": _cmd_score,
        "gate": _cmd_gate,
        "bench": _cmd_bench,
        "export-risky": _cmd_export_risky,
        "compare": _cmd_compare,
        "experiment": _cmd_experiment,
        "claims": _cmd_claims,
        "canaries": _cmd_canaries,
        "dp-check": _cmd_dp_check,
        "dataset-inference": _cmd_dataset_inference,
        "attacks": _cmd_attacks,
    }[args.command]
    try:
        return handler(args)
    except AuditError as exc:
        print(f"privacy-audit: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("privacy-audit: interrupted; no partial report was written", file=sys.stderr)
        if argv is None:  # the command itself (console script, python -m), not a caller
            _exit_130()
        return 130
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if args.debug:
            raise
        print(
            f"privacy-audit: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _exit_130() -> None:
    """End the process with exit code 130 after ^C (:func:`main` run as the command).

    CPython (3.8 to 3.12) also records a KeyboardInterrupt that escaped a nested
    ``PyRun_*`` call (some extension imports run code that way) and, at the end of
    ``Py_RunMain``, kills the process with SIGINT whatever exit code was asked for, even
    when the interrupt was caught: the shell then sees a signal death (-2) instead of 130,
    at random depending on where the interrupt landed. So the exit handlers run here and
    the process ends with ``os._exit(130)``."""
    import atexit

    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    os._exit(130)


if __name__ == "__main__":
    sys.exit(main())
