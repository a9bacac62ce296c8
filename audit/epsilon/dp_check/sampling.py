"""Which batches the user's data loader really draws, and the ε of that scheme.

The loader built by ``make_private`` is driven over the claimed schedule (its batch
sampler, or the loader itself on a dataset that records the indices it is asked for),
with gradient-accumulation signals (Opacus's ``BatchMemoryManager``) recorded so that
physical batches are joined into the logical steps the accountant counts.

The scheme is read from the index sets (:func:`classify`):

- ``poisson``: every example in every step independently with probability q. Tested by
  two dispersion tests, batch sizes against Binomial(N, q̂) and per-example counts
  against Binomial(T, q̂); a scheme is called non-Poisson only at p < 1e-6.
- ``shuffle``: each epoch a partition of the data (every example in exactly one step, a
  few dropped with ``drop_last``), a new one every epoch.
- ``fixed``: the same batches every epoch (no reshuffling), or batches in index order.
- ``with-replacement``: an example drawn twice into one step.
- ``fixed-size``: constant batch sizes that are neither of the above.
- ``other``.

q̂ is the inclusion rate (total inclusions / (N·T)) with a Clopper–Pearson interval; under
Poisson sampling the N·T inclusions are independent Bernoulli(q), so it is exact.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from privacy_audit.audit.epsilon.dp_check.contract import Claim, SetupError
from privacy_audit.audit.epsilon.dp_check.harness import Instance
from privacy_audit.audit.epsilon.dp_check.mechanism import DECISION_ALPHA

#: p-value below which a dispersion test calls a scheme non-Poisson
POISSON_P = 1e-6


@dataclass
class Trace:
    n: int
    epochs: list[list[list[int]]] = field(default_factory=list)  # logical batches
    physical: list[tuple[list[int], list[bool]]] = field(default_factory=list)
    source: str = "batch_sampler"
    truncated: bool = False
    epochs_wanted: int = 0

    @property
    def steps(self) -> list[list[int]]:
        return [b for e in self.epochs for b in e]


def _batch_indices(batch: Any) -> list[int]:
    if hasattr(batch, "tolist"):
        batch = batch.tolist()
    return [int(i) for i in batch]


def drive(inst: Instance, claim: Claim, deadline: float, max_steps: int = 200_000) -> Trace:
    """Iterate the instance's loader over the claimed schedule and record every batch."""
    loader = inst.loader
    if loader is None:
        raise SetupError("no data loader to drive (privatize: define make_loader(dataset))")
    n = len(inst.dataset) if inst.dataset is not None else 0
    trace = Trace(n=n)
    signals: list[bool] = []
    opt = inst.optimizer
    patched = False
    if opt is not None and hasattr(opt, "signal_skip_step"):

        def record(do_skip=True):
            signals.append(bool(do_skip))

        opt.signal_skip_step = record
        patched = True
    bs = getattr(loader, "batch_sampler", None)
    if bs is None and inst.protocol == "privatize":
        bs = loader  # make_loader may return the batch sampler itself (lists of indices)
    use_sampler = bs is not None and hasattr(bs, "__iter__")
    trace.source = "batch_sampler" if use_sampler else "loader"
    try:
        per_epoch = None
        epochs = claim.epochs
        if epochs is None:
            try:
                per_epoch = len(bs if use_sampler else loader)
            except TypeError:
                per_epoch = None
            epochs = math.ceil(claim.steps / per_epoch) if per_epoch else 1
        trace.epochs_wanted = int(epochs)
        total = 0
        for _ in range(int(epochs)):
            logical: list[list[int]] = []
            pending: list[int] = []
            if use_sampler:
                source = iter(bs)
            else:
                inst.dataset.seen.clear()
                inst.dataset.recording = True
                source = iter(loader)
            for item in source:
                if use_sampler:
                    idx = _batch_indices(item)
                else:
                    idx = list(inst.dataset.seen)
                    inst.dataset.seen.clear()
                sig = list(signals)
                signals.clear()
                trace.physical.append((idx, sig))
                pending.extend(idx)
                if not sig or sig[-1] is False:
                    logical.append(pending)
                    pending = []
                    total += 1
                if (claim.epochs is None and claim.steps is not None and total >= claim.steps) or (
                    total >= max_steps
                ):
                    break
                if time.perf_counter() > deadline and total >= 2:
                    trace.truncated = True
                    break
            if pending:
                logical.append(pending)
            trace.epochs.append(logical)
            if trace.truncated or total >= max_steps:
                trace.truncated = trace.truncated or total >= max_steps
                break
            if claim.epochs is None and claim.steps is not None and total >= claim.steps:
                break
    except SetupError:
        raise
    except Exception as exc:
        raise SetupError(
            f"iterating the data loader raised {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    finally:
        if patched:
            del opt.signal_skip_step  # the class's method again
            if hasattr(opt, "_step_skip_queue"):
                opt._step_skip_queue.clear()
        if inst.dataset is not None:
            inst.dataset.recording = False
    return trace


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided (1 − alpha) lower and upper bounds of a binomial proportion."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


def _dispersion_p(x: np.ndarray, var0: float) -> float:
    """Two-sided p-value of the sample variance of ``x`` against ``var0`` (χ²)."""
    k = x.size
    if k < 3 or var0 <= 0:
        return float("nan")
    d = float(((x - x.mean()) ** 2).sum() / var0)
    lo, hi = stats.chi2.cdf(d, k - 1), stats.chi2.sf(d, k - 1)
    return float(min(1.0, 2 * min(lo, hi)))


def _summary(trace: Trace, sizes: np.ndarray) -> dict[str, Any]:
    """The trace's counts for the sampling record: examples, logical steps, physical
    batches, epochs driven and wanted, steps per epoch, source, truncation, inclusions and
    the batch sizes (``sizes``: one per logical step) with the empty batches."""
    n = trace.n
    t = len(trace.steps)
    total = int(sizes.sum())
    out: dict[str, Any] = {
        "examples": n,
        "logical_steps": t,
        "physical_batches": len(trace.physical),
        "epochs_driven": len(trace.epochs),
        "epochs_wanted": trace.epochs_wanted,
        "steps_per_epoch": [len(e) for e in trace.epochs],
        "source": trace.source,
        "truncated": trace.truncated,
        "inclusions": total,
        "batch_size": {
            "mean": float(sizes.mean()) if t else float("nan"),
            "min": int(sizes.min()) if t else 0,
            "max": int(sizes.max()) if t else 0,
            "std": float(sizes.std(ddof=1)) if t > 1 else 0.0,
        },
        "empty_batches": int((sizes == 0).sum()),
    }
    return out


def _epoch_passes(trace: Trace, n: int) -> tuple[list[bool], list[bool], bool, list[int]]:
    """Per non-empty epoch: whether it is one full pass (every example exactly once) and
    whether it is a pass with a few examples dropped (at most once each, ≥ 95% present);
    whether every epoch has the same batches; and each epoch's number of steps."""
    full, partial, identical = [], [], True
    first_epoch = None
    sizes_e = []
    for e in trace.epochs:
        if not e:
            continue
        c = np.bincount(
            np.concatenate([np.asarray(b, dtype=np.int64) for b in e if b] or [[0]]), minlength=n
        )
        if not any(len(b) for b in e):
            c = np.zeros(n, dtype=np.int64)
        full.append(bool(c.max() <= 1 and (c == 1).all()))
        partial.append(bool(c.max() <= 1 and (c == 1).mean() >= 0.95))
        sizes_e.append(len(e))
        key = [tuple(sorted(b)) for b in e]
        if first_epoch is None:
            first_epoch = key
        elif key != first_epoch:
            identical = False
    return full, partial, identical, sizes_e


def classify(trace: Trace, alpha: float = 0.025) -> dict[str, Any]:
    """The scheme the trace shows and its parameters (module docstring)."""
    n = trace.n
    steps = trace.steps
    t = len(steps)
    sizes = np.array([len(b) for b in steps], dtype=float)
    total = int(sizes.sum())
    out = _summary(trace, sizes)
    if t == 0 or n == 0:
        out["scheme"] = "none"
        return out
    q = total / (n * t)
    lo, hi = clopper_pearson(total, n * t, alpha)
    lo_d, hi_d = clopper_pearson(total, n * t, DECISION_ALPHA)
    out["rate"] = {
        "estimate": q,
        "lower": lo,
        "upper": hi,
        "decision_lower": lo_d,  # the ends a VIOLATED decision uses (mechanism.DECISION_ALPHA)
        "decision_upper": hi_d,
        "trials": n * t,
    }
    dup = sum(len(b) - len(set(b)) for b in steps)
    out["duplicates_within_steps"] = int(dup)
    out["expected_empty_batches"] = float(t * (1 - q) ** n) if q < 1 else 0.0
    full, partial, identical, sizes_e = _epoch_passes(trace, n)
    in_order = all(
        all(b == list(range(b[0], b[0] + len(b))) for b in e if b)
        and [b[0] for b in e if b] == sorted(b[0] for b in e if b)
        for e in trace.epochs
    )
    out["partition_epochs"] = int(sum(partial))
    # how likely Poisson sampling at q̂ is to look like one pass per epoch (every example
    # at most once per epoch): the pattern decides the scheme only when this is < 1e-6
    log_p_pattern = 0.0
    for te in sizes_e:
        if 0 < q < 1:
            p_le1 = (1 - q) ** te + te * q * (1 - q) ** (te - 1)
            log_p_pattern += n * math.log(max(p_le1, 1e-300))
    out["poisson_looks_like_passes"] = math.exp(log_p_pattern) if sizes_e else None
    decisive = sizes_e and log_p_pattern < math.log(1e-6)
    counts = np.bincount(
        np.concatenate([np.asarray(b, dtype=np.int64) for b in steps if b] or [[0]]), minlength=n
    )
    if not total:
        counts = np.zeros(n)
    p_size = _dispersion_p(sizes, n * q * (1 - q)) if 0 < q < 1 else float("nan")
    p_count = _dispersion_p(counts.astype(float), t * q * (1 - q)) if 0 < q < 1 else float("nan")
    out["poisson_tests"] = {"batch_size_p": p_size, "per_example_count_p": p_count}
    full_epochs = [e for e in trace.epochs if e]
    if n > 0 and all(len(set(b)) == n for b in steps):
        out["scheme"] = "poisson"
        out["why"] = "every example in every step (q = 1: Poisson sampling at rate 1)"
    elif dup > 0:
        out["scheme"] = "with-replacement"
        out["why"] = f"{dup} draws of an example already in its step"
    elif partial and all(partial) and not decisive:
        out["scheme"] = "undetermined"
        out["why"] = (
            "one pass per epoch, but Poisson sampling at this size would look the same with "
            f"probability {out['poisson_looks_like_passes']:.2g}: drive more epochs"
        )
    elif full and all(full):
        if in_order:
            out["scheme"] = "fixed"
            out["why"] = "batches in index order: an example's step is known"
        elif len(full_epochs) >= 2 and identical:
            out["scheme"] = "fixed-shuffled-once"
            out["why"] = "the same batches every epoch (one permutation)"
        else:
            out["scheme"] = "shuffle"
            out["why"] = "every example in exactly one step per epoch, reshuffled"
    elif partial and all(partial):
        out["scheme"] = "shuffle-drop-last"
        out["why"] = "one pass per epoch, a few examples dropped each time (drop_last)"
    elif not (p_size == p_size and p_count == p_count):
        out["scheme"] = "undetermined"
        out["why"] = "too few steps (or a rate of 0 or 1) to test for Poisson sampling"
    elif not (p_size < POISSON_P or p_count < POISSON_P):
        out["scheme"] = "poisson"
        out["why"] = "batch sizes and per-example counts as Poisson sampling predicts"
    elif sizes[:-1].std() == 0 if t > 1 else True:
        out["scheme"] = "fixed-size"
        out["why"] = "constant batch size, examples not in one step per epoch"
    else:
        out["scheme"] = "other"
        out["why"] = "neither Poisson sampling nor one pass per epoch"
    return out
