"""The LM battery through the command line: LiRA and RMIA on a causal LM via ``[shadow]``
with shadow LMs, the new membership signals and pii-extraction in one run, with
``--aggregate-only``: no PII string of the audited records appears in any output file."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from privacy_audit.attacks.pii_extraction import find_pii

pytestmark = pytest.mark.slow

CONFIG = """\
title = "Tiny LM battery"
seed = 0
device = "cpu"

[data]
corpus = "fixtures"
n_members = 40
n_nonmembers = 40
n_test = 20

[target]
preset = "tiny-gpt2-word"
max_length = 96

[train]
epochs = 4
batch_size = 20
learning_rate = 3e-3

[[defenses]]
name = "none"
label = "non-private"

[attacks]
names = ["loss", "min-k++", "dc-pdd", "recall", "pii-extraction"]

[attacks.options.pii-extraction]
samples = 10
new_tokens = 16
records = 10
candidates = 4

[metrics]
bootstrap = 100

[shadow]
n_models = 4
population = 10
attacks = ["lira-online", "lira-offline", "rmia-online", "rmia-offline"]
fixed_variance = true  # 2 IN / 2 OUT models per example: the paper's global variance
"""


def _forms(s: str) -> set[str]:
    return {s, html.escape(s), html.escape(s, quote=False), json.dumps(s)[1:-1]}


def _pii_strings(cfg_path: Path) -> list[str]:
    from privacy_audit.audit.config import load_config
    from privacy_audit.audit.data import load_audit_data

    cfg = load_config(cfg_path)
    data = load_audit_data(cfg.data, cfg.seed, train=True)
    texts = data.members.texts + data.nonmembers.texts
    return sorted({s for t in texts for _, _, s in find_pii(t)})


def test_lm_shadow_attacks_and_aggregate_only_pii(tmp_path, cli):
    cfg = tmp_path / "lm.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet", "--aggregate-only"])
    assert outcome.code == 0, outcome.stderr
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    (run,) = res["runs"]
    by = {a["attack"]: a for a in run["attacks"]}
    for name in ("lira-online", "lira-offline", "rmia-online", "rmia-offline", "min-k++", "recall"):
        assert by[name]["status"] == "ok", (name, by[name].get("reason"))
        auc = by[name]["metrics"]["auc"]
        assert auc["ci_low"] <= auc["value"] <= auc["ci_high"]
        # the 4-epoch LM fits its 40 members: every signal, the shadow attacks included, sees it
        assert auc["ci_low"] > 0.5, (name, auc)
        assert by[name]["n_members"] == 40 and by[name]["n_nonmembers"] == 40
    (pii,) = [x for x in run["leakage"] if x["attack"] == "pii-extraction"]
    assert pii["status"] == "ok", pii["reason"]
    for m in ("extraction_rate", "reconstruction_rate", "inference_accuracy"):
        for key in (m, m + "_baseline"):
            assert pii["metrics"][key]["ci_high"] is not None
    assert pii["samples"] == [] and "example_texts" not in run

    secrets = _pii_strings(cfg)
    assert len(secrets) >= 20
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"results.json", "report.html"}
    for p in files:
        blob = p.read_text(encoding="utf-8", errors="replace")
        leaked = [s for s in secrets if any(f in blob for f in _forms(s))]
        assert not leaked, (p.name, leaked[:3])
    # the search can fail: the same strings are found in the audited texts themselves
    from privacy_audit.audit.config import load_config
    from privacy_audit.audit.data import load_audit_data

    c = load_config(cfg)
    d = load_audit_data(c.data, c.seed, train=True)
    blob = json.dumps(d.members.texts + d.nonmembers.texts)
    assert all(any(f in blob for f in _forms(s)) for s in secrets)

    # without aggregate-only the most-exposed table shows the text, escaped, and who flags it
    from privacy_audit.reports.html import render_html

    strongest = run["strongest_attack"]
    ex = by[strongest]["examples"]
    run["example_texts"] = {i: "<b>secret & text</b>" for i in ex["ids"]}
    res["aggregate_only"] = False
    page = render_html(res)
    assert "&lt;b&gt;secret &amp; text&lt;/b&gt;" in page and "<b>secret & text</b>" not in page
    assert "Flagged by" in page
