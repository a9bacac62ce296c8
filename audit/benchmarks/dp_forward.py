"""``privacy-audit bench dp-forward``: training-step time of dp-forward, non-private training
and DP-SGD side by side, on the same model, batch and optimizer, in one run.

Models: the pretrained all-MiniLM-L6-v2 encoder (offline, from the installed package; the
reported figure) and the tiny 2-layer BERT; ``--quick`` times the tiny BERT only, with small
shapes. Every case trains all parameters (dp-forward does *not* freeze the pre-noise layers
here, which would make it cheaper), so the ratio isolates the cost of the mechanism:
normalization and noise at one position for dp-forward, per-sample gradients (Opacus
GradSampleModule), clipping and noise for DP-SGD.

Targets (DP-Forward paper, Fig. 4): dp-forward ≤ 1.1× non-private, and DP-SGD ≥ 3× dp-forward.

Memory (Fig. 4 also claims DP-Forward's memory ≈ non-private and ≈ 3× below DP-SGD): after
timing, one more step of each case runs alone and its peak resident memory above the
resident memory just before it is read from /proc (``peak_step_memory_mib``: VmHWM after
resetting it through clear_refs, Linux only; None elsewhere). It counts activations,
gradients, per-sample gradients and optimizer work; the model weights, shared by all
cases, are reported separately.
"""

from __future__ import annotations

import copy
import time

import torch

from privacy_audit.audit.benchmarks.cost_of_privacy import peak_step_memory_mib
from privacy_audit.audit.benchmarks.dp_sgd import classifier_batch, opacus_dp_sgd_step, plain_step
from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, time_cases

DP_FORWARD_MAX = 1.1
DP_SGD_MIN_OVER_DPF = 3.0


def _cases(model, ids, mask, y, seed: int, position: str):
    from privacy_audit.defenses.dp_forward import DPForward

    step_plain = plain_step(copy.deepcopy(model).train(), ids, mask, y)
    dpf = copy.deepcopy(model).train()
    DPForward(epsilon=8.0, position=position, freeze_pre_noise=False).install(dpf, seed)
    step_dpf = plain_step(dpf, ids, mask, y)
    step_dp_sgd = opacus_dp_sgd_step(model, ids, mask, y, seed)
    return {"non-private": step_plain, "dp-forward": step_dpf, "dp-sgd": step_dp_sgd}


def run(settings: BenchSettings) -> BenchResult:
    shapes = [("tiny", 8, 32)] if settings.quick else [("minilm", 32, 64), ("tiny", 32, 64)]
    cases: dict[str, dict] = {}
    ratios: dict[str, float] = {}
    targets: dict[str, str] = {}
    memory: dict[str, object] = {}
    setup: dict = {"position": "encoder.1 (add-norm-2)", "optimizer": "SGD", "models": {}}
    notes = [
        "memory: peak resident memory of one step above the memory before it (MiB), "
        "Linux /proc VmHWM; ratios dp-forward/non-private and dp-sgd/dp-forward.",
        "All cases train every parameter; dp-forward with the pre-noise layers frozen "
        "(its default, for a proven local-DP claim) is cheaper still.",
        "Ratios are per model, against that model's non-private step; "
        "'dp-sgd/dp-forward' is the DP-SGD step over the dp-forward step.",
    ]
    # One intra-op thread: this process's CPU time equals its idle-machine wall time, and
    # unlike wall time it is not inflated by other load on a shared machine.
    single = torch.get_num_threads() == 1
    clock = time.process_time if single else time.perf_counter
    setup["clock"] = "process CPU time (1 thread)" if single else "wall time"
    if not single:
        notes.append(
            "Wall-clock timing (more than one thread): run with --threads 1 on a shared machine."
        )
    for preset, batch, seq in shapes:
        model, ids, mask, y = classifier_batch(batch, seq, settings.seed, preset)
        ids, mask = (
            ids[:, : max(int(mask.sum(1).max()), 1)],
            mask[:, : max(int(mask.sum(1).max()), 1)],
        )
        steps = _cases(model, ids, mask, y, settings.seed, "encoder.1")
        timings = time_cases(steps, settings.repeats, settings.warmup, clock=clock)
        peaks = {name: peak_step_memory_mib(fn) for name, fn in steps.items()}
        for name, mib in peaks.items():
            memory[f"{preset}/{name}"] = mib
        if peaks["non-private"] and peaks["dp-forward"] and peaks["dp-sgd"]:
            memory[f"{preset}/dp-forward/non-private"] = peaks["dp-forward"] / peaks["non-private"]
            memory[f"{preset}/dp-sgd/dp-forward"] = peaks["dp-sgd"] / peaks["dp-forward"]
        memory[f"{preset}/weights_mib"] = (
            sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        )
        ref = timings["non-private"].median_s
        for name, t in timings.items():
            key = f"{preset}/{name}"
            cases[key] = t.summary()
            ratios[key] = t.median_s / ref
        dpf = timings["dp-forward"].median_s / ref
        sgd_over_dpf = timings["dp-sgd"].median_s / timings["dp-forward"].median_s
        ratios[f"{preset}/dp-sgd/dp-forward"] = sgd_over_dpf
        targets[f"{preset}/dp-forward"] = (
            f"target <= {DP_FORWARD_MAX}x: {'met' if dpf <= DP_FORWARD_MAX else 'NOT met'}"
        )
        targets[f"{preset}/dp-sgd"] = (
            f"dp-sgd/dp-forward = {sgd_over_dpf:.2f}x, target >= {DP_SGD_MIN_OVER_DPF}x: "
            f"{'met' if sgd_over_dpf >= DP_SGD_MIN_OVER_DPF else 'NOT met'}"
        )
        setup["models"][preset] = {
            "batch_size": int(ids.shape[0]),
            "seq_len": int(ids.shape[1]),
            "parameters": int(sum(p.numel() for p in model.parameters())),
        }
    return BenchResult(
        name="dp-forward",
        reference="non-private (per model)",
        cases=cases,
        ratios=ratios,
        setup=setup,
        memory=memory,
        targets=targets,
        notes=notes,
    )
