"""Fresh instances of the user's DP setup, replayable noise, and the released update.

The release of one DP-SGD step is what the non-private optimizer consumes: for an
Opacus ``DPOptimizer`` (or any subclass) the ``p.grad`` its wrapped
``original_optimizer.step()`` reads, after clipping, noise and scaling. :class:`Capture`
records it there, so every subclass override (``clip_and_accumulate``, ``add_noise``,
``scale_grad``, ``step``, ``zero_grad``) is exercised as written. For the privatize
protocol the release is the function's return value.

Two instances built the same way and driven from the same random state draw the same
noise (:class:`Coupler`): their releases differ only by what the data changed, so one
example's effect on the release is measured exactly, not estimated.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from privacy_audit.audit.epsilon.dp_check.contract import Setup, SetupError, call_user

Rows = dict[str, torch.Tensor]  # name -> (B, *shape) per-example gradients
Release = dict[str, torch.Tensor]  # name -> released tensor


class RecordingDataset(torch.utils.data.Dataset):
    """The user's dataset, recording which indices are read while ``recording``."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.recording = False
        self.seen: list[int] = []

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, i):
        if self.recording:
            self.seen.append(int(i))
        return self.inner[i]

    def __getattr__(self, name: str):  # e.g. a HF dataset's column_names
        if name in ("inner", "recording", "seen"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def strip_wrapper_prefix(name: str) -> str:
    for prefix in ("_module.", "module."):
        while name.startswith(prefix):
            name = name[len(prefix) :]
    return name


@dataclass
class Instance:
    """One ``make_private`` result, or the privatize protocol's parameters."""

    protocol: str
    model: Any = None
    optimizer: Any = None
    loader: Any = None
    criterion: Any = None
    dataset: RecordingDataset | None = None
    names: list[str] = field(default_factory=list)  # released tensors, in optimizer order
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    params: list[torch.nn.Parameter] = field(default_factory=list)
    ghost: bool = False
    privatize: Callable | None = None

    @property
    def n_params(self) -> int:
        return int(sum(math.prod(s) for s in self.shapes.values()))

    def generators(self) -> list[torch.Generator]:
        """Every torch.Generator the setup draws from, in a fixed order (to replay)."""
        found: list[torch.Generator] = []
        bs = getattr(self.loader, "batch_sampler", None)
        objs = [
            self.optimizer,
            self.loader,
            bs,
            getattr(self.loader, "sampler", None),
            getattr(bs, "sampler", None),
            getattr(getattr(bs, "sampler", None), "sampler", None),
        ]
        for obj in objs:
            if obj is None:
                continue
            for attr in ("generator", "secure_rng", "noise_generator"):
                g = getattr(obj, attr, None)
                if isinstance(g, torch.Generator) and all(g is not f for f in found):
                    found.append(g)
        return found


def check_dataset(ds: Any) -> None:
    if not hasattr(ds, "__len__") or not hasattr(ds, "__getitem__"):
        raise SetupError(
            f"make_dataset() must return a map-style dataset (len() and [i]), got "
            f"{type(ds).__name__}"
        )
    try:
        n = len(ds)
    except Exception as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise SetupError(
            f"len(make_dataset()) raised {type(exc).__name__}{': ' + msg if msg else ''}"
        ) from None
    if n < 2:
        raise SetupError(f"make_dataset() returned {n} example(s); dp-check needs at least 2")


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def build(setup: Setup, dataset: Any, seed: int) -> Instance:
    """A fresh instance: the global random state is seeded first, so two builds with one
    seed are the same model, optimizer and sampler."""
    seed_everything(seed)
    if setup.protocol == "privatize":
        shapes = {k: tuple(int(s) for s in v) for k, v in setup.module.PARAMS.items()}
        loader = None
        rec = None
        if setup.optional.get("make_loader") is not None:
            rec = RecordingDataset(dataset)
            loader = call_user("make_loader(dataset)", setup.optional["make_loader"], rec)
        return Instance(
            "privatize",
            loader=loader,
            dataset=rec,
            names=list(shapes),
            shapes=shapes,
            privatize=setup.module.privatize,
        )
    rec = RecordingDataset(dataset)
    out = call_user("make_private(dataset)", setup.module.make_private, rec)
    if not isinstance(out, (tuple, list)) or len(out) not in (3, 4):
        raise SetupError(
            "make_private(dataset) must return (model, optimizer, data_loader), or "
            "(model, optimizer, criterion, data_loader) for ghost clipping; got "
            f"{type(out).__name__}{' of length ' + str(len(out)) if isinstance(out, (tuple, list)) else ''}"
        )
    if len(out) == 3:
        model, optimizer, loader = out
        criterion = None
    else:
        model, optimizer, criterion, loader = out
        if not callable(criterion):
            raise SetupError(
                "make_private returned 4 items; the third must be the criterion (a callable "
                f"loss, as Opacus's ghost clipping returns), got {type(criterion).__name__}"
            )
    if not isinstance(model, torch.nn.Module):
        raise SetupError(
            f"make_private returned {type(model).__name__} as the model; expected a torch.nn.Module"
        )
    if not hasattr(optimizer, "original_optimizer") or not callable(
        getattr(optimizer, "step", None)
    ):
        raise SetupError(
            f"make_private returned {type(optimizer).__name__} as the optimizer; expected an "
            "Opacus DPOptimizer (or subclass). For other DP code use the privatize protocol"
        )
    if not hasattr(loader, "__iter__"):
        raise SetupError(
            f"make_private returned {type(loader).__name__} as the data loader; expected "
            "an iterable (a DataLoader)"
        )
    from opacus.optimizers import DPOptimizerFastGradientClipping

    ghost = isinstance(optimizer, DPOptimizerFastGradientClipping)
    by_id = {id(p): strip_wrapper_prefix(n) for n, p in model.named_parameters()}
    params = list(optimizer.params)
    if not params:
        raise SetupError("the optimizer holds no trainable parameter (nothing is released)")
    names, shapes = [], {}
    for i, p in enumerate(params):
        n = by_id.get(id(p), f"optimizer parameter #{i}")
        names.append(n)
        shapes[n] = tuple(p.shape)
    return Instance(
        "opacus",
        model=model,
        optimizer=optimizer,
        loader=loader,
        criterion=criterion,
        dataset=rec,
        names=names,
        shapes=shapes,
        params=params,
        ghost=ghost,
    )


# --------------------------------------------------------------------------- #
# replaying the noise
# --------------------------------------------------------------------------- #


def _global_state() -> tuple:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return (torch.get_rng_state(), np.random.get_state(), random.getstate(), cuda)


def _set_global_state(state: tuple) -> None:
    torch.set_rng_state(state[0])
    np.random.set_state(state[1])
    random.setstate(state[2])
    if state[3] is not None:
        torch.cuda.set_rng_state_all(state[3])


def _same_state(x: tuple, y: tuple) -> bool:
    if not torch.equal(x[0], y[0]) or x[2] != y[2]:
        return False
    (n1, k1, p1, h1, c1), (n2, k2, p2, h2, c2) = x[1], y[1]
    if n1 != n2 or not np.array_equal(k1, k2) or (p1, h1, c1) != (p2, h2, c2):
        return False
    if x[3] is not None and not all(torch.equal(a, b) for a, b in zip(x[3], y[3], strict=True)):
        return False
    return True


class Coupler:
    """Runs the same step on two instances from the same random state (the global torch,
    CUDA, numpy and random states, and each instance's own torch generators): the noise
    they draw is identical when the noise comes from any of these, so their releases
    differ exactly by the effect of the data.

    After every pair it checks that both runs left every state the same; ``last_replayed``
    is False when they did not (one run drew a different amount of randomness: its noise
    is not the other's), and ``replayed`` stays False from then on. Callers must not treat
    such a pair's difference as exact."""

    def __init__(self, a: Instance, b: Instance):
        self.a, self.b = a, b
        self.replayed = True  # every pair so far left both in the same state
        self.last_replayed = True

    def pair(self, run_a: Callable[[], Any], run_b: Callable[[], Any]) -> tuple[Any, Any]:
        start = _global_state()
        gens_a = self.a.generators()
        gens_b = self.b.generators()
        try:
            own = [g.get_state() for g in gens_a]
        except RuntimeError:
            own = None
        out_a = run_a()
        end = _global_state()
        try:
            end_own = [g.get_state() for g in gens_a]
        except RuntimeError:
            end_own = None
        _set_global_state(start)
        if own is not None and len(gens_b) == len(own):
            for g, s in zip(gens_b, own, strict=True):
                g.set_state(s)
        out_b = run_b()
        after = _global_state()
        same = _same_state(after, end)
        if own is None or len(gens_b) != len(own):
            same = same and not gens_a and not gens_b
        elif end_own is not None:
            try:
                same = same and all(
                    torch.equal(g.get_state(), s) for g, s in zip(gens_b, end_own, strict=True)
                )
            except RuntimeError:
                same = False
        self.last_replayed = same
        if not same:
            self.replayed = False
        _set_global_state(end)
        return out_a, out_b


# --------------------------------------------------------------------------- #
# capturing the release
# --------------------------------------------------------------------------- #


class Capture:
    """Records the release each time the setup's optimizer steps its wrapped optimizer.

    With ``update=False`` the wrapped step is skipped (the parameters stay as built, so a
    sequence of crafted steps measures the optimizer, not a drifting model)."""

    def __init__(self, inst: Instance, update: bool = False):
        self.inst = inst
        self.update = update
        self.releases: list[Release] = []
        self._inner = None

    def __enter__(self) -> Capture:
        if self.inst.protocol != "opacus":
            return self
        inner = self.inst.optimizer.original_optimizer
        original = inner.step
        names = {id(p): n for p, n in zip(self.inst.params, self.inst.names, strict=True)}
        extra = {}
        for n, p in self.inst.model.named_parameters():
            extra.setdefault(id(p), strip_wrapper_prefix(n))

        def step(*args, **kwargs):
            rel: Release = {}
            for group in inner.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        key = names.get(id(p)) or extra.get(id(p)) or f"param@{id(p)}"
                        rel[key] = p.grad.detach().clone()
            self.releases.append(rel)
            if self.update:
                return original(*args, **kwargs)
            return None

        inner.step = step
        self._inner = inner
        return self

    def __exit__(self, *exc) -> None:
        if self._inner is not None and "step" in self._inner.__dict__:
            del self._inner.step
        self._inner = None


# --------------------------------------------------------------------------- #
# crafted per-example gradients
# --------------------------------------------------------------------------- #


def zero_rows(inst: Instance, b: int) -> Rows:
    return {n: torch.zeros((b, *s), dtype=torch.float32) for n, s in inst.shapes.items()}


def crafted_step(inst: Instance, rows: Rows) -> Release | None:
    """One optimizer step with ``rows`` written into the per-example gradient slots, as
    the user's loop runs it (``zero_grad``, the gradients, ``step``). Returns the release,
    or None when the optimizer skipped the step (gradient accumulation)."""
    if inst.protocol == "privatize":
        arrays = {n: r.double().numpy() for n, r in rows.items()}
        out = call_user("privatize(per_example_grads)", inst.privatize, arrays)
        return _privatized(inst, out)
    opt = inst.optimizer
    with Capture(inst) as cap:
        call_user("optimizer.zero_grad()", opt.zero_grad)
        for n, p in zip(inst.names, inst.params, strict=True):
            r = rows[n].to(dtype=p.dtype, device=p.device)
            if inst.ghost:  # ghost clipping clips inside the loss: the optimizer reads p.grad
                p.grad = r.sum(dim=0)
            else:
                p.grad_sample = r
        call_user("optimizer.step()", opt.step)
    if not cap.releases:
        return None
    rel = cap.releases[-1]
    for n, t in rel.items():
        if not torch.isfinite(t).all():
            raise SetupError(
                f"the optimizer released NaN or inf in '{n}' for crafted per-example gradients "
                "(zeros, or one example of norm up to 10^6·C): dp-check cannot measure a "
                "release that is not finite"
            )
    return rel


def _privatized(inst: Instance, out: Any) -> Release:
    if not isinstance(out, dict):
        raise SetupError(
            f"privatize(per_example_grads) must return a dict {{name: array}}, got "
            f"{type(out).__name__}"
        )
    rel: Release = {}
    for n, shape in inst.shapes.items():
        if n not in out:
            raise SetupError(f"privatize returned no '{n}' (PARAMS names it)")
        try:
            a = np.asarray(out[n], dtype=np.float64)
        except (TypeError, ValueError):
            raise SetupError(
                f"privatize returned '{n}' that is not an array of numbers "
                f"({type(out[n]).__name__})"
            ) from None
        if a.shape != tuple(shape):
            raise SetupError(f"privatize returned '{n}' of shape {a.shape}; PARAMS says {shape}")
        if not np.isfinite(a).all():
            raise SetupError(f"privatize returned non-finite values (NaN or inf) in '{n}'")
        rel[n] = torch.from_numpy(a.copy())
    return rel


def replay_signals(inst: Instance, signals: list[bool] | None) -> None:
    """Queue the accumulation signals the sampler emitted before a physical batch."""
    if not signals or inst.protocol != "opacus":
        return
    for s in signals:
        inst.optimizer.signal_skip_step(do_skip=bool(s))


def flat(rel: Release, names: Iterable[str]) -> torch.Tensor:
    return torch.cat([rel[n].reshape(-1).double() for n in names])
