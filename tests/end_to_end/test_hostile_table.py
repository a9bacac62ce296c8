"""The hostile-input table: every subcommand fed malformed files, impossible values,
unknown names, missing paths and outputs that would overwrite an input.

Each row says what must happen: the exit code (2 for bad input, before any training or
write) and a word the one-line refusal must contain. Every row also checks that nothing
was traced back, that stderr's last line is ``privacy-audit...: error: ...`` for a
refusal, that a refused command wrote no output folder and that no input changed.
``tests/bad_inputs_outcomes.py`` runs the slower cases (training, resume) as a tool.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest


@dataclass
class Case:
    name: str
    argv: Callable[[Path], list[str]]
    code: int = 2
    needle: str = ""
    # files the command must not create (relative to the case folder)
    absent: tuple[str, ...] = ("out",)
    setup: Callable[[Path], None] = field(default=lambda d: None)


CASES: list[Case] = []


def case(name, argv, code=2, needle="", absent=("out",), setup=lambda d: None):
    CASES.append(Case(name, argv, code, needle, absent, setup))


# --------------------------------------------------------------------------- files
def _scores(d: Path, rows, header=("score", "member"), name="s.csv") -> str:
    p = d / name
    with open(p, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        if header is not None:
            w.writerow(header)
        w.writerows(rows)
    return str(p)


def _good_rows(n=40):
    rng = np.random.default_rng(0)
    return [(f"{rng.normal(i % 2, 1):.5f}", i % 2) for i in range(n)]


def _raw(d: Path, text: str | bytes, name: str) -> str:
    p = d / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return str(p)


def _results(d: Path, runs=None, name="r.json", **top) -> str:
    att = {
        "attack": "loss",
        "status": "ok",
        "n_members": 1000,
        "n_nonmembers": 1000,
        "metrics": {
            "auc": {"value": 0.6, "ci_low": 0.55, "ci_high": 0.65},
            "tpr_at_fpr_0.01": {"value": 0.02, "ci_low": 0.01, "ci_high": 0.03},
            "tpr_at_fpr_0.001": {"value": 0.0, "ci_low": 0.0, "ci_high": 0.01},
            "advantage": {"value": 0.1, "ci_low": 0.05, "ci_high": 0.15},
            "epsilon_lower_bound": {"value": 0.1, "ci_low": 0.1, "ci_high": None},
        },
    }
    run = {"name": "r", "claim": {"notion": "none"}, "attacks": [att], "leakage": []}
    res = {"schema_version": 1, "tool": {"name": "privacy-audit"}, "runs": runs or [run]}
    res.update(top)
    return _raw(d, json.dumps(res), name)


def _edit_results(d: Path, edit, name="r.json") -> str:
    p = Path(_results(d, name=name))
    res = json.loads(p.read_text(encoding="utf-8"))
    edit(res)
    p.write_text(json.dumps(res), encoding="utf-8")
    return str(p)


def _toml(d: Path, text: str, name="c.toml") -> str:
    return _raw(d, text, name)


def _out(d: Path) -> str:
    return str(d / "out")


# --------------------------------------------------------------------------- score
for bad in ["x", "", "1_000", "0x1f", "1,5", "--1", "1e", "١", "True", "[1]", "1.2.3", " "]:
    case(
        f"score: score {bad!r}",
        lambda d, b=bad: ["score", _scores(d, [(b, 1)] + _good_rows()), "--out", _out(d)],
        needle="is not a number",
    )
for bad in ["2", "-1", "yes", "", "0.5", "1.5", "t", "member", "nan"]:
    case(
        f"score: member {bad!r}",
        lambda d, b=bad: ["score", _scores(d, [("0.5", b)] + _good_rows()), "--out", _out(d)],
        needle="member must be 0/1",
    )
for name, rows, header, needle in [
    ("no rows", [], ("score", "member"), "no rows"),
    ("no score column", [("1", "0")], ("s", "member"), "no column 'score'"),
    ("no member column", [("1", "0")], ("score", "m"), "no column 'member'"),
    ("one class", [(str(i), 1) for i in range(20)], ("score", "member"), "non-member"),
    ("one class (non-members)", [(str(i), 0) for i in range(20)], ("score", "member"), "member"),
    ("one row per class", [("1", 1), ("0", 0)], ("score", "member"), "at least"),
    ("NaN score", [("nan", 1)] + _good_rows(), ("score", "member"), "NaN or infinite"),
    ("inf score", [("inf", 0)] + _good_rows(), ("score", "member"), "NaN or infinite"),
    (
        "duplicate ids",
        [(s, m, "a") for s, m in _good_rows()],
        ("score", "member", "id"),
        "duplicate id",
    ),
    (
        "duplicate column",
        [(s, m, s) for s, m in _good_rows()],
        ("score", "member", "score"),
        "twice",
    ),
    ("extra field", [("0.5", 1, "x")] + _good_rows(), ("score", "member"), "fields"),
    ("empty texts", [(s, m, "") for s, m in _good_rows()], ("score", "member", "text"), "empty"),
    (
        "all texts copies",
        [(s, m, "same text") for s, m in _good_rows()],
        ("score", "member", "text"),
        "exact duplicates",
    ),
    (
        "member copies",
        [(s, m, "same text" if m else f"other {i}") for i, (s, m) in enumerate(_good_rows())],
        ("score", "member", "text"),
        "distinct record",
    ),
]:
    case(
        f"score: {name}",
        lambda d, r=rows, h=header: ["score", _scores(d, r, h), "--out", _out(d)],
        needle=needle,
    )
for name, content, needle in [
    ("empty file", "", "no rows"),
    ("not utf-8", b"score,member\n\xff\xfe,1\n", "UTF-8"),
    ("blank lines only", "\n\n\n", "no rows"),
    ("header only", "score,member\n", "no rows"),
]:
    case(
        f"score: {name}",
        lambda d, c=content: ["score", _raw(d, c, "s.csv"), "--out", _out(d)],
        needle=needle,
    )
for flag, val, needle in [
    ("--delta", "0", "--delta"),
    ("--delta", "1", "--delta"),
    ("--delta", "-0.1", "--delta"),
    ("--delta", "nan", "--delta"),
    ("--delta", "abc", "--delta"),
    ("--bootstrap", "0", "--bootstrap"),
    ("--bootstrap", "-5", "--bootstrap"),
    ("--bootstrap", "x", "--bootstrap"),
    ("--bootstrap", "1e9", "--bootstrap"),
    ("--seed", "x", "--seed"),
]:
    case(
        f"score: {flag} {val}",
        lambda d, f=flag, v=val: ["score", _scores(d, _good_rows()), f, v, "--out", _out(d)],
        needle=needle,
    )
case(
    "score: missing file",
    lambda d: ["score", str(d / "nope.csv"), "--out", _out(d)],
    needle="does not exist",
)
case(
    "score: a directory",
    lambda d: ["score", str(d), "--out", _out(d)],
    needle="directory",
    absent=(),
)
case("score: /dev/null", lambda d: ["score", "/dev/null", "--out", _out(d)], needle="regular file")
case("score: no argument", lambda d: ["score"], needle="required")
case(
    "score: --out is the input file",
    lambda d: ["score", _scores(d, _good_rows()), "--out", str(d / "s.csv")],
    needle="output directory",
    absent=(),
)
case(
    "score: --out under a file",
    lambda d: ["score", _scores(d, _good_rows()), "--out", str(d / "s.csv" / "o")],
    needle="output",
    absent=(),
)


# --------------------------------------------------------------------------- gate
def _g(d, *extra, results=None):
    return ["gate", results or _results(d), *extra]


for flag, val in [
    ("--max-auc", "-0.1"),
    ("--max-auc", "1.5"),
    ("--max-auc", "nan"),
    ("--max-auc", "x"),
    ("--max-tpr-at-1pct-fpr", "2"),
    ("--max-tpr-at-1pct-fpr", "-1"),
    ("--max-epsilon-lb", "-1"),
    ("--max-epsilon-lb", "inf"),
    ("--max-epsilon-lb", "nan"),
]:
    case(f"gate: {flag} {val}", lambda d, f=flag, v=val: _g(d, f, v), needle=flag, absent=())
for val, needle in [
    ("bogus=1", "unknown leakage metric"),
    ("exposure", "NAME=VALUE"),
    ("exposure=-1", "exposure"),
    ("extraction-rate=2", "extraction-rate"),
    ("inversion-recall=x", "inversion-recall"),
    ("extraction-risk@0=0.1", "extraction-risk"),
]:
    case(
        f"gate: --max-leakage {val}",
        lambda d, v=val: _g(d, "--max-leakage", v),
        needle=needle,
        absent=(),
    )
case("gate: nothing to check", lambda d: _g(d), needle="needs --baseline", absent=())
case(
    "gate: --tolerance without baseline",
    lambda d: _g(d, "--max-auc", "0.9", "--tolerance", "0.1"),
    needle="--tolerance",
    absent=(),
)
case(
    "gate: --fail-on-missing without baseline",
    lambda d: _g(d, "--max-auc", "0.9", "--fail-on-missing"),
    needle="--fail-on-missing",
    absent=(),
)
case(
    "gate: --match without baseline",
    lambda d: _g(d, "--max-auc", "0.9", "--match", "a=b"),
    needle="--match",
    absent=(),
)
case(
    "gate: --tolerance -1",
    lambda d: _g(d, "--baseline", _results(d, name="b.json"), "--tolerance", "-1"),
    needle="--tolerance",
    absent=(),
)
case(
    "gate: --tolerance nan",
    lambda d: _g(d, "--baseline", _results(d, name="b.json"), "--tolerance", "nan"),
    needle="--tolerance",
    absent=(),
)
case(
    "gate: --match without =",
    lambda d: _g(d, "--baseline", _results(d, name="b.json"), "--match", "ab"),
    needle="NEW_RUN=BASELINE_RUN",
    absent=(),
)
case(
    "gate: --match unknown run",
    lambda d: _g(d, "--baseline", _results(d, name="b.json"), "--match", "x=r"),
    needle="no run 'x'",
    absent=(),
)
case(
    "gate: missing results",
    lambda d: ["gate", str(d / "none.json"), "--max-auc", "0.9"],
    needle="does not exist",
    absent=(),
)
case(
    "gate: a directory",
    lambda d: ["gate", str(d), "--max-auc", "0.9"],
    needle="is a directory",
    absent=(),
)
case(
    "gate: /dev/null",
    lambda d: ["gate", "/dev/null", "--max-auc", "0.9"],
    needle="not a regular file",
    absent=(),
)
case(
    "gate: missing baseline",
    lambda d: _g(d, "--baseline", str(d / "b.json")),
    needle="does not exist",
    absent=(),
)
case(
    "gate: --junit is the results",
    lambda d: _g(d, "--max-auc", "0.9", "--junit", str(d / "r.json")),
    needle="--junit",
    absent=(),
)
case(
    "gate: --summary is the baseline",
    lambda d: _g(d, "--baseline", _results(d, name="b.json"), "--summary", str(d / "b.json")),
    needle="--summary",
    absent=(),
)
for name, text, needle in [
    ("not JSON", "{", "JSON"),
    ("a list", "[]", "'runs'"),
    ("no runs", '{"schema_version": 1}', "'runs'"),
    ("runs not a list", '{"schema_version": 1, "runs": {}}', "'runs'"),
    ("run not an object", '{"schema_version": 1, "runs": [1]}', "run #1"),
    ("run without name", '{"schema_version": 1, "runs": [{"attacks": []}]}', "run #1"),
    (
        "attacks not a list",
        '{"schema_version": 1, "runs": [{"name": "r", "attacks": 3}]}',
        "'attacks'",
    ),
    (
        "attack without name",
        '{"schema_version": 1, "runs": [{"name": "r", "attacks": [{}]}]}',
        "'attacks'",
    ),
    (
        "metrics not an object",
        '{"schema_version": 1, "runs": [{"name": "r", "attacks": [{"attack": "a", "metrics": []}]}]}',
        "not an object",
    ),
    (
        "NaN bare",
        '{"schema_version": 1, "runs": [{"name": "r", "attacks": [{"attack": "a", "status": "ok", "metrics": {"auc": {"value": NaN}}}]}]}',
        "non-finite",
    ),
    ("deep nesting", "[" * 100 + "]" * 100, "deep"),
    ("huge int", '{"schema_version": 1, "runs": [], "x": ' + "9" * 5000 + "}", "digit"),
    ("empty file", "", "JSON"),
]:
    case(
        f"gate: results {name}",
        lambda d, t=text: ["gate", _raw(d, t, "bad.json"), "--max-auc", "0.9"],
        needle=needle,
        absent=(),
    )
for name, edit, needle in [
    ("schema 999", lambda r: r.update(schema_version=999), "does not know"),
    ("schema string", lambda r: r.update(schema_version="1"), "does not know"),
    (
        "AUC -5",
        lambda r: r["runs"][0]["attacks"][0]["metrics"]["auc"].update(value=-5.0),
        "outside",
    ),
    (
        "AUC 1.2",
        lambda r: r["runs"][0]["attacks"][0]["metrics"]["auc"].update(value=1.2),
        "outside",
    ),
    (
        "AUC string",
        lambda r: r["runs"][0]["attacks"][0]["metrics"]["auc"].update(value="0.6"),
        "number or null",
    ),
    (
        "AUC bool",
        lambda r: r["runs"][0]["attacks"][0]["metrics"]["auc"].update(value=True),
        "number or null",
    ),
    (
        "ci reversed",
        lambda r: r["runs"][0]["attacks"][0]["metrics"]["auc"].update(ci_low=0.9, ci_high=0.1),
        "above ci_high",
    ),
    (
        "TPR 3",
        lambda r: r["runs"][0]["attacks"][0]["metrics"]["tpr_at_fpr_0.01"].update(value=3.0),
        "outside",
    ),
    (
        "advantage -2",
        lambda r: r["runs"][0]["attacks"][0]["metrics"]["advantage"].update(value=-2.0),
        "outside",
    ),
    (
        "ε bound -1",
        lambda r: r["runs"][0]["attacks"][0]["metrics"]["epsilon_lower_bound"].update(value=-1.0),
        "outside",
    ),
    (
        "epsilon_audit not an object",
        lambda r: r["runs"][0].update(epsilon_audit=[1]),
        "epsilon_audit",
    ),
    ("leakage not a list", lambda r: r["runs"][0].update(leakage={}), "'leakage'"),
]:
    case(
        f"gate: results {name}",
        lambda d, e=edit: ["gate", _edit_results(d, e), "--max-auc", "0.9"],
        needle=needle,
        absent=(),
    )
    case(
        f"gate: baseline {name}",
        lambda d, e=edit: ["gate", _results(d), "--baseline", _edit_results(d, e, name="b.json")],
        needle=needle,
        absent=(),
    )
# fail-open cases: the gate must fail (exit 1), never pass
case(
    "gate: nothing measured",
    lambda d: _g(
        d,
        "--max-auc",
        "0.9",
        results=_results(
            d, runs=[{"name": "r", "attacks": [{"attack": "a", "status": "error", "reason": "x"}]}]
        ),
    ),
    code=1,
    needle="",
    absent=(),
)
case(
    "gate: nothing compared",
    lambda d: [
        "gate",
        _results(d, runs=[{"name": "a", "attacks": []}, {"name": "b", "attacks": []}]),
        "--baseline",
        _results(d, name="b.json"),
    ],
    code=1,
    absent=(),
)
case(
    "gate: a null AUC under --max-auc",
    lambda d: [
        "gate",
        _edit_results(d, lambda r: r["runs"][0]["attacks"][0]["metrics"]["auc"].update(value=None)),
        "--max-auc",
        "0.9",
    ],
    code=1,
    absent=(),
)
case(
    "gate: an unresolved TPR under --max-tpr",
    lambda d: [
        "gate",
        _edit_results(d, lambda r: r["runs"][0]["attacks"][0].update(n_nonmembers=150)),
        "--max-tpr-at-1pct-fpr",
        "0.5",
    ],
    code=1,
    absent=(),
)


# --------------------------------------------------------------------------- run / epsilon
def _run_cfg(d, text):
    return ["run", _toml(d, text), "--out", _out(d)]


for text, needle in [
    ("seed = 'x'\n", "seed"),
    ("seed = -1\n", "seed"),
    ("bogus = 1\n", "unknown config key 'bogus'"),
    ("[data]\nn_members = 0\n", "n_members"),
    ("[data]\nn_members = 'ten'\n", "n_members"),
    ("[data]\ncorpus = 'nope'\n", "nope"),
    ("[data]\nmembers = 'missing.csv'\nnonmembers = 'missing2.csv'\n", "does not exist"),
    ("[data]\nbogus = 1\n", "data.bogus"),
    ("[target]\npreset = 'huge'\n", "preset"),
    ("[target]\nmax_length = 0\n", "max_length"),
    ("[target]\nmax_length = 100000\n", "max_length"),
    ("[target]\ndtype = 'float8'\n", "dtype"),
    ("[target]\naudit_dir = 'org/hub-model'\n", "audit_dir"),
    ("[train]\nepochs = 0\n", "train.epochs"),
    ("[train]\nepochs = 1.5\n", "train.epochs"),
    ("[train]\nbatch_size = 0\n", "batch_size"),
    ("[train]\nlearning_rate = -1.0\n", "learning_rate"),
    ("[train]\nlearning_rate = nan\n", "learning_rate"),
    ("[metrics]\ndelta = 0\n", "delta"),
    ("[metrics]\ndelta = 1.5\n", "delta"),
    ("[metrics]\ndelta = inf\n", "delta"),
    ("[metrics]\nconfidence = 1\n", "confidence"),
    ("[metrics]\nconfidence = 0\n", "confidence"),
    ("[metrics]\nbootstrap = 0\n", "bootstrap"),
    ("[metrics]\nbootstrap = 'many'\n", "bootstrap"),
    ("[attacks]\nnames = []\n", "attacks.names"),
    ("[attacks]\nnames = 'loss'\n", "attacks.names"),
    ("[attacks]\nnames = ['loss', 'loss']\n", "twice"),
    ("[attacks]\nnames = ['los']\n", "did you mean 'loss'"),
    ("[attacks]\nnames = ['ez_mia']\n", "did you mean 'ez-mia'"),
    ("[attacks]\nnames = [3]\n", "unknown attack"),
    ("[[defenses]]\nname = 'nope'\n", "defenses[0]"),
    ("[[defenses]]\nname = 'dp-sgd'\nepsilon = -1.0\n", "epsilon"),
    ("[[defenses]]\nname = 'dp-sgd'\nepsilon = 0.0\n", "epsilon"),
    ("[[defenses]]\nname = 'dp-sgd'\nepsilon = nan\n", "epsilon"),
    ("[[defenses]]\nname = 'dp-sgd'\nepsilon = 1e400\n", "epsilon"),
    ("[[defenses]]\nname = 'dp-sgd'\nepsilon = 8.0\ndelta = 1.0\n", "delta"),
    ("[[defenses]]\nname = 'dp-sgd'\nepsilon = 8.0\ndelta = 0.0\n", "delta"),
    ("[[defenses]]\nname = 'dp-sgd'\nepsilon = 8.0\nmax_grad_norm = 0.0\n", "max_grad_norm"),
    ("[[defenses]]\nname = 'dp-sgd'\nepsilon = 8.0\nbogus = 1\n", "bogus"),
    (
        "[[defenses]]\nname = 'none'\nlabel = 'a'\n[[defenses]]\nname = 'none'\nlabel = 'a'\n",
        "label",
    ),
    ("defenses = 3\n", "defenses"),
    ("[epsilon]\nenabled = 'yes'\n", "epsilon.enabled"),
    ("[epsilon]\ncanaries = 1\n", "canaries"),
    ("[epsilon]\ncanary_kind = 'emoji'\n", "canary_kind"),
    ("[epsilon]\ngradient_trials = 0\n", "gradient_trials"),
    ("[claim]\nepsilon = -1.0\n", "claim"),
    ("[report]\nleakage_top = -1\n", "leakage_top"),
    ("device = 'tpu'\n", "device"),
    ("title = 3\n", "title"),
    ("[data\n", "TOML"),
    ("x = 1 = 2\n", "TOML"),
]:
    case(f"run config: {text.strip()[:50]!r}", lambda d, t=text: _run_cfg(d, t), needle=needle)
case(
    "run: missing config",
    lambda d: ["run", str(d / "nope.toml"), "--out", _out(d)],
    needle="does not exist",
)
case(
    "run: config is a directory",
    lambda d: ["run", str(d), "--out", _out(d)],
    needle="directory",
    absent=(),
)
for flags, needle in [
    (["--model", "nope"], "--model needs --members"),
    (["--members", "m.txt", "--max-length", "0"], "--members/--max-length need --model"),
    (["--members", "m.txt"], "--model"),
    (["--attacks", "quux"], "unknown attack"),
    (["--attacks", ""], "no attack"),
    (["--attacks", "ez_mia"], "did you mean 'ez-mia'"),
    (["--max-length", "0"], "--max-length needs --model"),
    (["--max-length", "x"], "--max-length"),
    (["--device", "tpu"], "--device"),
    (["--dtype", "float8"], "--dtype"),
    (["--quick", "--model", "m"], "--quick"),
]:
    case(
        f"run flags: {' '.join(flags)}",
        lambda d, f=flags: ["run", *f, "--out", _out(d)],
        needle=needle,
    )
case(
    "epsilon: missing config",
    lambda d: ["epsilon", str(d / "nope.toml"), "--out", _out(d)],
    needle="does not exist",
)
case(
    "epsilon: bad config",
    lambda d: ["epsilon", _toml(d, "[epsilon]\ncanaries = 1\n"), "--out", _out(d)],
    needle="canaries",
)


# --------------------------------------------------------------------------- compare
case(
    "compare: one run", lambda d: ["compare", _results(d), "--out", _out(d)], needle="at least two"
)
case(
    "compare: missing run",
    lambda d: ["compare", _results(d), str(d / "none.json"), "--out", _out(d)],
    needle="none.json",
)
case(
    "compare: not JSON",
    lambda d: ["compare", _results(d), _raw(d, "{", "b.json"), "--out", _out(d)],
    needle="b.json",
)
case(
    "compare: another tool",
    lambda d: ["compare", _results(d), _raw(d, '{"runs": []}', "b.json"), "--out", _out(d)],
    needle="incompatible",
)
case(
    "compare: schema 999",
    lambda d: [
        "compare",
        _results(d),
        _results(d, name="b.json", schema_version=999),
        "--out",
        _out(d),
    ],
    needle="schema",
)
case(
    "compare: --out writes over a run",
    lambda d: [
        "compare",
        _results(d, name="compare.json"),
        _results(d, name="b.json"),
        "--out",
        str(d),
    ],
    needle="--out",
    absent=(),
)
case(
    "compare: --out under a file",
    lambda d: [
        "compare",
        _results(d),
        _results(d, name="b.json"),
        "--out",
        str(d / "r.json" / "o"),
    ],
    needle="output",
    absent=(),
)


# --------------------------------------------------------------------------- export-risky
for flags, needle in [
    (["--top", "0"], "--top"),
    (["--top", "-1"], "--top"),
    (["--top", "x"], "--top"),
    (["--top", "2", "--by", "magic"], "--by"),
]:
    case(
        f"export-risky: {' '.join(flags)}",
        lambda d, f=flags: ["export-risky", _results(d), *f, "--out", str(d / "ids.txt")],
        needle=needle,
        absent=("ids.txt",),
    )
case(
    "export-risky: no ranking",
    lambda d: ["export-risky", _results(d), "--top", "2", "--out", str(d / "ids.txt")],
    needle="rank",
    absent=("ids.txt",),
)
case(
    "export-risky: missing results",
    lambda d: ["export-risky", str(d / "none.json"), "--top", "2", "--out", str(d / "ids.txt")],
    needle="does not exist",
    absent=("ids.txt",),
)
case(
    "export-risky: --out is the results",
    lambda d: ["export-risky", _results(d), "--top", "2", "--out", str(d / "r.json")],
    needle="--out",
    absent=(),
)


# --------------------------------------------------------------------------- canaries
def _tok_dir(d: Path) -> str:
    return str(d)  # a folder with no tokenizer in it


for flags, needle in [
    (["--design", "emoji"], "unknown design 'emoji'"),
    (["--n", "5"], "--n"),
    (["--n", "1000000"], "--n"),
    (["--n", "x"], "--n"),
    (["--repeat", "0"], "--repeat"),
    (["--repeat", "100"], "--repeat"),
    (["--secret-tokens", "0"], "--secret-tokens"),
    (["--prefix-tokens", "-1"], "--prefix-tokens"),
    (["--temperature", "0"], "--temperature"),
    (["--temperature", "nan"], "--temperature"),
    (["--design", "bigram"], "--data"),
    (["--design", "synthetic"], "--base-model"),
]:
    case(
        f"canaries make: {' '.join(flags)}",
        lambda d, f=flags: [
            "canaries",
            "make",
            "--tokenizer",
            _tok_dir(d),
            *(f if "--design" in f else ["--design", "random-token", *f]),
            "--out",
            _out(d),
        ],
        needle=needle,
    )
case(
    "canaries make: hub tokenizer",
    lambda d: [
        "canaries",
        "make",
        "--design",
        "random-token",
        "--tokenizer",
        "gpt2",
        "--out",
        _out(d),
    ],
    needle="hub",
)
case(
    "canaries make: missing tokenizer",
    lambda d: [
        "canaries",
        "make",
        "--design",
        "random-token",
        "--tokenizer",
        str(d / "none"),
        "--out",
        _out(d),
    ],
    needle="--tokenizer",
)
for flags, needle in [
    ([], "need --model and --canaries"),
    (["--model", "m"], "need --model and --canaries"),
    (["--model", "m", "--canaries", "c", "--delta", "0"], "--delta"),
    (["--model", "m", "--canaries", "c", "--delta", "1"], "--delta"),
    (["--model", "m", "--canaries", "c", "--confidence", "1"], "--confidence"),
    (["--model", "m", "--canaries", "c", "--claimed-epsilon", "0"], "--claimed-epsilon"),
    (["--model", "m", "--canaries", "c", "--claimed-epsilon", "-2"], "--claimed-epsilon"),
    (
        ["--model", "m", "--canaries", "c", "--delta", "1e-6", "--claimed-delta", "1e-5"],
        "--claimed-delta",
    ),
    (["--model", "m", "--canaries", "nope"], "canaries directory"),
    (["--model", "org/hub", "--canaries", "nope"], "canaries"),
]:
    case(
        f"canaries audit: {' '.join(flags) or 'nothing'}",
        lambda d, f=flags: ["canaries", "audit", *f, "--out", _out(d)],
        needle=needle,
    )


# --------------------------------------------------------------------------- dataset-inference
case("dataset-inference: nothing", lambda d: ["dataset-inference", "--out", _out(d)], needle="")
case(
    "dataset-inference: no suspect",
    lambda d: [
        "dataset-inference",
        "--model",
        str(d),
        "--validation",
        _raw(d, "a\nb\n", "v.txt"),
        "--out",
        _out(d),
    ],
    needle="suspect",
)
case(
    "dataset-inference: missing suspect",
    lambda d: [
        "dataset-inference",
        "--model",
        str(d),
        "--suspect",
        str(d / "none.txt"),
        "--validation",
        _raw(d, "a\nb\n", "v.txt"),
        "--out",
        _out(d),
    ],
    needle="--suspect",
)
case(
    "dataset-inference: missing model",
    lambda d: [
        "dataset-inference",
        "--model",
        str(d / "none"),
        "--suspect",
        _raw(d, "a\nb\n", "s.txt"),
        "--validation",
        _raw(d, "a\nb\n", "v.txt"),
        "--out",
        _out(d),
    ],
    needle="does not exist",
)
for text, needle in [
    ("[target]\naudit_dir = '.'\n", "[dataset_inference]"),
    ("[target]\naudit_dir = '.'\n[dataset_inference]\nvalidation = 'v.txt'\n", "suspect"),
    (
        "[target]\naudit_dir = '.'\n[dataset_inference]\nsuspect = 's.txt'\nvalidation = 'v.txt'\nalpha = 0\n",
        "alpha",
    ),
    (
        "[target]\naudit_dir = '.'\n[dataset_inference]\nsuspect = 's.txt'\nvalidation = 'v.txt'\nalpha = 1.5\n",
        "alpha",
    ),
    (
        "[target]\naudit_dir = '.'\n[dataset_inference]\nsuspect = 's.txt'\nvalidation = 'v.txt'\nfit_fraction = 1\n",
        "fit_fraction",
    ),
    (
        "[target]\naudit_dir = '.'\n[dataset_inference]\nsuspect = 's.txt'\nvalidation = 'v.txt'\nbogus = 1\n",
        "bogus",
    ),
    (
        "[target]\naudit_dir = '.'\n[dataset_inference]\nsuspect = 3\nvalidation = 'v.txt'\n",
        "wrong type",
    ),
    ("[target]\naudit_dir = '.'\ndataset_inference = 3\n", "dataset_inference"),
]:
    case(
        f"dataset-inference config: {text.splitlines()[-1][:40]!r}",
        lambda d, t=text: ["dataset-inference", _toml(d, t), "--out", _out(d)],
        needle=needle,
    )
case(
    "dataset-inference: --fit-fraction 0",
    lambda d: [
        "dataset-inference",
        "--model",
        str(d),
        "--suspect",
        _raw(d, "a\nb\n", "s.txt"),
        "--validation",
        _raw(d, "c\nd\n", "v.txt"),
        "--fit-fraction",
        "0",
        "--out",
        _out(d),
    ],
    needle="fit",
)


# --------------------------------------------------------------------------- dp-check, bench, misc
case(
    "dp-check: missing setup",
    lambda d: ["dp-check", str(d / "none.py"), "--out", _out(d)],
    needle="does not exist",
)
case(
    "dp-check: budget 0",
    lambda d: ["dp-check", _raw(d, "x = 1\n", "s.py"), "--budget", "0", "--out", _out(d)],
    needle="--budget",
)
case(
    "dp-check: budget nan",
    lambda d: ["dp-check", _raw(d, "x = 1\n", "s.py"), "--budget", "nan", "--out", _out(d)],
    needle="--budget",
)
case(
    "dp-check: no CLAIM",
    lambda d: ["dp-check", _raw(d, "x = 1\n", "s.py"), "--out", _out(d)],
    needle="CLAIM",
)
case(
    "dp-check: no make_private",
    lambda d: [
        "dp-check",
        _raw(
            d,
            "CLAIM = dict(epsilon=1.0, delta=1e-5, noise_multiplier=1.0, max_grad_norm=1.0, "
            "sample_rate=0.01, steps=10)\n",
            "s.py",
        ),
        "--out",
        _out(d),
    ],
    needle="make_private",
)
case(
    "canaries make: no design",
    lambda d: ["canaries", "make", "--tokenizer", str(d), "--out", _out(d)],
    needle="--design",
)
case(
    "dp-check: syntax error",
    lambda d: ["dp-check", _raw(d, "def (:\n", "s.py"), "--out", _out(d)],
    needle="s.py",
)
case("bench: unknown", lambda d: ["bench", "nope"], needle="nope", absent=())
case(
    "bench dp-check: --seeds 0",
    lambda d: ["bench", "dp-check", "--seeds", "0", "--out", str(d / "b.json")],
    needle="--seeds",
    absent=("b.json",),
)
case("unknown command", lambda d: ["frobnicate"], needle="invalid choice", absent=())
case("experiment: unknown", lambda d: ["experiment", "nope"], needle="nope", absent=())


# --------------------------------------------------------------------------- more rows
def _model_dir(d: Path) -> str:
    m = d / "model"
    m.mkdir(exist_ok=True)
    (m / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}), "utf-8")
    return str(m)


def _path_of(kind: str, d: Path) -> str:
    if kind == "missing":
        return str(d / "absent.txt")
    if kind == "directory":
        (d / "a-dir").mkdir(exist_ok=True)
        return str(d / "a-dir")
    return "/dev/null"


for flag in ("--members", "--nonmembers", "--test", "--public"):
    for kind, needle in (
        ("missing", "does not exist"),
        ("directory", "directory"),
        ("device", "regular file"),
    ):

        def _argv(d, f=flag, k=kind):
            paths = {
                "--members": _raw(d, "a b c\nd e f\n", "m.txt"),
                "--nonmembers": _raw(d, "g h i\nj k l\n", "n.txt"),
            }
            paths[f] = _path_of(k, d)
            argv = ["run", "--model", _model_dir(d)]
            for g, p in paths.items():
                argv += [g, p]
            return [*argv, "--out", _out(d)]

        absent = ("out",) if kind != "directory" else ("out",)
        case(f"run flags: {flag} {kind}", _argv, needle=needle, absent=absent)

for name in (
    "inversion-recall",
    "extraction-rate",
    "pii-extraction-rate",
    "attribute-accuracy",
    "extraction-risk",
    "extraction-risk@100",
):
    for val in ("2", "-0.5", "nan", "x"):
        case(
            f"gate: --max-leakage {name}={val}",
            lambda d, n=name, v=val: _g(d, "--max-leakage", f"{n}={v}"),
            needle=name.split("@")[0],
            absent=(),
        )
for name in ("exposure", "mi", "attention-epsilon"):
    for val in ("-1", "inf", "x"):
        case(
            f"gate: --max-leakage {name}={val}",
            lambda d, n=name, v=val: _g(d, "--max-leakage", f"{n}={v}"),
            needle=name,
            absent=(),
        )
for flag, val in (("--delta", "2"), ("--delta", "inf"), ("--bootstrap", "0.5"), ("--seed", "1.5")):
    case(
        f"score: {flag} {val} (again, another form)",
        lambda d, f=flag, v=val: ["score", _scores(d, _good_rows()), f, v, "--out", _out(d)],
        needle=flag,
    )


# --------------------------------------------------------------------------- users
# ``--group-by`` / ``--fresh`` / ``export-risky --by-user`` / ``score --group-by`` and the
# ``[data]`` keys. Rows that must run use one tiny untrained GPT-2, built once (_lm).
_LM: dict[str, Path] = {}


@pytest.fixture(autouse=True, scope="module")
def _lm_home(tmp_path_factory):
    _LM["home"] = tmp_path_factory.mktemp("hostile-lm")


def _lm(d: Path) -> str:
    """The saved tiny causal LM (outside the case folder, so no input digest sees it)."""
    home = _LM["home"] / "model"
    if not (home / "config.json").is_file():
        from tests.own_models import build_causal_lm, save, word_tokenizer

        tok = word_tokenizer()
        save(build_causal_lm("gpt2", len(tok), seed=0, d=16), tok, home)
    return str(home)


def _user_rows(prefix: str, users: int = 4, per: int = 3, seed: int = 0) -> list[dict]:
    from tests.own_models import random_texts

    return [
        {"text": t, "author": f"{prefix}{u}"}
        for u in range(users)
        for t in random_texts(per, seed * 100 + u, length=8)
    ]


def _users_csv(d: Path, name: str, rows: list[dict], fields=("text", "author")) -> str:
    p = d / name
    with open(p, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(fields), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return str(p)


def _run_users(d: Path, members=None, nonmembers=None, *extra, group=("--group-by", "author")):
    m = members if isinstance(members, str) else _users_csv(d, "m.csv", members or _user_rows("m"))
    n = (
        nonmembers
        if isinstance(nonmembers, str)
        else _users_csv(d, "n.csv", nonmembers or _user_rows("n", seed=1))
    )
    return ["run", "--model", _lm(d), "--members", m, "--nonmembers", n, *group,
            "--attacks", "lm-loss", "--out", _out(d), *extra]  # fmt: skip


def _per_user_dir(d: Path, name: str, users: dict[str, str], extra: dict | None = None) -> str:
    p = d / name
    p.mkdir()
    for user, text in {**users, **(extra or {})}.items():
        (p / user).write_text(text, encoding="utf-8")
    return str(p)


def _txt_users(prefix: str, seed: int) -> dict[str, str]:
    from tests.own_models import random_texts

    return {
        f"{prefix}{u}.txt": "\n".join(random_texts(3, seed * 100 + u, length=8)) + "\n"
        for u in range(4)
    }


case(
    "run --group-by: missing column",
    lambda d: _run_users(d, group=("--group-by", "writer")),
    needle="group (user) column 'writer'",
)
case(
    "run --group-by: empty column name",
    lambda d: _run_users(d, group=("--group-by", "")),
    needle="group",
)
case(
    "run --group-by: column only in the members",
    lambda d: _run_users(
        d, _user_rows("m"), _users_csv(d, "n.csv", _user_rows("n", seed=1), ("text",))
    ),  # fmt: skip
    needle="n.csv",
)
case(
    "run --group-by: a user on both sides",
    lambda d: _run_users(
        d, _user_rows("m"), _user_rows("n", seed=1) + [{"text": "w1 w2 w3", "author": "m0"}]
    ),
    needle="both",
)
case(
    "run --group-by: a user emptied by cleaning",
    lambda d: _run_users(
        d,
        _user_rows("m"),
        _user_rows("n", seed=1) + [{"text": _user_rows("m")[0]["text"], "author": "n9"}],
    ),
    needle="no text left",
)
case(
    "run --group-by: 7 and 7.0 are one user on both sides",
    lambda d: _run_users(
        d,
        [{**r, "author": "7"} if r["author"] == "m0" else r for r in _user_rows("m")],
        [{**r, "author": "7.0"} if r["author"] == "n0" else r for r in _user_rows("n", seed=1)],
    ),
    needle="'7'",
)
case(
    "run --group-by: numeric user ids run",
    lambda d: _run_users(
        d,
        [{**r, "author": str(10 + int(r["author"][1:]))} for r in _user_rows("m")],
        [{**r, "author": f"{20 + int(r['author'][1:])}.0"} for r in _user_rows("n", seed=1)],
    ),
    code=0,
    absent=(),
)
case(
    "run --group-by: unicode user names run",
    lambda d: _run_users(
        d,
        [
            {**r, "author": ["Zoë", "李雷", "مريم", "🙂 x"][int(r["author"][1:])]}
            for r in _user_rows("m")
        ],
        [
            {**r, "author": ["Ōta", "Ñandú", "a\u200bb", "user\nnewline"][int(r["author"][1:])]}
            for r in _user_rows("n", seed=1)
        ],
    ),  # fmt: skip
    code=0,
    absent=(),
)
case(
    "run --group-by: 3 users a side",
    lambda d: _run_users(d, _user_rows("m", users=3), _user_rows("n", users=3, seed=1)),
    needle="at least 4 users on each side",
)
case(
    "run: per-user .txt directory with a stray file",
    lambda d: _run_users(
        d,
        _per_user_dir(d, "m", _txt_users("m", 0), {"notes.md": "x"}),
        _per_user_dir(d, "n", _txt_users("n", 1)),
        group=(),
    ),
    needle="notes.md",
)
case(
    "run: per-user .txt directory with an empty user file",
    lambda d: _run_users(
        d,
        _per_user_dir(d, "m", _txt_users("m", 0), {"empty.txt": ""}),
        _per_user_dir(d, "n", _txt_users("n", 1)),
        group=(),
    ),
    needle="empty.txt",
)
case(
    "run: a directory with no .txt files",
    lambda d: _run_users(
        d,
        _per_user_dir(d, "m", {"a.md": "x", "b.csv": "text\nx\n"}),
        _per_user_dir(d, "n", _txt_users("n", 1)),
        group=(),
    ),
    needle="is a directory",
)
case(
    "run --fresh: missing file",
    lambda d: _run_users(d, None, None, "--fresh", str(d / "nope.csv")),
    needle="does not exist",
)
case(
    "run --fresh: a directory",
    lambda d: _run_users(d, None, None, "--fresh", str(d)),
    needle="is a directory",
)
case(
    "run --fresh: an empty directory",
    lambda d: (d / "e").mkdir() or _run_users(d, None, None, "--fresh", str(d / "e")),
    needle="is a directory",
)


def _fifo(d: Path) -> str:
    import os

    p = d / "fifo.csv"
    os.mkfifo(p)
    return str(p)


case(
    "run --fresh: a FIFO",
    lambda d: _run_users(d, None, None, "--fresh", _fifo(d)),
    needle="--fresh",
)
case(
    "run --fresh: unknown users",
    lambda d: _run_users(
        d, None, None, "--fresh", _users_csv(d, "f.csv", [{"text": "w9 w8", "author": "zed"}])
    ),
    needle="neither member nor non-member",
)
case(
    "run --fresh: copies of training texts",
    lambda d: _run_users(d, None, None, "--fresh", _users_csv(d, "f.csv", [_user_rows("m")[0]])),
    needle="copies of member",
)
case(
    "run --fresh: without --group-by on CSV data",
    lambda d: _run_users(
        d,
        None,
        None,
        "--fresh",
        _users_csv(d, "f.csv", [{"text": "w9 w8", "author": "m0"}]),
        group=(),
    ),
    needle="needs users",
)
case(
    "run --fresh: no user column",
    lambda d: _run_users(
        d, None, None, "--fresh", _users_csv(d, "f.csv", [{"text": "w9 w8"}], ("text",))
    ),
    needle="group (user) column 'author'",
)
for text, needle in [
    ('[target]\naudit_dir = "m"\n[data]\nmembers = "a.txt"\nnonmembers = "b.txt"\ngroup = ""\n', "group"),
    ('[target]\naudit_dir = "m"\n[data]\nmembers = "a.txt"\nnonmembers = "b.txt"\ngroup = 3\n', "group"),
    ('[target]\naudit_dir = "m"\n[data]\nmembers = "a.txt"\nnonmembers = "b.txt"\nfresh = 5\n', "fresh"),
    ('[data]\ngroup = ""\n', "group"),
]:  # fmt: skip
    case(f"run config: {text.splitlines()[-1]!r} ({len(text)})", lambda d, t=text: _run_cfg(d, t),
         needle=needle)  # fmt: skip


def _users_results(d: Path, aggregate_only: bool = False) -> str:
    att = {
        "attack": "lm-loss:user-mean",
        "status": "ok",
        "unit": "user",
        "n_members": 2,
        "n_nonmembers": 2,
        "metrics": {"auc": {"value": 0.75, "ci_low": 0.2, "ci_high": 0.99}},
        "examples": {"ids": ["a", "b", "c", "e"], "scores": [2.0, 1.0, 0.5, 0.0],
                     "members": [1, 1, 0, 0], "n_texts": [3, 3, 3, 3]},
    }  # fmt: skip
    run = {"name": "r", "claim": {"notion": "none"}, "attacks": [], "leakage": [],
           "users": {"attacks": [att], "strongest_attack": att["attack"]}}  # fmt: skip
    return _results(d, runs=[run], aggregate_only=aggregate_only)


for name, argv, needle in [
    ("a run without users", lambda d: [_results(d), "--top", "2"], "names no users"),
    ("aggregate-only", lambda d: [_users_results(d, True), "--top", "2"], "aggregate-only"),
    (
        "--by extraction-risk@10",
        lambda d: [_users_results(d), "--top", "2", "--by", "extraction-risk@10"],
        "--by",
    ),
    ("--top 0", lambda d: [_users_results(d), "--top", "0"], "--top"),
    (
        "no user-level attack measured",
        lambda d: [_edit_results(d, lambda r: r["runs"][0].update(users={"attacks": []})), "--top", "2"],
        "no measured user-level attack",
    ),
]:  # fmt: skip
    case(
        f"export-risky --by-user: {name}",
        lambda d, a=argv: ["export-risky", *a(d), "--by-user", "--out", str(d / "ids.txt")],
        needle=needle,
        absent=("ids.txt",),
    )


def _score_users(d: Path, edit=None, users: int = 4, text: bool = False) -> str:
    rng = np.random.default_rng(0)
    rows = []
    for u in range(2 * users):
        for j in range(3):
            row = [f"{rng.normal(u < users, 1):.5f}", int(u < users), f"u{u}"]
            rows.append(row + ([f"w{u} w{j} w{u + j} x{u}{j}"] if text else []))
    if edit is not None:
        edit(rows)
    header = ("score", "member", "author") + (("text",) if text else ())
    return _scores(d, rows, header)


def _copy_to_member_text(rows):
    for r in rows[-3:]:  # the last non-member user's every text copies a member's
        r[3] = rows[0][3]


for name, argv, needle in [
    ("missing column", lambda d: [_score_users(d), "--group-by", "writer"], "'writer'"),
    ("empty column name", lambda d: [_score_users(d), "--group-by", " "], "--group-by"),
    ("empty user cell", lambda d: [_score_users(d, lambda r: r[4].__setitem__(2, "")),
                                   "--group-by", "author"], "data row 5"),
    ("a user on both sides", lambda d: [_score_users(d, lambda r: r[0].__setitem__(1, 0)),
                                        "--group-by", "author"], "member 1 and member 0"),
    ("3 users a side", lambda d: [_score_users(d, users=3), "--group-by", "author"], "at least 4"),
    ("a user emptied by duplicate removal",
     lambda d: [_score_users(d, _copy_to_member_text, text=True), "--group-by", "author"],
     "no text left"),
    ("7 and 7.0 are one user on both sides",
     lambda d: [_score_users(d, lambda r: (r[0].__setitem__(2, "7"), r[-1].__setitem__(2, "7.0"))),
                "--group-by", "author"], "'7'"),
]:  # fmt: skip
    case(
        f"score --group-by: {name}",
        lambda d, a=argv: ["score", *a(d), "--out", _out(d)],
        needle=needle,
    )


# --------------------------------------------------------------------------- the test
def _digest(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_hostile_input(c: Case, tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = c.argv(tmp_path)
    before = _digest(tmp_path)
    out = cli(argv)
    text = out.stdout + out.stderr
    assert "Traceback" not in text, text[-2000:]
    assert out.code == c.code, (out.code, text[-1500:])
    if c.code == 2:
        last = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else ""
        assert last.startswith("privacy-audit") and ": error: " in last, out.stderr[-800:]
        assert c.needle in last, (c.needle, last)
    for rel in c.absent:
        assert not (tmp_path / rel).exists(), f"{rel} was written"
    after = _digest(tmp_path)
    changed = [k for k in before if before[k] != after.get(k)]
    assert changed == [], f"inputs changed: {changed}"


def test_the_table_covers_every_subcommand_with_many_cases():
    from privacy_audit.audit.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    commands = set(sub.choices) - {"claims"}  # claims reproduces papers, takes no input
    covered = {c.name.split(":")[0].split(" ")[0] for c in CASES}
    missing = commands - covered - {"attacks"}  # `attacks` takes no arguments
    assert missing == set(), missing
    assert len(CASES) >= 300, len(CASES)
