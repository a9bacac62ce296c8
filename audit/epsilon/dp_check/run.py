"""``dp-check``: every check on the user's setup, within a budget, into one result.

Order: build and replay test → noise → crafted pairs (sensitivity, clipping, coverage)
→ the sampler over the claimed schedule → one example across the schedule → the model's
own forward pass (cross-example, clipping through the loss, state outside the release)
→ the ε of what was measured (:mod:`.verdict`). Each phase gets a share of the budget and
stops at its deadline, saying what it left out.
"""

from __future__ import annotations

import math
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from privacy_audit.audit.epsilon.dp_check import (
    accounting,
    end_to_end,
    mechanism,
    model_checks,
    sampling,
)
from privacy_audit.audit.epsilon.dp_check.contract import Setup, SetupError, as_setup, call_user
from privacy_audit.audit.epsilon.dp_check.harness import (
    Coupler,
    Instance,
    build,
    check_dataset,
    crafted_step,
    flat,
    seed_everything,
    zero_rows,
)

SCHEMA = "privacy-audit/dp-check"
SCHEMA_VERSION = 1
DEFAULT_BUDGET = 180.0
#: share of the budget each phase may use before it stops early (they need not sum to 1:
#: a phase that finishes early leaves its time to the next)
SHARES = {
    "noise": 0.15,
    "designs": 0.35,
    "sampling": 0.45,
    "schedule": 0.55,
    "model": 0.7,
    # the verdict's accountants and the report need the rest (a few seconds)
    "end_to_end": 0.85,
}


class Progress:
    """``[m:ss] dp-check: ...`` lines on stderr (terminal and CI logs alike)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.start = time.perf_counter()

    def __call__(self, msg: str) -> None:
        if self.enabled:
            s = int(time.perf_counter() - self.start)
            print(f"[{s // 60}:{s % 60:02d}] dp-check: {msg}", file=sys.stderr, flush=True)


def _release_scale(inst: Instance) -> tuple[float | None, str]:
    """The factor the code applies to (clipped sum + noise), when it can be read:
    Opacus divides by expected_batch_size with loss_reduction='mean'."""
    opt = inst.optimizer
    if inst.protocol == "privatize":
        return 1.0, "privatize returns the release as is"
    red = getattr(opt, "loss_reduction", None)
    b = getattr(opt, "expected_batch_size", None)
    if red == "mean" and b:
        return 1.0 / float(b), f"1/expected_batch_size = 1/{b} (loss_reduction='mean')"
    if red == "sum":
        return 1.0, "loss_reduction='sum'"
    return None, "unknown"


class DPCheck:
    def __init__(
        self, setup: Setup, budget: float, seed: int, progress: Progress, e2e: bool = False
    ):
        self.force_e2e = e2e
        self.setup = setup
        self.claim = setup.claim
        self.budget = float(budget)
        self.seed = int(seed)
        self.log = progress
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()
        self.timing: dict[str, dict[str, float]] = {}
        self.notes: list[str] = []
        self.dataset = None

    def deadline(self, phase: str) -> float:
        return self.t0 + self.budget * SHARES[phase]

    def over(self) -> bool:
        return time.perf_counter() > self.t0 + self.budget

    def fresh(self, k: int) -> Instance:
        return build(self.setup, self.dataset, self.seed + 1000 * k)

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        w, c = time.perf_counter(), time.process_time()
        try:
            return fn()
        finally:
            self.timing[name] = {
                "wall_s": time.perf_counter() - w,
                "cpu_s": time.process_time() - c,
            }

    # ------------------------------------------------------------------ phases
    def load(self) -> Instance:
        s = self.setup
        if s.protocol == "opacus" or s.get("make_dataset") is not None:
            self.dataset = call_user("make_dataset()", s.module.make_dataset)
            check_dataset(self.dataset)
        a = build(s, self.dataset, self.seed)
        if a.n_params == 0:
            raise SetupError("the setup releases no parameter")
        return a

    def rows_per_step(self, inst: Instance) -> int:
        n = len(self.dataset) if self.dataset is not None else 64
        b = max(1, round(self.claim.sample_rate * n))
        cap = max(1, int(2e8 // max(1, inst.n_params * 4)))  # ≤ 200 MB of rows per step
        return int(min(b, 256, cap))

    def replay_test(self, a: Instance, b: Instance) -> dict[str, Any]:
        coupler = Coupler(a, b)
        ra, rb = coupler.pair(
            lambda: crafted_step(a, zero_rows(a, 4)), lambda: crafted_step(b, zero_rows(b, 4))
        )
        if ra is None or rb is None:
            return {"replayed": False, "why": "the optimizer released nothing for one step"}
        same = all(torch.equal(ra[n], rb[n]) for n in ra if n in rb)
        return {
            "replayed": bool(same),
            "why": "the noise is drawn from a random state dp-check can set"
            if same
            else "the noise comes from a generator dp-check cannot replay (e.g. secure mode): "
            "each pair is drawn repeatedly and only its projection is used",
        }

    def freshness(self) -> dict[str, Any]:
        """Two instances built from different global random states: is their noise the
        same (the setup seeds its own noise)?"""
        x = build(self.setup, self.dataset, self.seed + 7_777)
        y = build(self.setup, self.dataset, self.seed + 99_991)
        torch.manual_seed(self.seed + 31)
        rx = crafted_step(x, zero_rows(x, 2))
        torch.manual_seed(self.seed + 32_003)
        ry = crafted_step(y, zero_rows(y, 2))
        if rx is None or ry is None:
            return {"tested": False}
        same = all(torch.equal(rx[n], ry[n]) for n in rx if n in ry)
        return {"tested": True, "reproducible_without_global_seed": bool(same)}

    def run(self) -> dict[str, Any]:
        log = self.log
        claim = self.claim
        log(
            f"loading {self.setup.path.name if self.setup.path else 'setup'} ({self.setup.protocol})"
        )
        a = self.timed("build", self.load)
        scale, scale_how = _release_scale(a)
        info = self._info(a, scale, scale_how)
        log(
            f"{info['released_parameters']:,} parameters in {info['released_tensors']} released "
            f"tensors; optimizer {info['optimizer']}"
        )
        b = self.fresh(0)
        replay = self.timed("replay", lambda: self.replay_test(a, b))
        coupled = replay["replayed"]
        fresh = self.timed("freshness", self.freshness)
        # noise
        nb = self.rows_per_step(a)
        noise_inst = self.fresh(1)
        log(f"noise: releases of {nb}-example batches whose gradients are all zero")
        noise = self.timed(
            "noise",
            lambda: mechanism.measure_noise(
                noise_inst, 64, nb, self.deadline("noise"), progress=log
            ),
        )
        # designs
        noiseless = tuple(n for n, p in noise.per_tensor.items() if p.get("zero"))
        des = mechanism.designs(
            a,
            claim.max_grad_norm,
            claim.adjacency == "replace-one",
            limit=48,
            seed=self.seed,
            must=noiseless,
        )
        log(f"sensitivity: {len(des)} crafted pairs of batches that differ by one example")
        effects, flushes = self.timed(
            "designs", lambda: self._measure_designs(a, b, des, noise, coupled)
        )
        trace, samp = self._sampling(a)
        sched, sched2 = self._schedule(a, trace, noise)
        # the model
        model = {}
        if a.protocol == "opacus" and not self.over():
            model = self.timed("model", lambda: self._model_checks(noise, coupled))
        # the many-run audits (run_end_to_end): asked for, or where the parts rest on an
        # assumption that failed and their own bounds did not already decide
        self._e2e_inputs = (a, noise, effects, model)
        result = {
            "info": info,
            "end_to_end": [],
            "end_to_end_why": self._why_end_to_end(noise, coupled, sched, model),
            "replay": replay,
            "freshness": fresh,
            "noise": noise,
            "effects": effects,
            "flushes": flushes,
            "sampling": samp,
            "schedule": sched,
            "schedule_later_insertion": sched2,
            "model": model,
            "scale": scale,
        }
        return result

    def _info(self, a: Instance, scale: float | None, scale_how: str) -> dict[str, Any]:
        """The setup as the record describes it: protocol, released tensors and parameters,
        optimizer, data loader and batch sampler, dataset size, the release's scale and
        how it was found; with a model, its parameters and trainable tensors too."""
        info = {
            "protocol": a.protocol,
            "released_tensors": len(a.names),
            "released_parameters": a.n_params,
            "ghost_clipping": a.ghost,
            "optimizer": type(a.optimizer).__name__ if a.optimizer is not None else None,
            "data_loader": type(a.loader).__name__ if a.loader is not None else None,
            "batch_sampler": type(getattr(a.loader, "batch_sampler", None)).__name__
            if a.loader is not None
            else None,
            "dataset_size": len(self.dataset) if self.dataset is not None else None,
            "release_scale": scale,
            "release_scale_how": scale_how,
        }
        if a.model is not None:
            trainable = {n for n, p in a.model.named_parameters() if p.requires_grad}
            info["model_parameters"] = int(sum(p.numel() for p in a.model.parameters()))
            info["trainable_tensors"] = len(trainable)
        return info

    def _sampling(self, a: Instance) -> tuple[Any, dict[str, Any]]:
        """Drive the data loader over the claimed schedule (a fresh instance) and classify
        its batches: the trace (None without a loader) and the sampling record
        (``{"tested": False}`` without one)."""
        log, claim = self.log, self.claim
        trace = None
        samp: dict[str, Any] = {"tested": False}
        if a.loader is not None:
            log("sampling: driving the data loader over the claimed schedule")
            s_inst = self.fresh(2)
            trace = self.timed(
                "sampling", lambda: sampling.drive(s_inst, claim, self.deadline("sampling"))
            )
            samp = sampling.classify(trace)
            samp["tested"] = True
            log(
                f"sampling: {samp['logical_steps']} steps over {samp['epochs_driven']} epoch(s), "
                f"scheme {samp['scheme']}"
                + (f", q̂ = {samp['rate']['estimate']:.4g}" if "rate" in samp else "")
            )
        return trace, samp

    def _schedule(self, a: Instance, trace: Any, noise: Any) -> tuple[Any, Any]:
        """One example in the first step, every later release compared (fresh instances,
        within the budget), and, when it moves later releases, the same example inserted a
        few steps later. Returns both schedule effects (None when not run)."""
        log, claim = self.log, self.claim
        # one example across the schedule
        sched = None
        if trace is not None and trace.physical and not self.over():
            log("schedule: one example in the first step, every later release compared")
            a2, b2 = self.fresh(3), self.fresh(3)
            t0 = max(a.names, key=lambda n: math.prod(a.shapes[n]))
            g = claim.max_grad_norm * (1.0 if a.ghost else 1e3)
            sched = self.timed(
                "schedule",
                lambda: mechanism.schedule_effect(
                    a2,
                    b2,
                    Coupler(a2, b2),
                    trace.physical,
                    {t0: {0: g}},
                    noise,
                    self.deadline("schedule"),
                ),
            )
        # time-invariance, which the state-across-steps bound assumes: the same example
        # inserted a few steps later must move the later releases the same way
        sched2 = None
        if sched is not None and sched.mu_later > 0 and not self.over():
            a3, b3 = self.fresh(7), self.fresh(7)
            at = min(3, max(1, len(trace.physical) // 2))
            sched2 = mechanism.schedule_effect(
                a3,
                b3,
                Coupler(a3, b3),
                trace.physical,
                {t0: {0: g}},
                noise,
                self.deadline("schedule"),
                insert_at=at,
            )
        return sched, sched2

    def _measure_designs(self, a, b, des, noise, coupled):
        coupler = Coupler(a, b)
        effects, flushes = [], []
        deadline = self.deadline("designs")
        fresh_pairs = False
        for k, d in enumerate(des):
            if time.perf_counter() > deadline and k >= 4:
                self.notes.append(
                    f"sensitivity: {len(des) - k} of {len(des)} crafted pairs not run (budget)"
                )
                break
            if fresh_pairs:
                a, b = self.fresh(10 + k), self.fresh(10 + k)
                coupler = Coupler(a, b)
            # Bonferroni over the pairs for the drawn (not replayed) measurements
            e = mechanism.measure_design(
                a,
                b,
                coupler,
                d,
                noise,
                coupled,
                repeats=40,
                alpha=mechanism.DECISION_ALPHA / max(1, len(des)),
            )
            effects.append(e)
            if coupled and not fresh_pairs:
                fa, fb = coupler.pair(
                    lambda a=a: crafted_step(a, zero_rows(a, 3)),
                    lambda b=b: crafted_step(b, zero_rows(b, 3)),
                )
                if fa is not None and fb is not None:
                    diff = {n: fa[n].double() - fb[n].double() for n in fa if n in fb}
                    mu, _, _, norms, inf_in = mechanism.measured_mu(diff, noise)
                    if mu > 0 or inf_in:
                        flushes.append({"after": d.name, "mu": mu, "tensors": sorted(norms)[:5]})
                        fresh_pairs = True  # later pairs would carry this one's state
        return effects, flushes

    def run_end_to_end(self, raw: dict[str, Any]) -> None:
        why = raw["end_to_end_why"]
        if not why or self.over():
            return
        self.log(
            f"end-to-end: many-run audits on your setup ({why}); budget left "
            f"{self.t0 + self.budget - time.perf_counter():.0f} s"
        )
        e2e = self.timed("end_to_end", lambda: self._end_to_end(*self._e2e_inputs))
        raw["end_to_end"] = [e.as_dict() for e in e2e]

    def _why_end_to_end(self, noise, coupled, sched, model) -> str:
        if self.force_e2e:
            return "asked for"
        reasons = []
        if noise.gaussian_p is not None and noise.gaussian_p < 1e-3:
            reasons.append("the noise is not Gaussian")
        if not coupled:
            reasons.append("the noise cannot be replayed")
        ce = (model or {}).get("cross_example")
        if ce is not None and ce.tested and ce.rows_moved > 0:
            reasons.append("the batch mixes examples")
        if sched is not None and sched.mu_later > 0:
            reasons.append("state is carried across steps")
        return "; ".join(reasons)

    def _end_to_end(self, a: Instance, noise, effects, model) -> list:
        claim = self.claim
        deadline = self.deadline("end_to_end")
        t0 = max(a.names, key=lambda n: math.prod(a.shapes[n]))
        s = noise.per_tensor[t0]["std"] or 1.0
        dirac = [e for e in effects if e.design.kind == "dirac" and e.design.tensor == t0]
        mu = dirac[0].mu if dirac and 0 < dirac[0].mu < math.inf else 1.0 / claim.noise_multiplier
        steps = int(min(16, claim.steps or int((claim.epochs or 1) / claim.sample_rate)))
        out = []
        k = [0]

        def factory(r: int) -> Instance:
            # each run its own random state after the build, for the global generators and
            # the instance's own (a setup that seeds its noise would repeat it otherwise)
            k[0] += 1
            inst = build(self.setup, self.dataset, self.seed + 50_000 + k[0])
            run_seed = (self.seed * 7_919 + 104_729 * k[0]) % 2**31
            seed_everything(run_seed)
            for j, gen in enumerate(inst.generators()):
                gen.manual_seed(run_seed + j + 1)
            return inst

        for anchors in (0, 8):
            share = (deadline - time.perf_counter()) / (2 if anchors == 0 else 1)
            out.append(
                end_to_end.lone_canary(
                    factory,
                    t0,
                    claim.max_grad_norm,
                    claim.sample_rate,
                    steps,
                    s,
                    mu,
                    claim.delta,
                    runs=5000,
                    deadline=time.perf_counter() + share,
                    seed=self.seed,
                    anchors=anchors,
                )
            )
        ce = (model or {}).get("cross_example")
        if ce is not None and ce.tested and ce.rows_moved > 0 and time.perf_counter() < deadline:
            ds = self.dataset
            base = model_checks.collate(a, [ds[0]] * 8)
            other = None
            for j in range(1, min(len(ds), 64)):
                cand = model_checks.collate(a, [ds[j]] + [ds[0]] * 7)
                if model_checks.batch_shapes(cand) == model_checks.batch_shapes(base):
                    other = cand
                    break
            if other is not None:
                w = torch.full((8,), 1e3)

                def step(inst, batch):
                    o = model_checks.model_step(inst, self.setup, batch, w)
                    return None if o is None else o.release

                out.append(
                    end_to_end.duplicate_record(
                        factory, step, base, other, claim.delta, 2000, deadline, self.seed
                    )
                )
        return out

    def _model_checks(self, noise, coupled) -> dict[str, Any]:
        log = self.log
        out: dict[str, Any] = {}
        if not coupled:
            out["not_tested"] = (
                "the noise cannot be replayed, so one forward pass cannot be compared"
            )
            return out
        log("model: cross-example (one example replaced; do the others' gradients move?)")
        out["cross_example"] = model_checks.cross_example(
            lambda: (self.fresh(4), self.fresh(4)), self.setup, noise
        )
        if not self.over():
            log("model: clipping through the loss (one example's loss weighted by W vs 0)")
            out["loss_weight"] = model_checks.loss_weight_sensitivity(
                lambda: (self.fresh(5), self.fresh(5)), self.setup, noise
            )
        if not self.over():
            log("model: state the optimizer does not release (buffers, other optimizers)")
            sa, sb, sc = self.fresh(6), self.fresh(6), self.fresh(6)
            out["outside"] = model_checks.state_outside_release(
                sa, sb, sc, Coupler(sa, sb), self.setup, steps=1
            )
        return out


def check(
    setup: Any,
    budget: float = DEFAULT_BUDGET,
    seed: int = 0,
    progress: bool = True,
    accept_untested: tuple[str, ...] = (),
    end_to_end: bool = False,
) -> dict[str, Any]:
    """Run every check on ``setup`` (a SETUP.py path, a module or an object with the
    contract's names) and return the results record (the schema of docs/dp-check.md)."""
    import warnings

    from privacy_audit.audit.epsilon.dp_check import verdict
    from privacy_audit.audit.epsilon.dp_check.contract import check_seed

    check_seed(seed)
    s = as_setup(setup)
    if not (isinstance(budget, (int, float)) and math.isfinite(budget) and budget > 0):
        raise SetupError(f"--budget must be a number of seconds > 0, got {budget!r}")
    prog = Progress(progress)
    runner = DPCheck(s, budget, seed, prog, e2e=end_to_end)
    with warnings.catch_warnings():
        # Opacus's "secure RNG turned off" and torch's full-backward-hook notes are printed
        # on every build; what they say is in the report's findings where it matters
        warnings.simplefilter("ignore")
        raw = runner.run()
        record = runner.timed("verdict", lambda: verdict.assemble(s, raw, runner, accept_untested))
        # the parts' sound bounds first; the many-run audits only where they are asked for
        # or could still decide (they cost the rest of the budget)
        if raw["end_to_end_why"] and (end_to_end or record["verdict"] != "violated"):
            runner.run_end_to_end(raw)
            if raw["end_to_end"]:
                record = runner.timed(
                    "verdict", lambda: verdict.assemble(s, raw, runner, accept_untested)
                )
    record["budget"] = {
        "seconds": float(budget),
        "wall_s": time.perf_counter() - runner.t0,
        "cpu_s": time.process_time() - runner.cpu0,
        "phases": runner.timing,
        "left_out": list(dict.fromkeys(runner.notes)),
    }
    from privacy_audit.audit import __version__

    record["tool"] = {"name": "privacy-audit", "version": __version__}
    record["environment"] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "opacus": _version("opacus"),
        "dp_accounting": _version("dp-accounting"),
    }
    prog(f"verdict: {record['verdict'].upper()} ({record['headline']})")
    return record


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


__all__ = ["check", "SCHEMA", "SCHEMA_VERSION", "DEFAULT_BUDGET", "flat", "accounting"]
