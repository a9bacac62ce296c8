"""Checks that need the user's model: its forward pass on the dataset's own items.

- :func:`cross_example` — does one example's per-sample gradient change when another
  example of the batch changes? A batch of copies of one item, then the same batch with
  one copy replaced by another item of the same shape (so every random draw, dropout
  included, is the same): the other rows' per-sample gradients (Opacus's own
  ``grad_sample``; per-sample norms under ghost clipping) must not move, and the release
  may move by at most the replaced example's two clipped gradients.
- :func:`loss_weight_sensitivity` — clipping as the model computes it: one example's
  loss multiplied by W (its gradient by W) against W = 0. Under ghost clipping the
  clipping lives in the loss's double backward, not in the optimizer, so this is the
  only test of it.
- :func:`state_outside_release` — parameters and buffers that training changes but the
  DP optimizer does not release (a second optimizer, a head trained outside it, running
  statistics), and whether they depend on one example and carry no noise.

The batch is built from ``make_dataset()``'s items with the loader's ``collate_fn``. The
loss is ``loss_fn(model, batch)`` when SETUP defines it (per-example losses), the
criterion ghost clipping returns, or cross-entropy on an ``(inputs, labels)`` batch or a
Hugging Face batch with ``labels``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from privacy_audit.audit.epsilon.dp_check.contract import Setup, SetupError, call_user
from privacy_audit.audit.epsilon.dp_check.harness import (
    Capture,
    Coupler,
    Instance,
    strip_wrapper_prefix,
)
from privacy_audit.audit.epsilon.dp_check.mechanism import NoiseStats, exact_tolerance

#: relative change of a per-sample gradient treated as exactly zero (float rounding of
#: the same arithmetic on a batch of the same shape)
ROW_TOL = 1e-4


def collate(inst: Instance, items: list[Any]) -> Any:
    fn = getattr(inst.loader, "collate_fn", None)
    if fn is None:
        from torch.utils.data import default_collate

        fn = default_collate
    try:
        return fn(items)
    except Exception as exc:
        raise SetupError(
            f"collating dataset items into a batch raised {type(exc).__name__}: {str(exc)[:160]}"
        ) from None


def batch_shapes(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return ("t", tuple(batch.shape), str(batch.dtype))
    if isinstance(batch, dict):
        return ("d", tuple((k, batch_shapes(v)) for k, v in sorted(batch.items())))
    if isinstance(batch, (list, tuple)):
        return ("l", tuple(batch_shapes(v) for v in batch))
    return ("o", type(batch).__name__)


def _rows(batch: Any) -> int | None:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else None
    if isinstance(batch, dict):
        for v in batch.values():
            r = _rows(v)
            if r is not None:
                return r
    if isinstance(batch, (list, tuple)):
        for v in batch:
            r = _rows(v)
            if r is not None:
                return r
    return None


def per_example_loss(inst: Instance, setup: Setup, batch: Any):
    """Per-example losses (B,) for ``batch``, or ghost clipping's loss tensor; None when
    the batch's form is not one dp-check knows (SETUP should define loss_fn)."""
    fn = setup.optional.get("loss_fn")
    model = inst.model
    if fn is not None:
        return call_user("loss_fn(model, batch)", fn, model, batch)
    if isinstance(batch, dict) and "labels" in batch:
        labels = batch["labels"]
        out = model(**{k: v for k, v in batch.items() if k != "labels"})
        logits = getattr(out, "logits", out)
        return _ce(logits, labels, inst)
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        x, y = batch
        out = model(x)
        logits = getattr(out, "logits", out)
        if inst.ghost and inst.criterion is not None:
            return inst.criterion(logits, y)
        if isinstance(y, torch.Tensor) and isinstance(logits, torch.Tensor):
            if y.dtype in (torch.int64, torch.int32, torch.long):
                return _ce(logits, y, inst)
            if y.shape == logits.shape:
                return ((logits - y) ** 2).reshape(len(y), -1).mean(dim=1)
    return None


def _ce(logits: torch.Tensor, labels: torch.Tensor, inst: Instance):
    import torch.nn.functional as F

    if inst.ghost and inst.criterion is not None and labels.dim() == 1:
        return inst.criterion(logits, labels)
    if labels.dim() == 1 and logits.dim() == 2:
        return F.cross_entropy(logits, labels, reduction="none")
    if labels.dim() == 2 and logits.dim() == 3:  # causal LM: predict token t+1 from t
        lg, lb = logits[:, :-1], labels[:, 1:]
        tok = F.cross_entropy(
            lg.reshape(-1, lg.shape[-1]), lb.reshape(-1), reduction="none", ignore_index=-100
        ).reshape(lb.shape)
        valid = (lb != -100).float()
        return (tok * valid).sum(dim=1) / valid.sum(dim=1).clamp_min(1.0)
    return None


def _takes_criterion(fn) -> bool:
    """``train_step(model, optimizer, batch, criterion)``: ghost clipping's loss is passed."""
    import inspect

    try:
        ps = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(ps) >= 4 or any(p.kind == p.VAR_POSITIONAL for p in ps)


def _reduce(inst: Instance, losses, weights: torch.Tensor):
    w = weights.to(getattr(losses, "device", "cpu"))
    weighted = losses * w
    if isinstance(weighted, torch.Tensor):
        red = getattr(inst.model, "loss_reduction", "mean")
        return weighted.mean() if red == "mean" else weighted.sum()
    return weighted  # ghost clipping's DPTensorFastGradientClipping reduces itself


@dataclass
class StepOut:
    release: dict[str, torch.Tensor] | None
    rows: dict[str, torch.Tensor] | None  # per-sample gradients (B, numel) per tensor
    norms: torch.Tensor | None  # ghost clipping's per-sample norms


def model_step(
    inst: Instance, setup: Setup, batch: Any, weights: torch.Tensor | None, update: bool = False
) -> StepOut | None:
    """One step of the user's loop body (``train_step``) or of the default loss with
    per-example ``weights``; the release and the per-sample gradients as Opacus saw them."""
    # the modules' training flags stay as the setup left them (a frozen BatchNorm in eval
    # mode is a correct recipe: forcing train mode would invent a batch-statistics leak)
    seen: dict[str, Any] = {}
    opt = inst.optimizer

    def snapshot():
        rows = {}
        for n, p in zip(inst.names, inst.params, strict=True):
            gs = getattr(p, "grad_sample", None)
            if isinstance(gs, list):
                gs = torch.cat(gs, dim=0) if gs else None
            if isinstance(gs, torch.Tensor):
                rows[n] = gs.detach().reshape(gs.shape[0], -1).double().clone()
        seen["rows"] = rows or None
        mod = getattr(inst.model, "_per_sample_gradient_norms", None)
        seen["norms"] = mod.detach().double().clone() if isinstance(mod, torch.Tensor) else None

    with Capture(inst, update=update) as cap:
        inner = opt.original_optimizer
        patched = inner.step

        def step(*a, **k):
            snapshot()
            return patched(*a, **k)

        inner.step = step
        try:
            if weights is None:
                fn = setup.optional["train_step"]
                args = (inst.model, opt, batch)
                if inst.criterion is not None and _takes_criterion(fn):
                    args = (*args, inst.criterion)
                call_user("train_step(model, optimizer, batch)", fn, *args)
            else:
                call_user("optimizer.zero_grad()", opt.zero_grad)
                losses = per_example_loss(inst, setup, batch)
                if losses is None:
                    return None
                loss = _reduce(inst, losses, weights)
                loss.backward()
                call_user("optimizer.step()", opt.step)
        finally:
            inner.step = patched
    rel = cap.releases[-1] if cap.releases else None
    return StepOut(rel, seen.get("rows"), seen.get("norms"))


def _mu(diff: dict[str, torch.Tensor], noise: NoiseStats) -> tuple[float, float]:
    m2, m2lo = 0.0, 0.0
    for n, v in diff.items():
        p = noise.per_tensor.get(n)
        if p is None:
            continue
        nv = float(v.norm())
        if nv <= exact_tolerance(p):
            continue
        if p.get("zero") or p["std"] == 0:
            return math.inf, math.inf
        m2 += nv * nv / p["std"] ** 2
        m2lo += nv * nv / p["hi_decision"] ** 2
    return math.sqrt(m2), math.sqrt(m2lo)


@dataclass
class CrossExample:
    tested: bool
    reason: str = ""
    rows_moved: int = 0
    rows_compared: int = 0
    max_relative_change: float = 0.0
    mu_replace: float = 0.0  # release shift of the replace pair, noise units
    mu_replace_lower: float = 0.0
    candidates: int = 0
    detail: dict[str, Any] = field(default_factory=dict)


def _pick_items(dataset, n_items: int) -> list[int]:
    return list(range(min(len(dataset), n_items)))


def cross_example(
    pair_factory,
    setup: Setup,
    noise: NoiseStats,
    copies: int = 8,
    candidates: int = 6,
    weight: float = 1e3,
) -> CrossExample:
    """See the module docstring. The loss of every row is multiplied by ``weight`` (the
    default loss only), so every per-sample gradient is clipped: a shift in a row's
    direction then moves the release by up to 2C per row. Every candidate runs on a fresh
    pair of instances (a loop body that trains something else cannot carry one
    candidate's step into the next)."""
    a, b = pair_factory()
    ds = a.dataset.inner
    x_item = ds[0]
    base = collate(a, [x_item] * copies)
    shape = batch_shapes(base)
    use_train_step = (
        setup.optional.get("train_step") is not None and setup.optional.get("loss_fn") is None
    )
    w = None if use_train_step else torch.full((copies,), float(weight))
    tried = 0
    res = CrossExample(tested=False)
    for j in range(1, min(len(ds), 64)):
        if tried >= candidates:
            break
        z_item = ds[j]
        other = collate(a, [z_item] + [x_item] * (copies - 1))
        if batch_shapes(other) != shape:
            continue
        tried += 1
        if tried > 1:
            a, b = pair_factory()
        coupler = Coupler(a, b)
        oa, ob = coupler.pair(
            lambda a=a, other=other: model_step(a, setup, base, w),
            lambda b=b, other=other: model_step(b, setup, other, w),
        )
        if oa is None or ob is None:
            return CrossExample(
                False,
                "the batch's form is not one dp-check can compute a loss for: define "
                "loss_fn(model, batch) (per-example losses) or train_step in SETUP",
            )
        res.candidates = tried
        moved, compared, rel_max = 0, 0, 0.0
        if oa.rows and ob.rows:
            for i in range(1, copies):
                num = sum(
                    float((oa.rows[n][i] - ob.rows[n][i]).norm() ** 2)
                    for n in oa.rows
                    if n in ob.rows and oa.rows[n].shape == ob.rows[n].shape
                )
                den = sum(float(oa.rows[n][i].norm() ** 2) for n in oa.rows)
                compared += 1
                change = math.sqrt(num / den) if den > 0 else 0.0
                rel_max = max(rel_max, change)
                moved += int(change > ROW_TOL)
        elif oa.norms is not None and ob.norms is not None and oa.norms.shape == ob.norms.shape:
            na, nb = oa.norms[1:], ob.norms[1:]
            ch = ((na - nb).abs() / na.abs().clamp_min(1e-30)).max()
            rel_max = float(ch)
            compared = int(na.numel())
            moved = int(((na - nb).abs() / na.abs().clamp_min(1e-30) > ROW_TOL).sum())
        else:
            res.reason = "no per-sample gradients or norms to compare"
        if oa.release is not None and ob.release is not None:
            diff = {
                n: oa.release[n].double() - ob.release[n].double()
                for n in oa.release
                if n in ob.release
            }
            mu, mu_lo = _mu(diff, noise)
            if mu > res.mu_replace:
                res.mu_replace, res.mu_replace_lower = mu, mu_lo
        if moved > res.rows_moved or (
            moved == res.rows_moved and rel_max > res.max_relative_change
        ):
            res.rows_moved, res.rows_compared, res.max_relative_change = moved, compared, rel_max
        elif not res.rows_compared:
            res.rows_compared = compared
    res.tested = res.rows_compared > 0  # only what was compared counts as tested
    if not res.tested and not res.reason:
        res.reason = (
            "no other item of the dataset collates to a batch of the same shape"
            if not tried
            else "no per-sample gradients or norms to compare"
        )
    res.detail = {
        "copies": copies,
        "loss": "train_step" if use_train_step else "weighted default loss",
    }
    return res


@dataclass
class WeightSensitivity:
    tested: bool
    reason: str = ""
    mu: dict[str, float] = field(default_factory=dict)  # weight -> μ
    mu_lower: dict[str, float] = field(default_factory=dict)
    grows: bool = False


def loss_weight_sensitivity(
    pair_factory, setup: Setup, noise: NoiseStats, rows: int = 4
) -> WeightSensitivity:
    """One example's loss weighted by W against 0 (every other row weight 0): the release
    moves by its clipped gradient, whatever W is, when clipping works. Each W runs on a
    fresh pair of instances (state one step leaves cannot leak into the next)."""
    out = WeightSensitivity(tested=False)
    for weight in (1e4, 1e7):
        a, b = pair_factory()
        coupler = Coupler(a, b)
        ds = a.dataset.inner
        batch = collate(a, [ds[i % len(ds)] for i in range(rows)])
        wa = torch.zeros(rows)
        wa[0] = weight
        wb = torch.zeros(rows)
        oa, ob = coupler.pair(
            lambda a=a, batch=batch, wa=wa: model_step(a, setup, batch, wa),
            lambda b=b, batch=batch, wb=wb: model_step(b, setup, batch, wb),
        )
        if oa is None or ob is None or oa.release is None or ob.release is None:
            out.reason = (
                "no loss for this batch form: define loss_fn(model, batch) in SETUP"
                if oa is None
                else "the optimizer released nothing for one step"
            )
            return out
        diff = {
            n: oa.release[n].double() - ob.release[n].double()
            for n in oa.release
            if n in ob.release
        }
        mu, mu_lo = _mu(diff, noise)
        out.mu[f"{weight:g}"] = mu
        out.mu_lower[f"{weight:g}"] = mu_lo
        out.tested = True
    vals = list(out.mu.values())
    # growth with W means unclipped only once the effect is already above one clipped
    # example's (a gradient below C/10⁴ is not clipped at W = 10⁴ even when clipping works)
    sigma = setup.claim.noise_multiplier
    out.grows = (
        len(vals) == 2
        and vals[0] > 0
        and vals[1] > vals[0] * (1 + 1e-3)
        and vals[1] > (1 + 1e-2) / sigma
    )
    if out.tested and vals[0] == 0:
        out.tested = False
        out.reason = "the example's gradient was zero at this model state"
    return out


@dataclass
class OutsideRelease:
    tested: bool
    reason: str = ""
    changed: list[dict[str, Any]] = field(default_factory=list)
    trainable_not_released: list[str] = field(default_factory=list)


def _state(inst: Instance) -> dict[str, torch.Tensor]:
    return {
        strip_wrapper_prefix(k): v.detach().clone()
        for k, v in inst.model.state_dict().items()
        if isinstance(v, torch.Tensor)
    }


def state_outside_release(
    a: Instance, b: Instance, c: Instance, coupler: Coupler, setup: Setup, steps: int = 2
) -> OutsideRelease:
    """Run the loop ``steps`` times on A (batch b1), B (b1 with one example replaced, same
    noise) and C (b1, other random draws); report every tensor of the model's state that
    changed and is not a DP-released parameter, whether it depends on the one example
    (A ≠ B) and whether it is deterministic (A == C)."""
    ds = a.dataset.inner
    n_rows = min(8, len(ds))
    b1 = collate(a, [ds[i] for i in range(n_rows)])
    alt = None
    for j in range(n_rows, min(len(ds), n_rows + 64)):
        cand = collate(a, [ds[j]] + [ds[i] for i in range(1, n_rows)])
        if batch_shapes(cand) == batch_shapes(b1):
            alt = cand
            break
    if alt is None:
        return OutsideRelease(False, "no item collates to a batch of the same shape")
    use_ts = setup.optional.get("train_step") is not None
    w = None if use_ts else torch.ones(n_rows)
    released = set(a.names)
    before = _state(a)
    for _ in range(steps):
        oa, ob = coupler.pair(
            lambda: model_step(a, setup, b1, w, update=True),
            lambda: model_step(b, setup, alt, w, update=True),
        )
        if oa is None:
            return OutsideRelease(
                False, "no loss for this batch form: define loss_fn or train_step"
            )
    from privacy_audit.audit.epsilon.dp_check.harness import seed_everything

    seed_everything(0x5EED + steps)  # C: the same model and batch, other random draws
    for _ in range(steps):
        model_step(c, setup, b1, w, update=True)
    sa, sb, sc = _state(a), _state(b), _state(c)
    out = OutsideRelease(True)
    params = {strip_wrapper_prefix(n) for n, _ in a.model.named_parameters()}
    # a state entry that shares storage with a released parameter (tied weights) is it
    released_ptrs = {p.data_ptr() for p in a.params}
    tied = {
        strip_wrapper_prefix(k)
        for k, v in a.model.state_dict().items()
        if isinstance(v, torch.Tensor) and v.data_ptr() in released_ptrs
    }
    # "deterministic" needs C to have drawn other noise than A: compare the releases
    c_other_noise = not all(torch.equal(x, y) for x, y in zip(a.params, c.params, strict=True))
    for k, v0 in before.items():
        if k in released or k in tied or k not in sa:
            continue
        if v0.dtype in (torch.int64, torch.int32, torch.bool) and torch.equal(sa[k], sb[k]):
            continue  # counters (BatchNorm's num_batches_tracked): not data
        if torch.equal(v0, sa[k]):
            continue
        dep = not torch.equal(sa[k], sb[k])
        det = torch.equal(sa[k], sc[k]) and c_other_noise
        out.changed.append(
            {
                "name": k,
                "kind": "parameter" if k in params else "buffer",
                "depends_on_one_example": bool(dep),
                "deterministic": bool(det),
                "max_change": float((sa[k].double() - v0.double()).abs().max()),
            }
        )
    for n, p in a.model.named_parameters():
        if p.requires_grad and strip_wrapper_prefix(n) not in released:
            out.trainable_not_released.append(strip_wrapper_prefix(n))
    return out
