"""Extraction risk and the per-record leakage map end to end (issue 28): the ``run
--model`` one-liner with decoding flags, results.json, the report, the gate's
``extraction-risk@N``, ``export-risky`` and aggregate-only mode.

The user's model is a GPT-2 from config whose final layer norm is scaled up (sharp
next-token distributions; no training, so the test is fast). Members are records that
continue a random prefix with the model's most likely words, so their suffixes come out
with high probability; non-members are random records, whose suffixes do not.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from tests.own_models import build_causal_lm, random_texts, save, word_tokenizer, write_lines

PREFIX, SUFFIX = 3, 3
N = 16
DECODE = ["--temperature", "1.0", "--top-k", "0", "--top-p", "1.0"]
SHAPE = ["--prefix-tokens", str(PREFIX), "--suffix-tokens", str(SUFFIX), "--queries", "1,10,100"]
MARK = "zzmemberzz"  # a word outside the vocabulary: <unk> in the tokens, text in the data


@pytest.fixture(scope="module")
def byo(tmp_path_factory):
    root = tmp_path_factory.mktemp("risk")
    hf = word_tokenizer()
    model = build_causal_lm("gpt2", len(hf), seed=0, d=32)
    with torch.no_grad():
        model.transformer.ln_f.weight.mul_(25.0)
    rng = np.random.default_rng(0)
    members = []
    with torch.no_grad():
        for _ in range(N):
            ids = [0, *rng.integers(2, 122, size=PREFIX).tolist()]
            for _ in range(SUFFIX + 2):
                logits = model(torch.tensor([ids])).logits[0, -1]
                logits[:2] = -torch.inf
                ids.append(int(logits.argmax()))
            members.append(hf.decode(ids[1:]))
    members[0] = members[0] + f" <b>{MARK}</b>"  # markup in a member's text: escaped
    nonmembers = random_texts(N, 5, length=PREFIX + SUFFIX + 2)
    save(model, hf, root / "model")
    save(build_causal_lm("gpt2", len(hf), seed=1, d=32), hf, root / "reference")
    write_lines(root / "members.txt", members)
    write_lines(root / "nonmembers.txt", nonmembers)
    return root, members, nonmembers


def _run(cli, byo, out, *extra):
    root = byo[0]
    argv = ["run", "--model", str(root / "model"), "--members", str(root / "members.txt")]
    argv += ["--nonmembers", str(root / "nonmembers.txt"), "--out", str(out), "--quiet"]
    return cli([*argv, "--device", "cpu", "--max-length", "32", *DECODE, *SHAPE, *extra])


@pytest.fixture(scope="module")
def full(cli, byo, tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "out"
    res = _run(cli, byo, out, "--per-token", "--leakage-top", "5")
    assert res.code == 0, res.stderr[-3000:]
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def aggregate(cli, byo, tmp_path_factory):
    out = tmp_path_factory.mktemp("agg") / "out"
    res = _run(cli, byo, out, "--aggregate-only", "--per-token")
    assert res.code == 0, res.stderr[-3000:]
    return out


def _scored_row(tok, text) -> tuple[list[int], int]:
    """The row the suite scores ``text`` as (its encoding convention, whatever special
    tokens it adds) and where the text's own tokens start in it."""
    from privacy_audit.targets.scoring import HFTokenizer

    row = HFTokenizer(tok).encode([text], 32)[0][0].tolist()
    own = tok(text, add_special_tokens=False)["input_ids"]
    lead = next(o for o in range(4) if row[o : o + len(own)] == own)
    return row, lead


def _risk(run) -> dict:
    return next(r for r in run["leakage"] if r["attack"] == "extraction-risk")


def test_results_carry_risks_with_cis_beside_the_control(full):
    _, res = full
    rec = _risk(res["runs"][0])
    assert rec["status"] == "ok", rec.get("reason")
    d = rec["details"]
    assert d["decoding"] == {"temperature": 1.0, "top_k": 0, "top_p": 1.0}
    assert (d["prefix_tokens"], d["suffix_tokens"], d["queries"]) == (PREFIX, SUFFIX, [1, 10, 100])
    assert d["eligible"] == {"member": N, "nonmember": N}
    m = rec["metrics"]
    for n in (1, 10, 100):
        for g in ("member", "nonmember"):
            for lv in ("0.01", "0.1", "0.5"):
                f = m[f"{g}_frac_risk>{lv}@{n}"]
                assert f["n"] == N and f["ci_low"] <= f["value"] <= f["ci_high"]
            med = m[f"{g}_median_risk@{n}"]
            assert med["ci_low"] <= med["value"] <= med["ci_high"]
    # members' suffixes are the model's likely words; random non-members' are not
    assert m["member_median_risk@100"]["ci_low"] > m["nonmember_median_risk@100"]["ci_high"]
    # risk grows with n for every record
    r = d["records"]
    for a, b in zip(r["risk@1"], r["risk@100"], strict=True):
        assert a <= b
    assert r["members"].count(1) == N and len(r["ids"]) == 2 * N


def test_per_record_probability_matches_a_plain_transformers_forward_pass(full, byo):
    """Independent computation: transformers forward pass on the scored row, softmax in
    numpy (temperature 1, no truncation), product over the suffix positions."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root, members, _ = byo
    _, res = full
    r = _risk(res["runs"][0])["details"]["records"]
    model = AutoModelForCausalLM.from_pretrained(root / "model").eval()
    tok = AutoTokenizer.from_pretrained(root / "model")
    for k in (1, 2, 3):
        ids, lead = _scored_row(tok, members[k])
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double().numpy()
        lp = 0.0
        for t in range(lead + PREFIX, lead + PREFIX + SUFFIX):  # row index of a suffix token
            z = logits[t - 1] - logits[t - 1].max()
            lp += z[ids[t]] - math.log(np.exp(z).sum())
        i = r["ids"].index(res["runs"][0]["attacks"][0]["examples"]["ids"][k])
        assert r["log_p"][i] == pytest.approx(lp, abs=1e-4)
        assert r["risk@100"][i] == pytest.approx(1 - (1 - math.exp(lp)) ** 100, abs=1e-6)


def test_leakage_map_ranks_members_with_their_risk_and_token_values(full, byo):
    _, res = full
    run = res["runs"][0]
    lm = run["leakage_map"]
    assert len(lm["records"]) == 5 and lm["reference"] is False
    assert lm["ranked_by"].startswith("strongest attack")
    scores = [row["score"] for row in lm["records"]]
    assert scores == sorted(scores, reverse=True)
    ranking = run["leakage_ranking"]
    assert ranking["ids"][:5] == [row["id"] for row in lm["records"]]
    for row in lm["records"]:
        assert set(row["extraction_risk"]) == {"1", "10", "100"}
        assert len(row["tokens"]) == len(row["values"]) > PREFIX + SUFFIX
        assert all(v is None or v <= 0 for v in row["values"])  # target log-probs
    pt = run["per_token"]
    assert len(pt["ids"]) == N and all(len(v) > 0 for v in pt["target_log_probs"])


def test_report_shows_the_risk_table_plot_and_escaped_leakage_map(full, byo):
    out, res = full
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Extraction risk at your decoding settings" in html
    assert "Which records leak, and where" in html
    assert html.count('class="tok"') >= 5 * (PREFIX + SUFFIX)
    assert "<b>" + MARK not in html  # the member's markup never reaches the page raw


def test_aggregate_only_shows_no_text_no_map_no_raw_ids(aggregate, byo):
    _, members, nonmembers = byo
    html = (aggregate / "report.html").read_text(encoding="utf-8")
    js = (aggregate / "results.json").read_text(encoding="utf-8")
    for doc in (html, js):
        assert MARK not in doc
        for text in members + nonmembers:
            assert text not in doc
        assert "leakage_map" not in doc or "Which records leak" not in doc
    assert "Which records leak" not in html and 'class="tok"' not in html
    res = json.loads(js)
    run = res["runs"][0]
    assert "leakage_map" not in run and "per_token" not in run
    assert "ids" not in run["leakage_ranking"]
    ids = _risk(run)["details"]["records"]["ids"]
    raw = {f"members.txt:{i}" for i in range(1, N + 1)} | {str(i) for i in range(2 * N)}
    assert not set(ids) & raw and len(set(ids)) == 2 * N
    assert "Extraction risk at your decoding settings" in html  # aggregates still shown


def test_gate_holds_extraction_risk_at_n(cli, full):
    out, res = full
    path = str(out / "results.json")
    worst = _risk(res["runs"][0])["metrics"]["max_member_risk@100"]["value"]
    assert worst > 0.01
    fail = cli(["gate", path, "--max-leakage", "extraction-risk@100=0.01"])
    assert fail.code == 1 and "extraction risk within 100 queries" in fail.stdout, fail.stdout
    ok = cli(["gate", path, "--max-leakage", "extraction-risk@100=1"])
    assert ok.code == 0, ok.stdout
    missing = cli(["gate", path, "--max-leakage", "extraction-risk@7=0.5"])
    assert missing.code == 1 and "max_member_risk@7" in missing.stdout, missing.stdout
    for bad in ("extraction-risk@0=0.1", "extraction-risk@100=5", "extraction-risk@x=0.1"):
        res_bad = cli(["gate", path, "--max-leakage", bad])
        assert res_bad.code == 2, (bad, res_bad.stdout, res_bad.stderr)
        assert len(res_bad.stderr.strip().splitlines()) == 1


def test_gate_fails_when_no_extraction_risk_was_measured(cli, tiny_run_dir):
    res = cli(
        ["gate", str(tiny_run_dir / "results.json"), "--max-leakage", "extraction-risk@100=0.5"]
    )
    assert res.code == 1 and "no run has a measured extraction-risk" in res.stdout, res.stdout


def test_export_risky_writes_the_top_ids(cli, full, aggregate, tmp_path):
    out, res = full
    run = res["runs"][0]
    dest = tmp_path / "risky.txt"
    ok = cli(["export-risky", str(out / "results.json"), "--top", "3", "--out", str(dest)])
    assert ok.code == 0, ok.stderr
    assert dest.read_text(encoding="utf-8").splitlines() == run["leakage_ranking"]["ids"][:3]
    by_risk = cli(
        ["export-risky", str(out / "results.json"), "--top", "4", "--by", "extraction-risk@100",
         "--out", str(dest)]
    )  # fmt: skip
    assert by_risk.code == 0, by_risk.stderr
    r = _risk(run)["details"]["records"]
    member_risk = {i: v for i, v, m in zip(r["ids"], r["risk@100"], r["members"], strict=True) if m}
    got = dest.read_text(encoding="utf-8").splitlines()
    assert len(got) == 4 and all(i in member_risk for i in got)
    assert [member_risk[i] for i in got] == sorted(member_risk.values(), reverse=True)[:4]
    before = dest.read_text(encoding="utf-8")
    for argv in (
        ["--top", "0"],
        ["--top", "2", "--by", "loss"],
        ["--top", "2", "--by", "extraction-risk@5"],
    ):
        bad = cli(["export-risky", str(out / "results.json"), *argv, "--out", str(dest)])
        assert bad.code == 2 and len(bad.stderr.strip().splitlines()) == 1, (argv, bad.stderr)
    agg = cli(["export-risky", str(aggregate / "results.json"), "--top", "2", "--out", str(dest)])
    assert agg.code == 2 and "aggregate-only" in agg.stderr
    assert dest.read_text(encoding="utf-8") == before  # no failed call touched the file


@pytest.mark.parametrize(
    "flags, word",
    [
        (["--top-p", "1.5"], "top_p"),
        (["--temperature", "0"], "temperature"),
        (["--top-k", "-2"], "top_k"),
        (["--queries", "1,x"], "--queries"),
        (["--queries", "0,10"], "queries"),
        (["--prefix-tokens", "0"], "prefix_tokens"),
    ],
)
def test_bad_extraction_flags_exit_2_in_one_line(cli, byo, tmp_path, flags, word):
    root = byo[0]
    out = tmp_path / "out"
    res = cli(
        ["run", "--model", str(root / "model"), "--members", str(root / "members.txt"),
         "--nonmembers", str(root / "nonmembers.txt"), "--out", str(out), *flags]
    )  # fmt: skip
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.code == 2 and len(lines) == 1 and word in lines[0], res.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "section, word",
    [
        ("[extraction]\ndecoding = {temperature = 0.7, top_q = 0.9}\n", "top_q"),
        ("[extraction]\nqueries = []\n", "queries"),
        ("[extraction]\nsuffix_tokens = 0\n", "suffix_tokens"),
        ("[extraction]\ndecoding = {top_p = 0}\n", "top_p"),
        ("[report]\nleakage_top = -1\n", "leakage_top"),
    ],
)
def test_bad_extraction_config_exits_2(cli, byo, tmp_path, section, word):
    root = byo[0]
    cfg = tmp_path / "audit.toml"
    cfg.write_text(
        f'[target]\naudit_dir = "{root / "model"}"\n[data]\nmembers = "{root / "members.txt"}"\n'
        f'nonmembers = "{root / "nonmembers.txt"}"\n' + section,
        encoding="utf-8",
    )
    res = cli(["run", str(cfg), "--out", str(tmp_path / "out")])
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.code == 2 and len(lines) == 1 and word in lines[0], res.stderr


def test_extraction_config_section_runs_the_attack(cli, byo, tmp_path):
    root = byo[0]
    cfg = tmp_path / "audit.toml"
    cfg.write_text(
        f'[target]\naudit_dir = "{root / "model"}"\nmax_length = 32\n'
        f'[data]\nmembers = "{root / "members.txt"}"\nnonmembers = "{root / "nonmembers.txt"}"\n'
        "[extraction]\ndecoding = {temperature = 0.7, top_k = 5, top_p = 0.9}\n"
        "queries = [1, 1000]\nprefix_tokens = 3\nsuffix_tokens = 2\n",
        encoding="utf-8",
    )
    res = cli(["run", str(cfg), "--out", str(tmp_path / "out"), "--quiet"])
    assert res.code == 0, res.stderr[-2000:]
    run = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))["runs"][0]
    rec = _risk(run)
    assert rec["status"] == "ok"
    assert rec["details"]["decoding"] == {"temperature": 0.7, "top_k": 5, "top_p": 0.9}
    assert rec["headline"] == "max_member_risk@1000"
    assert {a["attack"] for a in run["attacks"]} >= {"lm-loss", "zlib", "min-k"}


def test_byo_lm_bench_times_extraction_risk_beside_the_suite(tmp_path, cli):
    out = tmp_path / "bench.json"
    res = cli(["bench", "byo-lm", "--quick", "--threads", "1", "--extraction", "--out", str(out)])
    assert res.code == 0, res.stderr[-2000:]
    bench = json.loads(out.read_text())["benchmarks"][0]
    setup = bench["setup"]
    assert set(setup["seconds"]) == {"plain", "suite", "suite+extraction"}
    assert setup["extraction_time_over_suite"] == pytest.approx(
        setup["seconds"]["suite+extraction"] / setup["seconds"]["suite"]
    )
    assert setup["extraction"]["decoding"] == {"temperature": 0.7, "top_k": 50, "top_p": 0.9}
    assert "suite+extraction" in bench["targets"]
    bad = cli(["bench", "dp-sgd", "--extraction", "--out", str(out)])
    assert bad.code == 2 and "byo-lm" in bad.stderr


def test_with_a_reference_records_rank_and_tokens_shade_by_target_minus_reference(
    cli, byo, tmp_path
):
    """Independent computation: both models' plain transformers forward passes on the
    scored row, log-softmax in numpy, per-token difference and its sum."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root, members, _ = byo
    out = tmp_path / "out"
    res = _run(cli, byo, out, "--reference", str(root / "reference"), "--leakage-top", "3")
    assert res.code == 0, res.stderr[-3000:]
    run = json.loads((out / "results.json").read_text(encoding="utf-8"))["runs"][0]
    lm = run["leakage_map"]
    assert lm["reference"] is True and lm["ranked_by"] == "target - reference log-likelihood"
    tok = AutoTokenizer.from_pretrained(root / "model")

    def token_lp(path, ids):
        model = AutoModelForCausalLM.from_pretrained(path).eval()
        with torch.no_grad():
            z = model(torch.tensor([ids])).logits[0, :-1].double().numpy()
        z = z - z.max(1, keepdims=True)
        return z[np.arange(len(ids) - 1), ids[1:]] - np.log(np.exp(z).sum(1))

    sums = []
    for text in members:
        ids, _ = _scored_row(tok, text)
        diff = token_lp(root / "model", ids) - token_lp(root / "reference", ids)
        sums.append((float(diff.sum()), diff))
    order = sorted(range(N), key=lambda i: -sums[i][0])
    for row, i in zip(lm["records"], order[:3], strict=True):
        assert row["score"] == pytest.approx(sums[i][0], abs=1e-3)
        np.testing.assert_allclose(row["values"], sums[i][1], atol=1e-4)
    assert any(v > 0 for row in lm["records"] for v in row["values"])
