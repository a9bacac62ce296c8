"""Bad input is exit 2 with one line, before any work (issue 26, item 3): the inputs that
used to end in an internal error (exit 3) after reading data or training, and the sizes
that used to run out of memory or hang without a word."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.own_models import build_causal_lm, random_texts, save, word_tokenizer, write_lines


def _one_line(outcome, out_dir: Path | None = None, seconds: float | None = None) -> None:
    assert outcome.code == 2, (outcome.code, outcome.stderr)
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("privacy-audit: error: "), outcome.stderr
    assert "Traceback" not in outcome.stderr + outcome.stdout
    if out_dir is not None:
        assert not out_dir.exists() or not any(out_dir.iterdir()), list(out_dir.iterdir())


def _lm(tmp_path: Path, vocab_shrink: int = 0, **config) -> Path:
    tok = word_tokenizer()
    model = build_causal_lm("gpt2", len(tok) - vocab_shrink)
    path = save(model, tok, tmp_path / "model")
    if config:
        conf = json.loads((path / "config.json").read_text(encoding="utf-8"))
        conf.update(config)
        (path / "config.json").write_text(json.dumps(conf), encoding="utf-8")
    return path


def _texts(tmp_path: Path) -> tuple[Path, Path]:
    return (
        write_lines(tmp_path / "m.txt", random_texts(20, 0)),
        write_lines(tmp_path / "n.txt", random_texts(20, 1)),
    )


@pytest.mark.parametrize(
    ("config", "shrink", "needle"),
    [
        ({"n_layer": -1}, 0, "n_layer must be an integer in [1, "),
        ({"n_head": 0}, 0, "n_head must be an integer in [1, "),
        ({}, 20, "rows; was the tokenizer extended"),
    ],
    ids=["n_layer=-1", "n_head=0", "vocab>embedding"],
)
def test_broken_model_directories_are_one_line(tmp_path, cli, config, shrink, needle):
    model = _lm(tmp_path, shrink, **config)
    m, n = _texts(tmp_path)
    out = tmp_path / "out"
    outcome = cli(
        ["run", "--model", str(model), "--members", str(m), "--nonmembers", str(n)]
        + ["--out", str(out), "--quiet"]
    )
    _one_line(outcome, out)
    assert needle in outcome.stderr


def test_unwritable_run_dir_is_one_line(tmp_path, cli, tiny_config_path):
    tiny = tiny_config_path.read_text(encoding="utf-8")  # tests/conftest.py's
    cfg = tmp_path / "c.toml"
    cfg.write_text(tiny, encoding="utf-8")
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out), "--run-dir", "/proc/nope/run", "--quiet"])
    _one_line(outcome, out)
    assert "--run-dir" in outcome.stderr


@pytest.mark.parametrize(
    "payload",
    [
        {"run": {}},
        {"run": {"name": "x"}},
        {"run": {"name": "x", "attacks": [{}]}},
        {"run": {"name": "x", "attacks": [{"attack": "loss", "status": "ok"}]}},
        {"run": {"name": "x", "attacks": [], "claim": []}},
        {
            "run": {
                "name": "x",
                "attacks": [
                    {
                        "attack": "loss",
                        "status": "ok",
                        "metrics": {"auc": {"value": 0.5}},
                        "examples": {"ids": ["a"], "scores": [], "members": [1]},
                    }
                ],
            }
        },
    ],
)
def test_damaged_resumed_task_files_are_bad_input(tmp_path, payload):
    from privacy_audit.audit.scale.executors import RunDir
    from privacy_audit.ground.errors import AuditError

    rd = RunDir(tmp_path / "run")
    rd.tasks.mkdir(parents=True)
    (rd.tasks / "k.json").write_text(json.dumps(payload), encoding="utf-8")
    with pytest.raises(AuditError, match="damaged|no run record"):
        rd.load("k", "audit-trial")
    good = {"run": {"name": "x", "attacks": [{"attack": "loss", "status": "error"}]}}
    (rd.tasks / "k.json").write_text(json.dumps(good), encoding="utf-8")
    assert rd.load("k", "audit-trial") == good


@pytest.mark.parametrize("size", [10**7, 10**12])
def test_bootstrap_sizes_have_an_upper_bound(tmp_path, cli, size, tiny_config_path):
    """bootstrap = 10^12 ran out of memory after training and 10^7 ran for hours: both are
    refused when the config is read (and by `score --bootstrap`)."""
    tiny = tiny_config_path.read_text(encoding="utf-8")  # tests/conftest.py's
    cfg = tmp_path / "c.toml"
    cfg.write_text(tiny.replace("bootstrap = 100", f"bootstrap = {size}"), "utf-8")
    out = tmp_path / "out"
    t0 = time.monotonic()
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    _one_line(outcome, out)
    assert "metrics.bootstrap" in outcome.stderr and "100,000" in outcome.stderr
    assert time.monotonic() - t0 < 30  # before any training
    scores = tmp_path / "s.csv"
    scores.write_text("score,member\n" + "".join(f"{i},{i % 2}\n" for i in range(10)), "utf-8")
    outcome = cli(["score", str(scores), "--bootstrap", str(size), "--out", str(out)])
    _one_line(outcome, out)
    assert "--bootstrap" in outcome.stderr


def test_canaries_make_bad_values_are_one_line(tmp_path, cli):
    tok = tmp_path / "tok"
    word_tokenizer().save_pretrained(tok)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9 au lait\n\xff\xfe\n")
    base = ["canaries", "make", "--tokenizer", str(tok)]
    cases = [
        (["--design", "random-token", "--n", str(10**12)], "--n must be in 20.."),
        (["--design", "random-token", "--temperature", "nan"], "--temperature"),
        (["--design", "random-token", "--temperature", "inf"], "--temperature"),
        (["--design", "bigram", "--data", str(bad)], "is not UTF-8 text"),
        (["--design", "random-token", "--secret-tokens", str(10**9)], "--secret-tokens"),
    ]
    for i, (extra, needle) in enumerate(cases):
        out = tmp_path / f"c{i}"
        t0 = time.monotonic()
        outcome = cli([*base, *extra, "--out", str(out)])
        _one_line(outcome, out)
        assert needle in outcome.stderr, (extra, outcome.stderr)
        assert time.monotonic() - t0 < 30, extra


def test_long_bootstraps_print_progress(tmp_path, cli):
    """A bootstrap of >= 10,000 resamples prints a line per tenth (terminal and CI log alike)
    instead of running silently; short ones print nothing extra."""
    rows = "".join(f"{(i * 7919) % 1000 / 1000 + (i % 2) * 0.1},{i % 2}\n" for i in range(2000))
    scores = tmp_path / "s.csv"
    scores.write_text("score,member\n" + rows, "utf-8")
    long = cli(["score", str(scores), "--bootstrap", "20000", "--out", str(tmp_path / "a")])
    assert long.code == 0, long.stderr
    steps = [ln for ln in long.stderr.splitlines() if "score: bootstrap" in ln]
    assert steps[-1].strip() == "score: bootstrap 100% (20,000 of 20,000)", long.stderr
    assert 3 <= len(steps) <= 10 and len(set(steps)) == len(steps)
    short = cli(["score", str(scores), "--bootstrap", "1000", "--out", str(tmp_path / "b")])
    assert short.code == 0 and "bootstrap" not in short.stderr, short.stderr
