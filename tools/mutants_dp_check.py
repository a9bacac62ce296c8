"""One-line mutants of the dp-check modules: each must make a test fail.

    python tools/mutants_dp_check.py /path/to/a/clone [INDEX ...]

Applies each mutant (exact string, first occurrence) in the clone, runs the listed tests
there, restores the file and prints killed / SURVIVED; the closing note of the dp-check
issue explains the equivalent survivors. Never run it on your working tree."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

KA = "tests/audit/epsilon/test_dp_check_known_answers.py"
ST = "tests/audit/epsilon/test_dp_check_setups.py"
FA = "tests/audit/epsilon/test_dp_check_false_alarms.py"
IN = "tests/commands/test_dp_check.py"

MUTANTS = [
    (
        "audit/epsilon/dp_check/mechanism.py",
        'm2 += nv * nv / p["std"] ** 2',
        'm2 += nv / p["std"]',
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "μ formula",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        'm2lo += nv * nv / p["hi_decision"] ** 2',
        'm2lo += nv * nv / p["lo_decision"] ** 2',
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_cli_end_to_end_results_json_against_dp_accounting",
            "tests/audit/epsilon/test_dp_check_known_answers.py",
        ],
        "σ_eff upper end uses s's lower end (anti-conservative)",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "big = 1e3 * clip",
        "big = clip",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "crafted example not above C",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "huge = 1e6 * clip",
        "huge = 1e3 * clip",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "second magnitude equals the first",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "bg = {t0: {j0: -3.0 * clip}}",
        "bg = {t0: {j0: -0.5 * clip}}",
        [
            "tests/audit/epsilon/test_dp_check_known_answers.py",
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check",
        ],
        "opposing examples not clipped",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "dof = numel * (k - 1)",
        "dof = numel * k",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "degrees of freedom",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "lo = math.sqrt(ss / stats.chi2.ppf(1 - alpha, dof))",
        "lo = math.sqrt(ss / stats.chi2.ppf(alpha, dof))",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "χ² interval ends",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "if pv < level:",
        "if pv < 0:",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "pooling always",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "zero = ss == 0.0 or std <= 1e-9 * max(scale, 1e-30)",
        "zero = False",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "noiseless tensor not flagged",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "        if nv <= exact_tolerance(p):\n            continue",
        "        if nv <= 1e6 * exact_tolerance(p):\n            continue",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "effects hidden as rounding",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "rows = zero_rows(a, n_rows + (1 if first else 0))",
        "rows = zero_rows(a, n_rows)",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_summed_grad_kept]"
        ],
        "schedule probe dropped",
    ),
    (
        "audit/epsilon/dp_check/sampling.py",
        "POISSON_P = 1e-6",
        "POISSON_P = 0.5",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "Poisson called otherwise",
    ),
    (
        "audit/epsilon/dp_check/sampling.py",
        "(c == 1).mean() >= 0.95",
        "(c == 1).mean() >= 1.5",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "shuffle not recognised",
    ),
    (
        "audit/epsilon/dp_check/sampling.py",
        "lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))",
        "lo = 0.0 if k == 0 else float(stats.beta.ppf(1 - alpha, k, n - k + 1))",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "CP lower end",
    ),
    (
        "audit/epsilon/dp_check/sampling.py",
        "if not sig or sig[-1] is False:",
        "if True:",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_correct_setup_is_consistent[opacus_batch_memory_manager]"
        ],
        "physical batches counted as steps",
    ),
    (
        "audit/epsilon/dp_check/accounting.py",
        "lo = max(lo, _lower_or_fewer_steps(sigma, q, steps, delta, vdi, relation))",
        "lo = max(lo, poisson_epsilon(sigma, q, steps, delta, True, vdi, relation))",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "lower bound pessimistic",
    ),
    (
        "audit/epsilon/dp_check/accounting.py",
        "lower, upper, pessimistic_estimate=False, value_discretization_interval=vdi",
        "lower, upper, pessimistic_estimate=True, value_discretization_interval=vdi",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "shuffle bound pessimistic",
    ),
    (
        "audit/epsilon/dp_check/accounting.py",
        "k = np.floor(c / grid).astype(np.int64)",
        "k = np.ceil(c / grid).astype(np.int64)",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "persistence shifts rounded up",
    ),
    (
        "audit/epsilon/dp_check/accounting.py",
        "if (r < -1e-9).any() or not np.isfinite(r).all():",
        "if not np.isfinite(r).all():",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "negative responses accepted",
    ),
    (
        "audit/epsilon/dp_check/verdict.py",
        "exceeds = eps_lo is not None and eps_lo > claim.epsilon",
        "exceeds = eps_lo is not None and eps_lo > 2 * claim.epsilon",
        ["tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check"],
        "violation threshold",
    ),
    (
        "audit/epsilon/dp_check/verdict.py",
        'q_lo = rate["decision_lower"] if rate and not standin else q_d',
        'q_lo = rate["upper"] if rate and not standin else q_d',
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_cli_end_to_end_results_json_against_dp_accounting"
        ],
        "q's upper end in the lower bound",
    ),
    (
        "audit/epsilon/dp_check/findings_sampling.py",
        'if claim.sampling == "poisson" and dec.lower > claim.epsilon:',
        'if claim.sampling == "poisson" and dec.lower > 10 * claim.epsilon:',
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_replace_one_claim]"
        ],
        "declared-ε check",
    ),
    (
        "audit/epsilon/dp_check/findings_sampling.py",
        "        if scheme != claim.sampling:",
        "        if False:",
        ["tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check"],
        "scheme mismatch ignored",
    ),
    (
        "audit/epsilon/dp_check/findings_sampling.py",
        'if samp.get("tested") and t_run > t_declared and not standin:',
        'if samp.get("tested") and t_run > 10 * t_declared and not standin:',
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_accountant_steps_per_epoch]"
        ],
        "steps check",
    ),
    (
        "audit/epsilon/dp_check/findings_model.py",
        "            if ce.rows_moved > 0:",
        "            if ce.rows_moved > 100:",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_batch_norm]"
        ],
        "cross-example ignored",
    ),
    (
        "audit/epsilon/dp_check/findings_sensitivity.py",
        "if worst.mu_lo > base_hi * (1 + EFFECT_SLACK) and worst.mu_lo > expected_mu * (",
        "if worst.mu_lo > base_hi * (1 + EFFECT_SLACK) and worst.mu_lo > 3 * expected_mu * (",
        ["tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check"],
        "design effect threshold",
    ),
    (
        "audit/epsilon/dp_check/verdict.py",
        '    elif untested or any(f.severity == "inconclusive" for f in findings):',
        '    elif any(f.severity == "inconclusive" for f in findings):',
        [
            "tests/audit/epsilon/test_dp_check_known_answers.py::test_an_untested_check_is_never_consistent"
        ],
        "untested checks ignored",
    ),
    (
        "audit/epsilon/dp_check/model_checks.py",
        "ROW_TOL = 1e-4",
        "ROW_TOL = 1e3",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_batch_norm]"
        ],
        "cross-example tolerance",
    ),
    (
        "audit/epsilon/dp_check/model_checks.py",
        "        det = torch.equal(sa[k], sc[k])",
        "        det = False",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_lora_head_outside]"
        ],
        "determinism test",
    ),
    (
        "audit/epsilon/dp_check/model_checks.py",
        "        dep = not torch.equal(sa[k], sb[k])",
        "        dep = False",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_lora_head_outside]"
        ],
        "dependence test",
    ),
    (
        "audit/epsilon/dp_check/model_checks.py",
        "        and vals[1] > vals[0] * (1 + 1e-3)\n",
        "        and False\n",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_ghost_clip_norm]",
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_unclipped_no_decay_group]",
        ],
        "growth test (covered by level-1 too: equivalent for these bugs)",
    ),
    (
        "audit/epsilon/dp_check/harness.py",
        "        _set_global_state(start)\n",
        "",
        [
            "tests/audit/epsilon/test_dp_check_known_answers.py",
            "tests/audit/epsilon/test_dp_check_setups.py::test_correct_setup_is_consistent[opacus_default]",
        ],
        "noise not replayed",
    ),
    (
        "audit/epsilon/dp_check/accounting.py",
        "return poisson_epsilon(sigma, q, t, delta, False, vdi, relation)",
        "return poisson_epsilon(sigma, q, t, delta, True, vdi, relation)",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "lower bound pessimistic",
    ),
    (
        "audit/epsilon/dp_check/findings_sensitivity.py",
        "if worst.mu_lo > base_hi * (1 + EFFECT_SLACK) and worst.mu_lo > expected_mu * (",
        "if worst.mu_lo > 3 * base_hi and worst.mu_lo > expected_mu * (",
        ["tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check"],
        "design effect threshold",
    ),
    (
        "audit/epsilon/dp_check/accounting.py",
        "k = np.floor(c / grid).astype(np.int64)",
        "k = np.ceil(c / grid).astype(np.int64)",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "persistence shifts rounded up",
    ),
    (
        "audit/epsilon/dp_check/findings_schedule.py",
        "    elif sched.mu_later > 0:",
        "        elif sched.mu_later > 1e9:",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_bug_is_violated_by_its_check[bug_summed_grad_kept]"
        ],
        "state across steps ignored",
    ),
    (
        "audit/epsilon/dp_check/sampling.py",
        "        if not sig or sig[-1] is False:",
        "        if not sig:",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_correct_setup_is_consistent[opacus_batch_memory_manager]"
        ],
        "accumulation signals ignored",
    ),
    (
        "audit/epsilon/dp_check/harness.py",
        "            if inst.ghost:",
        "            if False:",
        [
            "tests/audit/epsilon/test_dp_check_setups.py::test_correct_setup_is_consistent[opacus_ghost]"
        ],
        "ghost release path",
    ),
    (
        "audit/epsilon/dp_check/findings_noise.py",
        "    if corr > 0.05:",
        "    if corr > 0.05 and False:",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "correlated noise not reported (warning only: equivalent for the verdict)",
    ),
    (
        "audit/epsilon/dp_check/harness.py",
        "if not torch.equal(x[0], y[0]) or x[2] != y[2]:",
        "if not torch.equal(x[0], y[0]):",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_known_answers.py",
        ],
        "python random state not compared",
    ),
    (
        "audit/epsilon/dp_check/harness.py",
        "if n1 != n2 or not np.array_equal(k1, k2) or (p1, h1, c1) != (p2, h2, c2):",
        "if False:",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_known_answers.py",
        ],
        "numpy state not compared",
    ),
    (
        "audit/epsilon/dp_check/harness.py",
        "        self.last_replayed = same",
        "        self.last_replayed = True",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_known_answers.py",
        ],
        "replay never doubted",
    ),
    (
        "audit/epsilon/dp_check/harness.py",
        "                g.set_state(s)",
        "                pass",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_known_answers.py",
            "tests/audit/epsilon/test_dp_check_setups.py::test_correct_setup_is_consistent",
        ],
        "own generators not replayed",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "    return resid2 > tol2",
        "    return False",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_known_answers.py",
        ],
        "off-direction check removed",
    ),
    (
        "audit/epsilon/dp_check/findings_schedule.py",
        "    return fresh and invariant and poisson, used, why_not",
        "    return fresh and poisson, used, why_not",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "persistence bound without time invariance",
    ),
    (
        "audit/epsilon/dp_check/findings_schedule.py",
        "    return fresh and invariant and poisson, used, why_not",
        "    return invariant and poisson, used, why_not",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "persistence bound with correlated noise",
    ),
    (
        "audit/epsilon/dp_check/findings_schedule.py",
        "    return fresh and invariant and poisson, used, why_not",
        "    return fresh and invariant, used, why_not",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "persistence bound without Poisson",
    ),
    (
        "audit/epsilon/dp_check/findings_schedule.py",
        "        used = [float(x) for x in np.minimum(r0[:m], r1[:m])]",
        "        used = [float(x) for x in np.maximum(r0[:m], r1[:m])]",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "the larger response used",
    ),
    (
        "audit/epsilon/dp_check/findings_schedule.py",
        "invariant = bool(m and np.abs(r0[:m] - r1[:m]).max() <= 1e-3 * scale_r + 1e-9)",
        "invariant = bool(m and np.abs(r0[:m] - r1[:m]).max() <= 1e-1 * scale_r + 1e-9)",
        ["tests/audit/epsilon/test_dp_check_known_answers.py"],
        "invariance tolerance 10%",
    ),
    (
        "audit/epsilon/dp_check/mechanism.py",
        "                coef[n] = float((diff[n].reshape(-1) * un).sum()) / nn",
        "                coef[n] = 0.0",
        [
            "tests/audit/epsilon/test_dp_check_known_answers.py",
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
        ],
        "spread pair never exact",
    ),
    (
        "audit/epsilon/dp_check/sampling.py",
        "decisive = sizes_e and log_p_pattern < math.log(1e-6)",
        "decisive = True",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_known_answers.py",
        ],
        "small Poisson traces decide the scheme",
    ),
    (
        "audit/epsilon/dp_check/sampling.py",
        "decisive = sizes_e and log_p_pattern < math.log(1e-6)",
        "decisive = sizes_e and log_p_pattern < math.log(0.5)",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_known_answers.py",
        ],
        "decisive at 50%",
    ),
    (
        "audit/epsilon/dp_check/model_checks.py",
        "    seen: dict[str, Any] = {}\n    opt = inst.optimizer",
        "    seen: dict[str, Any] = {}\n    inst.model.train()\n    opt = inst.optimizer",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_setups.py",
        ],
        "training flags forced",
    ),
    (
        "audit/epsilon/dp_check/model_checks.py",
        "        if k in released or k in tied or k not in sa:",
        "        if k in released or k not in sa:",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_setups.py",
        ],
        "tied weights seen as outside",
    ),
    (
        "audit/epsilon/dp_check/model_checks.py",
        "    c_other_noise = not all(torch.equal(x, y) for x, y in zip(a.params, c.params, strict=True))",
        "    c_other_noise = True",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_setups.py",
            "tests/commands/test_dp_check.py",
        ],
        "determinism claimed without other noise",
    ),
    (
        "audit/epsilon/dp_check/verdict.py",
        '        if exceeds:\n            f.severity = "violation"',
        '        if True:\n            f.severity = "violation"',
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_setups.py",
            "tests/audit/epsilon/test_dp_check_known_answers.py",
        ],
        "every deviation a violation",
    ),
    (
        "audit/epsilon/dp_check/findings_sampling.py",
        "    standin = claim.dataset_size is not None and n_data is not None and claim.dataset_size != "
        "n_data",
        "    standin = False",
        [
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/audit/epsilon/test_dp_check_setups.py",
        ],
        "stand-in dataset ignored",
    ),
    (
        "audit/epsilon/dp_check/run.py",
        "            seed_everything(run_seed)\n",
        "",
        [
            "tests/audit/epsilon/test_dp_check_setups.py",
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/commands/test_dp_check.py",
            "tests/defenses/test_dp_bugs.py",
        ],
        "e2e runs not reseeded (global)",
    ),
    (
        "audit/epsilon/dp_check/run.py",
        "                gen.manual_seed(run_seed + j + 1)",
        "                pass",
        [
            "tests/audit/epsilon/test_dp_check_setups.py",
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/commands/test_dp_check.py",
            "tests/defenses/test_dp_bugs.py",
        ],
        "e2e runs not reseeded (own generators)",
    ),
    (
        "audit/epsilon/dp_check/end_to_end.py",
        "                if len(first_out) == 2 and all(",
        "                if False and all(",
        [
            "tests/audit/epsilon/test_dp_check_setups.py",
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/commands/test_dp_check.py",
            "tests/defenses/test_dp_bugs.py",
        ],
        "dependent runs not refused",
    ),
    (
        "audit/epsilon/dp_check/end_to_end.py",
        "        torch.manual_seed(seed * 1_000_003 + 2 * r + int(present))",
        "        torch.manual_seed(seed)",
        [
            "tests/audit/epsilon/test_dp_check_setups.py",
            "tests/audit/epsilon/test_dp_check_false_alarms.py",
            "tests/commands/test_dp_check.py",
            "tests/defenses/test_dp_bugs.py",
        ],
        "anchor-pair runs share noise",
    ),
]


def main() -> int:
    root = Path(sys.argv[1])
    only = {int(a) for a in sys.argv[2:]}
    py = sys.executable
    results = []
    for i, (f, old, new, tests, why) in enumerate(MUTANTS):
        if only and i not in only:
            continue
        p = root / f
        src = p.read_text()
        if old not in src:
            results.append((i, f, why, "NOT-FOUND"))
            print(i, "NOT FOUND", f, old[:70], flush=True)
            continue
        p.write_text(src.replace(old, new, 1))
        try:
            t = time.time()
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            r = subprocess.run(
                [py, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=2400,
                env=env,
            )
            status = "killed" if r.returncode != 0 else "SURVIVED"
            results.append((i, f, why, status))
            print(i, status, f, why, f"{time.time() - t:.0f}s", flush=True)
        finally:
            p.write_text(src)
    print(json.dumps({"killed": sum(r[3] == "killed" for r in results), "total": len(results)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
