"""``privacy-audit experiment dp-blogs-audit``: the gradient-level ε audit of the DP-BloGS
shuffle (``privacy_audit.attacks.shuffle_audit.ShuffleAudit``) recorded for the paper-claims table, with
a Gaussian mechanism as positive control through the same audit.

World D: a batch of 50 for a bias-free 2-layer MLP (two 64×64 tensors); world D′: the same
batch with one example replaced by a canary. BloGS is configured by its own accountant for
a whole-run ε ≤ 1 over 100 steps; one step's release is audited (it is part of the run's
transcript, so its ε lower bound also bounds the run's ε). 1000 trials per world; the
Clopper–Pearson bound at δ = 1e-5 is capped by the trial count (``certified_ceiling``).
"""

from __future__ import annotations

from typing import Any

import torch

from experiments.run import CellStore, ExperimentSettings

DELTA = 1e-5


def _worlds(seed: int):
    from privacy_audit.attacks.shuffle_audit import batch_gradient

    def loss(model, batch):
        return torch.nn.functional.cross_entropy(model(batch[0]), batch[1])

    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64, bias=False), torch.nn.Tanh(), torch.nn.Linear(64, 64, bias=False)
    )
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(50, 64, generator=g), torch.randint(0, 64, (50,), generator=g)
    xc, yc = x.clone(), y.clone()
    xc[0], yc[0] = 5 * torch.randn(64, generator=g), 7
    return model, batch_gradient(model, loss, (xc, yc)), batch_gradient(model, loss, (x, y))


def _blogs(seed: int, trials: int) -> dict[str, Any]:
    import warnings

    from privacy_audit.attacks.shuffle_audit import ShuffleAudit, certified_ceiling
    from privacy_audit.defenses.dp_blogs import BloGSGenerator

    model, g_in, g_out = _worlds(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        blogs = BloGSGenerator(model.named_parameters(), target_epsilon=1.0, steps=100, seed=seed)
        claimed = float(blogs.epsilon_planned)
        r = ShuffleAudit(trials=trials, seed=seed).run(
            g_in, g_out, blogs.mechanism(), delta=DELTA, claimed_epsilon=claimed
        )
    return {**r, "claimed_epsilon": claimed, "ceiling": certified_ceiling(trials, DELTA)}


def _control(seed: int, trials: int) -> dict[str, Any]:
    from privacy_audit.attacks.shuffle_audit import GaussianControl, ShuffleAudit

    d = 32
    g_in = [torch.zeros(d, dtype=torch.float64)]
    g_in[0][3] = 2.0
    g_out = [torch.zeros(d, dtype=torch.float64)]
    control = GaussianControl(clip_value=1.0, sigma=0.5)
    true_eps = float(control.epsilon(DELTA))
    r = ShuffleAudit(trials=trials, seed=seed, statistic="projection").run(
        g_in, g_out, control, delta=DELTA, claimed_epsilon=true_eps
    )
    return {**r, "true_epsilon": true_eps}


def run(settings: ExperimentSettings, cells: CellStore) -> dict[str, Any]:
    trials = 100 if settings.quick else 1000
    seeds = list(range(settings.seeds))
    blogs = [cells.get(f"blogs-seed{s}", lambda s=s: _blogs(s, trials)) for s in seeds]
    control = [cells.get(f"control-seed{s}", lambda s=s: _control(s, trials)) for s in seeds]
    lbs = [b["epsilon_lb"] for b in blogs]
    return {
        "setup": {"trials_per_world": trials, "delta": DELTA, "seeds": seeds},
        "blogs": blogs,
        "gaussian_control": control,
        "summary": {
            "claimed_epsilon_max": max(b["claimed_epsilon"] for b in blogs),
            "epsilon_lb_min": min(lbs),
            "exceeds_claim_all_seeds": all(b["exceeds_claim"] for b in blogs),
            "control_below_true_epsilon_all_seeds": all(
                c["epsilon_lb"] <= c["true_epsilon"] for c in control
            ),
        },
    }
