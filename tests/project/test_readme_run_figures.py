"""The README's figures about the bundled default audit, recomputed from the default config
and the trainer's own code: the DP-SGD trainer's sampling rate and step count (read off
the arguments it passes to its noise calibration), the members, non-members, attacks and
canaries of ``audit/configs/default.toml``, and the gradient-canary bound and ceiling of
the calibrated mechanism (the ε audit's own code, same trials and seed as the run).

A README number that drifts from the code fails here with both values."""

from __future__ import annotations

import dataclasses
import re
from fractions import Fraction
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _int(text: str) -> int:
    return WORDS[text] if text in WORDS else int(text.replace(",", ""))


def _paragraph(start: str) -> str:
    i = README.index(start)
    j = README.find("\n\n", i)
    return " ".join(README[i:j].split())


@pytest.fixture(scope="module")
def default_run():
    """What the default audit's DP-SGD trainer is given, without training: the data, the
    included canaries, the loader, and the (q, T) the trainer passes to its calibration."""
    import privacy_audit.defenses.calibration as calibration
    from privacy_audit.audit.config import load_config
    from privacy_audit.audit.epsilon.input_canaries import make_canaries, with_canaries
    from privacy_audit.audit.evaluate import epsilon_settings
    from privacy_audit.audit.scale import tasks
    from privacy_audit.targets.classifier import make_loader

    cfg = load_config(None)
    data = tasks.task_data(cfg)
    eps = epsilon_settings(cfg)
    # the same canaries as audit/scale/tasks.py::audit_trial draws for this config
    canaries = make_canaries(
        eps.canaries,
        eps.canary_kind,
        len(data.label_names),
        data.members.texts + data.nonmembers.texts,
        cfg.seed,
    )
    train = with_canaries(data.members, canaries)
    (idx,) = [i for i, d in enumerate(cfg.defenses) if d.name == "dp-sgd"]
    dcfg, defense = tasks.task_defense(cfg, {"defense": idx})
    training = tasks.task_training(cfg, dcfg)
    # public pretraining changes the weights, not the tokenizer or the loader: skip it here
    spec = dataclasses.replace(cfg.target, public_epochs=0)
    model, tokenizer = tasks.task_target(dataclasses.replace(cfg, target=spec), data).build(
        cfg.seed
    )
    loader = make_loader(tokenizer, train, training, cfg.seed)
    seen: dict = {}
    real = calibration.bounded_noise_multiplier

    def spy(**kw):
        seen.update(kw)
        return real(**kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(calibration, "bounded_noise_multiplier", spy)
    try:
        out = defense.make_private(model, loader, training, cfg.seed)
    finally:
        mp.undo()
    return {
        "cfg": cfg,
        "data": data,
        "eps": eps,
        "dcfg": dcfg,
        "training": training,
        "batches": len(loader),
        "sigma": out[4],
        "sample_rate": out[5],
        "calibration": seen,
        "canaries_in": int(canaries.included.sum()),
        "layers": model.config.num_hidden_layers,
        "model_type": model.config.model_type,
    }


def test_the_default_dp_sgd_schedule_in_the_readme_is_the_trainers(default_run):
    text = _paragraph("On the default audit's DP-SGD")
    m = re.search(
        r"ε = ([\d.]+), q = 1/(\d+) = ([\d.]+) from batches of (\d+) over the ([\d,]+) "
        r"members plus the included input canaries, (\d+) epochs = (\d+) steps",
        text,
    )
    assert m, text
    eps, denom, q_dec, batch, members, epochs, steps = m.groups()
    r = default_run
    q = r["calibration"]["sample_rate"]
    assert float(eps) == r["dcfg"].params["epsilon"] == r["calibration"]["target_epsilon"]
    assert Fraction(q).limit_denominator(10_000) == Fraction(1, int(denom)), (q, denom)
    assert q_dec == f"{q:.4f}"
    assert int(batch) == r["training"].batch_size
    assert _int(members) == len(r["data"].members.texts)
    assert int(denom) == r["batches"]  # ceil((members + included canaries) / batch)
    assert int(epochs) == r["training"].epochs
    assert int(steps) == r["calibration"]["steps"]


def test_the_default_audit_paragraph_matches_the_default_config(default_run):
    text = _paragraph("`make audit` does three steps")
    cfg, data = default_run["cfg"], default_run["data"]
    m = re.search(r"fine-tunes it twice on ([\d,]+) members", text)
    assert m and _int(m.group(1)) == len(data.members.texts), text
    m = re.search(r"with DP-SGD at ε = ([\d.]+)\)", text)
    assert m and float(m.group(1)) == default_run["dcfg"].params["epsilon"]
    m = re.search(
        r"runs (\w+) membership attacks on each \(([\d,]+) members\s+vs ([\d,]+) non-members\)",
        text,
    )
    assert m, text
    assert _int(m.group(1)) == len(cfg.attacks)
    assert _int(m.group(2)) == len(data.members.texts)
    assert _int(m.group(3)) == len(data.nonmembers.texts)
    m = re.search(r"(\d+) one-run input\s+canaries", text)
    assert m and int(m.group(1)) == default_run["eps"].canaries
    m = re.search(r"pretrains a (\d+)-layer BERT", text)
    assert m and int(m.group(1)) == default_run["layers"], text
    assert default_run["model_type"] == "bert"
    assert len(cfg.defenses) == 2 and "twice" in text
    assert cfg.target.public_epochs > 0 and "public split" in text


def test_the_readmes_gradient_canary_figures_are_the_audits(default_run):
    """The bound, ceiling and the 10x-less-noise case the README quotes, by the ε audit's
    own gradient-canary code on the calibrated mechanism (no training needed: the audit
    reads only the mechanism and the schedule)."""
    from privacy_audit.audit.epsilon.gradient_canary_audit import GradientCanaryAudit
    from privacy_audit.defenses.base import Surface
    from privacy_audit.defenses.gradient_mechanism import (
        GaussianGradientMechanism,
        SamplingSchedule,
    )

    text = _paragraph("On the default audit's DP-SGD")
    m = re.search(
        r"gradient-canary bound is about ([\d.]+) with 10⁵ trials per side \(ceiling ([\d.]+)\); "
        r"the same mechanism with 10× less noise than it claims gives ([\d.]+) and is flagged",
        text,
    )
    assert m, text
    r, eps = default_run, default_run["eps"]
    assert eps.gradient_trials == 10**5
    clip = float(r["dcfg"].params["max_grad_norm"])

    def audit(sigma):
        class Release:
            surfaces = frozenset({Surface.GRADIENTS})
            gradient_mechanism = GaussianGradientMechanism(clip, sigma)
            schedule = SamplingSchedule(r["sample_rate"], r["calibration"]["steps"])

        return GradientCanaryAudit(trials=eps.gradient_trials, seed=eps.seed).run(
            Release(), eps.delta, eps.confidence, r["dcfg"].params["epsilon"]
        )

    honest, weak = audit(r["sigma"]), audit(r["sigma"] / 10)
    assert m.group(1) == f"{honest['epsilon_lb']:.1f}", honest["epsilon_lb"]
    assert m.group(2) == f"{honest['ceiling']:.1f}"
    assert not honest["exceeds_claim"]
    assert m.group(3) == f"{weak['epsilon_lb']:.1f}" and weak["exceeds_claim"]
