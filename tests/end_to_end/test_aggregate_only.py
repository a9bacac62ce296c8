"""``--aggregate-only``: results.json and report.html carry no training text and no raw ids.

The tiny audit runs with the flag (the config's ``[report]`` section is left alone, or
explicitly says ``aggregate_only = false``: the flag overrides it). Every private-split
text of the fixture corpus, every 5-word window of the member and non-member texts, every
corpus id and the ``doc-NNNNNN`` pattern are then searched for in both output files, raw,
HTML-escaped and JSON-escaped. The shared tiny run without the flag is the control: its
ids do appear, so the search can fail.

Ids become ``HMAC-SHA256(salt, id)[:16]`` with a random salt per invocation that is never
written, so two invocations give unrelated pseudonyms (they cannot be joined).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

import pytest

from privacy_audit import fixtures
from privacy_audit.audit.config import load_config
from privacy_audit.audit.data import load_audit_data

DOC_ID = re.compile(r"doc-\d{6}")
HEX16 = re.compile(r"[0-9a-f]{16}")
WINDOW = 5

EPSILON_CONFIG = """\
title = "Tiny aggregate-only epsilon audit"
seed = 0
device = "cpu"

[data]
corpus = "fixtures"
n_members = 40
n_nonmembers = 40
n_test = 40

[target]
preset = "tiny"
max_length = 32
public_epochs = 0

[train]
epochs = 1
batch_size = 16

[[defenses]]
name = "dp-sgd"
label = "dp-sgd (eps=8)"
epsilon = 8.0

[attacks]
names = ["loss", "confidence"]

[metrics]
bootstrap = 100

[report]
aggregate_only = false

[epsilon]
gradient_trials = 1000
canaries = 20
canary_kind = "pii"
"""


# --------------------------------------------------------------------------- #
# the leak search
# --------------------------------------------------------------------------- #
def _forms(s: str) -> set[str]:
    """How a string can appear in the outputs: raw, HTML-escaped or JSON-escaped."""
    return {s, html.escape(s), html.escape(s, quote=False), json.dumps(s, ensure_ascii=False)[1:-1]}


def _windows(text: str, k: int = WINDOW) -> list[str]:
    words = text.split()
    return [" ".join(words[i : i + k]) for i in range(max(1, len(words) - k + 1))]


def leaks(blob: str, texts: list[str], window_texts: list[str], ids: list[str]) -> list[str]:
    """Everything of ``texts`` (whole), ``window_texts`` (any 5-word window) and ``ids``
    (whole, or the doc-NNNNNN pattern) that occurs in ``blob``."""
    found = [f"doc id pattern: {m}" for m in sorted(set(DOC_ID.findall(blob)))[:5]]
    found += [f"id: {i}" for i in ids if any(f in blob for f in _forms(i))][:5]
    found += [f"text: {t[:60]}" for t in texts if any(f in blob for f in _forms(t))][:5]
    for t in window_texts:
        hits = [w for w in _windows(t) if any(f in blob for f in _forms(w))]
        if hits:
            found.append(f"5-word window: {hits[0]!r}")
    return found


@pytest.fixture(scope="module")
def secrets_of(tiny_config_path):
    """Texts and ids the outputs must not contain, for a config path."""

    def get(config_path: Path) -> dict[str, list[str]]:
        cfg = load_config(str(config_path))
        data = load_audit_data(cfg.data, cfg.seed, train=True)  # the same split as the run
        private = fixtures.load_corpus("private")
        return {
            "members": list(data.members.texts),
            "texts": [r["text"] for r in private],
            "windows": list(data.members.texts) + list(data.nonmembers.texts),
            "ids": list(data.members.ids) + list(data.nonmembers.ids),
            "member_ids": list(data.members.ids),
            "all_ids": [r["id"] for r in fixtures.load_corpus()],
        }

    return get


def _outputs(out_dir: Path) -> tuple[str, str]:
    return (
        (out_dir / "results.json").read_text(encoding="utf-8"),
        (out_dir / "report.html").read_text(encoding="utf-8"),
    )


def _assert_no_leaks(out_dir: Path, s: dict[str, list[str]]) -> None:
    for name, blob in zip(("results.json", "report.html"), _outputs(out_dir), strict=True):
        found = leaks(blob, s["texts"], s["windows"], s["ids"])
        assert not found, f"{name} leaks: {found}"
        # every corpus id, not only the audited ones (whole ids, cheap substring checks)
        assert not [i for i in s["all_ids"] if i in blob][:3], name


def _example_ids(results: dict) -> list[list[str]]:
    return [
        a["examples"]["ids"] for r in results["runs"] for a in r["attacks"] if a["status"] == "ok"
    ]


# --------------------------------------------------------------------------- #
# run --aggregate-only
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def aggregate_run(tiny_config_path, tmp_path_factory, cli) -> Path:
    d = tmp_path_factory.mktemp("aggregate")
    config = d / "tiny-variant.toml"  # [report] untouched: the flag alone turns it on
    config.write_text(tiny_config_path.read_text(encoding="utf-8"), encoding="utf-8")
    out = d / "out"
    outcome = cli(["run", str(config), "--out", str(out), "--quiet", "--aggregate-only"])
    assert outcome.code == 0, outcome.stderr[-2000:]
    assert "doc-" not in outcome.stdout + outcome.stderr
    return out


def test_run_aggregate_only_writes_no_text_and_no_raw_id(
    aggregate_run, secrets_of, tiny_config_path
):
    s = secrets_of(tiny_config_path)
    assert len(s["members"]) == 40 and len(s["texts"]) > 1000
    _assert_no_leaks(aggregate_run, s)


def test_run_aggregate_only_pseudonyms(aggregate_run, secrets_of, tiny_config_path):
    res = json.loads((aggregate_run / "results.json").read_text(encoding="utf-8"))
    assert res["aggregate_only"] is True
    assert res["config"]["report"]["aggregate_only"] is True
    raw = secrets_of(tiny_config_path)["ids"]
    all_ids = _example_ids(res)
    assert len(all_ids) == 8
    for ids in all_ids:
        assert len(ids) == 80 == len(set(ids))
        assert all(HEX16.fullmatch(i) for i in ids), ids[:3]
        # the same example has the same pseudonym in every run and attack of one file
        assert ids == all_ids[0]
    # not the unsalted hash, which anyone could recompute from a guessed id
    unsalted = {hashlib.sha256(i.encode()).hexdigest()[:16] for i in raw}
    assert not unsalted & set(all_ids[0])
    # the metrics are still there
    att = res["runs"][0]["attacks"][0]
    assert 0 <= att["metrics"]["auc"]["value"] <= 1
    assert len(att["examples"]["scores"]) == 80


def test_report_says_aggregate_only_and_hides_the_exposed_table(aggregate_run, tiny_run_dir):
    _, page = _outputs(aggregate_run)
    assert "Aggregate-only report" in page
    assert "Most exposed training examples" not in page
    _, control = _outputs(tiny_run_dir)
    assert "Most exposed training examples" in control


def test_control_without_the_flag_the_ids_do_appear(tiny_run_dir, secrets_of, tiny_config_path):
    """The search is not vacuous: the ordinary run's outputs hold raw doc ids."""
    s = secrets_of(tiny_config_path)
    results, page = _outputs(tiny_run_dir)
    for blob in (results, page):
        found = leaks(blob, s["texts"], s["windows"], s["ids"])
        assert any(f.startswith("doc id pattern") for f in found), found
        assert any(f.startswith("id: ") for f in found), found
    assert set(s["member_ids"]) <= set(_example_ids(json.loads(results))[0])
    # and the text search finds text where there is some
    sentence = f"<p>{html.escape(s['members'][3])}</p>"
    assert leaks(sentence, s["texts"], [], [])
    words = s["members"][7].split()
    snippet = "x " + " ".join(words[2 : 2 + WINDOW]) + " y"
    assert leaks(snippet, [], s["windows"], [])
    assert not leaks(" ".join(words[2 : 2 + WINDOW - 1]), [], s["windows"], [])


# --------------------------------------------------------------------------- #
# epsilon --aggregate-only (overrides an explicit [report] aggregate_only = false)
# --------------------------------------------------------------------------- #
def test_epsilon_aggregate_only_overrides_the_config(tmp_path, cli, secrets_of):
    from privacy_audit.audit.epsilon.input_canaries import make_canaries

    config = tmp_path / "epsilon.toml"
    config.write_text(EPSILON_CONFIG, encoding="utf-8")
    out = tmp_path / "out"
    outcome = cli(["epsilon", str(config), "--out", str(out), "--quiet", "--aggregate-only"])
    assert outcome.code == 0, outcome.stderr[-2000:]
    s = secrets_of(config)
    _assert_no_leaks(out, s)
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert res["aggregate_only"] is True and res["config"]["report"]["aggregate_only"] is True
    assert res["runs"][0]["epsilon_audit"]["audits"]  # the ε audits ran
    (ic,) = [a for a in res["runs"][0]["epsilon_audit"]["audits"] if a["name"].startswith("input")]
    assert ic["status"] == "ok" and "examples" not in ic  # no per-canary inclusion bits
    # the canaries inserted into training are training text too
    cfg = load_config(str(config))
    data = load_audit_data(cfg.data, cfg.seed, train=True)
    canaries = make_canaries(
        20, "pii", len(data.label_names), data.members.texts + data.nonmembers.texts, cfg.seed
    )
    for blob in _outputs(out):
        assert not re.search(r"canary-\d{5}", blob)
        assert not leaks(blob, canaries.examples.texts, canaries.examples.texts, [])
        assert "canary-mail.test" not in blob


# --------------------------------------------------------------------------- #
# score --aggregate-only: cheap, so it also checks that pseudonyms cannot be joined
# --------------------------------------------------------------------------- #
def _scores_csv(path: Path) -> tuple[Path, list[str]]:
    ids = [f"doc-{i:06d}" for i in range(60)]
    lines = ["score,member,id"] + [
        f"{(i % 7) / 7 + (1.0 if i < 30 else 0.0)},{1 if i < 30 else 0},{ident}"
        for i, ident in enumerate(ids)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, ids


def test_score_aggregate_only_cannot_be_joined_across_runs(tmp_path, cli):
    csv_path, ids = _scores_csv(tmp_path / "scores.csv")
    pseudonyms = []
    for name in ("a", "b"):
        out = tmp_path / name
        outcome = cli(
            ["score", str(csv_path), "--out", str(out), "--bootstrap", "100", "--aggregate-only"]
        )
        assert outcome.code == 0, outcome.stderr
        for blob in _outputs(out):
            assert not DOC_ID.search(blob)
        res = json.loads((out / "results.json").read_text(encoding="utf-8"))
        assert res["aggregate_only"] is True
        (got,) = _example_ids(res)
        assert len(set(got)) == len(ids) and all(HEX16.fullmatch(i) for i in got)
        pseudonyms.append(got)
    # a fresh salt each time: no pseudonym of one run occurs in the other
    assert not set(pseudonyms[0]) & set(pseudonyms[1])
    # control: without the flag the raw ids are written
    plain = tmp_path / "plain"
    assert cli(["score", str(csv_path), "--out", str(plain), "--bootstrap", "100"]).code == 0
    assert _example_ids(json.loads((plain / "results.json").read_text(encoding="utf-8")))[0] == ids
