"""Defense ``dp-sgd``: Opacus per-example clipping plus Gaussian noise (Abadi et al. 2016).

Noise is calibrated to a target (ε, δ) for the planned number of epochs and the Poisson
sampling rate, with Opacus's calibration, which returns the conservative end of its
bisection. Accounting uses Opacus's PRV accountant (or RDP) and is cross-checked with
dp-accounting's RDP accountant; no accountant is written here.

Privacy unit: one training example, add/remove-one neighbouring relation, central DP.

``unit = "user"`` (classifier target): user-level DP-SGD instead
(:mod:`privacy_audit.defenses.user_dp_sgd`): users Poisson-sampled with rate q = expected
users per step / users, each user's summed per-example gradient (Opacus GradSampleModule)
clipped to C, N(0, σ²C²) added, the accountant over users; the claim's unit is "user".
The users are the training examples' ``groups`` (``[data] group``).
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import torch

from privacy_audit.defenses import dp_bugs
from privacy_audit.defenses.base import Defense, Examples, PrivacyClaim, TrainingReport
from privacy_audit.defenses.dp_engine import attach_canary_record, gradient_canaries_for
from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism, SamplingSchedule
from privacy_audit.targets.classifier import (
    ClassifierRelease,
    TrainingConfig,
    make_loader,
    train_loop,
)

ACCOUNTANTS = ("prv", "rdp")


def dp_accounting_epsilon(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float
) -> float:
    """ε of the Poisson-subsampled Gaussian mechanism composed ``steps`` times (dp-accounting RDP)."""
    import dp_accounting
    from absl import logging as absl_logging

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(
            sample_rate, dp_accounting.GaussianDpEvent(noise_multiplier)
        ),
        steps,
    )
    acc = dp_accounting.rdp.RdpAccountant()
    # Orders whose series does not converge are dropped by dp-accounting, which can only
    # raise ε (conservative); its per-order warnings are noise in a report run.
    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.ERROR)
    try:
        acc.compose(event)
        return float(acc.get_epsilon(delta))
    finally:
        absl_logging.set_verbosity(verbosity)


class DPSGD(Defense):
    name = "dp-sgd"
    description = (
        "DP-SGD with Opacus: per-example clipping and Gaussian noise, calibrated to (ε, δ)."
    )
    PARAMS = {
        "epsilon": ((int, float), 8.0),
        "delta": ((int, float), 1e-5),
        "max_grad_norm": ((int, float), 1.0),
        "accountant": (str, "prv"),
        # "user": clip each user's summed gradient, sample users (needs the data's groups)
        "unit": (str, "example"),
        # expected users per step under unit = "user" (0: batch_size / mean texts per user)
        "users_per_step": ((int, float), 0),
    }

    def validate(self) -> None:
        eps, delta = self.params["epsilon"], self.params["delta"]
        if not (isinstance(eps, (int, float)) and eps > 0 and math.isfinite(eps)):
            raise ValueError(f"dp-sgd epsilon must be a positive finite number, got {eps!r}")
        if not (0 < delta < 1):
            raise ValueError(f"dp-sgd delta must be in (0, 1), got {delta!r}")
        if not self.params["max_grad_norm"] > 0:
            raise ValueError(
                f"dp-sgd max_grad_norm must be > 0, got {self.params['max_grad_norm']!r}"
            )
        if self.params["unit"] not in ("example", "user"):
            raise ValueError(
                f"dp-sgd unit must be 'example' or 'user', got {self.params['unit']!r}"
            )
        if not self.params["users_per_step"] >= 0:
            raise ValueError(
                f"dp-sgd users_per_step must be >= 0, got {self.params['users_per_step']!r}"
            )
        if self.params["accountant"] not in ACCOUNTANTS:
            raise ValueError(
                f"unknown dp-sgd accountant {self.params['accountant']!r}; allowed: {', '.join(ACCOUNTANTS)}"
            )

    def fit(self, target, train: Examples, training: TrainingConfig, seed: int):
        from privacy_audit.targets.lm import is_lm_target

        if is_lm_target(target):  # causal LM: Opacus with an untied head (defenses/dp_engine.py)
            from privacy_audit.defenses.dp_engine import fit_lm_opacus

            release, info = fit_lm_opacus(target, train, training, seed, self.params)
            return release, TrainingReport(info)

        if self.params["unit"] == "user":
            return self.fit_users(target, train, training, seed)
        eps, delta = float(self.params["epsilon"]), float(self.params["delta"])
        clip = float(self.params["max_grad_norm"])
        accountant = self.params["accountant"]
        model, tokenizer = target.build(seed)
        # a model loaded with from_pretrained (or shared with a scorer) may be in eval mode;
        # Opacus refuses it, and dropout must be on while training (as in the plain trainer)
        model.train()
        if dp_bugs.is_active("batch-norm-classifier"):  # PLANTED BUG (tests, benchmark only)
            dp_bugs.insert_batch_norm(model)
        torch.manual_seed(seed)
        loader = make_loader(tokenizer, train, training, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            engine, gsm, dp_optimizer, dp_loader, sigma, sample_rate, canaries = self.make_private(
                model, loader, training, seed
            )
            observe_released(dp_optimizer)
            info = train_loop(gsm, dp_optimizer, dp_loader, training, desc="train dp-sgd")
            spent = float(engine.get_epsilon(delta))
        steps = len(engine.accountant.history) and sum(n for _, _, n in engine.accountant.history)
        cross = dp_accounting_epsilon(sigma, sample_rate, int(steps), delta)
        gsm.remove_hooks()
        model = gsm._module
        info.update(
            noise_multiplier=sigma,
            max_grad_norm=clip,
            sample_rate=sample_rate,
            accountant=f"opacus-{accountant}",
            epsilon_target=eps,
            epsilon_spent=spent,
            epsilon_rdp_dp_accounting=cross,
        )
        # The claim reports the larger of the two accountants: never overstate privacy.
        claimed = max(spent, cross) if accountant == "rdp" else spent
        claim = PrivacyClaim(
            epsilon=claimed,
            delta=delta,
            unit="example",
            notion="central-dp",
            accountant=f"opacus-{accountant}",
            proven=True,
            note=(
                f"DP-SGD (Abadi et al. 2016), Poisson sampling q={sample_rate:.4g}, σ={sigma:.4g}, "
                f"C={clip:g}, {int(steps)} steps; add/remove-one example. "
                f"Cross-check (dp-accounting RDP): ε={cross:.3g}."
            ),
        )
        release = ClassifierRelease(
            model,
            tokenizer,
            training.max_length,
            claim,
            target.label_names,
            training.device,
            gradient_mechanism=GaussianGradientMechanism(clip, sigma),
            schedule=SamplingSchedule(sample_rate, int(steps)),
        )
        attach_canary_record(release, info, canaries)
        return release, TrainingReport(info)

    def fit_users(self, target, train: Examples, training: TrainingConfig, seed: int):
        """User-level DP-SGD of the classifier target (``unit = "user"``): the hand loop of
        :func:`privacy_audit.defenses.user_dp_sgd.train_user_dp` with Opacus's
        GradSampleModule for the per-example gradients and AdamW on the released noisy
        mean (post-processing). Users are ``train.groups``; q = users per step / users."""
        from opacus import GradSampleModule

        from privacy_audit.defenses.user_dp_sgd import UserDPConfig, train_user_dp
        from privacy_audit.targets.classifier import encode, forward_kwargs

        groups = getattr(train, "groups", None)
        if groups is None:
            raise ValueError(
                "dp-sgd with unit = 'user' needs the user of every text: set [data] group "
                "= COLUMN (or --group-by COLUMN)"
            )
        users = np.asarray([str(g) for g in groups])
        n_users = len(set(users.tolist()))
        per_step = float(self.params["users_per_step"]) or max(
            1.0, training.batch_size * n_users / max(len(users), 1)
        )
        config = UserDPConfig(
            target_epsilon=float(self.params["epsilon"]),
            delta=float(self.params["delta"]),
            clip=float(self.params["max_grad_norm"]),
            users_per_step=min(per_step, float(n_users)),
            epochs=float(training.epochs),
            learning_rate=training.learning_rate,
            accountant=self.params["accountant"],
        )
        model, tokenizer = target.build(seed)
        model.train()
        torch.manual_seed(seed)
        ids, mask = encode(tokenizer, train.texts, training.max_length)
        labels = torch.as_tensor(np.asarray(train.labels), dtype=torch.long)
        gsm = GradSampleModule(model)
        params = [p for p in model.parameters() if p.requires_grad]

        def per_example(idx):
            logits = gsm(**forward_kwargs(model, ids[idx], mask[idx])).logits
            loss = torch.nn.functional.cross_entropy(logits, labels[idx], reduction="sum")
            for p in params:
                p.grad_sample = None
            loss.backward()
            out = torch.cat([p.grad_sample.reshape(len(idx), -1) for p in params], dim=1)
            for p in params:
                p.grad_sample, p.grad = None, None
            return out

        optimizer = torch.optim.AdamW(
            params, lr=training.learning_rate, weight_decay=training.weight_decay
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = train_user_dp(
                model,
                None,
                ids,
                labels,
                users,
                config,
                seed,
                per_example=per_example,
                optimizer=optimizer,
            )
        gsm.remove_hooks()
        info = {
            **run.info,
            "noise_multiplier": run.noise_multiplier,
            "max_grad_norm": config.clip,
            "sample_rate": run.sample_rate,
            "steps": run.steps,
            "unit": "user",
            "accountant": f"opacus-{config.accountant} + dp-accounting PLD (larger)",
            "epsilon_target": config.target_epsilon,
            "epsilon_spent": run.claim.epsilon,
        }
        release = ClassifierRelease(
            model,
            tokenizer,
            training.max_length,
            run.claim,
            target.label_names,
            training.device,
            # one white-box unit (a user) contributes at most C per step: the simulated
            # gradient canaries of the ε audit are canary users of this mechanism
            gradient_mechanism=GaussianGradientMechanism(config.clip, run.noise_multiplier),
            schedule=SamplingSchedule(run.sample_rate, run.steps),
        )
        return release, TrainingReport(info)

    def make_private(self, model, loader, training: TrainingConfig, seed: int):
        """The private pieces of :meth:`fit`: σ calibrated to (ε, δ) for the loader's
        Poisson rate and the epochs, AdamW, the white-box canaries, and Opacus's
        ``make_private`` with Poisson sampling. Returns ``(engine, model, optimizer,
        loader, sigma, sample_rate, canaries)``; ``privacy-audit dp-check`` checks exactly
        these (``privacy-audit bench dp-check``)."""
        from opacus import PrivacyEngine

        from privacy_audit.defenses.calibration import bounded_noise_multiplier

        eps, delta = float(self.params["epsilon"]), float(self.params["delta"])
        clip = float(self.params["max_grad_norm"])
        accountant = self.params["accountant"]
        sample_rate = 1 / len(loader)
        sigma = bounded_noise_multiplier(  # Opacus's search, with bounds
            target_epsilon=eps,
            target_delta=delta,
            sample_rate=sample_rate,
            steps=int(training.epochs / sample_rate),
            accountant=accountant,
        )
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=training.learning_rate, weight_decay=training.weight_decay
        )
        # white-box canaries: coordinates from a pilot on the plain model (no data)
        canaries = gradient_canaries_for(
            training,
            [p for p in model.parameters() if p.requires_grad],
            clip,
            sample_rate,
            seed,
            model=model,
            kind="classifier",
        )
        engine = PrivacyEngine(accountant=accountant)
        gsm, dp_optimizer, dp_loader = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=sigma,
            max_grad_norm=clip,
            poisson_sampling=True,
        )
        record_canaries(dp_optimizer, canaries)
        return engine, gsm, dp_optimizer, dp_loader, sigma, sample_rate, canaries


def record_canaries(dp_optimizer, canaries) -> None:
    """Put white-box Dirac ``canaries`` inside Opacus's own DPOptimizer: added to
    ``p.summed_grad`` (the clipped sum) before its ``add_noise``, read from ``p.grad``
    (sum + noise) right after, before ``scale_grad`` divides it."""
    if canaries is None:
        return
    add_noise = dp_optimizer.add_noise

    def add_noise_with_canaries():
        sums = {p: p.summed_grad for p in dp_optimizer.params}
        canaries.inject(sums)
        for p, t in sums.items():
            p.summed_grad = t
        add_noise()
        canaries.observe({p: p.grad for p in dp_optimizer.params})

    dp_optimizer.add_noise = add_noise_with_canaries


#: White-box observers of the released gradients (see :func:`released_gradients`).
_OBSERVERS: list = []


@contextlib.contextmanager
def released_gradients(callback):
    """The white-box view of the ``dp-sgd`` classifier trainer's release, for ε audits
    (the duplicate-record audit, :mod:`privacy_audit.audit.epsilon.duplicate_record`):
    while active, every ``DPSGD.fit`` calls ``callback(step, params)`` at each optimizer
    step right after Opacus's ``add_noise``, where ``p.grad`` is the released noisy sum
    Σ clip(g_i) + N(0, σ²C²) (before ``scale_grad``) and ``p.summed_grad`` the clipped sum
    before noise. Reading changes nothing the trainer computes; no config reaches it."""
    _OBSERVERS.append(callback)
    try:
        yield
    finally:
        _OBSERVERS.remove(callback)


def observe_released(dp_optimizer) -> None:
    """Hand each step's release to the active :func:`released_gradients` observers."""
    if not _OBSERVERS:
        return
    observers, add_noise, step = list(_OBSERVERS), dp_optimizer.add_noise, [0]

    def add_noise_observed():
        add_noise()
        for callback in observers:
            callback(step[0], dp_optimizer.params)
        step[0] += 1

    dp_optimizer.add_noise = add_noise_observed
