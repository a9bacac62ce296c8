"""Issue 37, the first hour of a new user: the attack catalogue and ``--attacks``, one ε
headline per run, only resolvable TPRs, the split check in the summary, no empty
comparison in an own-model report, and a stage-time breakdown that adds up.

One tiny GPT-2 (word tokenizer, 2 layers) fine-tuned on 60 texts is audited once through
the command line (module fixture); the browser checks of the same report are in
tests/test_first_hour_browser.py.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from tests.own_models import (
    build_causal_lm,
    fine_tune,
    random_texts,
    save,
    word_tokenizer,
    write_lines,
)

N = 60


@pytest.fixture(scope="module")
def own_run(tmp_path_factory, cli):
    """``run --model gpt2 --reference base --attacks min-k++,recall --public ...``: the
    output directory, the CLI outcome and the wall time around the command."""
    root = tmp_path_factory.mktemp("first-hour")
    tok = word_tokenizer()
    members, nonmembers = random_texts(N, 1), random_texts(N, 2)
    write_lines(root / "members.txt", members)
    write_lines(root / "nonmembers.txt", nonmembers)
    write_lines(root / "public.txt", random_texts(12, 5))
    model = build_causal_lm("gpt2", len(tok), seed=0)
    fine_tune(model, tok, members, epochs=20)
    save(model, tok, root / "gpt2")
    save(build_causal_lm("gpt2", len(tok), seed=0), tok, root / "base")
    out = root / "out"
    args = ["run", "--model", str(root / "gpt2"), "--members", str(root / "members.txt")]
    args += ["--nonmembers", str(root / "nonmembers.txt"), "--reference", str(root / "base")]
    args += ["--attacks", "min-k++,recall", "--public", str(root / "public.txt")]
    # a first run warms the lazily imported modules (attack families, reports, plotting),
    # so "setup" below measures the glue between stages, not this worker's first imports
    assert cli([*args, "--out", str(root / "warm-up")]).code == 0
    start = time.perf_counter()
    outcome = cli([*args, "--out", str(out)])
    wall = time.perf_counter() - start
    assert outcome.code == 0, outcome.stderr[-3000:]
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return {"root": root, "out": out, "outcome": outcome, "wall": wall, "results": results}


# --------------------------------------------------------------------------- #
# item 6: the attack catalogue and --attacks
# --------------------------------------------------------------------------- #
def test_attacks_listing_equals_the_registry(cli):
    from privacy_audit.attacks import ATTACKS, LEAKAGE_ATTACKS
    from privacy_audit.attacks.base import NEEDS
    from privacy_audit.attacks.shadow import CATALOG, SHADOW_ATTACKS

    outcome = cli(["attacks"])
    assert outcome.code == 0, outcome.stderr
    listed = re.findall(r"^  ([a-z0-9+\-]+)(?: \[[a-z]+\])?: ", outcome.stdout, re.M)
    registry = [*ATTACKS, *LEAKAGE_ATTACKS, *SHADOW_ATTACKS]
    assert sorted(listed) == sorted(registry) and len(listed) == len(set(listed))
    for name, cls in [*ATTACKS.items(), *LEAKAGE_ATTACKS.items()]:
        assert cls.summary.strip() and cls.cost.strip(), name
        assert set(cls.needs) <= set(NEEDS), name
        line = re.search(rf"^  {re.escape(name)}(?: \[[a-z]+\])?: (.*)$", outcome.stdout, re.M)
        assert line and line[1] == cls.summary  # read from the class, not a copy
    for name in SHADOW_ATTACKS:
        summary, needs, cost = CATALOG[name]
        assert summary and cost and set(needs) <= set(NEEDS)
    # the ones the brief names: a reference model, non-member prefixes, gradients
    assert "reference" in ATTACKS["reference"].needs
    assert "nonmember-prefixes" in ATTACKS["recall"].needs
    assert "gradients" in ATTACKS["grad-norm"].needs


def test_attacks_flag_runs_exactly_those(own_run):
    run = own_run["results"]["runs"][0]
    # --reference was given, yet no lira/rmia: --attacks named neither
    assert [a["attack"] for a in run["attacks"]] == ["min-k++", "recall"]
    assert all(a["status"] == "ok" for a in run["attacks"]), run["attacks"]
    assert run["split_check"]["status"] == "ok"  # what the split check needs still ran
    assert own_run["results"]["config"]["attacks"] == ["min-k++", "recall"]


def test_attacks_flag_unknown_name_exits_2_listing_the_valid_ones(tmp_path, cli):
    out = tmp_path / "out"
    outcome = cli(
        ["run", "--model", str(tmp_path), "--members", "m.txt", "--nonmembers", "n.txt"]
        + ["--attacks", "min-k++,min-k+++", "--out", str(out)]
    )
    assert outcome.code == 2
    lines = [ln for ln in outcome.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "unknown attack 'min-k+++'" in lines[0], outcome.stderr
    for valid in ("min-k++", "recall", "all", "llm", "lm-loss", "rmia-offline"):
        assert valid in lines[0]
    assert not out.exists()  # nothing written


def test_attacks_groups_follow_the_needs():
    from privacy_audit.attacks.catalog import expand

    llm, refs = expand("llm", "causal-lm", set())
    assert "reference" not in llm and "recall" not in llm and "dc-pdd" not in llm
    assert {"lm-loss", "zlib", "min-k", "min-k++", "grad-norm"} <= set(llm) and refs == []
    llm, refs = expand("llm", "causal-lm", {"reference", "nonmember-prefixes", "population"})
    assert {"reference", "recall", "dc-pdd"} <= set(llm) and refs == []
    every, refs = expand("all", "causal-lm", {"reference"})
    assert set(llm) - {"recall", "dc-pdd"} <= set(every) and "extraction-risk" in every
    assert refs == ["lira-offline", "rmia-offline"]
    assert expand("all", "classifier", set())[0] == [
        "loss",
        "confidence",
        "entropy",
        "modified-entropy",
    ]
    with pytest.raises(ValueError, match="classifier"):
        expand("llm", "classifier", set())


# --------------------------------------------------------------------------- #
# item 8: where the time went
# --------------------------------------------------------------------------- #
def test_stage_times_add_up_to_the_run_time(own_run):
    timing = own_run["results"]["timing"]
    stages = {s["stage"]: s["seconds"] for s in timing["stages"]}
    for name in ("load", "split check", "score", "attack min-k++", "attack recall", "report"):
        assert name in stages, stages
    total = sum(stages.values())
    wall = timing["wall_seconds"]
    assert abs(total - wall) <= 0.05 * wall, (total, wall, stages)
    # "setup" (imports, glue) holds what no named stage does: the named stages cover the run
    # (imports are warm in this process; a cold command line spends seconds importing torch)
    assert stages["setup"] <= 0.10 * wall, stages
    assert wall <= own_run["wall"]  # the command's own clock, measured outside it
    assert timing["unattributed_seconds"] == pytest.approx(max(wall - total, 0), abs=0.01)
    # one stdout line, the same numbers
    line = [ln for ln in own_run["outcome"].stdout.splitlines() if ln.startswith("time: ")]
    assert len(line) == 1 and f"total {wall:.1f} s" in line[0]
    assert f"score {stages['score']:.1f} s" in line[0]
    html = (own_run["out"] / "report.html").read_text(encoding="utf-8")
    conf = html[html.index('id="configuration"') :]
    assert "Where the time went" in conf and "attack min-k++" in conf


def test_stage_timer_never_counts_a_second_twice():
    from privacy_audit.audit.timing import StageTimer, active, stage

    # start 0; outer 1..3, inner 3..4, deep 4..10, inner 10..10.5, outer 10.5..11; outer 11..12
    clock = iter([0.0, 1.0, 3.0, 4.0, 10.0, 10.5, 11.0, 11.0, 12.0, 12.5])
    timer = StageTimer(clock=lambda: next(clock))
    with active(timer):
        with stage("outer"):
            with stage("inner"):
                with stage("deep"):
                    pass
        with stage("outer"):
            pass
    timer.stop()  # 12.5
    record = timer.record()
    got = {s["stage"]: s["seconds"] for s in record["stages"]}
    assert got == {"outer": 2.0 + 0.5 + 1.0, "inner": 1.0 + 0.5, "deep": 6.0}
    assert record["wall_seconds"] == 12.5 and record["unattributed_seconds"] == 1.5
    # a root stage holds what no other stage does, up to the end
    clock = iter([0.0, 2.0, 5.0, 6.0])
    timer = StageTimer(clock=lambda: next(clock), root="setup")
    with active(timer), stage("a"):
        pass
    timer.stop()
    assert {s["stage"]: s["seconds"] for s in timer.record()["stages"]} == {"setup": 3.0, "a": 3.0}


# --------------------------------------------------------------------------- #
# item 2: one ε headline per run
# --------------------------------------------------------------------------- #
def _run_with(
    attack_lb: float, attack_ceiling: float, audits: list[dict], claim_eps: float | None = 20.0
) -> dict:
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.audit.results import run_record
    from privacy_audit.defenses.base import PrivacyClaim

    rng = np.random.default_rng(0)
    m = np.r_[np.ones(300, dtype=int), np.zeros(300, dtype=int)]
    res = AttackResult.from_scores(
        "lm-loss", rng.normal(size=600) + 2 * m, m, None, MetricSettings(n_boot=100), "loss"
    )
    claim = (
        PrivacyClaim(claim_eps, 1e-5, "example", "central-dp", "rdp", True, "test claim")
        if claim_eps is not None
        else PrivacyClaim.none()
    )
    run = run_record("model", "as-is", claim, None, [res])
    run["attacks"][0]["metrics"]["epsilon_lower_bound"].update(
        value=attack_lb, ceiling=attack_ceiling
    )
    if audits:
        status = "consistent" if claim_eps is not None else "no-claim"
        run["epsilon_audit"] = {"status": status, "audits": audits}
    return run


def test_headline_is_fixed_by_the_run_and_larger_bounds_sit_beside_it():
    from privacy_audit.reports.verdict import AT_CEILING, epsilon_headline

    # the case: gradient canaries at their ceiling, the attack lower
    gc = {"name": "gradient canaries", "status": "ok", "epsilon_lb": 9.51, "ceiling": 9.51}
    h = epsilon_headline(_run_with(1.34, 4.0, [gc]))
    assert (h["value"], h["source"], h["at_ceiling"]) == (9.51, "ε audit: gradient canaries", True)
    assert h["larger"] == []
    # the audit lower than the attack: the audit is still the headline, the attack beside it
    low = {"name": "gradient canaries", "status": "ok", "epsilon_lb": 0.5, "ceiling": 9.51}
    h = epsilon_headline(_run_with(1.34, 1.34, [low]))
    assert h["value"] == 0.5 and not h["at_ceiling"]
    assert [(b["value"], b["source"], b["at_ceiling"]) for b in h["larger"]] == [
        (1.34, "strongest attack: lm-loss", True)
    ]
    # no ε audit: the strongest attack's bound
    h = epsilon_headline(_run_with(1.34, 4.0, []))
    assert (h["value"], h["source"], h["larger"]) == (1.34, "strongest attack: lm-loss", [])
    assert AT_CEILING == "at least; the sample cannot certify more"


def test_a_run_without_a_claim_never_headlines_a_simulated_mechanism():
    """A non-private run declares no mechanism: the gradient canaries simulated from one
    (noiseless updates, at their ceiling 9.51) are not about it. The attack's 0.76 leads,
    with the audit of the released model (input canaries) beside it."""
    from privacy_audit.reports.epsilon_readout import epsilon_audit_bounds
    from privacy_audit.reports.verdict import epsilon_headline

    sim = {
        "name": "gradient-canary",
        "status": "ok",
        "epsilon_lb": 9.51,
        "ceiling": 9.51,
        "cost": "200000 simulated runs of the mechanism (no model training)",
    }
    one_run = {
        "name": "one-run white-box (thresholded)",
        "status": "ok",
        "epsilon_lb": 4.77,
        "ceiling": 4.77,
        "source": "simulated from the mechanism",
    }
    real = {"name": "input-canaries (one-run)", "status": "ok", "epsilon_lb": 2.20, "ceiling": 3.14}
    run = _run_with(0.76, 4.0, [sim, one_run, real], claim_eps=None)
    h = epsilon_headline(run)
    assert (h["value"], h["source"]) == (0.76, "strongest attack: lm-loss")
    assert [(b["value"], b["source"]) for b in h["larger"]] == [
        (2.20, "ε audit: input-canaries (one-run)")
    ]
    assert [n for n, _ in epsilon_audit_bounds(run)] == ["input-canaries (one-run)"]
    # with a claim, the simulated audit is about the declared mechanism and leads
    claimed = _run_with(0.76, 4.0, [sim, one_run, real], claim_eps=20.0)
    assert epsilon_headline(claimed)["source"] == "ε audit: gradient-canary"
    assert len(epsilon_audit_bounds(claimed)) == 3


def test_headline_is_one_number_in_summary_verdict_stdout_and_gate(tmp_path, cli):
    from privacy_audit.audit.commands.common import verdict_line
    from privacy_audit.audit.results import assemble_results, write_outputs

    low = {"name": "gradient canaries", "status": "ok", "epsilon_lb": 0.5, "ceiling": 9.51}
    run = _run_with(1.34, 1.34, [low])
    results = assemble_results([run], "headline", 0, {})
    html_path, json_path = write_outputs(results, tmp_path / "out")
    html = html_path.read_text(encoding="utf-8")
    summary = html[html.index('id="summary"') : html.index('id="verdicts"')]
    values = re.findall(r'class="eps-value">≥ ([0-9.]+)<', summary)
    assert values == ["0.500"]
    assert "larger, from another audit: ≥ 1.34" in summary
    assert "strongest attack: lm-loss · at least; the sample cannot certify more" in summary
    verdict = results["runs"][0]["verdict"]["text"]
    assert "Certified privacy loss: ε ≥ 0.500 (ε audit: gradient canaries)" in verdict
    assert "A larger bound from another audit" in verdict and "ε ≥ 1.34" in verdict
    line = verdict_line(results["runs"][0])
    assert "ε_lb ≥ 0.500 (ε audit: gradient canaries); larger: ε ≥ 1.34 (strongest" in line
    summary_json = tmp_path / "gate.json"
    gate = cli(["gate", str(json_path), "--max-auc", "1.0", "--summary", str(summary_json)])
    assert gate.code in (0, 1)
    (head,) = json.loads(summary_json.read_text(encoding="utf-8"))["epsilon_headlines"]
    assert head["value"] == 0.5 and head["source"] == "ε audit: gradient canaries"
    assert [b["value"] for b in head["larger"]] == [1.34]


def test_own_model_headline_matches_verdict_and_stdout(own_run):
    run = own_run["results"]["runs"][0]
    html = (own_run["out"] / "report.html").read_text(encoding="utf-8")
    summary = html[html.index('id="summary"') : html.index('id="verdicts"')]
    (value,) = re.findall(r'class="eps-value">≥ ([0-9.]+)<', summary)
    assert f"ε ≥ {value}" in run["verdict"]["text"]
    vline = [ln for ln in own_run["outcome"].stdout.splitlines() if ln.startswith("VERDICT")]
    assert f"ε_lb ≥ {value} (strongest attack: " in vline[0]


# --------------------------------------------------------------------------- #
# item 3: only resolvable TPRs
# --------------------------------------------------------------------------- #
def test_tpr_resolution_known_answers():
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.reports.resolution import lead_tpr, needed_nonmembers, tpr_view

    assert needed_nonmembers(0.01, 295, 0.1) == 300  # the 295 + 295 texts
    assert needed_nonmembers(0.001, 5000, 0.2) == 3000
    assert needed_nonmembers(0.05, 100, 1.0) == 400  # width 1.0 at 100 -> 0.5 at 400

    rng = np.random.default_rng(7)
    n = 295
    m = np.r_[np.ones(n, dtype=int), np.zeros(n, dtype=int)]
    s = rng.normal(size=2 * n) + 1.5 * m
    res = AttackResult.from_scores("x", s, m, None, MetricSettings(n_boot=100), "x").to_dict()
    stored = res["metrics"]["tpr_at_fpr_0.01"]
    assert stored["value"] is None and stored["below_resolution"] is True  # never a number
    assert stored["reason"] == "not resolvable at this n (needs about 300 non-members)"
    one = tpr_view(res, 0.01)
    assert not one["resolvable"]
    assert one["text"] == "not resolvable at this n (needs about 300 non-members)"
    lead = lead_tpr(res)
    assert lead is not None and lead["fpr"] in (0.05, 0.1)
    # independent: the largest TPR with at most floor(f * n) non-members above threshold
    non = np.sort(s[m == 0])[::-1]
    k = int(np.floor(lead["fpr"] * n))
    want = float(np.mean(s[m == 1] > non[k]))
    assert lead["metric"]["value"] == pytest.approx(want)
    assert lead["metric"]["ci_low"] <= want <= lead["metric"]["ci_high"]
    assert lead["metric"]["ci_high"] - lead["metric"]["ci_low"] <= 0.5


def test_unresolvable_tpr_in_report_verdict_and_stdout(own_run):
    run = own_run["results"]["runs"][0]
    assert run["attacks"][0]["n_nonmembers"] == N  # 60 < 300: 1% FPR is not resolvable
    html = (own_run["out"] / "report.html").read_text(encoding="utf-8")
    summary = html[html.index('id="summary"') : html.index('id="verdicts"')]
    assert "not resolvable at this n (needs about 300 non-members)" in summary
    assert "[0.0, 100.0]" not in summary
    vline = [ln for ln in own_run["outcome"].stdout.splitlines() if ln.startswith("VERDICT")][0]
    assert "TPR@1%FPR not resolvable at this n (needs about 300 non-members)" in vline
    assert "needs about 300 non-members" in run["verdict"]["text"]


# --------------------------------------------------------------------------- #
# items 4 and 5: split check in the summary, no empty comparison
# --------------------------------------------------------------------------- #
def test_summary_has_the_split_check_and_no_comparison_for_an_own_model(own_run):
    run = own_run["results"]["runs"][0]
    auc = run["split_check"]["blind"]["auc"]
    html = (own_run["out"] / "report.html").read_text(encoding="utf-8")
    summary = html[html.index('id="summary"') : html.index('id="verdicts"')]
    assert "Split check: blind AUC" in summary
    assert f"{auc['value']:.3f} [{auc['ci_low']:.3f}, {auc['ci_high']:.3f}]" in summary
    assert "no shift found" in summary
    assert "Comparison with the undefended model" not in html


def test_suite_comparison_keeps_its_section():
    from privacy_audit.audit.results import assemble_results
    from privacy_audit.reports.html import render_html

    a, b = _run_with(1.0, 4.0, []), _run_with(0.5, 4.0, [])
    a["defense"], a["name"], b["defense"], b["name"] = "none", "plain", "dp-sgd", "dp"
    html = render_html(assemble_results([a, b], "two", 0, {}))
    assert "Comparison with the undefended model" in html
    assert "Split check: blind AUC" not in html  # no run had one: no column


def test_dataset_inference_report_is_styled_and_filled():
    from privacy_audit.audit.dataset_inference_pipeline import render_html

    shifted = {
        "schema_version": 1,
        "tool": {"name": "privacy-audit", "version": "0"},
        "created": "now",
        "config": {},
        "dataset_inference": {
            "status": "split-shifted",
            "p_value": None,
            "model": "m",
            "reference": None,
            "max_length": 64,
            "texts_cut_to_max_length": 0,
            "fit_fraction": 0.5,
            "seed": 0,
            "text": "No p-value: ...",
            "split_check": {
                "shifted": True,
                "text": "members and non-members differ",
                "blind": {
                    "auc": {"value": 0.9, "ci_low": 0.8, "ci_high": 0.95},
                    "n_members": 40,
                    "n_nonmembers": 40,
                },
                "duplicates": {"pairs": 0},
            },
        },
    }
    html = render_html(shifted)
    rows = re.findall(r"<tr><th>(.*?)</th><td class=\"wrap\">(.*?)</td></tr>", html, re.S)
    assert len(rows) >= 12 and all(v.strip() for _, v in rows), rows
    text = dict(rows)
    assert text["p-value"].startswith("no p-value: a classifier that never sees the model")
    assert text["Assumption"].strip()
    assert "suspect texts and validation texts differ" in text["Split check finding"]
    assert "non-member" not in html and 'section class="card"' in html


# --------------------------------------------------------------------------- #
# in a browser (headless Chromium, 1280 px): items 2-5 and 7
# --------------------------------------------------------------------------- #
_SUMMARY_STATE = """(() => {
  const seen = el => { if (!el) return false; const r = el.getBoundingClientRect();
    const st = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && st.display !== 'none' && st.visibility !== 'hidden'
      && r.left >= 0 && r.right <= window.innerWidth; };
  const wrap = document.querySelector('#summary .table-wrap');
  return {
    viewport: window.innerWidth,
    scroll: wrap.scrollWidth, client: wrap.clientWidth,
    rows: [...document.querySelectorAll('#summary tbody tr')].map(tr => ({
      eps: [...tr.querySelectorAll('.eps-value')].map(e => [e.innerText, seen(e)]),
      epsCell: tr.querySelector('.eps-headline').innerText,
      tpr: tr.querySelector('.tpr-cell').innerText, tprSeen: seen(tr.querySelector('.tpr-cell')),
      split: tr.querySelector('.split-cell') ? tr.querySelector('.split-cell').innerText : null,
      splitSeen: seen(tr.querySelector('.split-cell .blind-auc')),
    })),
    headers: [...document.querySelectorAll('#summary thead th')].map(th => th.innerText),
    verdicts: [...document.querySelectorAll('#verdicts .verdict p')].map(p => p.innerText),
    h3: [...document.querySelectorAll('#verdicts h3')].map(h => h.innerText),
    timing: document.querySelector('table.timing') ? document.querySelector('table.timing').innerText : null,
  };
})()"""

_DI_STATE = """(() => {
  const st = el => getComputedStyle(el);
  const top = document.querySelector('header.top');
  return {
    viewport: window.innerWidth,
    bodyBg: st(document.body).backgroundColor,
    topBg: st(top).backgroundColor, topRadius: st(top).borderTopLeftRadius,
    cards: document.querySelectorAll('section.card').length,
    badge: document.querySelector('#result .badge').innerText,
    badgeBg: st(document.querySelector('#result .badge')).backgroundColor,
    rows: [...document.querySelectorAll('table.di-table tr')].map(tr => [
      tr.querySelector('th').innerText, tr.querySelector('td').innerText,
      tr.querySelector('td').getBoundingClientRect().right <= window.innerWidth]),
    text: document.querySelector('#result').innerText + document.querySelector('#details').innerText,
  };
})()"""


def _browse(path: Path, expression: str, tmp: Path) -> dict:
    """Open ``path`` in headless Chromium at 1280 x 900 and evaluate ``expression``."""
    from tests.end_to_end.test_browser import DevTools, chromium_binary

    chrome = DevTools(chromium_binary(), tmp / "profile")
    try:
        target = chrome.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = chrome.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime"):
            chrome.send(f"{domain}.enable", session=session)
        chrome.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        chrome.drain()
        chrome.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        chrome.wait_for("Page.loadEventFired", session)
        return chrome.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            session=session,
        )["result"]["value"]
    finally:
        chrome.close()


def test_browser_own_model_summary_headline_resolution_split_no_comparison(own_run, tmp_path):
    state = _browse(own_run["out"] / "report.html", _SUMMARY_STATE, tmp_path)
    assert state["viewport"] == 1280
    assert state["scroll"] <= state["client"] + 1  # no horizontal scrollbar
    (row,) = state["rows"]
    # item 2: one ε headline, visible, the verdict's number
    assert len(row["eps"]) == 1 and row["eps"][0][1], row
    value = row["eps"][0][0].removeprefix("≥ ")
    assert f"ε ≥ {value}" in state["verdicts"][0]
    assert (
        "strongest attack: min-k++" in row["epsCell"]
        or "strongest attack: recall" in row["epsCell"]
    )
    # item 3: 60 non-members: 1% FPR is not resolvable, said so, and a resolvable FPR leads
    assert row["tprSeen"]
    assert "not resolvable at this n (needs about 300 non-members)" in row["tpr"]
    assert re.search(r"TPR @ (5|10|20)% FPR", row["tpr"]), row["tpr"]
    # item 4: the split check's blind AUC with its interval and status, in the summary
    auc = own_run["results"]["runs"][0]["split_check"]["blind"]["auc"]
    assert any("Split check" in h for h in state["headers"])
    assert row["splitSeen"]
    assert f"{auc['value']:.3f} [{auc['ci_low']:.3f}, {auc['ci_high']:.3f}]" in row["split"]
    assert "NO SHIFT FOUND" in row["split"].upper()
    # item 5: an own-model report has no comparison section
    assert not [h for h in state["h3"] if "Comparison" in h]
    # item 8: the stage times are in the run configuration section
    assert state["timing"] and "attack min-k++" in state["timing"]


def test_browser_headline_with_a_larger_audit_beside_it(tmp_path):
    from privacy_audit.audit.results import assemble_results, write_outputs

    gc = {"name": "gradient canaries", "status": "ok", "epsilon_lb": 9.51, "ceiling": 9.51}
    low = {"name": "one-run canaries", "status": "ok", "epsilon_lb": 0.4, "ceiling": 3.0}
    a, b = _run_with(1.34, 4.0, [gc]), _run_with(1.34, 1.34, [low, gc])
    a["defense"], a["name"], b["defense"], b["name"] = "none", "plain", "dp-sgd", "dp"
    html, _ = write_outputs(assemble_results([a, b], "headlines", 0, {}), tmp_path / "out")
    state = _browse(html, _SUMMARY_STATE, tmp_path)
    first, second = state["rows"]
    assert [e[0] for e in first["eps"]] == ["≥ 9.51"] and first["eps"][0][1]
    assert "at least; the sample cannot certify more" in first["epsCell"]
    assert "larger" not in first["epsCell"]
    assert [e[0] for e in second["eps"]] == ["≥ 0.400"] and second["eps"][0][1]
    assert "larger, from another audit: ≥ 9.51" in second["epsCell"]
    assert "larger, from another audit: ≥ 1.34" in second["epsCell"]
    assert "ε ≥ 9.51" in state["verdicts"][0] and "ε ≥ 0.400" in state["verdicts"][1]
    # a suite comparison keeps its section
    assert [h for h in state["h3"] if "Comparison with the undefended model" in h]


def test_browser_dataset_inference_page_styled_and_filled(own_run, tmp_path, cli):
    root = own_run["root"]
    other = random_texts(N, 9, words=[f"v{i}" for i in range(120)])  # another vocabulary
    write_lines(root / "validation.txt", other)
    out = tmp_path / "di"
    outcome = cli(
        ["dataset-inference", "--model", str(root / "gpt2"), "--suspect"]
        + [str(root / "members.txt"), "--validation", str(root / "validation.txt")]
        + ["--out", str(out), "--quiet"]
    )
    assert outcome.code == 0, outcome.stderr[-2000:]
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert res["dataset_inference"]["status"] == "split-shifted"
    state = _browse(out / "report.html", _DI_STATE, tmp_path)
    assert state["viewport"] == 1280
    # the main report's stylesheet: grey page, white rounded cards, coloured badge
    assert state["bodyBg"] == "rgb(244, 246, 248)" and state["topBg"] == "rgb(255, 255, 255)"
    assert state["topRadius"] == "10px" and state["cards"] == 3
    assert state["badge"].upper() == "SPLIT SHIFTED: NO P-VALUE"
    assert state["badgeBg"] != "rgba(0, 0, 0, 0)"
    rows = {k: v for k, v, _ in state["rows"]}
    assert len(rows) >= 12 and all(v.strip() for v in rows.values()), rows
    assert all(inside for _, _, inside in state["rows"])
    assert rows["p-value"].startswith("no p-value: a classifier that never sees the model")
    assert rows["Assumption"].strip() and "suspect" in rows["Split check finding"]
    assert "member" not in state["text"].lower().replace("membership", "")
