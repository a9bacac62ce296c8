"""One-line mutant sweep (issue 49): apply each mutant, run the tests most likely to kill
it, record killed / SURVIVED, restore the file; write a JSON and a markdown table.

    python tools/mutants_issue49.py [--only ID,ID] [--shard I/N] [--root DIR]
                                    [--timeout S] [--out PREFIX]

A mutant is ``(id, file, old fragment, new fragment, tests, why)``: the first occurrence
of the exact fragment is replaced (NOT-FOUND when absent). Tests are pytest node ids or
files, run with ``-p no:cacheprovider -q -x`` and ``OMP_NUM_THREADS=1``; any non-zero
exit (or the timeout) kills the mutant. ``--root``: the checkout to mutate (a copy lets
two shards run at once). The file is always restored, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PY = "/work/main/.venv/bin/python"

# test selections shared by several mutants
T_VERDICT = [
    "tests/reports/test_verdict.py",
    "tests/end_to_end/test_verdict_edges.py",
    "tests/reports/test_verdict_inconclusive.py",
    "tests/reports/test_verdict_split_resolution.py",
]
T_RES = [
    "tests/reports/test_resolution.py",
    "tests/end_to_end/test_one_truth.py",
    "tests/attacks/test_frontier_attacks.py",
]
T_CB = "tests/stats/test_canary_bounds.py"
T_FP = "tests/stats/test_formula_pins.py"
T_CB_FAST = [
    f"{T_CB}::test_more_correct_guesses_than_guesses_is_refused",
    f"{T_CB}::test_group_ceiling_is_the_largest_perfect_guess_bound_over_the_grid",
    f"{T_CB}::test_group_delta_known_answers",
    f"{T_CB}::test_group_one_is_steinke_and_pure_dp_group_divides_by_r",
    f"{T_CB}::test_group_bound_splits_alpha_over_the_grid_by_hand",
    f"{T_FP}::test_group_bound_tests_the_group_delta",
]
T_GAUSS = [
    f"{T_CB}::test_gaussian_audit_needs_two_canaries_a_side_and_holds_back_half_of_alpha",
    f"{T_CB}::test_gaussian_regime_rejects_unequal_variances",
    f"{T_FP}::test_gaussian_mu_lower_far_tail_matches_the_noncentral_t_by_quadrature",
    f"{T_FP}::test_noncentral_t_lower_is_never_above_the_exact_bound_for_t_up_to_1e4",
    f"{T_FP}::test_gaussian_one_run_epsilon_is_at_most_the_exact_bound_far_out",
    f"{T_CB}::test_gaussian_mu_bound_coverage_is_nominal",
    f"{T_CB}::test_gaussian_audit_fails_outside_its_regime_randomized_response",
]
T_FPRINT = ["tests/audit/test_fingerprint.py", "tests/audit/test_stale_inputs.py"]
T_FPRINT_NEW = ["tests/audit/test_fingerprint.py"]
T_OUT = ["tests/end_to_end/test_outputs.py"]
T_LOCK = ["tests/ground/test_lock.py"]
T_CR = ["tests/attacks/test_con_recall.py", "tests/attacks/test_frontier_attacks.py"]
T_MK = ["tests/attacks/test_min_k_pp.py", "tests/attacks/test_lm_score_formulas.py"]
T_SC = [
    "tests/stats/test_scores.py",
    "tests/stats/test_metrics.py",
    "tests/stats/test_metrics_ties.py",
]
T_DUP = [
    "tests/audit/epsilon/test_duplicate_record.py::test_run_indices_stop_where_the_pilot_stream_begins",
    "tests/audit/epsilon/test_duplicate_record.py::test_a_bound_equal_to_the_claim_is_not_a_violation",
    "tests/audit/epsilon/test_duplicate_record.py::test_the_crafted_record_is_the_farthest_candidate",
    "tests/audit/epsilon/test_duplicate_record.py::test_bound_passes_false_positives_with_the_runs_without_x_star",
    "tests/audit/epsilon/test_duplicate_record.py",
]
T_SPLIT = [
    "tests/stats/test_split_check.py::test_delong_se_with_member_non_member_ties_by_brute_force",
    "tests/stats/test_split_check.py::test_a_relabelling_tied_with_the_observed_auc_counts_against_it",
    "tests/stats/test_split_check.py::test_one_member_left_after_removing_duplicates_is_not_measured",
    "tests/stats/test_split_check.py",
    "tests/reports/test_verdict_split_resolution.py",
]
T_JOIN = [
    "tests/stats/test_split_check.py::test_a_member_near_duplicate_of_a_text_in_both_sets_is_paired_with_its_non_member",
    "tests/stats/test_split_check.py::test_a_join_at_another_threshold_is_refused",
    "tests/stats/test_split_check_join.py",
    "tests/stats/test_near_duplicates.py",
    "tests/stats/test_split_check.py",
]
T_DIAG = [
    "tests/audit/epsilon/test_claimed_vs_audited.py",
    "tests/defenses/test_dp_bugs.py::test_diagnosis_names_the_audit_threat_model_and_bug_classes",
    "tests/audit/epsilon/test_duplicate_record.py::test_the_violated_diagnosis_points_cross_example_layers_to_this_audit",
    "tests/stats/test_epsilon_bounds_soundness.py",
]
T_EZ = ["tests/attacks/test_ez_mia.py", "tests/attacks/test_frontier_attacks.py"]

V, R = "reports/verdict.py", "reports/resolution.py"
EB, RC, REC = "reports/epsilon_readout.py", "reports/run_comparison.py", "reports/results_record.py"
CB, FPR = "stats/canary_bounds.py", "audit/scale/fingerprint.py"
OUT, LOCK = "audit/outputs.py", "privacy_audit/ground/lock.py"
CR, MK, SC = "attacks/con_recall.py", "attacks/min_k_pp.py", "stats/scores.py"
DUP, SPL = "audit/epsilon/duplicate_record.py", "stats/split_check.py"
BB, ND = "stats/blind_baseline.py", "stats/near_duplicates.py"
AUD, EZ = "audit/epsilon/claimed_vs_audited.py", "attacks/ez_mia.py"

# fmt: off
MUTANTS = [
    # ---- reports/verdict.py ------------------------------------------------------------
    ("V01", V, "return eps_claim is not None and lb is not None and lb > eps_claim", "return eps_claim is not None and lb is not None and lb >= eps_claim", T_VERDICT, "audit_exceeds: a bound equal to the claim is not a violation"),
    ("V02", EB, "cands.append(math.log((t - delta) / f))", "cands.append(math.log((t + delta) / f))", T_VERDICT, "trade-off ε bound: TPR <= e^ε FPR + δ subtracts δ"),
    ("V03", EB, "if t < 1 and 1 - f - delta > 0:", "if t <= 1 and 1 - f - delta > 0:", T_VERDICT, "trade-off ε bound: second inequality undefined at TPR = 1"),
    ("V04", EB, "if c > 0 and (best is None or c > best):", "if c > 0 and (best is None or c < best):", T_VERDICT, "trade-off ε bound keeps the largest candidate"),
    ("V05", V, "value >= c * (1 - 1e-6)", "value >= c * (1 + 1e-6)", T_VERDICT, "AT_CEILING label for a bound equal to its ceiling"),
    ("V06", V, "(b for b in rest if b[\"value\"] > head[\"value\"])", "(b for b in rest if b[\"value\"] >= head[\"value\"])", T_VERDICT, "headline 'larger' list holds only strictly larger bounds"),
    ("V07", V, "if v is not None and not rec.shifted:", "if v is not None:", T_VERDICT, "attack ε bound dropped from the headline under a shifted split"),
    ("V08", V, "if audits and has_claim(rec):", "if audits:", T_VERDICT, "headline: ε audit leads only when a claim was audited"),
    ("V09", V, "    if lb_v > eps_c:\n        reason", "    if lb_v >= eps_c:\n        reason", T_VERDICT, "VIOLATED only when the bound exceeds the claim"),
    ("V10", V, "if ceiling is not None and ceiling <= eps_c:", "if ceiling is not None and ceiling < eps_c:", T_VERDICT, "untestable when the ceiling equals the claim"),
    ("V11", V, "if d_claim is not None and d_audit is not None and d_claim > d_audit:", "if d_claim is not None and d_audit is not None and d_claim >= d_audit:", T_VERDICT, "a claim at the audit's own δ is comparable"),
    ("V12", V, "return int(min(math.ceil(need), MAX_NAMED_SAMPLE + 1))", "return int(min(math.ceil(need), MAX_NAMED_SAMPLE))", T_VERDICT, "'more than MAX members' vs a named size in the inconclusive reason"),
    ("V13", REC, "return p is None or alpha is None or p <= alpha", "return p is None or alpha is None or p < alpha", T_VERDICT, "battery family-wise test rejects at p == alpha"),
    ("V14", V, "if auc_hi is not None and auc_hi < CHANCE_AUC:", "if auc_hi is not None and auc_hi <= CHANCE_AUC:", T_VERDICT, "invalid-attack only when the AUC interval lies strictly below 0.5"),
    ("V15", V, "if tpr_lo is not None and tpr_lo >= HIGH_TPR_CI_LOW:", "if tpr_lo is not None and tpr_lo > HIGH_TPR_CI_LOW:", T_VERDICT, "HIGH at TPR ci_low exactly 0.05"),
    ("V16", V, "unresolved = det is not None and auc_lo is not None and auc_lo < det", "unresolved = det is not None and auc_lo is not None and auc_lo <= det", T_VERDICT, "AUC at exactly the detectable AUC is resolved"),
    ("V17", V, "if auc_lo is not None and auc_lo >= HIGH_AUC_CI_LOW and not unresolved:", "if auc_lo is not None and auc_lo > HIGH_AUC_CI_LOW and not unresolved:", T_VERDICT, "HIGH at AUC ci_low exactly 0.6"),
    ("V18", V, "if auc_lo is not None and auc_lo >= HIGH_AUC_CI_LOW and not unresolved:", "if auc_lo is not None and auc_lo >= HIGH_AUC_CI_LOW:", T_VERDICT, "AUC-route HIGH gated by the split check's resolution"),
    ("V19", V, "    if lb_v is not None and lb_v > 0:\n        return \"moderate\"", "    if lb_v is not None and lb_v >= 0:\n        return \"moderate\"", T_VERDICT, "MODERATE by ε bound only when the bound is > 0"),
    ("V20", V, "if auc_lo is not None and auc_lo > CHANCE_AUC and beats_chance:", "if auc_lo is not None and auc_lo > CHANCE_AUC:", T_VERDICT, "MODERATE by AUC gated by the family-wise test"),
    ("V21", V, "if auc_lo is not None and auc_lo > CHANCE_AUC and beats_chance:", "if auc_lo is not None and auc_lo >= CHANCE_AUC and beats_chance:", T_VERDICT, "MODERATE needs the AUC interval to exclude 0.5"),
    ("V22", V, "auc_ok = auc_hi is not None and auc_hi < HIGH_AUC_CI_LOW", "auc_ok = auc_hi is not None and auc_hi <= HIGH_AUC_CI_LOW", T_VERDICT, "LOW needs AUC ci_high strictly below 0.6"),
    ("V23", V, "tpr_ok = tpr_hi is not None and tpr_hi < HIGH_TPR_CI_LOW", "tpr_ok = tpr_hi is not None and tpr_hi <= HIGH_TPR_CI_LOW", T_VERDICT, "LOW needs TPR ci_high strictly below 0.05"),
    ("V24", V, "if auc_ok and tpr_ok:", "if auc_ok or tpr_ok:", T_VERDICT, "LOW needs both intervals below HIGH"),
    ("V25", V, "at_least = max(at_least, 100)", "at_least = max(at_least, 10)", T_VERDICT, "the named 100 non-members needed for 1% FPR"),
    ("V26", REC, "return max(candidates, key=lambda a: a.value(\"auc\") or 0.0)", "return min(candidates, key=lambda a: a.value(\"auc\") or 0.0)", T_VERDICT, "strongest attack fallback = highest AUC"),
    ("V27", V, "if blind.get(\"subsampled\") is not True or det is None:", "if det is None:", T_VERDICT, "split resolution rule applies only to a sub-sampled check"),
    ("V28", RC, "overlap = o_auc[1] <= b_auc[2] and b_auc[1] <= o_auc[2]", "overlap = o_auc[1] < b_auc[2] and b_auc[1] <= o_auc[2]", T_VERDICT + ["tests/reports/test_html.py"], "compare: touching CIs count as overlapping"),
    ("V29", RC, "if o_auc[0] > b_auc[0]:", "if o_auc[0] >= b_auc[0]:", T_VERDICT + ["tests/reports/test_html.py"], "compare: equal AUCs name no more-vulnerable run"),
    ("V30", V, "    if rec.shifted:\n        # the attacks' bounds", "    if not rec.shifted:\n        # the attacks' bounds", T_VERDICT, "attack bounds are not evidence under a shifted split"),
    ("V31", V, "status = \"unmeasured\" if claimed_epsilon(rec) else \"no-claim\"", "status = \"no-claim\" if claimed_epsilon(rec) else \"unmeasured\"", T_VERDICT, "claim status of a split-shifted verdict"),
    # ---- reports/resolution.py ----------------------------------------------------------
    ("R01", R, "        if not ok:\n", "        if ok:\n", T_RES, "a TPR the rule calls unresolved is never shown"),
    ("R02", R, "n_non = n_non if isinstance(n_non, int) and not isinstance(n_non, bool) else None", "n_non = n_non if isinstance(n_non, int) else None", T_RES, "a boolean n_nonmembers is not a sample size"),
    ("R03", R, "FPR_LADDER = tuple(sorted(REPORTED_FPRS))", "FPR_LADDER = tuple(sorted(REPORTED_FPRS, reverse=True))", T_RES, "the summary leads with the LOWEST resolvable FPR"),
    ("R04", R, "if not isinstance(needs, int) or isinstance(needs, bool):", "if not isinstance(needs, int):", T_RES, "a boolean needs_nonmembers is recomputed"),
    ("R05", R, "out.update(resolvable=True, metric=m, reason=\"\")", "out.update(resolvable=False, metric=m, reason=\"\")", T_RES, "a resolved TPR is shown"),
    ("R06", R, "as_finite(m.get(\"ci_low\")), as_finite(m.get(\"ci_high\"))", "as_finite(m.get(\"ci_high\")), as_finite(m.get(\"ci_low\"))", T_RES, "interval width sign: ci_high - ci_low"),
    ("R07", R, "return f\"{100 * fpr:g}%\"", "return f\"{fpr:g}%\"", T_RES, "label 'TPR @ 1% FPR'"),
    ("R08", R, "if m.get(\"below_resolution\") is True:", "if m.get(\"below_resolution\") is False:", T_RES, "a stored unresolved flag wins"),
    # ---- stats/canary_bounds.py -------------------------------------------------------
    ("C01", CB, "        return r * delta\n", "        return (r - 1) * delta\n", T_CB_FAST, "δ_r at ε = 0 is r δ"),
    ("C02", CB, "log_sum = r * epsilon + math.log(", "log_sum = (r - 1) * epsilon + math.log(", T_CB_FAST, "δ_r = δ (e^{rε} - 1)/(e^ε - 1)"),
    ("C03", CB, "return min(1.0, delta * math.exp(log_sum))", "return max(1.0, delta * math.exp(log_sum))", T_CB_FAST, "δ_r capped at 1"),
    ("C04", CB, "return _one_run_p_value_fn(m, r, v, dg)(group * eps)", "return _one_run_p_value_fn(m, r, v, dg)(eps)", T_CB_FAST, "group test at r ε"),
    ("C05", CB, "if v == 0 or p(0.0) > alpha:", "if v == 0 or p(0.0) >= alpha:", T_CB_FAST, "ε = 0 rejected only when p <= α"),
    ("C06", CB, "        if p(mid) <= alpha:\n", "        if p(mid) < alpha:\n", T_CB_FAST, "bisection keeps rejected ε below"),
    ("C07", CB, "    return lo\n\n\ndef one_run_group_epsilon", "    return hi\n\n\ndef one_run_group_epsilon", T_CB_FAST, "the bound is the last REJECTED ε (conservative side)"),
    ("C08", CB, "if r > m or v > r:", "if r > m:", T_CB_FAST + [f"{T_CB}::test_one_run_bound_sound_on_randomized_response_with_repetition"], "refuse correct > guesses"),
    ("C09", CB, "a_k = alpha / len(grid)", "a_k = alpha", T_CB_FAST, "Bonferroni over the (k+, k-) grid"),
    ("C10", CB, "ceiling = max(ceiling, _group_eps(", "ceiling = min(ceiling, _group_eps(", T_CB_FAST, "design ceiling is the max over the grid"),
    ("C11", CB, "if best is None or eps > best[\"epsilon\"]:", "if best is None or eps < best[\"epsilon\"]:", T_CB_FAST, "best grid entry = largest bound"),
    ("C12", CB, "stats.norm.isf(alpha - a)", "stats.norm.isf(alpha + a)", T_GAUSS, "split bound spends α - a on the normal tail"),
    ("C13", CB, "level = alpha * (1.0 - NCT_LEVEL_MARGIN)", "level = alpha * (1.0 + NCT_LEVEL_MARGIN)", T_GAUSS, "stricter level keeps nc below the exact root"),
    ("C14", CB, "    df = n1 + n2 - 2\n", "    df = n1 + n2 - 1\n", T_GAUSS, "pooled t degrees of freedom"),
    ("C15", CB, "\"mu_lo\": float(nc_lo * scale)", "\"mu_lo\": float(nc_lo / scale)", T_GAUSS, "μ_lo = nc_lo · sqrt(1/n1 + 1/n2)"),
    ("C16", CB, "if n1 < 2 or n2 < 2:", "if n1 < 1 or n2 < 2:", T_GAUSS + [f"{T_CB}::test_gaussian_audit_sound_in_its_regime_white_box_dpsgd"], "variance needs 2 present canaries"),
    ("C17", CB, "ok = bool(enough and normal_p > level and levene_p > level)", "ok = bool(enough and normal_p > level)", T_GAUSS, "regime ok needs equal variances"),
    ("C18", CB, "sampling = 1.0 - (1.0 - confidence) * (1.0 - approximation_share)", "sampling = 1.0 - (1.0 - confidence)", T_GAUSS, "half of α held back for the CLT approximation"),
    ("C19", CB, "eps = gaussian_mechanism_epsilon(mu[\"mu_lo\"], delta) if mu[\"mu_lo\"] > 0 else 0.0", "eps = gaussian_mechanism_epsilon(mu[\"mu_hat\"], delta) if mu[\"mu_lo\"] > 0 else 0.0", T_GAUSS, "ε from the LOWER bound on μ"),
    ("C20", CB, "-np.sort(-s[~inc])[None], 0.01, 1.0 - confidence", "-np.sort(-s[~inc])[None], 0.01, (1.0 - confidence) / 2", [f"{T_CB}::test_tpr_at_1pct_fpr_interval_is_at_the_stated_confidence_by_hand", f"{T_CB}::test_tpr_at_1pct_fpr_has_ci"], "TPR@1% interval at the stated confidence"),
    ("C21", CB, "    if dg >= 1.0:\n        return 1.0", "    if dg > 1.0:\n        return 1.0", T_CB_FAST, "δ_r = 1 tests nothing (p = 1)"),
    ("C22", CB, "    if t0 >= 0.0:\n        return 0.0", "    if t0 > 0.0:\n        return 0.0", T_GAUSS, "nc = 0 when even nc = 0 reaches the level"),
    # ---- audit/scale/fingerprint.py -----------------------------------------------------
    ("F01", FPR, "if started - max(st.st_mtime_ns, st.st_ctime_ns) / 1e9 >= RACY_SECONDS:", "if started - min(st.st_mtime_ns, st.st_ctime_ns) / 1e9 >= RACY_SECONDS:", T_FPRINT, "racy-clean: the later of mtime/ctime decides"),
    ("F02", FPR, "if cache is not None and unchanged:", "if cache is not None:", T_FPRINT, "no hash cached for a file that changed while hashed"),
    ("F03", FPR, "if k not in (\"mtime_ns\",)}", "if k not in (\"sha256\",)}", T_FPRINT, "contents, not mtimes, decide a change"),
    ("F04", FPR, "dirs[:] = sorted(d for d in dirs if not d.startswith(\".\"))", "dirs[:] = sorted(d for d in dirs)", T_FPRINT, "hidden directories are not inputs"),
    ("F05", FPR, "                    if name.startswith(\".\"):", "                    if name.startswith(\"..\"):", T_FPRINT, "hidden files are not inputs"),
    ("F06", FPR, "if old.get(\"format\") != FORMAT:", "if old.get(\"format\") == FORMAT:", T_FPRINT, "an old manifest format re-runs everything"),
    ("F07", FPR, "if before.get(\"path\") != fp.get(\"path\"):", "if before.get(\"path\") == fp.get(\"path\"):", T_FPRINT, "a renamed input is reported"),
    ("F08", FPR, "elif _content(before) != _content(fp):", "elif before.get(\"sha256\") != fp.get(\"sha256\"):", T_FPRINT, "a changed file inside a directory input is reported"),
    ("F09", FPR, "fresh = dict(list(fresh.items())[-_CACHE_LIMIT:])", "fresh = dict(list(fresh.items())[:_CACHE_LIMIT])", T_FPRINT, "cache keeps the newest entries"),
    ("F10", FPR, "if isinstance(v, str) and v != \"fixtures\":", "if isinstance(v, str):", T_FPRINT, "bundled fixtures are not a file input"),
    ("F11", FPR, "for key in (\"corpus\", \"members\", \"nonmembers\", \"test\", \"public\"):", "for key in (\"corpus\", \"members\", \"nonmembers\", \"test\"):", T_FPRINT, "the public split is an input too"),
    ("F12", FPR, "return self.dirty.get(key) or self.entries.get(key)", "return self.entries.get(key)", T_FPRINT, "hashes computed this run are reused before flush"),
    ("F13", FPR, "if resume and (rd.path / MANIFEST).is_file():", "if (rd.path / MANIFEST).is_file():", T_FPRINT, "changes are noted on --resume only"),
    ("F14", FPR, "    if size <= SEGMENT:\n", "    if size < SEGMENT:\n", T_FPRINT, "a file of exactly one segment is hashed flat"),
    ("F15", FPR, "if not refs and isinstance(cfg.own_model.get(\"reference_dir\"), str):", "if isinstance(cfg.own_model.get(\"reference_dir\"), str):", T_FPRINT, "reference_dirs wins over reference_dir"),
    # ---- audit/outputs.py ---------------------------------------------------------------
    ("O01", OUT, "if ro == rp or (io_ is not None and io_ == ip):", "if ro == rp:", T_OUT, "a hard link of an input is refused"),
    ("O02", OUT, "inside = rp == ro or rp in ro.parents", "inside = rp in ro.parents", T_OUT, "the input folder itself as output is refused"),
    ("O03", OUT, "if (inside and o.exists()) or (io_ is not None and io_ in inodes):", "if inside or (io_ is not None and io_ in inodes):", T_OUT, "a NEW file inside an input folder is allowed"),
    ("O04", OUT, "if ro == r2 or (io_ is not None and io_ == i2):", "if ro == r2:", T_OUT, "two outputs naming one file by a link"),
    ("O05", OUT, "if rp == rd or rd in rp.parents:", "if rp == rd:", T_OUT, "an output folder holding an input is refused"),
    ("O06", OUT, "if p.name == \"results.json\":", "if p.name == \"report.html\":", T_OUT, "a run's siblings are inputs of results.json readers"),
    ("O07", OUT, "if q.name != p.name and q.exists():", "if q.name != p.name:", T_OUT, "only existing siblings are protected"),
    ("O08", OUT, "what = FLAGS.get(key, key) if flags else key", "what = key", T_OUT, "one-line commands name inputs by their flags"),
    ("O09", OUT, "if len(out) >= _MAX_DIR_FILES:", "if len(out) >= 1:", T_OUT, "every file of an input folder checked for links"),
    # ---- privacy_audit/ground/lock.py ---------------------------------------------------
    ("L01", LOCK, "    if host and host != socket.gethostname():\n        return pid, f\"PID {pid} on host {host}\"\n    if not _alive(pid):", "    if host != socket.gethostname():\n        return pid, f\"PID {pid} on host {host}\"\n    if not _alive(pid):", T_LOCK, "a record without a host is local"),
    ("L02", LOCK, "if pid == os.getpid() or not _alive(pid):", "if not _alive(pid):", T_LOCK, "our own record is not a live holder"),
    ("L03", LOCK, "if owner is not None or (not text.strip() and age < FRESH_SECONDS):", "if owner is not None:", T_LOCK, "a fresh empty lock is respected (fallback)"),
    ("L04", LOCK, "FRESH_SECONDS = 10.0", "FRESH_SECONDS = 0.0", T_LOCK, "fresh-lock window"),
    ("L05", LOCK, "if taken != text:", "if taken == text:", T_LOCK, "a stale lock is taken over, a fresh one put back"),
    ("L06", LOCK, "if any((self.dir / \"tasks\").glob(\"*.json\")):", "if any((self.dir / \"tasks\").glob(\"*.jsonl\")):", T_LOCK, "a directory with finished tasks is kept"),
    ("L07", LOCK, "if not self.created_dir or not self.dir.is_dir():", "if not self.dir.is_dir():", T_LOCK + ["tests/project/test_layout.py"], "a directory the run did not create is never removed"),
    ("L08", LOCK, "return fields[19] if len(fields) > 19 else \"\"", "return fields[18] if len(fields) > 19 else \"\"", T_LOCK, "process start time identifies a reused PID"),
    ("L09", LOCK, "same = os.fstat(fd).st_ino == os.stat(self.file).st_ino", "same = True", T_LOCK, "retry on a lock file unlinked by its releasing holder"),
    ("L10", LOCK, "    if started and _start_time(pid) and _start_time(pid) != started:\n        return None  # the PID", "    if started and _start_time(pid) != started:\n        return None  # the PID", T_LOCK, "no start time available: the PID is trusted"),
    # ---- attacks/con_recall.py ----------------------------------------------------------
    ("CR01", CR, "return (non - gamma * mem) / np.minimum(unc, -1e-12)", "return (mem - gamma * non) / np.minimum(unc, -1e-12)", T_CR, "Con-ReCall numerator order"),
    ("CR02", CR, "/ np.minimum(unc, -1e-12)", "/ np.maximum(unc, -1e-12)", T_CR, "denominator kept negative"),
    ("CR03", CR, "pick = rng.permutation(len(texts))[: k + 1]", "pick = rng.permutation(len(texts))[:k]", T_CR, "pool of shots + 1 for leave-one-out"),
    ("CR04", CR, "return [t for t in pool if t != text][:k]", "return [t for t in pool][:k]", T_CR, "a text never conditions on itself"),
    ("CR05", CR, "if self.public is not None and len(self.public) > self.shots:", "if self.public is not None and len(self.public) >= self.shots:", T_CR, "public split used only with > shots texts"),
    ("CR06", CR, "if len(members) <= self.shots or len(nonmembers) <= self.shots:", "if len(members) < self.shots or len(nonmembers) < self.shots:", T_CR, "refuse pools of <= shots texts"),
    ("CR07", CR, "if ids[: len(pre)] != pre or len(ids) == len(pre):", "if ids[: len(pre)] != pre:", T_CR, "a prefix that swallowed x is refused"),
    ("CR08", CR, "if not np.isfinite(gamma) or gamma < 0:", "if not np.isfinite(gamma) or gamma <= 0:", T_CR, "gamma = 0 is allowed"),
    # ---- attacks/min_k_pp.py ------------------------------------------------------------
    ("MK01", MK, "sigma = np.sqrt(np.maximum(", "sigma = np.abs(np.maximum(", T_MK, "σ is the square root of the variance"),
    ("MK02", MK, "np.maximum(\n        sigma, SIGMA_FLOOR", "np.minimum(\n        sigma, SIGMA_FLOOR", T_MK, "σ floored, not capped"),
    ("MK03", MK, "n = max(1, int(np.ceil(k * z.size)))", "n = max(1, int(np.floor(k * z.size)))", T_MK, "⌈k·T⌉ lowest tokens"),
    ("MK04", MK, "out.append(float(np.sort(z)[:n].mean()))", "out.append(float(np.sort(z)[-n:].mean()))", T_MK, "the LOWEST z_t"),
    ("MK05", MK, "    if not 0 < k <= 1:\n        raise ValueError(f\"min-k++ fraction", "    if not 0 < k < 1:\n        raise ValueError(f\"min-k++ fraction", T_MK, "k = 1 (all tokens) allowed"),
    ("MK06", MK, "            out.append(0.0)\n", "            out.append(-1.0)\n", T_MK, "an empty sequence scores 0"),
    ("MK07", MK, "(np.asarray(stats.log_probs) - np.asarray(stats.mean_log_prob))", "(np.asarray(stats.log_probs) + np.asarray(stats.mean_log_prob))", T_MK, "z_t centres on μ_t"),
    # ---- stats/scores.py --------------------------------------------------------------
    ("S01", SC, "if n_in == 0 or n_in == mb.shape[0]:", "if n_in == 0:", T_SC, "refuse members-only input"),
    ("S02", SC, "if not (0.0 < c < 1.0):", "if not (0.0 <= c < 1.0):", T_SC, "confidence 0 refused"),
    ("S03", SC, "int(n_boot) != n_boot or int(n_boot) < 1:", "int(n_boot) != n_boot or int(n_boot) < 0:", T_SC, "n_boot = 0 refused"),
    ("S04", SC, "h_in, h_out = idx_in.size // 2, idx_out.size // 2", "h_in, h_out = (idx_in.size + 1) // 2, idx_out.size // 2", T_SC + ["tests/audit/epsilon/test_dp_check_known_answers.py"], "half B (counting) never the smaller"),
    ("S05", SC, "nxt = np.minimum.accumulate(pos[:, ::-1], axis=1)[:, ::-1]", "nxt = np.maximum.accumulate(pos[:, ::-1], axis=1)[:, ::-1]", T_SC, "tied scores share their group end's counts"),
    ("S06", SC, "(tp0[:, 1:] + tp0[:, :-1])", "(tp0[:, 1:] + tp0[:, 1:])", T_SC, "trapezoid rule: ties count half"),
    ("S07", SC, "max_fpr * n_out[i] * (1 + 1e-12), side=\"right\"))", "max_fpr * n_out[i] * (1 + 1e-12), side=\"left\"))", T_SC, "FPR exactly at max_fpr allowed"),
    ("S08", SC, "out[i] = tp[i, k - 1] / n_in[i] if k > 0 else 0.0", "out[i] = tp[i, k - 1] / n_out[i] if k > 0 else 0.0", T_SC, "TPR over members"),
    ("S09", SC, "return np.maximum(np.max(tp / n_in - fp / n_out, axis=1), 0.0)", "return np.maximum(np.max(tp / n_in - fp / n_out, axis=1), -1.0)", T_SC, "advantage floored at the (0, 0) point"),
    ("S10", SC, "return np.where(best_gain > 0, thr, np.inf)", "return np.where(best_gain >= 0, thr, np.inf)", T_SC, "no threshold when nothing beats (0, 0)"),
    ("S11", SC, "here / 2.0 + below / 2.0", "below", T_SC, "threshold at the midpoint"),
    ("S12", SC, "s2 = np.einsum(\"ij,ij->i\", wn, 2 * tp - wm, dtype=np.int64)", "s2 = np.einsum(\"ij,ij->i\", wn, 2 * tp + wm, dtype=np.int64)", T_SC, "bootstrap AUC: members strictly above + half the tied"),
    ("S13", SC, "bad = (n_in == 0) | (n_out == 0)", "bad = n_in == 0", T_SC, "a resample with no non-member is NaN"),
    ("S14", SC, "best = np.maximum(at_end.max(axis=1), 0.0)", "best = at_end.max(axis=1)", T_SC, "bootstrap advantage floored at 0"),
    ("S15", SC, "for b in np.flatnonzero(bound[i] > best[i]):", "for b in np.flatnonzero(bound[i] >= best[i]):", T_SC, "block pruning (more blocks scanned)"),
    ("S16", SC, "self.has_ties = bool(self.tp.size < self.scores.size)", "self.has_ties = bool(self.tp.size <= self.scores.size)", T_SC, "has_ties flag"),
    ("S17", SC, "edges[-1] = size", "edges[-1] = size - 1", T_SC, "Poisson table covers every 16-bit draw"),
    # ---- audit/epsilon/duplicate_record.py ----------------------------------------------
    ("D01", DUP, "if self.duplicates < 2:", "if self.duplicates < 1:", T_DUP, "K >= 2 copies"),
    ("D02", DUP, "if self.batch_size < self.duplicates + 1:", "if self.batch_size < self.duplicates:", T_DUP, "q = 1 needs a batch of K + 1"),
    ("D03", DUP, "if not 0 <= run < _PILOT_OFFSET // 2:", "if not 0 <= run < _PILOT_OFFSET:", T_DUP, "pilot and evaluation seed streams disjoint"),
    ("D04", DUP, "+ 2 * int(run) + int(present)", "+ int(run) + int(present)", T_DUP, "no two runs share a seed"),
    ("D05", DUP, "fp, fn = int((s_out >= threshold).sum()), int((s_in < threshold).sum())", "fp, fn = int((s_out > threshold).sum()), int((s_in < threshold).sum())", T_DUP, "a score at the threshold is a positive"),
    ("D06", DUP, "\"claimed\": max(claims)", "\"claimed\": min(claims)", T_DUP, "never overstate a violation"),
    ("D07", DUP, "\"violated\": bool(b[\"eps\"] > ev[\"claimed\"])", "\"violated\": bool(b[\"eps\"] >= ev[\"claimed\"])", T_DUP, "VIOLATED only above the claim"),
    ("D08", DUP, "t = 0.5 * float(sums[True] @ u + sums[False] @ u)", "t = float(sums[True] @ u + sums[False] @ u)", T_DUP, "threshold at the midpoint"),
    ("D09", DUP, "return int(torch.argmax((h[1:] - h[0]).norm(dim=1)))", "return int(torch.argmin((h[1:] - h[0]).norm(dim=1)))", T_DUP, "x* farthest from x_d"),
    ("D10", DUP, "epsilon_lower_bound_from_counts(fp, len(s_out), fn, len(s_in), delta, confidence)", "epsilon_lower_bound_from_counts(fn, len(s_out), fp, len(s_in), delta, confidence)", T_DUP, "fp and fn in their places"),
    # ---- stats/blind_baseline.py, stats/split_check.py: DeLong, SE, power, permutation ---
    ("SC01", BB, "se = float(np.sqrt(np.var(v10, ddof=1) / v10.size", "se = float(np.sqrt(np.var(v10, ddof=0) / v10.size", T_SPLIT, "DeLong SE uses sample variances"),
    ("SC02", BB, "    z = float(ndtri(0.5 + confidence / 2))\n    return {\n        \"value\": auc,", "    z = float(ndtri(confidence))\n    return {\n        \"value\": auc,", T_SPLIT, "two-sided DeLong z"),
    ("SC03", BB, "\"ci_low\": max(0.0, auc - z * se),", "\"ci_low\": max(0.0, auc - se),", T_SPLIT, "DeLong interval half-width z SE"),
    ("SC04", BB, "var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1])", "var = (s10[0, 0] + s10[1, 1] + 2 * s10[0, 1])", T_SPLIT, "paired DeLong difference subtracts the covariance"),
    ("SC05", BB, "v10 = (below + 0.5 * tie) / neg.size", "v10 = (below + tie) / neg.size", T_SPLIT, "ties count half in the placements"),
    ("SC06", BB, "above = pos.size - np.searchsorted(pos_sorted, neg, \"right\")", "above = pos.size - np.searchsorted(pos_sorted, neg, \"left\")", T_SPLIT, "v01 counts members strictly above"),
    ("SC07", BB, "+ float(ndtri(power))) * null_sd", "- float(ndtri(power))) * null_sd", T_SPLIT, "detectable AUC adds z_power"),
    ("SC08", SPL, "detectable_auc(perm[\"null_sd\"], self.confidence)", "detectable_auc(perm[\"null_sd\"], 0.95)", T_SPLIT, "power term at the check's own level"),
    ("SC09", SPL, "\"se\": max(perm[\"null_sd\"], dl[\"se\"]),", "\"se\": min(perm[\"null_sd\"], dl[\"se\"]),", T_SPLIT, "reported SE = max(null SD, DeLong SE)"),
    ("SC10", BB, "below = max(q_high - 0.5, z * delong_se)", "below = max(0.5 - q_low, z * delong_se)", T_SPLIT, "lower half-width from the upper null quantile"),
    ("SC11", BB, "return max(0.0, auc - below), min(1.0, auc + above)", "return max(0.0, auc - below), min(1.0, auc + below)", T_SPLIT, "upper half-width from the lower null quantile"),
    ("SC12", BB, "auc[\"p_value\"] <= (1 - confidence) / 2 and auc[\"ci_low\"] > 0.5", "auc[\"p_value\"] <= (1 - confidence) / 2", T_SPLIT, "shifted needs the interval above 0.5"),
    ("SC13", BB, "auc[\"p_value\"] <= (1 - confidence) / 2 and", "auc[\"p_value\"] <= (1 - confidence) and", T_SPLIT, "one-sided level (1-c)/2"),
    ("SC14", BB, "exceed = int(np.sum(null >= observed - 1e-12))", "exceed = int(np.sum(null > observed + 1e-12))", T_SPLIT, "ties with the observed count against it"),
    ("SC15", BB, "\"p_value\": (1 + exceed) / (1 + n_perm),", "\"p_value\": exceed / n_perm,", T_SPLIT, "Phipson-Smyth p never 0"),
    ("SC16", BB, "k = int(np.floor((1 - confidence) / 2 * (n_perm + 1) + 1e-9))", "k = int(np.ceil((1 - confidence) / 2 * (n_perm + 1) + 1e-9))", T_SPLIT, "null quantile index floors"),
    ("SC17", BB, "q_hi = float(srt[n_perm - k]) if k >= 1 else np.inf", "q_hi = float(srt[n_perm - k - 1]) if k >= 1 else np.inf", T_SPLIT, "k-th largest null AUC"),
    ("SC18", SPL, "if self.permutations < 19:", "if self.permutations < 20:", T_SPLIT, "19 relabellings allowed"),
    ("SC19", SPL, "if len(keep_m) < 2 or len(keep_n) < 2:", "if len(keep_m) < 1 or len(keep_n) < 2:", T_SPLIT, "not-measured with < 2 members left"),
    # ---- stats/near_duplicates.py, stats/split_check.py: near-duplicate joins ------------
    ("SJ01", ND, "    ok = jac >= jaccard\n", "    ok = jac > jaccard\n", T_JOIN, "a pair at exactly the threshold is a near-duplicate"),
    ("SJ02", ND, "jac = inter / (size[u] + size[v] - inter)", "jac = inter / (size[u] + size[v])", T_JOIN, "Jaccard = |A&B| / |A|B|"),
    ("SJ03", ND, "a_list = [np.flatnonzero(has_m & has_n & nonempty)]", "a_list = [np.flatnonzero(has_m & has_n)]", T_JOIN, "an empty text duplicates nothing"),
    ("SJ04", ND, "return (has_m[a] & has_n[b]) | (has_n[a] & has_m[b])", "return has_m[a] & has_n[b]", T_JOIN, "cross-set filter in both orientations"),
    ("SJ05", ND, "    ok = has_m[a] & has_n[b]\n", "    ok = has_m[a] | has_n[b]\n", T_JOIN, "only member x non-member pairs"),
    ("SJ06", ND, "+ 1 + _EXTRA, 1, size)", "+ _EXTRA, 1, size)", T_JOIN, "prefix filter length (|x| - ceil(t|x|) + 1)"),
    ("SJ07", ND, "np.ceil(np.log(miss) / np.log1p(-p) - 1e-12)", "np.floor(np.log(miss) / np.log1p(-p) - 1e-12)", T_JOIN, "fewest bands meeting the miss bound"),
    ("SJ08", SPL, "\"exact_pairs\": sum(1 for *_, v in pairs if v >= 1.0)", "\"exact_pairs\": sum(1 for *_, v in pairs if v > 1.0)", T_JOIN, "identical-after-normalising count"),
    ("SJ09", SPL, "if len(members) <= MAX_BLIND_PER_CLASS and len(nonmembers) <= MAX_BLIND_PER_CLASS:", "if len(members) < MAX_BLIND_PER_CLASS and len(nonmembers) <= MAX_BLIND_PER_CLASS:", T_JOIN, "one shared join when no sub-sampling"),
    ("SJ10", ND, "j = n_pos[np.repeat(n_off[b], rep) + k % cn_r]", "j = n_pos[np.repeat(n_off[b], rep) + k // cn_r]", T_JOIN, "expand unique pairs to every copy"),
    ("SJ11", ND, "if join.jaccard != jaccard or join.uid.size != nm + len(nonmembers):", "if join.uid.size != nm + len(nonmembers):", T_JOIN, "a join at another threshold is refused"),
    ("SJ12", ND, "    if which.size < 2:\n        return empty, empty, np.zeros(0)", "    if which.size < 1:\n        return empty, empty, np.zeros(0)", T_JOIN, "no pairs among < 2 texts"),
    # ---- audit/epsilon/claimed_vs_audited.py: VIOLATED and its diagnosis -------------------------------
    ("A01", AUD, "if a.get(\"status\") == \"ok\" and a.get(\"exceeds_claim\") and not a.get(\"asymptotic\"):", "if a.get(\"status\") == \"ok\" and a.get(\"exceeds_claim\"):", T_DIAG, "asymptotic bounds are never evidence"),
    ("A02", AUD, "        if a.get(\"status\") == \"ok\" and a.get(\"exceeds_claim\") and not a.get(\"asymptotic\")\n    ]", "        if a.get(\"status\") == \"ok\" and a.get(\"exceeds_claim\")\n    ]", T_DIAG, "diagnosis: asymptotic audits do not 'catch'"),
    ("A03", AUD, "or a[\"ceiling\"] <= claimed for a in audits", "or a[\"ceiling\"] < claimed for a in audits", T_DIAG, "untestable when every ceiling is at or below the claim"),
    ("A04", AUD, "declared = bool({\"gradient-canary\", REALISED} & names)", "declared = bool({\"gradient-canary\"} & names)", T_DIAG, "realised-schedule audit points to accounting"),
    ("A05", AUD, "if white and not black:", "if white:", T_DIAG, "noise class only when black-box audits saw nothing"),
    ("A06", AUD, "white = any(n.startswith(\"one-run white-box\") for n in names)", "white = all(n.startswith(\"one-run white-box\") for n in names)", T_DIAG, "any white-box canary audit"),
    ("A07", AUD, "black = any(n.startswith(\"input-canaries\") for n in names) or bool(", "black = False and any(n.startswith(\"input-canaries\") for n in names) or bool(", T_DIAG, "input canaries are black-box evidence"),
    ("A08", AUD, "if tradeoff is not None and tradeoff.get(\"violated\"):\n        caught.append(", "if False:\n        caught.append(", T_DIAG, "the trade-off test appears among caught_by"),
    ("A09", AUD, "{\"diagnosis\": diagnose(audits, tradeoff)} if status == \"violated\" else {}", "{\"diagnosis\": diagnose(audits, tradeoff)} if status != \"no-claim\" else {}", T_DIAG, "diagnosis only for VIOLATED"),
    ("A10", AUD, "if real.steps <= declared.steps and real.sample_rate <= declared.sample_rate:", "if real.steps < declared.steps and real.sample_rate <= declared.sample_rate:", T_DIAG, "realised audit only when the schedule is contradicted"),
    ("A11", AUD, "\"exceeds_claim\": claimed is not None and best[\"epsilon\"] > claimed,", "\"exceeds_claim\": claimed is not None and best[\"epsilon\"] >= claimed,", T_DIAG, "input canaries exceed only above the claim"),
    ("A12", AUD, "    elif evidence:\n        status = \"violated\"", "    elif len(evidence) > 1:\n        status = \"violated\"", T_DIAG, "one piece of evidence is a violation"),
    # ---- attacks/ez_mia.py: edge cases ----------------------------------------------------
    ("E01", EZ, "if ignore_first and error.size:", "if error.size:", T_EZ, "ignore_first=False keeps position 0"),
    ("E02", EZ, "        error[0] = False\n", "        error[-1] = False\n", T_EZ, "the FIRST position is dropped"),
    ("E03", EZ, "if int(error.sum()) < min_tokens:", "if int(error.sum()) <= min_tokens:", T_EZ, "exactly min_tokens error positions are scored"),
    ("E04", EZ, "positive = float(delta[delta > 0].sum())", "positive = float(delta[delta >= 0].sum())", T_EZ, "zeros add nothing"),
    ("E05", EZ, "if negative == 0.0:", "if negative < 0.0:", T_EZ, "no negative shift gives 0"),
    ("E06", EZ, "error = top1 != ids", "error = top1 == ids", T_EZ, "error zone = wrong top-1"),
    ("E07", EZ, "negative = float(-delta[delta < 0].sum())", "negative = float(delta[delta < 0].sum())", T_EZ, "negative sum is a magnitude"),
    ("E08", EZ, "if not np.array_equal(t.token_ids, r.token_ids):", "if False:", T_EZ, "refuse a reference scored on other tokens"),
    ("E09", EZ, "MIN_TOKENS = 2", "MIN_TOKENS = 1", T_EZ, "the paper's min_tokens"),
    ("E10", EZ, "if t.top1_ids is None:", "if False:", T_EZ, "refuse a target without top-1 tokens"),
]
# fmt: on


#: survivors with no observable behaviour change, and why (reported instead of a test)
EQUIVALENT = {
    "C05": "p(ε) is continuous and increasing, so at p(0) = α exactly inf{ε : p(ε) > α} = 0: "
    "the early return gives what the search would",
    "C06": "differs only when p(mid) == α exactly at a bisection point; the answer moves by "
    "less than the bisection tolerance",
    "C21": "at δ_r = 1 the one-run p-value is 1 anyway (_group_p(100, 50, 50, 0.5, 3, 0) = 1.0 "
    "on both): the early return only saves work",
    "C22": "at tail(0) == 0 exactly brentq returns the root 0 and the step-down loop does not "
    "run: 0 either way",
    "E04": "a zero shift adds 0 to the positive sum (pinned by test_a_zero_shift_adds_to_neither_side)",
    "E09": "with one error position there is no positive or no negative shift, so the ratio is "
    "0 for min_tokens 1 and 2 alike",
    "S09": "every row ends at TPR = FPR = 1 (gain 0), so the maximum is >= 0 and the floor "
    "never binds (NaN rows stay NaN)",
    "S14": "the last block end (always allowed) is the full counts, gain 0, so the maximum is "
    ">= 0 before the floor; NaN rows are overwritten",
    "S15": "scanning a block whose bound only equals the best cannot raise the maximum; it "
    "only costs time",
    "SJ05": "the expansion multiplies a's member copies by b's non-member copies, so a pair "
    "the wider filter lets through (a without members or b without non-members) has 0 copies",
    "SJ09": "the shared join gives the separate joins' pairs (Join's docstring; the LSH "
    "caveat aside), so at exactly 1,000 per side only the cost changes",
    "SJ12": "one text has no pair: the join finds none and join_description gives the same "
    "text (only the internal JOIN_STATS counters differ)",
    "S16": "without ties group_starts = arange(n) (reduceat is the identity) and ends are all "
    "True, the same values as the no-ties path; only slower",
}


def run_one(root: Path, mid, rel, old, new, tests, timeout) -> dict:
    path = root / rel
    src = path.read_text(encoding="utf-8")
    rec = {"id": mid, "file": rel, "old": old, "new": new, "tests": tests}
    if old not in src:
        rec["outcome"] = "NOT-FOUND"
        return rec
    existing = [t for t in tests if (root / t.split("::")[0]).exists()]
    if not existing:
        rec["outcome"] = "NO-TESTS"
        return rec
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    t0 = time.time()
    try:
        path.write_text(src.replace(old, new, 1), encoding="utf-8")
        try:
            p = subprocess.run(
                [PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", *existing],
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            rc, tail = p.returncode, (p.stdout + p.stderr).strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            rc, tail = -1, ["timeout"]
    finally:
        path.write_text(src, encoding="utf-8")
    rec["seconds"] = round(time.time() - t0, 1)
    rec["rc"] = rc
    rec["tail"] = tail
    rec["outcome"] = "killed" if rc != 0 else "SURVIVED"
    if rc == -1:
        rec["outcome"] = "killed (timeout)"
    failed = [ln for ln in (p.stdout.splitlines() if rc > 0 else []) if ln.startswith("FAILED")]
    rec["killed_by"] = failed[0][7:].split(" - ")[0] if failed else ""
    return rec


def table(recs: list[dict]) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", "⏎")

    lines = ["| id | file | mutation | outcome | killed by / note |", "|---|---|---|---|---|"]
    for r in recs:
        mut = f"`{esc(r['old'].strip())}` → `{esc(r['new'].strip())}`"
        lines.append(
            f"| {r['id']} | {r['file']} | {mut} | {r['outcome']} | {esc(r.get('killed_by', ''))} |"
        )
    return "\n".join(lines) + "\n"


def merged(paths: list[str]) -> list[dict]:
    """The sweep's records (first file(s)) with later runs' outcomes: ``outcome`` becomes
    killed (existing test) / killed (new test) / equivalent / SURVIVED / NOT-FOUND."""
    first: dict[str, dict] = {}
    last: dict[str, dict] = {}
    for path in paths:
        for r in json.loads(Path(path).read_text(encoding="utf-8")):
            first.setdefault(r["id"], r)
            last[r["id"]] = r
    order = [m[0] for m in MUTANTS]
    out = []
    for mid in order:
        if mid not in first:
            continue
        r0, r1 = first[mid], last[mid]
        r = {**r0}
        if r0["outcome"].startswith("killed"):
            r["outcome"] = "killed (existing test)"
        elif r0["outcome"] == "SURVIVED" and r1["outcome"].startswith("killed"):
            r["outcome"] = "killed (new test)"
            r["killed_by"] = r1.get("killed_by", "")
        elif r0["outcome"] == "SURVIVED" and mid in EQUIVALENT:
            r["outcome"] = "equivalent"
            r["killed_by"] = EQUIVALENT[mid]
        out.append(r)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--shard", default="0/1")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default="mutants_issue49")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--report", nargs="+", help="merge these JSON runs into the final table")
    a = ap.parse_args(argv)
    if a.report:
        recs = merged(a.report)
        Path(a.out + ".json").write_text(json.dumps(recs, indent=1, ensure_ascii=False))
        Path(a.out + ".md").write_text(table(recs), encoding="utf-8")
        counts: dict[str, int] = {}
        for r in recs:
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        print(len(recs), counts)
        return 0
    todo = MUTANTS
    if a.only:
        want = set(a.only.split(","))
        todo = [m for m in todo if m[0] in want]
    i, n = (int(x) for x in a.shard.split("/"))
    todo = todo[i::n]
    if a.list:
        for m in todo:
            print(m[0], m[1], m[5])
        return 0
    root = Path(a.root)
    recs = []
    for mid, rel, old, new, tests, why in todo:
        r = run_one(root, mid, rel, old, new, tests, a.timeout)
        r["why"] = why
        recs.append(r)
        print(
            f"{mid:5} {r['outcome']:16} {r.get('seconds', 0):6}s {r.get('killed_by', '')}",
            flush=True,
        )
        Path(a.out + ".json").write_text(json.dumps(recs, indent=1, ensure_ascii=False))
    Path(a.out + ".md").write_text(table(recs), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
