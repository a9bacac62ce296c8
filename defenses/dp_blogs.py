"""Defense ``dp-blogs``: DP-BloGS, block-wise gradient shuffle (Zagardo, arXiv 2407.21347).

Faithful to the paper and its reference implementation (``forgetnet`` v0.1, see
``../shared/notes/seeds/dp_blogs.md``; the seed's formulas are blank, the note rebuilds them):

* **batch-level clipping**: each parameter tensor's *accumulated batch gradient* is clipped
  to L2 norm ``C`` as a whole (not per example);
* **block shuffle**: the clipped tensor is cut into contiguous blocks of ``b`` entries,
  zero-padded to a multiple of ``b``, the blocks are permuted uniformly and the result is
  trimmed back to the tensor's size (``mode="reference"``). When ``b`` does not divide the
  tensor size this *drops* real entries and inserts zeros; ``mode="strict"`` (a labelled
  deviation) permutes only the full blocks and leaves the tail in place, so the output is a
  permutation of the input;
* **per-tensor ε** ``eps_i = min(eps1(d), eps2(d, b))`` with
  ``eps1 = 2 ln(1 + d (e^{2C/√d} − 1))`` and ``eps2 = 2 ln(1 + (b/d)(e^{2C√(b/d)} − 1))``;
* **composition** ``eps_step = Σ_i eps_i`` and
  ``eps_total = √(2T ln(1/δ)) eps_step + T eps_step (e^{eps_step} − 1)``;
* **accountant**: the nested binary search (outer over the per-group target, inner over
  each tensor's block size), keeping the block sizes whose total is *closest* to the target,
  which may lie above it (the ``overshoot`` flag) and leaves small tensors at ``b = 1`` even
  when that violates the per-group target (the ``stuck`` flag).

**The claim is not a DP guarantee.** No noise is added: the release is a block permutation
of the clipped batch gradient, so its per-tensor norm, sum, sorted values and block multiset
are released exactly. For generic neighbouring batches the two output supports are
disjoint, so no finite ε holds (note §5.3); ``privacy_audit.attacks.shuffle_audit`` measures it.
The adapter therefore states the paper's ε with ``proven=False``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from privacy_audit.defenses.base import Defense, PrivacyClaim, TrainingReport

MODES = ("reference", "strict")
GUARANTEE = "accountant claim only: not a valid DP guarantee (no noise is added)"
UNSOUND_REASON = (
    "a block permutation adds no noise: the clipped gradient's norm, sum and sorted values are "
    "released exactly, so neighbouring batches have disjoint output supports and no finite ε holds"
)

#: The paper's training setup (§4): micro-batch 5, accumulation 10 (effective 50), 5 epochs
#: over 1,000 records -> T = 100 optimizer steps; C = 1, δ = 1e-5 (reference default).
PAPER_DEFAULTS = dict(
    batch_size=5,
    accumulation_steps=10,
    epochs=5,
    n_train=1000,
    clip_value=1.0,
    delta=1e-5,
    learning_rate=2e-4,
    max_grad_norm=1.0,
)


class AccountantWarning(UserWarning):
    """The BloGS accountant overshot its target or left tensors stuck at block size 1."""


# --------------------------------------------------------------------------- checks


def _check_positive(value: Any, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a positive number, got {value!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{what} must be a positive finite number, got {value!r}")
    return v


def _check_block_size(block_size: Any) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)):
        raise ValueError(f"block size must be a positive integer, got {block_size!r}")
    if block_size <= 0:
        raise ValueError(f"block size must be a positive integer, got {block_size!r}")
    return int(block_size)


def _check_delta(delta: Any) -> float:
    d = float(delta)
    if not (0 < d < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return d


# --------------------------------------------------------------------------- ε formulas


def epsilon_whole(d: int, clip_value: float) -> float:
    """eps1(d) = 2 ln(1 + d (exp(2C/√d) − 1)), the "whole tensor" bound (eq. 1)."""
    c = _check_positive(clip_value, "clip value")
    if d < 1:
        raise ValueError(f"tensor size must be >= 1, got {d}")
    return 2.0 * math.log1p(d * math.expm1(2.0 * c / math.sqrt(d)))


def epsilon_block(d: int, b: int, clip_value: float) -> float:
    """eps2(d, b) = 2 ln(1 + (b/d)(exp(2C √(b/d)) − 1)), the "block" bound (eq. 2)."""
    c = _check_positive(clip_value, "clip value")
    b = _check_block_size(b)
    if d < 1:
        raise ValueError(f"tensor size must be >= 1, got {d}")
    r = b / d
    return 2.0 * math.log1p(r * math.expm1(2.0 * c * math.sqrt(r)))


def epsilon_group(d: int, b: int, clip_value: float) -> tuple[float, float, float]:
    """``(eps1, eps2, eps_i)`` of one parameter tensor of ``d`` entries cut into blocks of
    ``b``: the paper's two bounds and the smaller one it uses."""
    e1, e2 = epsilon_whole(d, clip_value), epsilon_block(d, b, clip_value)
    return e1, e2, min(e1, e2)


def _eps_group_vec(d: np.ndarray, b: np.ndarray, c: float) -> np.ndarray:
    d = d.astype(np.float64)
    r = b.astype(np.float64) / d
    e1 = 2.0 * np.log1p(d * np.expm1(2.0 * c / np.sqrt(d)))
    e2 = 2.0 * np.log1p(r * np.expm1(2.0 * c * np.sqrt(r)))
    return np.minimum(e1, e2)


def advanced_composition(eps_step: float, steps: int, delta: float) -> float:
    """Eq. (3): √(2T ln(1/δ))·ε + T·ε·(e^ε − 1), ``inf`` when ε > 700 (as the reference)."""
    if eps_step < 0 or not math.isfinite(eps_step) and eps_step != math.inf:
        raise ValueError(f"per-step epsilon must be >= 0, got {eps_step!r}")
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    delta = _check_delta(delta)
    if eps_step > 700:
        return math.inf
    t = int(steps)
    return math.sqrt(2.0 * t * math.log(1.0 / delta)) * eps_step + t * eps_step * math.expm1(
        eps_step
    )


# --------------------------------------------------------------------------- accountant


@dataclass
class AccountantResult:
    """What the nested search returns."""

    block_sizes: list[int]
    epsilon: float  # eps_total at the returned block sizes (the paper's claimed ε)
    epsilon_step: float
    per_group_target: float
    target_epsilon: float
    overshoot: bool  # returned ε above the target
    n_stuck_at_b1: int  # tensors at b = 1 (no finer cut exists)
    n_violating_b1: int  # of those, how many exceed the per-group target even at b = 1
    iterations: int
    flags: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "epsilon_step": self.epsilon_step,
            "per_group_target": self.per_group_target,
            "target_epsilon": self.target_epsilon,
            "overshoot": self.overshoot,
            "n_stuck_at_b1": self.n_stuck_at_b1,
            "n_violating_b1": self.n_violating_b1,
            "iterations": self.iterations,
            "flags": list(self.flags),
            "n_tensors": len(self.block_sizes),
        }


class BloGSAccountant:
    """The paper's accountant (§3.2.3, reference ``DPShufflePrivacyAccountant``).

    ``batch_size`` is stored but unused, as in the reference implementation (the paper's
    Thm 5 mentions B, its implemented ε does not). ``tol`` and ``max_outer`` bound the outer
    bisection over the per-group ε target in ``[0, target/T]``.
    """

    def __init__(
        self,
        param_dims: Sequence[int],
        target_epsilon: float = 1.0,
        delta: float = 1e-5,
        steps: int = 100,
        clip_value: float = 1.0,
        batch_size: int = 50,
        tol: float = 1e-6,
        max_outer: int = 1000,
    ) -> None:
        dims = [int(d) for d in param_dims]
        if not dims or min(dims) < 1:
            raise ValueError("the accountant needs at least one parameter tensor of size >= 1")
        self.dims = np.asarray(dims, dtype=np.int64)
        self.target_epsilon = _check_positive(target_epsilon, "target epsilon")
        self.delta = _check_delta(delta)
        if int(steps) != steps or steps < 1:
            raise ValueError(f"steps must be a positive integer, got {steps!r}")
        self.steps = int(steps)
        self.clip_value = _check_positive(clip_value, "clip value")
        self.batch_size = int(batch_size)  # unused, as in the reference implementation
        self.tol = float(tol)
        self.max_outer = int(max_outer)

    def group_epsilons(self, block_sizes: Sequence[int]) -> np.ndarray:
        return _eps_group_vec(self.dims, np.asarray(block_sizes, np.int64), self.clip_value)

    def total_epsilon(self, block_sizes: Sequence[int]) -> float:
        eps_step = float(self.group_epsilons(block_sizes).sum())
        return advanced_composition(eps_step, self.steps, self.delta)

    def _inner(self, t: float) -> np.ndarray:
        """Per tensor, the largest b in [1, d−1] whose eps_i ≤ t (b = 1 if none), by the
        reference's binary search (vectorised over tensors)."""
        d = self.dims
        lo = np.ones_like(d)
        hi = d - 1
        best = np.ones_like(d)
        active = lo <= hi
        while np.any(active):
            mid = (lo + hi) // 2
            ok = _eps_group_vec(d, np.maximum(mid, 1), self.clip_value) <= t
            upd = active & ok
            best = np.where(upd, mid, best)
            lo = np.where(upd, mid + 1, lo)
            hi = np.where(active & ~ok, mid - 1, hi)
            active = lo <= hi
        return best

    def find_block_sizes(self, warn: bool = True) -> AccountantResult:
        """The nested search; returns the block sizes whose ε is closest to the target."""
        target = self.target_epsilon
        lo, hi = 0.0, target / self.steps
        best_bs, best_gap, best_eps, best_t = None, math.inf, math.inf, hi
        it = 0
        while hi - lo > self.tol and it < self.max_outer:
            it += 1
            mid = (lo + hi) / 2.0
            bs = self._inner(mid)
            e = self.total_epsilon(bs)
            if abs(e - target) < best_gap:
                best_bs, best_gap, best_eps, best_t = bs, abs(e - target), e, mid
            if e > target:
                hi = mid
            else:
                lo = mid
        if best_bs is None:  # the bracket was already below tol: one evaluation at its top
            best_bs = self._inner(hi)
            best_eps = self.total_epsilon(best_bs)
        eps_g = self.group_epsilons(best_bs)
        stuck = int(np.sum(best_bs == 1))
        violating = int(np.sum((best_bs == 1) & (eps_g > best_t)))
        overshoot = best_eps > target
        flags = []
        if overshoot:
            flags.append(
                f"overshoot: the accountant returned ε = {best_eps:.4g} above its target {target:g}"
            )
        if stuck:
            flags.append(
                f"stuck at block size 1: {stuck} of {len(best_bs)} tensors "
                f"({violating} above the per-group target even at b = 1)"
            )
        if warn:
            for f in flags:
                warnings.warn(f"DP-BloGS accountant {f}", AccountantWarning, stacklevel=2)
        return AccountantResult(
            block_sizes=[int(b) for b in best_bs],
            epsilon=float(best_eps),
            epsilon_step=float(eps_g.sum()),
            per_group_target=float(best_t),
            target_epsilon=target,
            overshoot=bool(overshoot),
            n_stuck_at_b1=stuck,
            n_violating_b1=violating,
            iterations=it,
            flags=flags,
        )


def gpt2_small_dims(
    n_layer: int = 12, n_embd: int = 768, vocab: int = 50257, n_positions: int = 1024
) -> list[int]:
    """Sizes of GPT-2 small's 148 trainable tensors (tied ``lm_head``), in ``parameters()``
    order: wte, wpe, 12 × (ln_1 w/b, c_attn w/b, c_proj w/b, ln_2 w/b, mlp c_fc w/b,
    mlp c_proj w/b), ln_f w/b. 124,439,808 parameters."""
    e = n_embd
    block = [e, e, e * 3 * e, 3 * e, e * e, e, e, e, e * 4 * e, 4 * e, 4 * e * e, e]
    return [vocab * e, n_positions * e, *(block * n_layer), e, e]


# --------------------------------------------------------------------------- clip / shuffle


def clip_tensor(grad: torch.Tensor, clip_value: float) -> torch.Tensor:
    """``grad · min(1, C/‖grad‖₂)`` (batch-level clipping of one tensor; 0 stays 0)."""
    c = _check_positive(clip_value, "clip value")
    norm = torch.linalg.vector_norm(grad.detach().double())
    if norm <= c or norm == 0:
        return grad.clone()
    return grad * (c / norm).to(grad.dtype)


def block_shuffle(
    grad: torch.Tensor,
    block_size: int,
    generator: torch.Generator | None = None,
    mode: str = "reference",
) -> torch.Tensor:
    """Permute contiguous blocks of ``block_size`` entries of ``grad`` (row-major order).

    ``mode="reference"`` is the paper's code: zero-pad to a multiple of the block size,
    permute all ``ceil(d/b)`` blocks, trim to ``d``. If ``b`` does not divide ``d`` the
    padded tail can land mid-tensor and up to ``b − d mod b`` real entries are cut off.
    ``mode="strict"`` (a labelled deviation) permutes the ``⌊d/b⌋`` full blocks and leaves
    the tail in place, so the output is always a permutation of the input. ``b ≥ d`` is the
    identity in both modes. Returns a new tensor of ``grad``'s shape.
    """
    b = _check_block_size(block_size)
    if mode not in MODES:
        raise ValueError(f"unknown shuffle mode {mode!r}; allowed: {', '.join(MODES)}")
    if not isinstance(grad, torch.Tensor):
        raise ValueError(f"block_shuffle needs a torch.Tensor, got {type(grad).__name__}")
    flat = grad.reshape(-1)
    d = flat.numel()
    if b >= d:
        return grad.clone()
    device = flat.device
    if mode == "reference":
        n = -(-d // b)
        pad = n * b - d
        if pad:
            flat = torch.cat([flat, flat.new_zeros(pad)])
        perm = torch.randperm(n, generator=generator).to(device)
        out = flat.view(n, b)[perm].reshape(-1)[:d]
        return out.reshape(grad.shape)
    n = d // b
    perm = torch.randperm(n, generator=generator).to(device)
    head = flat[: n * b].view(n, b)[perm].reshape(-1)
    return torch.cat([head, flat[n * b :]]).reshape(grad.shape)


@dataclass(frozen=True)
class BloGSMechanism:
    """The per-step release of DP-BloGS on per-tensor batch gradients, for audits:
    ``canonical`` is the batch-level clip (what the adversary computes for a known batch),
    ``release`` the clip followed by a fresh block shuffle of every tensor."""

    block_sizes: tuple[int, ...]
    clip_value: float = 1.0
    mode: str = "reference"

    def canonical(self, grads: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [clip_tensor(g, self.clip_value) for g in grads]

    def release(
        self, grads: Sequence[torch.Tensor], generator: torch.Generator | None = None
    ) -> list[torch.Tensor]:
        return [
            block_shuffle(c, b, generator, self.mode)
            for c, b in zip(self.canonical(grads), self.block_sizes, strict=True)
        ]


# --------------------------------------------------------------------------- generator


class BloGSGenerator:
    """Clip-then-shuffle of a model's accumulated gradients (reference ``DPShuffleGenerator``).

    Built from ``named_parameters`` (only those that require grad, matched by name so a
    frozen or unused tensor cannot misalign block sizes, which the reference code risks).
    ``generate`` privatises the gradients in place and returns the accountant's planned
    whole-run ε (set from step 1 on, as in the reference: a plan, not a running count).
    """

    def __init__(
        self,
        named_parameters: Iterable[tuple[str, torch.nn.Parameter]],
        target_epsilon: float = 1.0,
        delta: float = 1e-5,
        steps: int = 100,
        clip_value: float = 1.0,
        batch_size: int = 50,
        mode: str = "reference",
        seed: int | None = None,
        block_sizes: dict[str, int] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown shuffle mode {mode!r}; allowed: {', '.join(MODES)}")
        self.params = [(n, p) for n, p in named_parameters if p.requires_grad]
        if not self.params:
            raise ValueError("DP-BloGS needs at least one parameter that requires grad")
        self.clip_value = _check_positive(clip_value, "clip value")
        self.mode = mode
        self.accountant = BloGSAccountant(
            [p.numel() for _, p in self.params],
            target_epsilon=target_epsilon,
            delta=delta,
            steps=steps,
            clip_value=clip_value,
            batch_size=batch_size,
        )
        if block_sizes is None:
            self.result = self.accountant.find_block_sizes()
            sizes = self.result.block_sizes
        else:  # fixed block sizes (audits, benchmarks); ε computed for them
            sizes = [_check_block_size(block_sizes[n]) for n, _ in self.params]
            self.result = None
        self.block_sizes = {n: int(b) for (n, _), b in zip(self.params, sizes, strict=True)}
        self.epsilon_planned = self.accountant.total_epsilon(sizes)
        self.delta = self.accountant.delta
        self.epsilon_spent = 0.0
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(int(seed))
        self.steps_done = 0

    def privatize(self, grad: torch.Tensor, name: str) -> torch.Tensor:
        return block_shuffle(
            clip_tensor(grad, self.clip_value), self.block_sizes[name], self.generator, self.mode
        )

    @torch.no_grad()
    def generate(self) -> float:
        """Clip and shuffle every parameter's ``.grad`` in place; returns ε spent (planned)."""
        if not any(p.grad is not None for _, p in self.params):
            raise ValueError(
                "DP-BloGS step with no gradients: call backward() before the optimizer step"
            )
        for name, p in self.params:
            if p.grad is not None:
                p.grad.copy_(self.privatize(p.grad, name))
        self.steps_done += 1
        self.epsilon_spent = self.epsilon_planned
        return self.epsilon_spent

    def mechanism(self) -> BloGSMechanism:
        """The per-step release with this generator's block sizes (for the gradient audit)."""
        return BloGSMechanism(
            tuple(self.block_sizes[n] for n, _ in self.params), self.clip_value, self.mode
        )

    def layout(self) -> list[dict[str, Any]]:
        """Per tensor: name, size d, block size b and number of blocks ceil(d/b)."""
        return [
            {
                "name": n,
                "d": p.numel(),
                "block_size": self.block_sizes[n],
                "blocks": -(-p.numel() // self.block_sizes[n]),
            }
            for n, p in self.params
        ]


# --------------------------------------------------------------------------- training hooks


class BloGSOptimizer:
    """Optimizer wrapper for a plain PyTorch loop (and usable as a Trainer optimizer).

    With ``accumulation_steps = k`` (default 10, the paper's; use 1 when the HF Trainer
    accumulates), call ``backward`` on ``loss / k``
    (or ``wrapper.scale(loss)``) and ``step()`` after every micro-batch: every k-th call
    clips and shuffles the accumulated gradient, applies the optional global-norm clip
    (``max_grad_norm``, the HF Trainer's 1.0 in the paper, applied *after* BloGS as there),
    steps the wrapped optimizer and zeroes the gradients; the other calls do nothing.
    Returns True when an optimizer step was taken.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        generator: BloGSGenerator,
        accumulation_steps: int = PAPER_DEFAULTS["accumulation_steps"],
        max_grad_norm: float | None = None,
    ) -> None:
        if int(accumulation_steps) != accumulation_steps or accumulation_steps < 1:
            raise ValueError(
                f"accumulation_steps must be a positive integer, got {accumulation_steps!r}"
            )
        if max_grad_norm is not None:
            _check_positive(max_grad_norm, "max_grad_norm")
        self.optimizer = optimizer
        self.blogs = generator
        self.accumulation_steps = int(accumulation_steps)
        self.max_grad_norm = max_grad_norm
        self._micro = 0

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state):
        return self.optimizer.load_state_dict(state)

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss / self.accumulation_steps

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None) -> bool:
        if not any(p.grad is not None for _, p in self.blogs.params):
            raise ValueError(
                "DP-BloGS step with no gradients: call backward() before the optimizer step"
            )
        self._micro += 1
        if self._micro % self.accumulation_steps:
            return False
        self.blogs.generate()
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(
                [p for _, p in self.blogs.params if p.grad is not None], self.max_grad_norm
            )
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return True


def blogs_trainer_callback(generator: BloGSGenerator, max_grad_norm: float | None = 1.0):
    """A Hugging Face ``TrainerCallback`` that clips and shuffles the accumulated gradients
    just before each optimizer step (``on_pre_optimizer_step``), then applies the global
    clip. The Trainer accumulates (``gradient_accumulation_steps``) and would clip *before*
    the callback, so set ``TrainingArguments(max_grad_norm=0)`` and give the norm here to
    keep the paper's order (BloGS, then global clip); the callback refuses ``max_grad_norm
    > 0`` in the arguments."""
    from transformers import TrainerCallback

    if max_grad_norm is not None:
        _check_positive(max_grad_norm, "max_grad_norm")

    class BloGSCallback(TrainerCallback):
        def __init__(self) -> None:
            self.blogs = generator
            self.max_grad_norm = max_grad_norm

        def on_train_begin(self, args, state, control, **kwargs):
            if args.max_grad_norm and args.max_grad_norm > 0:
                raise ValueError(
                    "DP-BloGS callback: set TrainingArguments(max_grad_norm=0) and pass the norm "
                    "to the callback, so the global clip follows the shuffle as in the paper"
                )

        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            self.blogs.generate()
            if self.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(
                    [p for _, p in self.blogs.params if p.grad is not None], self.max_grad_norm
                )

    return BloGSCallback()


# --------------------------------------------------------------------------- defense adapter


def _canary_text(seed: int) -> str:
    """A unique, PII-shaped audit canary (random digits the model could not predict)."""
    rng = np.random.default_rng([seed, 0xB10])
    digits = "".join(str(d) for d in rng.integers(0, 10, size=10))
    return f"please wire the refund to account {digits} before friday"


def _make_release_class():
    from privacy_audit.targets.lm import LMRelease, sequence_loss

    class _Release(LMRelease):
        """An LM trained with DP-BloGS. Its gradient surface is one step's release:
        the batch's mean gradient, clipped per tensor and block-shuffled."""

        blogs_mechanism: BloGSMechanism
        audit_texts: list[str]
        audit_trials: int

        def _batch_grads(self, texts: list[str]) -> list[torch.Tensor]:
            from privacy_audit.attacks.shuffle_audit import batch_gradient

            was = self.model.training
            self.model.eval()

            def loss_fn(model, batch):
                ids, mask = self.encode(batch)
                return sequence_loss(model, ids.to(self.device), mask.to(self.device)).mean()

            try:
                return batch_gradient(self.model, loss_fn, list(texts))
            finally:
                self.model.train(was)

        def gradient_update(self, texts, labels=None, seed: int = 0) -> np.ndarray:
            gen = torch.Generator().manual_seed(seed)
            rel = self.blogs_mechanism.release(self._batch_grads(list(texts)), gen)
            return torch.cat([r.reshape(-1) for r in rel]).double().cpu().numpy()

        def gradient_audits(
            self, delta: float, confidence: float, claimed: float | None
        ) -> list[dict[str, Any]]:
            """The white-box shuffle audit (``privacy_audit.attacks.shuffle_audit``): the batch of
            training texts with and without a canary; replaces the Dirac-canary audit,
            whose coordinate model does not apply to a permutation."""
            from privacy_audit.attacks.shuffle_audit import ShuffleAudit

            base = list(self.audit_texts)
            with_canary = [_canary_text(len(base)), *base[1:]]
            result = ShuffleAudit(trials=self.audit_trials, seed=0).run(
                self._batch_grads(with_canary),
                self._batch_grads(base),
                self.blogs_mechanism,
                delta,
                confidence,
                claimed,
            )
            result["batch_size"] = len(base)
            return [result]

    return _Release


class DPBloGS(Defense):
    name = "dp-blogs"
    description = (
        "DP-BloGS (Zagardo 2024): batch-level clipping and block-wise shuffle of each "
        "accumulated gradient tensor, no noise; the paper's accountant (claim not proven)."
    )
    PARAMS = {
        "epsilon": ((int, float), 1.0),
        "delta": ((int, float), 1e-5),
        "clip_value": ((int, float), 1.0),
        "accumulation_steps": (int, 10),
        "max_grad_norm": ((int, float), 1.0),
        "mode": (str, "reference"),
        "audit_trials": (int, 1000),
        "audit_batch": (int, 50),
    }

    def validate(self) -> None:
        p = self.params
        _check_positive(p["epsilon"], "dp-blogs epsilon (target epsilon)")
        _check_delta(p["delta"])
        _check_positive(p["clip_value"], "dp-blogs clip value")
        if p["accumulation_steps"] < 1:
            raise ValueError(
                f"dp-blogs accumulation_steps must be >= 1, got {p['accumulation_steps']}"
            )
        _check_positive(p["max_grad_norm"], "dp-blogs max_grad_norm")
        if p["mode"] not in MODES:
            raise ValueError(f"unknown dp-blogs mode {p['mode']!r}; allowed: {', '.join(MODES)}")
        if p["audit_trials"] < 100:
            raise ValueError(f"dp-blogs audit_trials must be >= 100, got {p['audit_trials']}")
        if p["audit_batch"] < 2:
            raise ValueError(f"dp-blogs audit_batch must be >= 2, got {p['audit_batch']}")

    def fit(self, target, train, training, seed: int):
        import time

        from privacy_audit.targets.lm import is_lm_target, sequence_loss, trim

        if not is_lm_target(target):
            from privacy_audit.ground.errors import ConfigError

            raise ConfigError(
                "dp-blogs trains the causal LM target: set [target] preset to 'tiny-gpt2' or "
                "'tiny-gpt2-word'"
            )
        p = self.params
        model, tokenizer = target.build(seed)
        model.to("cpu").train()
        n = len(train)
        micro, ga = int(training.batch_size), int(p["accumulation_steps"])
        per_epoch = n // (micro * ga)
        if per_epoch < 1:
            raise ValueError(
                f"dp-blogs needs at least batch_size × accumulation_steps = {micro * ga} training "
                f"examples for one optimizer step, got {n}"
            )
        steps = int(training.epochs) * per_epoch  # T = epochs · ⌊N / (B · GA)⌋, as the paper
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", AccountantWarning)
            blogs = BloGSGenerator(
                model.named_parameters(),
                target_epsilon=p["epsilon"],
                delta=p["delta"],
                steps=steps,
                clip_value=p["clip_value"],
                batch_size=micro * ga,
                mode=p["mode"],
                seed=seed,
            )
        for w in caught:  # re-raise for callers, keep them in the claim
            warnings.warn(w.message, w.category, stacklevel=2)
        opt = BloGSOptimizer(
            torch.optim.AdamW(
                model.parameters(), lr=training.learning_rate, weight_decay=training.weight_decay
            ),
            blogs,
            accumulation_steps=ga,
            max_grad_norm=p["max_grad_norm"],
        )
        ids, mask = tokenizer.encode(list(train.texts), training.max_length)
        gen = torch.Generator().manual_seed(seed)
        start, losses = time.perf_counter(), []
        for _ in range(int(training.epochs)):
            perm = torch.randperm(n, generator=gen)[: per_epoch * micro * ga]
            for i in range(0, len(perm), micro):
                b_ids, b_mask = trim(ids[perm[i : i + micro]], mask[perm[i : i + micro]])
                loss = sequence_loss(model, b_ids, b_mask).mean()
                opt.scale(loss).backward()
                losses.append(float(loss.detach()))
                opt.step()
        res = blogs.result
        layout = blogs.layout()
        blocks = np.array([r["blocks"] for r in layout])
        details = {
            "guarantee": GUARANTEE,
            "epsilon_kind": "planned whole-run ε (set from step 1, as the reference code)",
            "accountant_flags": res.flags,
            "overshoot": res.overshoot,
            "n_stuck_at_b1": res.n_stuck_at_b1,
            "per_group_target": res.per_group_target,
            "epsilon_step": res.epsilon_step,
            "steps": steps,
            "effective_batch": micro * ga,
            "mode": p["mode"],
            "blocks_per_tensor": {
                "min": int(blocks.min()),
                "median": float(np.median(blocks)),
                "max": int(blocks.max()),
            },
        }
        claim = PrivacyClaim(
            epsilon=float(res.epsilon),
            delta=float(p["delta"]),
            unit="sequence",
            notion="central-dp",
            accountant="dp-blogs (paper's per-tensor ε, advanced composition)",
            proven=False,
            note=f"Not proven: {UNSOUND_REASON}.",
            details=details,
        )
        cls = _make_release_class()
        release = cls(model, tokenizer, training.max_length, claim, training.device)
        release.blogs_mechanism = blogs.mechanism()
        k = min(int(p["audit_batch"]), n)
        release.audit_texts = list(train.texts[:k])
        release.audit_trials = int(p["audit_trials"])
        info = {
            "steps": steps,
            "micro_batch": micro,
            "accumulation_steps": ga,
            "epsilon_claimed": res.epsilon,
            "epsilon_target": float(p["epsilon"]),
            "accountant_flags": res.flags,
            "final_train_loss": float(np.mean(losses[-ga:])) if losses else float("nan"),
            "seconds": time.perf_counter() - start,
            "model": "GPT2LMHeadModel (tied embeddings)",
            "layout": layout,
        }
        return release, TrainingReport(info)
