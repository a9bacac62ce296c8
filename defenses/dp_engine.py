"""DP-SGD for the causal LM target, in three separable pieces (as in Opacus):

1. **per-sample norms and clipped sums** (pluggable): ``"phantom"`` (Phantom Clipping,
   :mod:`privacy_audit.defenses.phantom`, tied embeddings, no per-sample gradients built) or
   ``"explicit"`` (``torch.func.vmap(grad)`` per-sample gradients, the reference);
2. **clip and noise**: ``w_i = min(1, C/(‖g_i‖+1e-6))`` (or the normalisation
   ``C/(‖g_i‖+γ)`` of Bu et al. 2023a that the paper trains with), then
   ``(Σ_i w_i g_i + N(0, σ²C² I)) / B_expected``;
3. **the accountant**: noise calibrated to a target (ε, δ) by Opacus
   (``get_noise_multiplier``, conservative end of its bisection), ε from Opacus's PRV
   (or RDP) accountant and cross-checked with dp-accounting's PLD accountant; the claim
   takes the larger.

Poisson sampling with rate q = B/N, T = epochs/q steps; each example's influence on a step
is bounded by C (add/remove-one neighbouring relation), so the guarantee is per sequence.
Both clipping rules have sensitivity ≤ C.

:func:`fit_lm_dp` trains an LM with the engine; :func:`fit_lm_opacus` is the Opacus
baseline (untied output embedding, since Opacus cannot clip a weight used twice).
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from typing import Any

import torch
from torch import Tensor

from privacy_audit.defenses import dp_bugs
from privacy_audit.defenses.phantom import (
    PhantomCapture,
    check_batch,
    check_model,
    check_per_sample_loss,
    explicit_per_sample_grads,
    per_sample_token_loss,
)

NORM_BACKENDS = ("phantom", "explicit")
CLIPPING = ("clip", "normalize")
ACCOUNTANTS = ("prv", "rdp")


# --------------------------------------------------------------------------- #
# 2. clip and noise
# --------------------------------------------------------------------------- #
def clip_weights(norms: Tensor, max_grad_norm: float, clipping: str = "clip", gamma=0.01):
    """Per-sample factors w_i such that ‖w_i g_i‖ ≤ C."""
    if clipping == "clip":
        return (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
    if clipping == "normalize":
        return max_grad_norm / (norms + gamma)
    raise ValueError(f"unknown clipping {clipping!r}; allowed: {', '.join(CLIPPING)}")


def check_noise_multiplier(sigma: float) -> float:
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma)) or sigma < 0:
        raise ValueError(f"noise multiplier must be a finite number >= 0, got {sigma!r}")
    return float(sigma)


class DPSGDEngine:
    """Private gradients of a tied GPT-2 LM for one batch.

    ``norms``: ``"phantom"`` or ``"explicit"``; both give the same update for the same
    noise draw (tested). ``expected_batch_size`` is qN (the divisor under Poisson sampling).
    """

    def __init__(
        self,
        model,
        max_grad_norm: float = 1.0,
        noise_multiplier: float = 1.0,
        expected_batch_size: int | float = 1,
        norms: str = "phantom",
        clipping: str = "clip",
        linear_mode: str = "auto",
        chunk_size: int | None = None,
        loss_fn=None,
    ) -> None:
        if norms not in NORM_BACKENDS:
            raise ValueError(
                f"unknown norms backend {norms!r}; allowed: {', '.join(NORM_BACKENDS)}"
            )
        if clipping not in CLIPPING:
            raise ValueError(f"unknown clipping {clipping!r}; allowed: {', '.join(CLIPPING)}")
        if not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0, got {max_grad_norm!r}")
        if not expected_batch_size > 0:
            raise ValueError(f"expected_batch_size must be > 0, got {expected_batch_size!r}")
        self.noise_multiplier = check_noise_multiplier(noise_multiplier)
        if norms == "phantom":
            check_model(model)  # untied → UntiedModelError naming the alternatives
        self.model = model
        self.max_grad_norm = float(max_grad_norm)
        self.expected_batch_size = float(expected_batch_size)
        self.norms = norms
        self.clipping = clipping
        self.linear_mode = linear_mode
        self.chunk_size = chunk_size
        self.loss_fn = loss_fn or per_sample_token_loss
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.last_norms: Tensor | None = None
        # white-box audit: Dirac canaries added to the clipped sums, read after the noise
        self.canaries = None  # privacy_audit.defenses.dp_sgd_with_canaries.GradientCanaries
        # white-box audit: canaries that are rows of the dataset, sampled by the training
        # loop and clipped with the data (SampledGradientCanaries; explicit norms only)
        self.sampled_canaries = None

    # 1. norms + weighted sums ------------------------------------------------
    def clipped_sum(
        self, input_ids: Tensor, attention_mask: Tensor | None = None
    ) -> tuple[dict, Tensor]:
        """``({param: Σ_i w_i g_i}, norms)`` for a batch."""
        mask = check_batch(self.model, input_ids, attention_mask)
        if self.norms == "phantom":
            if self.sampled_canaries is not None or dp_bugs.active() in (
                "unclipped-no-decay-group",
                "clip-after-aggregation",
            ):
                raise ValueError("sampled canaries and planted clipping bugs need norms='explicit'")
            with PhantomCapture(self.model, self.linear_mode) as cap:
                cap.input_ids = input_ids
                b, t = input_ids.shape
                pos = torch.arange(t, device=input_ids.device).expand(b, t)
                logits = self.model(
                    input_ids=input_ids, attention_mask=mask, position_ids=pos
                ).logits
                loss = self.loss_fn(logits, input_ids, mask)
                cap.backward(loss)  # raises on a mean-reduced (scalar) loss
                norms = cap.sq_norms().clamp(min=0).sqrt()
                w = clip_weights(norms, self.max_grad_norm, self.clipping)
                grads = cap.weighted_grads(w)
            return {p: grads[p] if p in grads else torch.zeros_like(p) for p in self.params}, norms
        if not getattr(self, "_loss_checked", False):  # one-off: reject a reduced loss
            with torch.no_grad():
                logits = self.model(input_ids=input_ids, attention_mask=mask).logits
                check_per_sample_loss(self.loss_fn(logits, input_ids, mask), input_ids.shape[0])
            self._loss_checked = True
        per = explicit_per_sample_grads(
            self.model, input_ids, mask, self.chunk_size, loss_fn=self.loss_fn
        )
        return self._clip_and_sum(per)

    def _clip_and_sum(self, per: dict) -> tuple[dict, Tensor]:
        """``({param: Σ_i w_i g_i}, norms)`` from per-sample gradients ``{name: [B, ...]}``;
        sampled record canaries (white-box, ``sampled_canaries``) join the batch here as
        rows, so they pass through the same clipping code as the data."""
        by_name = dict(self.model.named_parameters())
        rows = self.sampled_canaries.rows() if self.sampled_canaries is not None else None
        if rows is not None:
            per = {
                n: torch.cat([per[n], rows[by_name[n]].to(per[n])]) if per else rows[by_name[n]]
                for n in (per or {n: None for n, p in by_name.items() if p in rows})
            }
        if not per:
            return {p: torch.zeros_like(p) for p in self.params}, None
        bug = dp_bugs.active()
        groups = per
        if bug == "unclipped-no-decay-group":  # PLANTED BUG: norms over weight matrices only
            groups = {n: g for n, g in per.items() if by_name[n].ndim >= 2}
        norms = torch.stack([g.flatten(1).pow(2).sum(1) for g in groups.values()]).sum(0).sqrt()
        w = clip_weights(norms, self.max_grad_norm, self.clipping)
        if bug == "clip-after-aggregation":  # PLANTED BUG: clip the batch sum, not examples
            sums = {by_name[n]: g.sum(0) for n, g in per.items()}
            total = torch.stack([t.pow(2).sum() for t in sums.values()]).sum().sqrt()
            factor = clip_weights(total[None], self.max_grad_norm, self.clipping)[0]
            sums = {p: t * factor for p, t in sums.items()}
        else:
            sums = {
                by_name[n]: torch.einsum("b,b...->...", w, g)
                if not (bug == "unclipped-no-decay-group" and by_name[n].ndim < 2)
                else g.sum(0)  # PLANTED BUG: this group is never clipped
                for n, g in per.items()
            }
        return {p: sums[p] if p in sums else torch.zeros_like(p) for p in self.params}, norms

    # 2. noise ------------------------------------------------------------------
    def private_gradients(
        self,
        input_ids: Tensor | None,
        attention_mask: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> dict:
        """``(Σ_i clip(g_i) + N(0, σ²C²I)) / B_expected`` per parameter. ``input_ids=None``
        (an empty Poisson batch) releases noise only."""
        if input_ids is None or input_ids.shape[0] == 0:
            if self.sampled_canaries is not None:  # canary rows alone, clipped as data
                sums, self.last_norms = self._clip_and_sum({})
            else:
                sums = {p: torch.zeros_like(p) for p in self.params}
            self.last_norms = None
        else:
            sums, self.last_norms = self.clipped_sum(input_ids, attention_mask)
        return self.noised(sums, generator)

    def noised(self, sums: dict, generator: torch.Generator | None = None) -> dict:
        """``(sums + N(0, σ²C²I)) / B_expected`` per parameter, one draw per parameter in
        parameter order (the white-box canaries, when set, are added before the noise and
        read after it). ``sums`` are the clipped sums of :meth:`clipped_sum`."""
        if self.canaries is not None:
            self.canaries.inject(sums)
        std = self.noise_multiplier * self.max_grad_norm
        bug = dp_bugs.active()
        if bug == "noise-divided-by-batch":  # PLANTED BUG: σC/B added to the SUM
            std = std / self.expected_batch_size
        elif bug == "accumulation-noise-once":  # PLANTED BUG: micro-batch std, added once
            std = std / math.sqrt(dp_bugs.ACCUMULATION)
        out = {}
        for p in self.params:  # one draw per parameter, in parameter order
            g = sums[p].detach()  # a fresh tensor: updated in place to save memory
            if bug == "unnoised-no-decay-group" and p.ndim < 2:  # PLANTED BUG: no noise here
                out[p] = g.div_(self.expected_batch_size)
                continue
            if std > 0:
                noise = torch.randn(p.shape, generator=generator, dtype=p.dtype, device="cpu")
                g.add_(noise.to(p.device), alpha=std)
                del noise
            out[p] = g.div_(self.expected_batch_size)
        if self.canaries is not None:
            self.canaries.observe(out, self.expected_batch_size)
        if self.sampled_canaries is not None:
            self.sampled_canaries.observe(out, self.expected_batch_size)
        return out

    def step(self, optimizer, input_ids, attention_mask=None, generator=None) -> None:
        grads = self.private_gradients(input_ids, attention_mask, generator)
        for p, g in grads.items():
            p.grad = g
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def per_sample_loss_check(loss: Tensor, batch_size: int) -> None:
    """Public alias: raise ValueError unless ``loss`` has shape [batch] (reduction='none')."""
    check_per_sample_loss(loss, batch_size)


# --------------------------------------------------------------------------- #
# 3. accountant
# --------------------------------------------------------------------------- #
@functools.lru_cache(maxsize=64)
def calibrate_noise(
    target_epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str = "prv"
) -> float:
    """Smallest σ (conservative end of Opacus's bisection) with ε(σ) ≤ target."""
    from privacy_audit.defenses.calibration import bounded_noise_multiplier

    if accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {accountant!r}; allowed: {', '.join(ACCOUNTANTS)}")
    if not target_epsilon > 0:
        raise ValueError(f"target epsilon must be > 0, got {target_epsilon!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(
            bounded_noise_multiplier(  # Opacus's search, with iteration and time bounds
                target_epsilon=target_epsilon,
                target_delta=delta,
                sample_rate=sample_rate,
                steps=int(steps),
                accountant=accountant,
                epsilon_tolerance=0.005,
            )
        )


@functools.lru_cache(maxsize=256)
def epsilon_opacus(sigma: float, sample_rate: float, steps: int, delta: float, accountant="prv"):
    from opacus.accountants import create_accountant

    acc = create_accountant(accountant)
    acc.history = [(sigma, sample_rate, int(steps))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(acc.get_epsilon(delta))


@functools.lru_cache(maxsize=256)
def epsilon_pld(sigma: float, sample_rate: float, steps: int, delta: float) -> float:
    """ε from dp-accounting's PLD accountant (Poisson-subsampled Gaussian, T-fold; its
    pessimistic discretisation rounds ε up)."""
    import dp_accounting

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sample_rate, dp_accounting.GaussianDpEvent(sigma)),
        int(steps),
    )
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3)
    acc.compose(event)
    return float(acc.get_epsilon(delta))


def account(sigma, sample_rate, steps, delta, accountant="prv") -> dict[str, Any]:
    """ε by the chosen Opacus accountant and by dp-accounting PLD; ``claimed`` = the larger."""
    main = epsilon_opacus(sigma, sample_rate, steps, delta, accountant)
    cross = epsilon_pld(sigma, sample_rate, steps, delta)
    return {
        f"epsilon_opacus_{accountant}": main,
        "epsilon_dp_accounting_pld": cross,
        "claimed": max(main, cross),
        "relative_difference": abs(main - cross) / max(cross, 1e-12),
    }


# --------------------------------------------------------------------------- #
# training
# --------------------------------------------------------------------------- #
def poisson_schedule(n: int, batch_size: int, epochs: int) -> tuple[float, int]:
    q = min(1.0, batch_size / max(n, 1))
    return q, max(1, int(round(epochs / q)))


def accountant_inputs(q: float, steps: int, epochs: int) -> tuple[float, int]:
    """The (q, T) the noise calibration and the accountant are given: the schedule run,
    except under a planted accounting bug (:mod:`privacy_audit.defenses.dp_bugs`)."""
    if dp_bugs.is_active("accountant-wrong-n"):  # PLANTED BUG: N×10 given to the accountant
        return q / dp_bugs.WRONG_N_FACTOR, steps
    if dp_bugs.is_active("accountant-steps-per-epoch"):  # PLANTED BUG: one epoch's steps
        return q, max(1, int(round(steps / max(int(epochs), 1))))
    return q, steps


def poisson_picks(rows: int, sample_rate: float, steps: int, generator, shuffled: bool = False):
    """The sampler of :func:`train_private_ids`: per step, a boolean mask of the rows drawn,
    each independently with probability ``sample_rate`` (``shuffled``: the planted
    shuffle bug, a permuted partition per epoch)."""
    batches: list[Tensor] = []
    for _ in range(steps):
        if shuffled:  # PLANTED BUG: a shuffled partition per epoch, accounted as Poisson
            if not batches:
                order = torch.randperm(rows, generator=generator)
                batches = list(torch.tensor_split(order, max(1, round(1 / sample_rate))))
            pick = torch.zeros(rows, dtype=torch.bool)
            pick[batches.pop(0)] = True
        else:
            pick = torch.rand(rows, generator=generator) < sample_rate
        yield pick


def train_private_ids(
    engine: DPSGDEngine,
    ids: Tensor,
    mask: Tensor,
    steps: int,
    sample_rate: float,
    learning_rate: float,
    weight_decay: float = 0.0,
    seed: int = 0,
    device=None,
    progress: bool = False,
    desc: str = "train dp",
    optimizer=None,
) -> dict[str, Any]:
    """Poisson-sampled private training of ``engine.model`` on token tensors with AdamW
    (each row is one privacy unit); returns steps, seconds and the fraction clipped."""
    from privacy_audit.ground.progress import progress_bar
    from privacy_audit.targets.lm import trim

    dev = device or ids.device
    opt = optimizer or torch.optim.AdamW(engine.params, lr=learning_rate, weight_decay=weight_decay)
    sampler = torch.Generator().manual_seed(seed)
    noise = torch.Generator().manual_seed(seed + 1)
    start = time.perf_counter()
    clipped = []
    n = len(ids)
    # a terminal bar, or one line per epoch (1/q steps) in a CI log
    epochs = max(1, round(steps * sample_rate))
    bar = progress_bar(steps, desc, progress, epochs, leave=False)
    canaries = engine.sampled_canaries  # record canaries: rows n.. of the dataset
    rows = n + (canaries.present_count if canaries is not None else 0)
    shuffled = dp_bugs.is_active("shuffle-as-poisson")
    sampled = 0  # rows drawn over the run (data and record canaries): the realised q
    for pick in poisson_picks(rows, sample_rate, steps, sampler, shuffled):
        if canaries is not None:
            canaries.set_batch(pick[n:])
        sampled += int(pick.sum())
        pick = pick[:n]
        if pick.any():
            b_ids, b_mask = trim(ids[pick], mask[pick])
            engine.step(opt, b_ids.to(dev), b_mask.to(dev), noise)
            if engine.last_norms is not None:
                clipped.append(float((engine.last_norms > engine.max_grad_norm).float().mean()))
        else:
            engine.step(opt, None, None, noise)
        bar.update(1)
    bar.close()
    return {
        "steps": steps,
        "seconds": time.perf_counter() - start,
        "fraction_clipped": sum(clipped) / max(len(clipped), 1),
        "rows": rows,
        "rows_sampled": sampled,
    }


def train_lm_private(
    engine: DPSGDEngine,
    tokenizer,
    texts: list[str],
    steps: int,
    sample_rate: float,
    learning_rate: float,
    max_length: int,
    weight_decay: float = 0.0,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
    desc: str = "train dp",
) -> dict[str, Any]:
    """Poisson-sampled private training of ``engine.model`` with AdamW."""
    from privacy_audit.targets.lm import sequence_loss, training_tensors, trim

    model = engine.model
    dev, ids, mask = training_tensors(model, tokenizer, texts, max_length, device)
    info = train_private_ids(
        engine,
        ids,
        mask,
        steps,
        sample_rate,
        learning_rate,
        weight_decay,
        seed,
        dev,
        progress,
        desc,
    )
    with torch.no_grad():
        sub_ids, sub_mask = trim(ids[:64], mask[:64])
        last = float(sequence_loss(model, sub_ids.to(dev), sub_mask.to(dev)).mean())
    return {
        "steps": steps,
        "final_train_loss": last,
        "seconds": info["seconds"],
        "fraction_clipped": info["fraction_clipped"],
        "rows": info["rows"],
        "rows_sampled": info["rows_sampled"],
    }


def _scope_note(target) -> str:
    """What the claim covers when the target was pretrained on public data first."""
    epochs = getattr(getattr(target, "spec", None), "public_epochs", 0) or 0
    if epochs <= 0:
        return ""
    n = len(target.public) if getattr(target, "public", None) is not None else 0
    return (
        f" Scope: private fine-tuning only. The model was first pretrained without privacy on "
        f"{n} public sequences ({epochs} epochs); the claim covers the private training data, "
        "not the public data."
    )


def fit_lm_dp(
    target,
    train,
    training,
    seed: int,
    params: dict[str, Any],
    name: str,
    model_hook=None,
) -> tuple[Any, dict[str, Any]]:
    """Train an LM target privately with :class:`DPSGDEngine`; returns ``(release, info)``.
    ``model_hook(model, sigma, sample_rate, tokenizer)`` may modify the model (re-attention)."""
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.defenses.gradient_mechanism import (
        GaussianGradientMechanism,
        SamplingSchedule,
        realised_schedule,
    )
    from privacy_audit.targets.lm import LMRelease

    model, tokenizer = target.build(seed)
    n = len(train)
    q, steps = poisson_schedule(n, training.batch_size, training.epochs)
    q_acc, steps_acc = accountant_inputs(q, steps, training.epochs)  # (q, steps) unless planted
    delta = float(params["delta"])
    accountant = params.get("accountant", "prv")
    clip = float(params["max_grad_norm"])
    if params.get("noise_multiplier") is not None:
        sigma = check_noise_multiplier(params["noise_multiplier"])
    else:
        sigma = calibrate_noise(float(params["epsilon"]), delta, q_acc, steps_acc, accountant)
    extra = model_hook(model, sigma, q, tokenizer) if model_hook else {}
    engine = DPSGDEngine(
        model,
        clip,
        sigma,
        expected_batch_size=q * n,
        norms=params.get("norms", "phantom"),
        clipping=params.get("clipping", "clip"),
    )
    engine.canaries = gradient_canaries_for(
        training, engine.params, clip, q, seed, engine.clipping, model=model
    )
    torch.manual_seed(seed)
    info = train_lm_private(
        engine,
        tokenizer,
        list(train.texts),
        steps,
        q,
        training.learning_rate,
        training.max_length,
        training.weight_decay,
        seed,
        training.device,
        training.progress,
        desc=f"train {name}",
    )
    acc = account(sigma, q_acc, steps_acc, delta, accountant) if sigma > 0 else None
    eps = acc["claimed"] if acc else math.inf
    info.update(
        epochs=training.epochs,
        noise_multiplier=sigma,
        max_grad_norm=clip,
        sample_rate=q,
        norms=engine.norms,
        clipping=engine.clipping,
        accountant=f"opacus-{accountant}",
        epsilon_target=params.get("epsilon"),
        epsilon_spent=eps,
        **({} if acc is None else {k: v for k, v in acc.items() if k != "claimed"}),
        **(extra or {}),
    )
    claim = PrivacyClaim(
        epsilon=eps if math.isfinite(eps) else None,
        delta=delta,
        unit="sequence",
        notion="central-dp",
        accountant=f"opacus-{accountant} + dp-accounting-pld (max)",
        proven=sigma > 0,
        note=(
            f"{name}: DP-SGD on a tied GPT-2 LM, per-sequence {engine.clipping} to C={clip:g} "
            f"({engine.norms} norms), Poisson q={q:.4g}, σ={sigma:.4g}, {steps} steps; "
            "add/remove-one sequence. ε is the larger of Opacus "
            f"{accountant.upper()} and dp-accounting PLD." + _scope_note(target)
        ),
        details={
            "norms": engine.norms,
            "public_pretraining_epochs": getattr(target.spec, "public_epochs", 0)
            if hasattr(target, "spec")
            else 0,
            **({} if acc is None else acc),
        },
    )
    release = LMRelease(
        model,
        tokenizer,
        training.max_length,
        claim,
        training.device,
        GaussianGradientMechanism(clip, sigma),
        SamplingSchedule(q_acc, steps_acc),
        label_names=list(getattr(target, "label_names", [])),
    )
    attach_canary_record(release, info, engine.canaries)
    # the schedule the run drew, for the realised-schedule audit (catches a claim
    # accounted with a wrong N, q or step count; docs/dp-bugs.md)
    release.realised_schedule = realised_schedule(info.pop("rows_sampled"), info.pop("rows"), steps)
    return release, info


def gradient_canaries_for(
    training, params, clip: float, q: float, seed: int, clipping="clip", model=None, kind=None
):
    """The run's white-box Dirac canaries when ``training.gradient_canaries`` asks for
    them (the ``[epsilon] white_box_canaries`` audit), else ``None``. With ``model`` (not
    yet trained, not yet wrapped by Opacus) and its ``kind`` (``"causal-lm"`` or
    ``"classifier"``) the coordinates come from a pilot gradient on random tokens."""
    m = int(getattr(training, "gradient_canaries", 0) or 0)
    if m <= 0:
        return None
    from privacy_audit.defenses.dp_sgd_with_canaries import GradientCanaries, pilot_gradient
    from privacy_audit.targets.lm import context_length

    pilot = None
    if model is not None:
        vocab = model.get_input_embeddings().weight.shape[0]
        length = min(int(training.max_length), context_length(model))
        pilot = pilot_gradient(model, params, vocab, length, kind or "causal-lm", seed)
    return GradientCanaries(
        params,
        m,
        clip,
        q,
        seed,
        clip_weight=lambda n: clip_weights(n, clip, clipping),
        pilot=pilot,
    )


def attach_canary_record(release, info: dict[str, Any], canaries) -> None:
    """Hand the recorded canary signals to the release (for the one-run white-box audit);
    ``info`` says how many rode along."""
    if canaries is None:
        return
    release.gradient_canary_record = canaries.record()
    info["white_box_canaries"] = canaries.m


def _opacus_clipped_sums(
    gsm, trainable: list, b_ids: Tensor, b_mask: Tensor, dev, clip: float
) -> dict:
    """The clipped sum of one batch's per-sequence gradients, per trainable tensor: Opacus's
    per-sample gradients of the summed token loss, each sequence's total norm clipped to
    ``clip`` (:func:`clip_weights`); the per-sample gradients are freed after."""
    b, t = b_ids.shape
    pos = torch.arange(t, device=dev).expand(b, t)
    logits = gsm(input_ids=b_ids, attention_mask=b_mask, position_ids=pos).logits
    with warnings.catch_warnings():  # Opacus's full-backward-hook notice
        warnings.simplefilter("ignore")
        per_sample_token_loss(logits, b_ids, b_mask).sum().backward()
    norms = torch.stack([p.grad_sample.flatten(1).norm(dim=1) for p in trainable]).norm(dim=0)
    w = clip_weights(norms, clip)
    sums = {p: torch.einsum("b,b...->...", w, p.grad_sample) for p in trainable}
    for p in trainable:
        p.grad_sample = None
    return sums


def _opacus_lm_claim(
    target,
    acc: dict[str, Any],
    delta: float,
    accountant: str,
    q: float,
    sigma: float,
    clip: float,
    steps: int,
):
    """The per-sequence claim of the Opacus LM baseline: ε = the larger of Opacus's and
    dp-accounting's (``acc``), add/remove-one sequence, the output embedding untied."""
    from privacy_audit.defenses.base import PrivacyClaim

    return PrivacyClaim(
        epsilon=acc["claimed"],
        delta=delta,
        unit="sequence",
        notion="central-dp",
        accountant=f"opacus-{accountant} + dp-accounting-pld (max)",
        proven=True,
        note=(
            f"Opacus DP-SGD on the GPT-2 LM with an UNTIED output embedding (Opacus cannot clip "
            f"a tied weight), Poisson q={q:.4g}, σ={sigma:.4g}, C={clip:g}, {steps} steps; "
            "add/remove-one sequence; ε = max(Opacus, dp-accounting PLD)." + _scope_note(target)
        ),
        details={
            "untied": True,
            "public_pretraining_epochs": getattr(target.spec, "public_epochs", 0)
            if hasattr(target, "spec")
            else 0,
            **acc,
        },
    )


def fit_lm_opacus(target, train, training, seed: int, params: dict[str, Any]):
    """Opacus DP-SGD baseline on the LM. Opacus clips per parameter tensor use, so the
    tied embedding (used twice) is **untied** here: the output head is an independent
    copy of the input embedding at initialisation (more parameters than the tied model)."""
    from opacus import GradSampleModule

    from privacy_audit.defenses.gradient_mechanism import (
        GaussianGradientMechanism,
        SamplingSchedule,
    )
    from privacy_audit.targets.lm import LMRelease, training_tensors, trim

    model, tokenizer = target.build(seed)
    head = model.get_output_embeddings()  # any causal LM, not only GPT-2's lm_head
    head.weight = torch.nn.Parameter(model.get_input_embeddings().weight.detach().clone())
    model.config.tie_word_embeddings = False
    n = len(train)
    q, steps = poisson_schedule(n, training.batch_size, training.epochs)
    delta = float(params["delta"])
    accountant = params.get("accountant", "prv")
    clip = float(params["max_grad_norm"])
    sigma = calibrate_noise(float(params["epsilon"]), delta, q, steps, accountant)
    dev, ids, mask = training_tensors(
        model, tokenizer, list(train.texts), training.max_length, training.device
    )
    # canary coordinates from a pilot on the plain model, before Opacus wraps it
    canaries = gradient_canaries_for(
        training, [p for p in model.parameters() if p.requires_grad], clip, q, seed, model=model
    )
    gsm = GradSampleModule(model)
    trainable = [p for p in gsm.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        trainable, lr=training.learning_rate, weight_decay=training.weight_decay
    )
    sampler = torch.Generator().manual_seed(seed)
    noise = torch.Generator().manual_seed(seed + 1)
    start = time.perf_counter()
    from privacy_audit.ground.progress import progress_bar

    bar = progress_bar(
        steps, "train dp-sgd (lm, opacus)", training.progress, training.epochs, leave=False
    )
    for _ in range(steps):
        pick = torch.rand(n, generator=sampler) < q
        opt.zero_grad(set_to_none=True)
        if pick.any():
            b_ids, b_mask = trim(ids[pick], mask[pick])
            sums = _opacus_clipped_sums(gsm, trainable, b_ids.to(dev), b_mask.to(dev), dev, clip)
        else:
            sums = {p: torch.zeros_like(p) for p in trainable}
        if canaries is not None:
            canaries.inject(sums)
        for p in trainable:
            p.grad = (sums[p] + sigma * clip * torch.randn(p.shape, generator=noise).to(dev)) / (
                q * n
            )
        if canaries is not None:
            canaries.observe({p: p.grad for p in trainable}, q * n)
        opt.step()
        bar.update(1)
    bar.close()
    gsm.remove_hooks() if hasattr(gsm, "remove_hooks") else None
    model = gsm._module
    acc = account(sigma, q, steps, delta, accountant)
    info = {
        "epochs": training.epochs,
        "steps": steps,
        "seconds": time.perf_counter() - start,
        "noise_multiplier": sigma,
        "max_grad_norm": clip,
        "sample_rate": q,
        "accountant": f"opacus-{accountant}",
        "epsilon_target": params["epsilon"],
        "epsilon_spent": acc["claimed"],
        "untied_for_opacus": True,
        **{k: v for k, v in acc.items() if k != "claimed"},
    }
    claim = _opacus_lm_claim(target, acc, delta, accountant, q, sigma, clip, steps)
    release = LMRelease(
        model,
        tokenizer,
        training.max_length,
        claim,
        training.device,
        GaussianGradientMechanism(clip, sigma),
        SamplingSchedule(q, steps),
        label_names=list(getattr(target, "label_names", [])),
    )
    attach_canary_record(release, info, canaries)
    return release, info


# --------------------------------------------------------------------------- #
# Opacus Ghost Clipping baseline (Li et al. 2022b, as shipped in Opacus >= 1.5)
# --------------------------------------------------------------------------- #
def conv1d_to_linear(model):
    """Replace every ``transformers`` ``Conv1D`` (GPT-2's projections, weight ``[in, out]``)
    by an ``nn.Linear`` with the transposed weight, in place; the function computed is
    unchanged. Opacus registers Ghost-Clipping norm samplers for ``nn.Linear`` and
    ``nn.Embedding`` only: left as ``Conv1D`` the projections would fall back to per-sample
    gradients built by functorch (fast gradient clipping), so the baseline would not be
    Ghost Clipping."""
    from transformers.pytorch_utils import Conv1D

    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, Conv1D):
                d_in, d_out = child.weight.shape
                lin = torch.nn.Linear(d_in, d_out, bias=child.bias is not None)
                lin = lin.to(child.weight.device, child.weight.dtype)
                with torch.no_grad():
                    lin.weight.copy_(child.weight.t())
                    if child.bias is not None:
                        lin.bias.copy_(child.bias)
                setattr(module, name, lin)
    return model


class OpacusGhostStep:
    """One DP-SGD step with Opacus's Ghost Clipping (``grad_sample_mode="ghost"``):
    ``GradSampleModuleFastGradientClipping`` computes per-sample norms from ghost norms
    (``nn.Linear``, ``nn.Embedding``) without per-sample gradients, then
    ``DPTensorFastGradientClipping.backward`` runs the second backward of ``Σ_i c_i L_i``
    and ``DPOptimizerFastGradientClipping`` adds N(0, σ²C²) and divides by the expected
    batch size. Opacus rejects a parameter used twice, so ``model`` must be **untied**
    (it raises ``NotImplementedError`` on a tied embedding); its ``Conv1D`` layers are
    converted to ``nn.Linear`` (:func:`conv1d_to_linear`)."""

    def __init__(
        self,
        model,
        max_grad_norm: float,
        noise_multiplier: float,
        expected_batch_size: int,
        learning_rate: float = 1e-3,
        generator: torch.Generator | None = None,
        optimizer: str = "sgd",
    ) -> None:
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
        from opacus.optimizers import DPOptimizerFastGradientClipping

        from privacy_audit.targets.lm import is_tied

        if is_tied(model):
            raise ValueError(
                "Opacus Ghost Clipping cannot clip a tied embedding (a weight used twice); "
                "build the model with tie=False"
            )
        conv1d_to_linear(model)
        self.gsm = GradSampleModuleFastGradientClipping(
            model,
            max_grad_norm=max_grad_norm,
            use_ghost_clipping=True,
            loss_reduction="mean",
        )
        params = [p for p in self.gsm.parameters() if p.requires_grad]
        base = (
            torch.optim.SGD(params, lr=learning_rate)
            if optimizer == "sgd"
            else torch.optim.AdamW(params, lr=learning_rate)
        )
        self.optimizer = DPOptimizerFastGradientClipping(
            base,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            expected_batch_size=expected_batch_size,
            loss_reduction="mean",
            generator=generator,
        )
        self.params = params

    def __call__(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """One step; returns the per-sample gradient norms (before clipping)."""
        from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping

        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        b, t = input_ids.shape
        # contiguous: Opacus's embedding norm sampler views the indices
        pos = torch.arange(t, device=input_ids.device).expand(b, t).contiguous()
        self.optimizer.zero_grad(set_to_none=True)
        with warnings.catch_warnings():  # Opacus's full-backward-hook notice
            warnings.simplefilter("ignore")
            logits = self.gsm(input_ids=input_ids, attention_mask=mask, position_ids=pos).logits
            loss = per_sample_token_loss(logits, input_ids, mask)
            DPTensorFastGradientClipping(self.gsm, self.optimizer, loss, "mean").backward()
        norms = self.gsm.per_sample_gradient_norms.detach()
        self.optimizer.step()
        return norms
