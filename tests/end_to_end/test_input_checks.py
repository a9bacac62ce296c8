"""Issue 35, items 3, 5 and 6: every reference checked as ``--reference`` is, long CSV
fields read, and messages that name the flag typed and the real cause.

Every refusal is exit 2 with one line, before any training and with nothing written.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.own_models import WORDS, build_causal_lm, random_texts, save, word_tokenizer, write_lines


def _refused(r, *needles, out: Path | None = None):
    assert r.code == 2, (r.code, r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("privacy-audit")]
    assert len(lines) == 1 and r.stderr.count("\n") == 1, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    if out is not None:
        assert not (out / "results.json").exists()
        assert not list(out.glob("run/tasks/*.json"))  # nothing trained


@pytest.fixture(scope="module")
def lms(tmp_path_factory):
    """A target and a base with one tokenizer; bases whose tokenizers differ in size or
    only in ids; a base without weights; texts and a population file."""
    d = tmp_path_factory.mktemp("refchecks")
    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), seed=0, d=32), tok, d / "target")
    save(build_causal_lm("gpt2", len(tok), seed=1, d=32), tok, d / "base")
    small = word_tokenizer(WORDS[:60])
    save(build_causal_lm("gpt2", len(small), seed=1, d=32), small, d / "base-small-vocab")
    permuted = word_tokenizer(list(reversed(WORDS)))  # same size, other ids
    assert len(permuted) == len(tok)
    save(build_causal_lm("gpt2", len(permuted), seed=1, d=32), permuted, d / "base-other-ids")
    (d / "link").symlink_to(d / "base")
    shutil.copytree(d / "base", d / "base-copy")
    write_lines(d / "members.txt", random_texts(24, 0, length=8))
    write_lines(d / "nonmembers.txt", random_texts(24, 1, length=8))
    write_lines(d / "population.txt", random_texts(12, 2, length=8))
    return d


def _shadow_cfg(d: Path, tmp: Path, base: Path, population: Path | None = None) -> Path:
    cfg = tmp / "audit.toml"
    cfg.write_text(
        f'[target]\naudit_dir = "{d / "target"}"\n'
        f'[shadow]\nn_models = 2\nbase_dir = "{base}"\n'
        f'population = "{population or d / "population.txt"}"\nepochs = 1\n'
        f'[data]\nmembers = "{d / "members.txt"}"\nnonmembers = "{d / "nonmembers.txt"}"\n'
        '[attacks]\nnames = ["lm-loss"]\n',
        encoding="utf-8",
    )
    return cfg


def test_shadow_base_dir_and_population_are_checked_before_any_training(lms, tmp_path, cli):
    d, out = lms, tmp_path / "out"
    for base, needles in (
        (d / "base-small-vocab", ("shadow.base_dir", "different tokenizer", "130 vs 62")),
        (d / "base-other-ids", ("shadow.base_dir", "different ids")),
        (d / "target", ("shadow.base_dir", "the audited model itself")),
    ):
        r = cli(["run", str(_shadow_cfg(d, tmp_path, base)), "--out", str(out), "--quiet"])
        _refused(r, *needles, out=out)
    cfg = _shadow_cfg(d, tmp_path, d / "base", population=d / "members.txt")
    _refused(cli(["run", str(cfg), "--out", str(out)]), "shadow.population", "data.members")
    # weights missing from the base: refused when the first reference loads it, untrained
    nw = tmp_path / "base-no-weights"
    shutil.copytree(d / "base", nw)
    for f in nw.glob("*.safetensors"):
        f.unlink()
    r = cli(["run", str(_shadow_cfg(d, tmp_path, nw)), "--out", str(out), "--quiet"])
    _refused(r, str(nw), out=out)


def test_a_reference_named_twice_through_a_link_or_a_copy_is_refused(lms, tmp_path, cli):
    d, out = lms, tmp_path / "out"
    argv = ["run", "--model", str(d / "target"), "--members", str(d / "members.txt")]
    argv += ["--nonmembers", str(d / "nonmembers.txt"), "--out", str(out), "--quiet"]
    for second, needle in (
        (d / "link", "same directory through a link"),
        (d / "base-copy", "holds the same files"),
    ):
        r = cli([*argv, "--reference", str(d / "base"), "--reference", str(second)])
        _refused(r, needle, out=out)
    _refused(cli([*argv, "--reference", str(d / "target")]), "is the audited model", out=out)


def _scores_csv(path: Path, texts: list[str]) -> Path:
    rng = np.random.default_rng(0)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["score", "member", "text"])
        for i, t in enumerate(texts):
            w.writerow([rng.normal() + (i % 2), i % 2, t])
    return path


def test_a_six_megabyte_csv_field_is_read_and_cut_like_run_cuts_it(lms, tmp_path, cli):
    from privacy_audit.audit.config import MAX_LENGTH_CAP
    from privacy_audit.audit.data import read_table
    from privacy_audit.audit.textcap import char_cap

    words = random_texts(400, 5, length=12)
    long = " ".join(words) * 1200  # ~6 MB in one field
    assert len(long) > 6_000_000
    texts = [long] + [f"{w} {i}" for i, w in enumerate(words[:199])]
    src = _scores_csv(tmp_path / "long.csv", texts)
    r = cli(["score", str(src), "--out", str(tmp_path / "o"), "--bootstrap", "100"])
    assert r.code == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "o" / "results.json").read_text(encoding="utf-8"))
    assert res["runs"][0]["attacks"][0]["n_members"] == 100
    rows = read_table(src, "text", None, None)
    assert rows[0]["text"] == long  # read whole; the audit then cuts it
    assert char_cap(MAX_LENGTH_CAP) < len(long)
    from privacy_audit.audit.textcap import cap_text

    assert len(cap_text(rows[0]["text"], 64)) == char_cap(64)  # what run keeps of it


def test_messages_name_the_flag_and_the_cause(lms, tmp_path, cli):
    d = lms
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    lm = ["run", "--model", str(d / "target"), "--out", str(tmp_path / "o"), "--quiet"]
    non = ["--nonmembers", str(d / "nonmembers.txt")]
    _refused(cli([*lm, "--members", "/dev/null", *non]), "--members", "character device")
    _refused(cli([*lm, "--members", str(fifo), *non]), "--members", "FIFO")  # never opened
    _refused(cli(["score", "/dev/null", "--out", str(tmp_path / "s")]), "character device")
    _refused(cli(["score", str(fifo), "--out", str(tmp_path / "s")]), "FIFO")
    di = ["dataset-inference", "--model", str(d / "target"), "--suspect", str(d / "members.txt")]
    di += ["--validation", str(d / "nonmembers.txt"), "--out", str(tmp_path / "di")]
    _refused(cli([*di, "--seed", "-1"]), "--seed", "-1")
    _refused(cli([*di, "--suspect", str(fifo)]), "--suspect", "FIFO")
    src = _scores_csv(tmp_path / "s.csv", [""] * 40)
    r = cli(["score", str(src), "--out", str(tmp_path / "s"), "--bootstrap", "100"])
    _refused(r, "column 'text' is empty in all 40 rows")
    _refused(cli(["score", str(src), "--out", str(tmp_path / "s"), "--seed", "-1"]), "--seed")
    empty = tmp_path / "empty.csv"
    empty.write_text("text\n" + '""\n' * 30, encoding="utf-8")
    _refused(
        cli([*lm, "--members", str(empty), *non]), "--members", "column 'text' is empty in all 30"
    )
    members = ["--members", str(d / "members.txt"), *non]
    for q in ("1e41", "1" + "0" * 41, "0"):
        _refused(cli([*lm, *members, "--queries", q]), "--queries")
    assert not (tmp_path / "o").exists() and not (tmp_path / "s").exists()
