"""User-level DP-SGD: sample users, clip each user's summed gradient, add Gaussian noise.

The mechanism (DP-FedAvg-style user-level DP-SGD; McMahan, Ramage, Talwar & Zhang 2018,
"Learning differentially private recurrent language models", with one local step):

- **sampling over users**: at every step each user (all of their records together) is
  drawn independently with probability q (Poisson sampling), q = the expected users per
  step / the number of users;
- **per-user gradient**: S_u = Σ_{i ∈ u} g_i, the SUM of the user's per-example gradients
  (``aggregate="sum"``; ``"mean"`` divides by the user's record count instead). Both are
  clipped *after* the aggregation, so either way a user's whole influence on a step is
  one vector of norm ≤ C. The sum is the default: it is what "clip each user's summed
  gradient" means, and a heavy contributor's clipped sum points where all of their texts
  pull; the mean gives each user's texts a smaller weight each and clips less often;
- **clip**: w_u = min(1, C / (‖S_u‖ + 10⁻⁶)) (the suite's per-example rule,
  :func:`privacy_audit.defenses.dp_engine.clip_weights`, applied to users);
- **noise**: the release of a step is R_t = Σ_{u sampled} w_u S_u + N(0, σ²C² I); the
  model moves by −η R_t / (qN_users) (the expected number of users per step).

Sensitivity. Under the add/remove-one-USER neighbouring relation (one user's records all
present or all absent) one step's sum moves by at most C in ℓ₂, so each step is the
Poisson(q)-subsampled Gaussian mechanism with noise multiplier σ, over users. The T steps
are accounted by a maintained accountant over users: Opacus's PRV (or RDP) accountant
and dp-accounting's PLD accountant at (σ, q, T), the claim takes the larger
(:func:`privacy_audit.defenses.dp_engine.account`); σ is calibrated to the target ε with
Opacus's search (:func:`privacy_audit.defenses.dp_engine.calibrate_noise`). The claim's
unit is ``"user"``.

The planted bug (tests and benchmarks only). ``clip_unit="example"`` clips each EXAMPLE to C
and sums, while sampling users and claiming the same user-level ε: a user with k records
then moves a step by up to k·C, so the real user-level ε is that of noise multiplier σ/k
(:func:`per_example_bug_epsilon`), far above the claim for k ≥ 4.

Per-example gradients: ``torch.func.vmap(grad(...))`` over a ``functional_call`` of the
model (explicit, no Opacus: Opacus clips per sample only). The trainer works on the
flattened trainable parameters; white-box canary users
(:class:`privacy_audit.defenses.dp_sgd_with_canaries.CanaryUsers`) join each step as rows of
per-example gradients with their own user ids, so they go through the same aggregation
and clipping code as the data.

Assumptions: the model has no layer that mixes examples (batch statistics); each record
belongs to exactly one user; the user ids are fixed before training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from privacy_audit.defenses.base import PrivacyClaim
from privacy_audit.defenses.dp_engine import account, calibrate_noise, clip_weights

#: What the clipping is applied to. ``"example"`` with a user-level claim is the PLANTED BUG.
CLIP_UNITS = ("user", "example")
AGGREGATES = ("sum", "mean")


def flat_per_example_grads(model: torch.nn.Module, loss_fn, x: Tensor, y: Tensor) -> Tensor:
    """Per-example gradients ``[B, d]`` of ``loss_fn(model(x_i), y_i)`` w.r.t. the model's
    trainable parameters, flattened in ``model.named_parameters()`` order
    (``torch.func.vmap(grad)``). ``loss_fn(logits [1, ...], y [1])`` returns a scalar."""
    from torch.func import functional_call, grad, vmap

    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}

    def loss_one(ps, xi, yi):
        return loss_fn(functional_call(model, ps, (xi[None],)), yi[None])

    g = vmap(grad(loss_one), in_dims=(None, 0, 0))(params, x, y)
    return torch.cat([g[n].reshape(x.shape[0], -1) for n in names], dim=1)


def user_clipped_sum(
    per_example: Tensor,
    users: Tensor,
    clip: float,
    clip_unit: str = "user",
    aggregate: str = "sum",
) -> tuple[Tensor, Tensor]:
    """``(Σ_u w_u S_u, norms)`` for the rows of one step (module docstring).

    ``per_example``: ``[B, d]`` gradients; ``users``: ``[B]`` integer user ids.
    ``clip_unit="user"``: S_u = Σ_{i∈u} g_i (or the mean), w_u = min(1, C/(‖S_u‖+1e-6));
    ``norms`` are the per-user ‖S_u‖ in ascending user-id order.
    ``clip_unit="example"`` (the PLANTED BUG under a user claim): each row clipped to C,
    then summed; ``norms`` are the per-row norms."""
    if clip_unit not in CLIP_UNITS:
        raise ValueError(f"unknown clip unit {clip_unit!r}; allowed: {', '.join(CLIP_UNITS)}")
    if aggregate not in AGGREGATES:
        raise ValueError(f"unknown aggregate {aggregate!r}; allowed: {', '.join(AGGREGATES)}")
    if not clip > 0:
        raise ValueError(f"clip must be > 0, got {clip!r}")
    if per_example.ndim != 2 or users.shape != per_example.shape[:1]:
        raise ValueError("need per_example [B, d] and users [B]")
    d = per_example.shape[1]
    if per_example.shape[0] == 0:
        return per_example.new_zeros(d), per_example.new_zeros(0)
    if clip_unit == "example":  # PLANTED BUG when the claim is per user
        norms = per_example.norm(dim=1)
        return (clip_weights(norms, clip)[:, None] * per_example).sum(0), norms
    _, inverse, counts = torch.unique(users, return_inverse=True, return_counts=True)
    sums = per_example.new_zeros(counts.numel(), d).index_add_(0, inverse, per_example)
    if aggregate == "mean":
        sums = sums / counts[:, None].to(sums.dtype)
    norms = sums.norm(dim=1)
    return (clip_weights(norms, clip)[:, None] * sums).sum(0), norms


def user_level_accounting(
    noise_multiplier: float,
    users_per_step: float,
    n_users: float,
    steps: int,
    delta: float,
    accountant: str = "prv",
) -> dict[str, Any]:
    """ε over users of T steps of the Poisson(q)-subsampled Gaussian mechanism, q =
    ``users_per_step`` / ``n_users``: Opacus (``accountant``) and dp-accounting PLD, the
    claim is the larger (:func:`privacy_audit.defenses.dp_engine.account`)."""
    if not (0 < users_per_step <= n_users):
        raise ValueError(f"need 0 < users per step <= users, got {users_per_step}, {n_users}")
    q = float(users_per_step) / float(n_users)
    return {**account(float(noise_multiplier), q, int(steps), float(delta), accountant), "q": q}


def per_example_bug_epsilon(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float, records: int
) -> float:
    """The real user-level ε of the planted bug for a user with ``records`` records: each
    clipped to C, so the user moves a step by up to k·C, i.e. noise multiplier σ/k
    (dp-accounting PLD; an upper bound, the exact worst case of the k·C shift)."""
    from privacy_audit.defenses.dp_engine import epsilon_pld

    return epsilon_pld(float(noise_multiplier) / int(records), sample_rate, int(steps), delta)


@dataclass(frozen=True)
class UserDPConfig:
    """Settings of one user-level DP-SGD run (recorded with its results)."""

    target_epsilon: float = 1.0
    delta: float = 1e-5
    clip: float = 1.0
    users_per_step: float = 32.0  # expected users per step (Poisson)
    epochs: float = 4.0  # expected passes over the users: T = round(epochs / q)
    learning_rate: float = 0.5
    aggregate: str = "sum"
    accountant: str = "prv"

    def __post_init__(self) -> None:
        if not (self.target_epsilon > 0 and math.isfinite(self.target_epsilon)):
            raise ValueError(
                f"target epsilon must be a positive number, got {self.target_epsilon!r}"
            )
        if not (0 < self.delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}")
        if not self.clip > 0:
            raise ValueError(f"clip must be > 0, got {self.clip!r}")
        if not self.users_per_step > 0 or not self.epochs > 0:
            raise ValueError("users_per_step and epochs must be > 0")
        if self.aggregate not in AGGREGATES:
            raise ValueError(
                f"unknown aggregate {self.aggregate!r}; allowed: {', '.join(AGGREGATES)}"
            )


@dataclass
class UserDPRun:
    """What one run returns: the trained model, the claim and the run's facts."""

    model: torch.nn.Module
    claim: PrivacyClaim
    noise_multiplier: float
    sample_rate: float
    steps: int
    clip_unit: str
    info: dict[str, Any] = field(default_factory=dict)


def _flat_params(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def _step_rows(
    idx: Tensor, d: int, row_user_t: Tensor, per_example, model, loss_fn, x: Tensor, y: Tensor
) -> tuple[Tensor, Tensor]:
    """The per-example gradients ``[len(idx), d]`` of the step's rows ``idx`` and their user
    ids (empty tensors when no user was drawn); ``per_example`` given, it computes them,
    else :func:`flat_per_example_grads` of ``model``/``loss_fn``."""
    if idx.numel():
        per = (
            per_example(idx)
            if per_example is not None
            else flat_per_example_grads(model, loss_fn, x[idx], y[idx])
        ).detach()
        uid = row_user_t[idx]
    else:
        per = torch.zeros(0, d)
        uid = torch.zeros(0, dtype=torch.long)
    return per, uid


def _apply_release(
    params: list[torch.nn.Parameter],
    sizes: list[int],
    released: Tensor,
    divisor: float,
    optimizer,
    learning_rate: float,
) -> None:
    """Step the model with the release R_t (post-processing): ``p.grad`` = R_t/(qN) and the
    given optimizer's step, else plain SGD ``p -= learning_rate · R_t/(qN)`` in place.
    ``sizes`` are the flat sizes of ``params`` in the release's order."""
    if optimizer is not None:  # post-processing of the release
        off = 0
        for p, n in zip(params, sizes, strict=True):
            p.grad = (released[off : off + n] / divisor).view_as(p).to(p.dtype).clone()
            off += n
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return
    with torch.no_grad():
        off = 0
        for p, n in zip(params, sizes, strict=True):
            p.add_(
                released[off : off + n].view_as(p).to(p.dtype),
                alpha=-learning_rate / divisor,
            )
            off += n


def _user_claim(
    config: UserDPConfig, claimed: float, q: float, sigma: float, steps: int, n_users: float
) -> PrivacyClaim:
    """The user-level claim of the run: ε ``claimed`` at the config's δ, add/remove-one
    user, proven only when there is noise (σ > 0)."""
    return PrivacyClaim(
        epsilon=claimed,
        delta=config.delta,
        unit="user",
        notion="central-dp",
        accountant=f"opacus-{config.accountant} + dp-accounting PLD (larger)",
        proven=bool(sigma > 0),
        note=(
            f"user-level DP-SGD: Poisson sampling of users q={q:.4g}, each user's "
            f"{config.aggregate} of gradients clipped to C={config.clip:g}, σ={sigma:.4g}, "
            f"{steps} steps; add/remove-one user."
        ),
        details={"sample_rate": q, "noise_multiplier": sigma, "steps": steps, "users": n_users},
    )


def train_user_dp(
    model: torch.nn.Module,
    loss_fn,
    x: Tensor,
    y: Tensor,
    users,
    config: UserDPConfig,
    seed: int = 0,
    canaries=None,
    clip_unit: str = "user",
    noise_multiplier: float | None = None,
    observer=None,
    per_example=None,
    optimizer=None,
) -> UserDPRun:
    """Train ``model`` (in place) with user-level DP-SGD on rows ``(x, y)`` owned by
    ``users`` (one id per row; any hashable ids).

    ``canaries``: white-box canary users
    (:class:`privacy_audit.defenses.dp_sgd_with_canaries.CanaryUsers`); their present users
    are users of the dataset, drawn by the same sampler and clipped by the same code.
    The number of users behind q is the real users plus the canaries' EXPECTED present
    count (m/2), so q and the claim do not depend on the secret inclusion bits.
    ``noise_multiplier``: use this σ instead of calibrating one to the target (tests).
    ``observer(step, released)``: called with each step's release R_t (flat, before the
    division by qN), the white-box view.
    ``clip_unit="example"`` is the PLANTED BUG (module docstring): same claim, clips rows.
    ``per_example(idx) -> [len(idx), d]``: the per-example gradients of rows ``idx``
    (default: :func:`flat_per_example_grads` of ``model``/``loss_fn`` on ``x[idx]``; the
    classifier trainer passes Opacus's GradSampleModule, which BERT needs).
    ``optimizer``: given, each step sets ``p.grad`` = R_t/(qN) and calls its ``step``
    (e.g. AdamW, post-processing of the release); default plain SGD at the config's rate.
    """
    if clip_unit not in CLIP_UNITS:
        raise ValueError(f"unknown clip unit {clip_unit!r}; allowed: {', '.join(CLIP_UNITS)}")
    ids = np.asarray(users)
    if ids.shape[0] != x.shape[0] or y.shape[0] != x.shape[0]:
        raise ValueError(f"need one user per row: {x.shape[0]} rows, {ids.shape[0]} user ids")
    uniq, row_user = np.unique(ids, return_inverse=True)
    n_real = len(uniq)
    if n_real < 1:
        raise ValueError("no users to train on")
    expected_canaries = canaries.m / 2 if canaries is not None else 0.0
    n_users = n_real + expected_canaries
    users_per_step = min(float(config.users_per_step), n_users)
    q = users_per_step / n_users
    steps = max(1, int(round(config.epochs / q)))
    if noise_multiplier is None:
        sigma = calibrate_noise(config.target_epsilon, config.delta, q, steps, config.accountant)
    else:
        sigma = float(noise_multiplier)
    if sigma > 0:
        acct = user_level_accounting(
            sigma, users_per_step, n_users, steps, config.delta, config.accountant
        )
    else:  # no noise (tests of the noiseless sum): no finite ε
        acct = {"claimed": math.inf}
    params = _flat_params(model)
    sizes = [p.numel() for p in params]
    row_user_t = torch.as_tensor(row_user, dtype=torch.long)
    rows_of = [np.flatnonzero(row_user == u) for u in range(n_real)]
    present = canaries.present_count if canaries is not None else 0
    sampler = torch.Generator().manual_seed(int(seed) * 7919 + 0x05E)
    noise_gen = torch.Generator().manual_seed(int(seed) * 7919 + 0x05F)
    divisor = q * n_users
    clipped_users = 0
    drawn_users = 0
    for t in range(steps):
        pick = torch.rand(n_real + present, generator=sampler) < q
        real = np.flatnonzero(pick[:n_real].numpy())
        drawn_users += int(pick.sum())
        rows = np.concatenate([rows_of[u] for u in real]) if len(real) else np.zeros(0, int)
        idx = torch.as_tensor(rows, dtype=torch.long)
        d = sum(sizes)
        per, uid = _step_rows(idx, d, row_user_t, per_example, model, loss_fn, x, y)
        if canaries is not None:
            canaries.set_batch(pick[n_real:])
            c_rows, c_users = canaries.rows(d, dtype=per.dtype)
            if c_rows is not None:
                per = torch.cat([per, c_rows])
                uid = torch.cat([uid, c_users + n_real])  # canary users after the real ones
        total, norms = user_clipped_sum(per, uid, config.clip, clip_unit, config.aggregate)
        clipped_users += int((norms > config.clip).sum())
        released = total + sigma * config.clip * torch.randn(
            d, generator=noise_gen, dtype=total.dtype
        )
        if canaries is not None:
            canaries.observe(released)
        if observer is not None:
            observer(t, released)
        _apply_release(params, sizes, released, divisor, optimizer, config.learning_rate)
    claim = _user_claim(config, acct["claimed"], q, sigma, steps, n_users)
    return UserDPRun(
        model=model,
        claim=claim,
        noise_multiplier=sigma,
        sample_rate=q,
        steps=steps,
        clip_unit=clip_unit,
        info={
            **{k: v for k, v in acct.items() if k != "q"},
            "users": n_real,
            "users_expected_canaries": expected_canaries,
            "rows": int(x.shape[0]),
            "users_per_step": users_per_step,
            "mean_users_drawn": drawn_users / steps,
            "fraction_clipped": clipped_users / max(drawn_users, 1),
            "planted_bug": "per-example clipping under a user claim"
            if clip_unit == "example"
            else None,
        },
    )
