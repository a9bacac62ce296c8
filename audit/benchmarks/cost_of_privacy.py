"""``privacy-audit bench cost-of-privacy``: the training step of the tied GPT-2 LM without
privacy, with phantom-clipping DP-SGD, with explicit per-sample gradients (torch.func
``vmap(grad)``) and with Opacus, side by side on the same model size and batch, at two
vocabulary sizes (2k and 16k).

Every private case performs the full DP-SGD step (per-sample norms, clip to C = 1, sum,
Gaussian noise, divide by B, optimizer step); all cases use the same SGD optimizer.
Opacus needs an untied output matrix (it cannot clip a weight used twice), so its model
has one more M×d matrix than the others; the table says so.

Time: median over round-robin repeats (``time_cases``). Memory: the peak resident set
size during one step above the resident size just before it (``/proc/self`` VmHWM reset
through ``clear_refs``; large allocations forced onto mmap so freed memory leaves the
process), plus the case's persistent state (parameters and gradients), reported in MiB;
on a non-Linux system memory is reported as unavailable.
"""

from __future__ import annotations

import ctypes
import gc
import os
from typing import Any

import torch

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, time_cases
from privacy_audit.audit.cost_of_privacy_table import budget_note

VOCABS = {"2k": 2048, "16k": 16384}
CASES = ("phantom", "explicit", "ghost", "opacus")
TINY = {"n_embd": 64, "n_layer": 2, "n_head": 2}
# GPT-2 small's vocabulary and width (d = 768, 12 heads) with 2 of its 12 blocks
GPT2_SMALL = {
    "vocab": 50257,
    "dims": {"n_embd": 768, "n_layer": 2, "n_head": 12},
    "batch_size": 8,
    "seq_len": 32,
    "cases": CASES,
}
GPT2_SMALL_QUICK = {
    "vocab": 4096,
    "dims": {"n_embd": 96, "n_layer": 1, "n_head": 2},
    "batch_size": 2,
    "seq_len": 8,
    "cases": CASES,
}
GHOST_NOTE = (
    "Opacus 1.6 Ghost Clipping (grad_sample_mode='ghost': GradSampleModuleFastGradientClipping "
    "+ DPOptimizerFastGradientClipping + DPTensorFastGradientClipping's double backward), "
    "untied head, GPT-2's Conv1D converted to nn.Linear so that Opacus's ghost norm samplers "
    "apply (LayerNorm gets Opacus's per-sample gradients; they are small)"
)
PAPER_NOTE = (
    "The paper's 4-100x (speed) and 10-400x (memory) over Ghost Clipping are measured on a "
    "V100 against fastDP's Ghost Clipping with d_E/2 for the untied model, as the maximum "
    "batch size that fits 16 GB and its throughput, on d=64 recommendation models whose cost "
    "is dominated by the embedding (the paper puts Ghost Clipping's embedding cost at "
    "O(B M^2 + B L^2)). Here: Opacus 1.6's Ghost Clipping at the same d (not d/2), on a CPU, "
    "at a fixed batch: step time and peak RSS, not maximum batch size on a GPU."
)
TARGETS = {
    "phantom": "time <= 1.5x non-private, memory <= 1.3x non-private",
    "explicit": "phantom >= 3x faster",
}


def _rss_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def peak_step_memory_mib(fn) -> float | None:
    """Peak RSS during ``fn()`` above the RSS just before it, in MiB (Linux only)."""
    libc = _libc()
    gc.collect()
    if libc is not None:
        libc.malloc_trim(0)
    before = _rss_kib("VmRSS")
    if before is None or not _reset_peak():
        return None
    fn()
    peak = _rss_kib("VmHWM")
    return None if peak is None else max(peak - before, 0) / 1024


def _state_mib(params) -> float:
    """Parameters plus their gradients, MiB."""
    return 2 * sum(p.numel() * p.element_size() for p in params) / 2**20


def privacy_cost_cases(
    vocab: int,
    batch: int,
    seq: int,
    seed: int,
    chunk: int | None,
    dims: dict[str, int] | None = None,
    include: tuple[str, ...] = CASES,
    reference: bool = True,
):
    """Step functions and parameters of each case; ``reference=False`` leaves out the
    non-private model (the memory-budget probe builds one method per process)."""
    from opacus import GradSampleModule

    from privacy_audit.defenses.dp_engine import DPSGDEngine, OpacusGhostStep, clip_weights
    from privacy_audit.defenses.phantom import per_sample_token_loss
    from privacy_audit.targets.lm import build_lm

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (batch, seq), generator=g)
    mask = torch.ones_like(ids)
    pos = torch.arange(seq).expand(batch, seq)
    noise = torch.Generator().manual_seed(seed + 1)

    dims = dims or TINY

    def model(tie=True):
        return build_lm(vocab, seed=seed, n_positions=seq, tie=tie, **dims).train()

    def engine_case(norms):
        m = model()
        eng = DPSGDEngine(m, 1.0, 1.0, batch, norms=norms, chunk_size=chunk)
        opt = torch.optim.SGD(m.parameters(), lr=1e-3)
        return m, lambda: eng.step(opt, ids, mask, noise)

    steps, params = {}, {}
    if reference:
        plain = model()
        opt_plain = torch.optim.SGD(plain.parameters(), lr=1e-3)

        def step_plain():
            opt_plain.zero_grad(set_to_none=True)
            logits = plain(input_ids=ids, attention_mask=mask, position_ids=pos).logits
            per_sample_token_loss(logits, ids, mask).mean().backward()
            opt_plain.step()

        steps["non-private"] = step_plain
        params["non-private"] = list(plain.parameters())
    if "phantom" in include:
        m_ph, steps["phantom"] = engine_case("phantom")
        params["phantom"] = list(m_ph.parameters())
    if "explicit" in include:
        m_ex, steps["explicit"] = engine_case("explicit")
        params["explicit"] = list(m_ex.parameters())
    if "ghost" in include:
        ghost = OpacusGhostStep(model(tie=False), 1.0, 1.0, batch, 1e-3, noise)
        params["ghost"] = ghost.params
        steps["ghost"] = lambda: ghost(ids, mask)
    if "opacus" not in include:
        return steps, params

    untied = model(tie=False)
    gsm = GradSampleModule(untied)
    params_op = [p for p in gsm.parameters() if p.requires_grad]
    opt_op = torch.optim.SGD(params_op, lr=1e-3)

    def step_opacus():
        opt_op.zero_grad(set_to_none=True)
        logits = gsm(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        per_sample_token_loss(logits, ids, mask).sum().backward()
        norms = torch.stack([p.grad_sample.flatten(1).norm(dim=1) for p in params_op]).norm(dim=0)
        w = clip_weights(norms, 1.0)
        for p in params_op:
            s = torch.einsum("b,b...->...", w, p.grad_sample)
            p.grad = (s + torch.randn(p.shape, generator=noise)) / batch
            p.grad_sample = None
        opt_op.step()

    steps["opacus"] = step_opacus
    params["opacus"] = params_op
    return steps, params


SHAPES = {"T=16": (32, 16), "T=64": (32, 64), "B=128 T=16": (128, 16)}  # (batch, sequence length)


def measure_shape(label, vocab, batch, seq, dims, settings, include=CASES, clock=None):
    """Time and memory of every case at one shape; returns (cases, ratios, memory, row).
    ``clock``: the time source (default wall time; ``time.process_time`` for CPU time)."""
    import time
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps, params = privacy_cost_cases(vocab, batch, seq, settings.seed, None, dims, include)
        named = {f"{k} @{label}": v for k, v in steps.items()}
        timings = time_cases(
            named, settings.repeats, settings.warmup, clock=clock or time.perf_counter
        )
        mem = {}
        for k, fn in steps.items():
            work = peak_step_memory_mib(fn)
            state = _state_mib(params[k])
            mem[k] = {
                "step_peak_mib": work,
                "state_mib": state,
                "total_mib": None if work is None else work + state,
            }
    cases, ratios, memory = {}, {}, {}
    ref = timings[f"non-private @{label}"].median_s
    ref_mem = mem["non-private"]["total_mib"]
    ref_work = mem["non-private"]["step_peak_mib"]
    for k in steps:
        key = f"{k} @{label}"
        cases[key] = timings[key].summary()
        ratios[key] = timings[key].median_s / ref
        m = mem[k]
        m["ratio_total"] = (
            None if not ref_mem or m["total_mib"] is None else m["total_mib"] / ref_mem
        )
        m["ratio_step_peak"] = (
            None if not ref_work or m["step_peak_mib"] is None else m["step_peak_mib"] / ref_work
        )
        memory[key] = m
    ph = timings[f"phantom @{label}"].median_s
    ph_mem = mem["phantom"]["total_mib"]
    row: dict[str, Any] = {"label": label, "vocab": vocab, "batch_size": batch, "seq_len": seq}
    for k in steps:
        if k == "non-private":
            continue
        row[f"{k}_time_x_nonprivate"] = ratios[f"{k} @{label}"]
    for k in steps:
        if k not in ("non-private", "phantom"):
            row[f"{k}_over_phantom_time"] = timings[f"{k} @{label}"].median_s / ph
    for k in steps:
        if k != "non-private":
            row[f"{k}_memory_x_nonprivate"] = memory[f"{k} @{label}"]["ratio_total"]
    for k in steps:
        if k not in ("non-private", "phantom"):
            tot = mem[k]["total_mib"]
            row[f"{k}_over_phantom_memory"] = None if not ph_mem or tot is None else tot / ph_mem
    row.update(
        model=dims,
        tied={
            "non-private": True,
            "phantom": True,
            "explicit": True,
            "ghost": False,
            "opacus": False,
        },
        non_private_step_ms=1e3 * ref,
        phantom_step_ms=1e3 * ph,
        memory_mib={k: mem[k]["total_mib"] for k in steps},
    )
    return cases, ratios, memory, row


def _run_options(settings: BenchSettings) -> tuple[tuple, bool, dict, dict, dict]:
    """The private cases to run (phantom always among them), whether only the
    GPT-2-small-shaped case runs, and the vocabularies, shapes and large case of this size."""
    extra = settings.extra or {}
    include = tuple(extra.get("cases") or CASES)
    unknown = [c for c in include if c not in CASES]
    if unknown or "phantom" not in include:
        raise ValueError(f"cost-of-privacy cases must include phantom, from {CASES}: {include}")
    largest_only = bool(extra.get("largest_only"))
    vocabs = {"2k": 512, "16k": 2048} if settings.quick else VOCABS
    shapes = {} if largest_only else ({"T=8": (4, 8)} if settings.quick else SHAPES)
    big = GPT2_SMALL_QUICK if settings.quick else GPT2_SMALL
    return include, largest_only, vocabs, shapes, big


def _measure_all(settings, include, vocabs, shapes, big, clock) -> tuple[dict, dict, dict, list]:
    """Every tiny-model case (each shape at each vocabulary), then the GPT-2-small-shaped
    case: the cases' timings, ratios and memory, and one cost-table row per case."""
    cases: dict[str, Any] = {}
    ratios: dict[str, float] = {}
    memory: dict[str, Any] = {}
    table = []
    for shape, (batch, seq) in shapes.items():
        for vlabel, vocab in vocabs.items():
            c, r, m, row = measure_shape(
                f"{vlabel} {shape}", vocab, batch, seq, TINY, settings, include, clock
            )
            cases |= c
            ratios |= r
            memory |= m
            table.append(row)
    label = f"gpt2-small-shaped B={big['batch_size']} T={big['seq_len']}"
    c, r, m, row = measure_shape(
        label,
        big["vocab"],
        big["batch_size"],
        big["seq_len"],
        big["dims"],
        settings,
        include=tuple(x for x in big["cases"] if x in include),
        clock=clock,
    )
    cases |= c
    ratios |= r
    memory |= m
    row["case"] = "gpt2-small-shaped"
    table.append(row)
    return cases, ratios, memory, table


def _run_setup(include, largest_only, vocabs, shapes, big, single, loads) -> dict:
    """The record's ``setup``: what was measured, with which clock, under which load."""
    return {
        "model": "GPT2LMHeadModel from config, d=64, 2 blocks, 2 heads, tied "
        "(Opacus and Opacus ghost: untied)",
        "gpt2_small_shaped": {
            "vocab": big["vocab"],
            **big["dims"],
            "batch_size": big["batch_size"],
            "seq_len": big["seq_len"],
            "cases": list(big["cases"]),
            "note": "GPT-2-small's vocabulary and width with fewer blocks (GPT-2 small has "
            "12), the largest that ran in minutes on a shared 2-core CPU",
        },
        "shapes": {k: {"batch_size": b, "seq_len": t} for k, (b, t) in shapes.items()},
        "cases": ["non-private", *include],
        "largest_only": largest_only,
        "clock": "process CPU time (1 thread)" if single else "wall time",
        "vocab_sizes": list(vocabs.values()),
        "optimizer": "SGD",
        "explicit": "torch.func vmap(grad) over the whole batch",
        "ghost": GHOST_NOTE,
        "device": "cpu (no GPU in this run)",
        "threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "load_average_before": loads[0],
        "load_average_after": loads[1],
    }


def _run_notes(table: list) -> list[str]:
    """One line per cost-table row (time and memory against non-private and phantom),
    then why Opacus is untied, then the paper's setting."""
    return [
        "cost of privacy: "
        + "; ".join(
            f"M={r['vocab']} d={r['model']['n_embd']} B={r['batch_size']} T={r['seq_len']}: "
            f"phantom {r['phantom_time_x_nonprivate']:.2f}x time, "
            f"{_fmt(r['phantom_memory_x_nonprivate'])} memory; "
            + ", ".join(
                f"{k}/phantom {r[f'{k}_over_phantom_time']:.2f}x time "
                f"{_fmt(r.get(f'{k}_over_phantom_memory'))} memory"
                for k in ("ghost", "explicit", "opacus")
                if f"{k}_over_phantom_time" in r
            )
            for r in table
        ),
        "Opacus (standard and ghost) runs an untied output embedding (one more M x d "
        "matrix): Opacus cannot clip a weight used twice.",
        PAPER_NOTE,
    ]


def run(settings: BenchSettings) -> BenchResult:
    """Options in ``settings.extra``: ``cases`` (the private cases, default all),
    ``largest_only`` (only the GPT-2-small-shaped, largest-vocabulary case),
    ``memory_budget_gb`` (add the largest-batch-in-budget search, :mod:`memory_budget`)
    and ``memory_max_batch`` (its cap). With one thread, steps are timed in this process's
    CPU time (``process_time``), which other load on a shared machine inflates far less
    than wall time; otherwise in wall time."""
    import time

    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD: big tensors on mmap, returned on free
    extra = settings.extra or {}
    include, largest_only, vocabs, shapes, big = _run_options(settings)
    single = settings.threads == 1
    clock = time.process_time if single else time.perf_counter
    load_before = _loadavg()
    cases, ratios, memory, table = _measure_all(settings, include, vocabs, shapes, big, clock)
    budget = None
    if extra.get("memory_budget_gb"):
        budget = largest_batch_in_budget(
            float(extra["memory_budget_gb"]),
            big["vocab"],
            big["seq_len"],
            big["dims"],
            start=big["batch_size"],
            max_batch=int(extra.get("memory_max_batch") or MEMORY_MAX_BATCH),
            seed=settings.seed,
        )
    load_after = _loadavg()
    result = BenchResult(
        name="cost-of-privacy",
        reference="non-private (same vocabulary and shape)",
        cases=cases,
        ratios=ratios,
        setup=_run_setup(
            include, largest_only, vocabs, shapes, big, single, (load_before, load_after)
        ),
        memory=memory,
        targets={f"phantom @16k {s}": TARGETS["phantom"] for s in shapes}
        | {f"explicit @16k {s}": TARGETS["explicit"] for s in shapes},
        notes=_run_notes(table),
    )
    result.setup["cost_of_privacy_table"] = table
    if budget is not None:
        result.setup["largest_batch_in_budget"] = budget
        result.notes.append(budget_note(budget))
    return result


MEMORY_MAX_BATCH = 512
#: bisection stops when the bracket is at most this fraction of the largest fit (probes are
#: minutes each at this shape); the bracket is recorded and carried into the ratio's interval
MEMORY_REL_TOL = 1 / 16


def largest_batch_in_budget(
    budget_gb: float,
    vocab: int,
    seq_len: int,
    dims: dict[str, int],
    start: int = 8,
    max_batch: int = MEMORY_MAX_BATCH,
    seed: int = 0,
    methods: tuple[str, ...] | None = None,
    rel_tol: float = MEMORY_REL_TOL,
    probe_factory=None,
) -> dict[str, Any]:
    """The paper's memory metric on a CPU: per method, the largest batch whose step's
    process peak RSS fits in ``budget_gb`` GiB (:mod:`memory_budget`), and the ratio of
    phantom's largest batch to Ghost Clipping's with the interval its brackets allow.
    ``probe_factory(method, budget_mib)`` replaces the subprocess probe (tests)."""
    import sys

    from privacy_audit.audit.benchmarks import memory_budget as mb

    budget_mib = budget_gb * 1024
    methods = methods or mb.METHODS
    out: dict[str, Any] = {
        "budget_gb": budget_gb,
        "budget_mib": budget_mib,
        "metric": mb.METRIC,
        "unit": "GiB (2^30 bytes)",
        "shape": {"vocab": vocab, **dims, "seq_len": seq_len},
        "search": f"doubling from B={start}, then bisection to within max(1, "
        f"{rel_tol:g} x largest fit); cap B={max_batch}",
        "tied": {"non-private": True, "phantom": True, "ghost": False},
        "methods": {},
    }
    found = {}
    for method in methods:
        probe = (
            probe_factory(method, budget_mib)
            if probe_factory
            else mb.subprocess_probe(method, vocab, seq_len, dims, budget_mib, seed)
        )
        print(f"memory budget {budget_gb:g} GiB, {method}:", file=sys.stderr, flush=True)
        res = mb.largest_fitting_batch(
            probe,
            budget_mib,
            start=start,
            max_batch=max_batch,
            rel_tol=rel_tol,
            progress=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True),
        )
        found[method] = res
        out["methods"][method] = res.to_dict()
    for a, b in (("phantom", "ghost"), ("phantom", "non-private"), ("ghost", "non-private")):
        if a in found and b in found:
            r = mb.ratio_interval(found[a], found[b])
            out[f"{a}_over_{b}_largest_batch"] = (
                None if r is None else {"value": r[0], "low": r[1], "high": r[2]}
            )
    return out


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def main(argv=None) -> int:
    """``python -m privacy_audit.audit.benchmarks.cost_of_privacy --cpu-time --out FILE``: the
    GPT-2-small-shaped case alone, timed in this process's CPU time (``process_time``),
    which other load on a shared machine inflates far less than wall time."""
    import argparse
    import json
    import sys
    import time
    from pathlib import Path

    from privacy_audit.ground.io import atomic_write_text

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--cpu-time", action="store_true", help="time with process_time")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if not out.parent.is_dir():
        print(f"error: output directory {str(out.parent)!r} does not exist", file=sys.stderr)
        return 2
    if args.repeats < 1 or args.warmup < 0:
        print("error: --repeats must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, 1 << 16)
    settings = BenchSettings(args.repeats, args.warmup, False, 0, "cpu", 1)
    big = GPT2_SMALL
    load = _loadavg()
    label = f"gpt2-small-shaped B={big['batch_size']} T={big['seq_len']}"
    cases, ratios, memory, row = measure_shape(
        label,
        big["vocab"],
        big["batch_size"],
        big["seq_len"],
        big["dims"],
        settings,
        clock=time.process_time if args.cpu_time else None,
    )
    row["case"] = "gpt2-small-shaped"
    payload = {
        "schema": "privacy-audit-cost-of-privacy-case/1",
        "clock": "process_time (CPU time of this process)" if args.cpu_time else "wall",
        "repeats": args.repeats,
        "warmup": args.warmup,
        "threads": 1,
        "device": "cpu (no GPU)",
        "load_average_before": load,
        "load_average_after": _loadavg(),
        "ghost": GHOST_NOTE,
        "cases": cases,
        "memory": memory,
        "row": row,
    }
    atomic_write_text(out, json.dumps(payload, indent=2))
    print(json.dumps(row, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
