"""Nothing stale on ``--resume`` (issue 35, item 1): task keys hold every input's content.

Each test swaps a checkpoint's weights for another model of the same shapes (the case the
old header-only fingerprint of ``.safetensors`` missed), resumes, and checks that the log
names the changed input, that exactly the tasks that read it ran again, and that the
results equal a fresh run. An unchanged large file is hashed once across runs (the hash
cache, counted by a hook).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from privacy_audit.audit.scale import fingerprint as fp
from tests.own_models import (
    build_causal_lm,
    fine_tune,
    random_texts,
    save,
    word_tokenizer,
    write_lines,
)

N = 20


def _metrics(out: Path) -> dict:
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return {
        (run["name"], a["attack"]): a.get("metrics") for run in res["runs"] for a in run["attacks"]
    }


def _starts(out: Path) -> int:
    log = out / "run" / "events.log"
    return log.read_text(encoding="utf-8").count(" start ") if log.exists() else 0


def _swap_weights(model_dir: Path, seed: int, tok, texts=None) -> None:
    """Overwrite the directory's weights with another model of the same shapes."""
    before = {p.name: p.stat().st_size for p in model_dir.glob("*.safetensors")}
    m = build_causal_lm("gpt2", len(tok), seed=seed, d=32)
    if texts:
        fine_tune(m, tok, texts, epochs=3)
    m.save_pretrained(model_dir)
    after = {p.name: p.stat().st_size for p in model_dir.glob("*.safetensors")}
    assert before == after  # same shapes: the same size and the same header


def _ok(outcome):
    assert outcome.code == 0, outcome.stderr[-3000:]
    return outcome


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    """A target fine-tuned on the members, a given reference, a base for [shadow] and a
    population file."""
    root = tmp_path_factory.mktemp("stale-own")
    tok = word_tokenizer()
    members, nonmembers = random_texts(N, 21, length=8), random_texts(N, 22, length=8)
    write_lines(root / "members.txt", members)
    write_lines(root / "nonmembers.txt", nonmembers)
    write_lines(root / "population.txt", random_texts(12, 23, length=8))
    target = build_causal_lm("gpt2", len(tok), seed=0, d=32)
    fine_tune(target, tok, members, epochs=6)
    save(target, tok, root / "target")
    save(build_causal_lm("gpt2", len(tok), seed=1, d=32), tok, root / "ref")
    save(build_causal_lm("gpt2", len(tok), seed=0, d=32), tok, root / "base")
    return root, tok, members


def test_swapped_weights_of_every_own_model_input_rerun_what_reads_them(own, tmp_path, cli):
    root, tok, members = own
    for name in ("target", "ref", "base", "population.txt", "members.txt", "nonmembers.txt"):
        src = root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    d = tmp_path
    cfg = d / "audit.toml"
    cfg.write_text(
        f'[target]\naudit_dir = "{d / "target"}"\nreference_dirs = ["{d / "ref"}"]\n'
        f'[shadow]\nn_models = 2\nbase_dir = "{d / "base"}"\n'
        f'population = "{d / "population.txt"}"\nepochs = 1\nlora_rank = 2\n'
        f'[data]\nmembers = "{d / "members.txt"}"\nnonmembers = "{d / "nonmembers.txt"}"\n'
        '[attacks]\nnames = ["lm-loss", "reference"]\n[metrics]\nbootstrap = 100\n',
        encoding="utf-8",
    )
    out = d / "out"
    _ok(cli(["run", str(cfg), "--out", str(out)]))
    assert _starts(out) == 2  # two references fine-tuned
    first = _metrics(out)

    def resume(changed: str, reruns: int):
        n = _starts(out)
        r = _ok(cli(["run", str(cfg), "--out", str(out), "--resume"]))
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("resume: ")]
        assert any(changed in ln and "changed contents" in ln for ln in lines), r.stderr
        assert _starts(out) - n == reruns, (changed, r.stderr)
        events = (out / "run" / "events.log").read_text(encoding="utf-8")
        assert f"input-changed {changed}" in events
        return _metrics(out)

    def fresh(tag: str) -> dict:
        o = d / f"fresh-{tag}"
        _ok(cli(["run", str(cfg), "--out", str(o), "--quiet"]))
        return _metrics(o)

    # [shadow] base_dir: the same shapes, other weights -> both references train again
    _swap_weights(d / "base", 7, tok)
    after_base = resume("shadow.base_dir", 2)
    assert after_base != first
    assert after_base == fresh("base")
    # the population file: both references again (their training texts changed)
    write_lines(d / "population.txt", random_texts(12, 24, length=8))
    resume("shadow.population", 2)
    # the audited model and the given reference: no reference task reads them (0 reruns),
    # every score of the target and of the given reference is computed again
    _swap_weights(d / "target", 3, tok, members)
    resume("target.audit_dir", 0)
    _swap_weights(d / "ref", 5, tok)
    last = resume("target.reference_dir", 0)
    assert last != after_base
    assert last == fresh("all")


def test_swapped_model_dir_weights_rerun_the_trial_and_a_big_file_is_hashed_once(
    tmp_path, cli, monkeypatch
):
    """``[target] model_dir`` (the suite fine-tunes the user's LM): other weights of the
    same shapes run the trial again; an unchanged 200 MiB file in the directory is read
    once over four runs (the hash cache; mtime set back past the racy-clean window)."""
    from privacy_audit import fixtures

    texts = [r["text"].lower() for r in fixtures.load_corpus("private")[:80]]
    tok = word_tokenizer(sorted({w for t in texts for w in t.split()}))
    model_dir = save(build_causal_lm("gpt2", len(tok), seed=0, d=32), tok, tmp_path / "lm")
    big = model_dir / "optimizer-state.bin"  # sparse: 200 MiB of zeros, no disk used
    with open(big, "wb") as fh:
        fh.truncate(200 << 20)
    old = big.stat().st_mtime - 3600
    os.utime(big, (old, old))
    reads: list[Path] = []
    monkeypatch.setattr(fp, "HASH_HOOKS", [reads.append])
    monkeypatch.setattr(fp, "RACY_SECONDS", 0.0)  # the test's files were all just written
    cfg = tmp_path / "audit.toml"
    cfg.write_text(
        "seed = 0\n[data]\nn_members = 24\nn_nonmembers = 24\nn_test = 12\n"
        f'[target]\nmodel_dir = "{model_dir}"\nmax_length = 24\n'
        "[train]\nepochs = 2\nbatch_size = 8\nlearning_rate = 0.01\n"
        '[[defenses]]\nname = "none"\n[attacks]\nnames = ["loss"]\n[metrics]\nbootstrap = 100\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    _ok(cli(["run", str(cfg), "--out", str(out), "--quiet"]))
    _ok(cli(["run", str(cfg), "--out", str(out), "--quiet", "--resume"]))
    assert _starts(out) == 1  # unchanged: reused
    _swap_weights(model_dir, 9, tok)
    r = _ok(cli(["run", str(cfg), "--out", str(out), "--resume"]))
    assert "target.model_dir" in r.stderr and "model.safetensors" in r.stderr, r.stderr
    assert _starts(out) == 2, r.stderr
    fresh = tmp_path / "fresh"
    _ok(cli(["run", str(cfg), "--out", str(fresh), "--quiet"]))
    assert _metrics(out) == _metrics(fresh)
    assert reads.count(big) == 1, reads  # hashed in the first run only
    assert sum(p.name == "model.safetensors" for p in reads) >= 2  # before and after the swap


def test_hash_cache_key_and_the_racy_clean_rule(tmp_path, monkeypatch):
    """A same-size edit whose mtime is set back still misses the cache (ctime is in the
    key); a file modified just now is not cached; a file over one segment is hashed as
    a tree of segment digests, which an independent computation reproduces."""
    import hashlib
    import time

    monkeypatch.setenv(fp.CACHE_ENV, str(tmp_path / "cache.json"))
    monkeypatch.setattr(fp, "RACY_SECONDS", 0.3)
    reads: list[Path] = []
    monkeypatch.setattr(fp, "HASH_HOOKS", [reads.append])
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 1000)
    fp.file_sha256(f)
    fp.file_sha256(f)
    assert len(reads) == 2  # just written: never cached (an edit in the same tick)
    time.sleep(0.35)
    d1 = fp.file_sha256(f)
    fp.hash_cache().flush()
    fp.CACHES.clear()  # a new process: the cache comes from the file
    assert fp.file_sha256(f) == d1 and len(reads) == 3
    st = f.stat()
    f.write_bytes(b"b" * 1000)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime, other bytes
    time.sleep(0.35)
    assert fp.file_sha256(f) != d1 and len(reads) == 4
    monkeypatch.setattr(fp, "SEGMENT", 1 << 10)
    data = os.urandom(5000)
    f.write_bytes(data)
    parts = [hashlib.sha256(data[i : i + 1024]).digest() for i in range(0, 5000, 1024)]
    top = hashlib.sha256(f"segments:{1 << 10}:5000:".encode() + b"".join(parts)).hexdigest()
    assert fp.file_sha256(f, use_cache=False) == "tree-" + top
    small = tmp_path / "s.bin"
    small.write_bytes(data[:1000])
    assert fp.file_sha256(small, use_cache=False) == hashlib.sha256(data[:1000]).hexdigest()


def test_an_old_run_directory_is_told_why_its_tasks_run_again(tmp_path, cli):
    """A run directory of format 1 (no "format" key, safetensors fingerprinted by header)
    resumes: the log says why nothing is reused."""
    from tests.end_to_end.test_data_safety import _write_data

    cfg = _write_data(tmp_path)
    out = tmp_path / "out"
    _ok(cli(["run", str(cfg), "--out", str(out), "--quiet"]))
    man = out / "run" / fp.MANIFEST
    new = json.loads(man.read_text(encoding="utf-8"))
    assert new["format"] == fp.FORMAT
    old = {k: {**v, "sha256": "0" * 64} for k, v in new["inputs"].items()}  # format 1: flat
    man.write_text(json.dumps(old), encoding="utf-8")
    for f in (out / "run" / "tasks").glob("*.json"):  # keyed by the old scheme
        f.rename(f.with_name("0" * 24 + ".json"))
    r = _ok(cli(["run", str(cfg), "--out", str(out), "--resume"]))
    assert "older privacy-audit" in r.stderr and "every task runs again" in r.stderr
    assert _starts(out) == 2
