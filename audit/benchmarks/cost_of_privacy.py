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

from audit.benchmarks.timing import BenchResult, BenchSettings, time_cases

VOCABS = {"2k": 2048, "16k": 16384}
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


def _cases(vocab: int, batch: int, seq: int, seed: int, chunk: int | None):
    from opacus import GradSampleModule

    from defenses.dp_engine import DPSGDEngine, clip_weights
    from defenses.phantom import per_sample_token_loss
    from defenses.targets.lm import build_lm

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (batch, seq), generator=g)
    mask = torch.ones_like(ids)
    pos = torch.arange(seq).expand(batch, seq)
    noise = torch.Generator().manual_seed(seed + 1)

    def model(tie=True):
        return build_lm(
            vocab, seed=seed, n_embd=64, n_layer=2, n_head=2, n_positions=seq, tie=tie
        ).train()

    plain = model()
    opt_plain = torch.optim.SGD(plain.parameters(), lr=1e-3)

    def step_plain():
        opt_plain.zero_grad(set_to_none=True)
        logits = plain(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        per_sample_token_loss(logits, ids, mask).mean().backward()
        opt_plain.step()

    def engine_case(norms):
        m = model()
        eng = DPSGDEngine(m, 1.0, 1.0, batch, norms=norms, chunk_size=chunk)
        opt = torch.optim.SGD(m.parameters(), lr=1e-3)
        return m, lambda: eng.step(opt, ids, mask, noise)

    m_ph, step_phantom = engine_case("phantom")
    m_ex, step_explicit = engine_case("explicit")

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

    steps = {
        "non-private": step_plain,
        "phantom": step_phantom,
        "explicit": step_explicit,
        "opacus": step_opacus,
    }
    params = {
        "non-private": list(plain.parameters()),
        "phantom": list(m_ph.parameters()),
        "explicit": list(m_ex.parameters()),
        "opacus": params_op,
    }
    return steps, params


def cost_table_from_bench_json(path) -> dict[str, Any]:
    """The "cost of privacy" table for the report, from a ``privacy-audit bench`` JSON
    file holding a ``cost-of-privacy`` result. AuditError on a missing or foreign file."""
    import json
    from pathlib import Path

    from audit.errors import AuditError

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
    return {
        "rows": res["setup"]["cost_of_privacy_table"],
        "setup": {k: v for k, v in res["setup"].items() if k != "cost_of_privacy_table"},
        "quick": bool((data.get("settings") or {}).get("quick", False)),
        "source": str(p),
    }


SHAPES = {"T=16": (32, 16), "T=64": (32, 64), "B=128 T=16": (128, 16)}  # (batch, sequence length)


def run(settings: BenchSettings) -> BenchResult:
    import warnings

    chunk = None  # vmap over the whole batch, as torch.func is normally used
    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD: big tensors on mmap, returned on free
    vocabs = {"2k": 512, "16k": 2048} if settings.quick else VOCABS
    shapes = {"T=8": (4, 8)} if settings.quick else SHAPES
    cases: dict[str, Any] = {}
    ratios: dict[str, float] = {}
    memory: dict[str, Any] = {}
    table = []
    for shape, (batch, seq) in shapes.items():
        for vlabel, vocab in vocabs.items():
            label = f"{vlabel} {shape}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                steps, params = _cases(vocab, batch, seq, settings.seed, chunk)
                named = {f"{k} @{label}": v for k, v in steps.items()}
                timings = time_cases(named, settings.repeats, settings.warmup)
                mem = {}
                for k, fn in steps.items():
                    work = peak_step_memory_mib(fn)
                    state = _state_mib(params[k])
                    mem[k] = {
                        "step_peak_mib": work,
                        "state_mib": state,
                        "total_mib": None if work is None else work + state,
                    }
            ref = timings[f"non-private @{label}"].median_s
            ref_mem = mem["non-private"]["total_mib"]
            ref_work = mem["non-private"]["step_peak_mib"]
            for k in steps:
                key = f"{k} @{label}"
                cases[key] = timings[key].summary()
                ratios[key] = timings[key].median_s / ref
                m = mem[k]
                m["ratio_total"] = None if not ref_mem else m["total_mib"] / ref_mem
                m["ratio_step_peak"] = (
                    None
                    if not ref_work or m["step_peak_mib"] is None
                    else m["step_peak_mib"] / ref_work
                )
                memory[key] = m
            ph = timings[f"phantom @{label}"].median_s
            table.append(
                {
                    "vocab": vocab,
                    "batch_size": batch,
                    "seq_len": seq,
                    "phantom_time_x_nonprivate": ratios[f"phantom @{label}"],
                    "explicit_time_x_nonprivate": ratios[f"explicit @{label}"],
                    "opacus_time_x_nonprivate": ratios[f"opacus @{label}"],
                    "explicit_over_phantom_time": timings[f"explicit @{label}"].median_s / ph,
                    "opacus_over_phantom_time": timings[f"opacus @{label}"].median_s / ph,
                    "phantom_memory_x_nonprivate": memory[f"phantom @{label}"]["ratio_total"],
                    "explicit_memory_x_nonprivate": memory[f"explicit @{label}"]["ratio_total"],
                    "opacus_memory_x_nonprivate": memory[f"opacus @{label}"]["ratio_total"],
                }
            )
    result = BenchResult(
        name="cost-of-privacy",
        reference="non-private (same vocabulary and shape)",
        cases=cases,
        ratios=ratios,
        setup={
            "model": "GPT2LMHeadModel from config, d=64, 2 blocks, 2 heads, tied (Opacus: untied)",
            "shapes": {k: {"batch_size": b, "seq_len": t} for k, (b, t) in shapes.items()},
            "vocab_sizes": list(vocabs.values()),
            "optimizer": "SGD",
            "explicit": "torch.func vmap(grad) over the whole batch",
            "threads": torch.get_num_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        },
        memory=memory,
        targets={f"phantom @16k {s}": TARGETS["phantom"] for s in shapes}
        | {f"explicit @16k {s}": TARGETS["explicit"] for s in shapes},
        notes=[
            "cost of privacy: "
            + "; ".join(
                f"M={r['vocab']} B={r['batch_size']} T={r['seq_len']}: phantom "
                f"{r['phantom_time_x_nonprivate']:.2f}x time, "
                f"{_fmt(r['phantom_memory_x_nonprivate'])} memory; explicit/phantom "
                f"{r['explicit_over_phantom_time']:.2f}x; opacus/phantom "
                f"{r['opacus_over_phantom_time']:.2f}x"
                for r in table
            ),
            "Opacus runs an untied output embedding (one more M x d matrix).",
        ],
    )
    result.setup["cost_of_privacy_table"] = table
    return result


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.2f}x"
