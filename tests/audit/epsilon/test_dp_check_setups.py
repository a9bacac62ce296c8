"""Every bundled SETUP.py through dp-check: each bug VIOLATED by the check that should
catch it, each correct setup (Opacus defaults, make_private_with_epsilon, ghost clipping,
per-layer clipping, BatchMemoryManager, peft LoRA, GPT-2, a numpy privatize loop, the
suite's own two trainers) consistent; and one run end to end through the CLI, its
results.json checked against dp-accounting and the sampler's own counts.

The detection and false-violation rates over 20 seeds are `privacy-audit bench dp-check`'s
(docs/dp-check.md); here one seed each keeps CI short.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from privacy_audit.audit.benchmarks.dp_check import (
    setups_dir,
    suite_dp_sgd_setup,
    suite_lm_engine_setup,
)
from privacy_audit.audit.epsilon.dp_check import dp_check

ROOT = Path(__file__).resolve().parents[3]
SETUPS = setups_dir()

#: bug setup -> (the check whose finding is a violation, a word of its bug class)
BUGS = {
    "bug_noise_divided_by_batch": ("noise", "noise: scale too small"),
    "bug_accumulation_noise_once": ("noise", "noise: scale too small"),
    "bug_noise_averaged_over_replicas": ("noise", "noise: scale too small"),
    "bug_unnoised_no_decay_group": ("coverage", "not noised"),
    "bug_unclipped_no_decay_group": ("sensitivity", "not clipped"),
    "bug_clip_after_aggregation": ("sensitivity", "after aggregation"),
    "bug_microbatch_clipping": ("sensitivity", "after aggregation"),
    "bug_per_layer_noise": ("sensitivity", "per-layer"),
    "bug_ghost_clip_norm": ("model-clipping", "norm larger than claimed"),
    "bug_ghost_unclipped": ("model-clipping", "not applied through the model"),
    "bug_shuffle_as_poisson": ("sampling", "shuffle accounted as poisson"),
    "bug_fixed_batches": ("sampling", "fixed accounted as poisson"),
    "bug_accountant_wrong_n": ("accounting", "sampling rate larger"),
    "bug_accountant_steps_per_epoch": ("accounting", "more steps"),
    "bug_replace_one_claim": ("accounting", "below its own parameters"),
    "bug_batch_norm": ("cross-example", "mixes examples"),
    "bug_lora_head_outside": ("outside-release", "trained outside the DP optimizer"),
    "bug_summed_grad_kept": ("schedule", "state carried across steps"),
}
CORRECT = [
    "opacus_default",
    "opacus_with_epsilon",
    "opacus_ghost",
    "opacus_per_layer",
    "opacus_batch_memory_manager",
    "opacus_lora",
    "opacus_gpt2",
    "privatize_correct",
]


def test_every_bundled_setup_is_listed_here():
    found = {p.stem for p in SETUPS.glob("*.py") if not p.name.startswith("_")}
    assert found == set(BUGS) | set(CORRECT)


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_is_violated_by_its_check(name):
    r = dp_check(SETUPS / f"{name}.py", budget=120, seed=1)
    check, cls = BUGS[name]
    assert r.verdict == "violated", r.summary()
    assert r.exit_code == 1
    hits = [f for f in r.violations if f["check"] == check and cls in f["bug_class"]]
    assert hits, r.summary()
    e = hits[0]["epsilon"]
    assert e is not None and e["kind"] == "sound lower bound"
    assert e["infinite"] or e["value"] > r.record["claim"]["epsilon"]
    assert hits[0]["where"]  # every finding says where to look


@pytest.mark.parametrize("name", CORRECT)
def test_correct_setup_is_consistent(name):
    r = dp_check(SETUPS / f"{name}.py", budget=120, seed=1)
    assert r.verdict == "consistent", r.summary()
    assert r.exit_code == 0
    assert not r.violations
    assert 0 < r.epsilon_lower <= r.record["claim"]["epsilon"]
    assert all(c["status"] in ("passed", "not-applicable") for c in r.record["checks"])


@pytest.mark.parametrize("make", [suite_dp_sgd_setup, suite_lm_engine_setup])
def test_the_suites_own_trainers_are_consistent(make):
    r = dp_check(make(), budget=120, seed=1)
    assert r.verdict == "consistent", r.summary()


def test_cli_end_to_end_results_json_against_dp_accounting(tmp_path):
    """From the SETUP file through the CLI to results.json: the declared ε interval holds
    dp-accounting's own PLD value, q̂ is the sampler's inclusions over N·T, the measured
    lower bound is below the claim, and the report and stdout say the same verdict."""
    import dp_accounting

    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "privacy_audit",
            "dp-check",
            str(SETUPS / "opacus_default.py"),
            "--out",
            str(out),
            "--budget",
            "120",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads((out / "results.json").read_text())
    c = r["claim"]
    dec = r["epsilon"]["declared"]
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(
                c["sample_rate"], dp_accounting.GaussianDpEvent(c["noise_multiplier"])
            ),
            dec["steps"],
        )
    )
    ref = acc.get_epsilon(c["delta"])
    assert dec["epsilon_pld"]["lower"] <= ref <= dec["epsilon_pld"]["upper"] + 1e-9
    assert dec["steps"] == int(c["epochs"] / c["sample_rate"])
    s = r["sampling"]
    assert s["rate"]["estimate"] == s["inclusions"] / (s["examples"] * s["logical_steps"])
    assert s["rate"]["trials"] == s["examples"] * s["logical_steps"]
    assert s["rate"]["decision_lower"] < s["rate"]["lower"] < s["rate"]["estimate"]
    m = r["epsilon"]["measured"]
    assert m["epsilon_lower"]["value"] <= c["epsilon"]
    # the sound bound is dp-accounting's optimistic PLD at σ_eff's UPPER end and q's
    # LOWER decision end (both reported, one-sided 1 - 1e-4), recomputed from the library
    from dp_accounting.pld import privacy_loss_distribution as pldm

    pld = pldm.from_gaussian_mechanism(
        standard_deviation=m["sigma_eff"]["upper"],
        sensitivity=1.0,
        pessimistic_estimate=False,
        sampling_prob=m["q"]["decision_lower"],
        value_discretization_interval=1e-4,
        use_connect_dots=False,
    )
    exact_lo = pld.self_compose(m["steps_run"]).get_epsilon_for_delta(c["delta"])
    assert m["epsilon_lower"]["value"] <= exact_lo + 1e-9
    assert m["epsilon_lower"]["value"] >= exact_lo - 0.05
    assert m["sigma_eff"]["lower"] <= c["noise_multiplier"] <= m["sigma_eff"]["upper"]
    html = (out / "report.html").read_text()
    assert "CONSISTENT" in html and "CONSISTENT" in p.stdout
    assert r["verdict"] == "consistent" and r["exit_code"] == 0
    assert not math.isnan(r["budget"]["cpu_s"])


def test_budget_is_honoured_within_ten_percent_and_progress_is_printed(capsys):
    """The many-run audits fill whatever budget is left: the whole run must stop within
    10% of --budget, print [m:ss] progress lines, and report the audits it ran."""
    import time

    t0 = time.perf_counter()
    r = dp_check(SETUPS / "opacus_default.py", budget=20, progress=True, end_to_end=True)
    wall = time.perf_counter() - t0
    assert wall <= 22.0, wall
    assert r.record["budget"]["wall_s"] <= 22.0
    err = capsys.readouterr().err
    assert "dp-check: end-to-end" in err and "[0:" in err and "\r" not in err
    audits = r.record["end_to_end"]["audits"]
    assert [a["design"] for a in audits] == ["lone canary", "anchor pair"]
    assert all(a["runs_per_side"] >= 0 and a["stopped_at_budget"] for a in audits)
    # a correct setup stays consistent: the end-to-end bounds stay below the claim
    assert r.verdict == "consistent"
    assert all(a["epsilon_lower"] <= r.record["claim"]["epsilon"] for a in audits)
