"""Input fingerprints for ``--resume`` (audit/scale/fingerprint.py): every file below a
model directory, every data file a config names, and no cached hash of a file that changed
while it was hashed. Digests are checked against hashlib directly."""

from __future__ import annotations

import hashlib
import os
from types import SimpleNamespace

import pytest

from privacy_audit.audit.scale import fingerprint as fp


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(fp.CACHE_ENV, str(tmp_path / "cache.json"))
    monkeypatch.setattr(fp, "_CACHES", {})
    return tmp_path / "cache.json"


def test_a_model_directory_is_fingerprinted_down_to_its_nested_files(tmp_path, cache):
    model = tmp_path / "model"
    (model / "sub" / "deep").mkdir(parents=True)
    (model / ".git").mkdir()
    (model / "config.json").write_bytes(b"{}")
    (model / "sub" / "deep" / "weights.bin").write_bytes(b"old weights")
    (model / ".git" / "HEAD").write_bytes(b"ignored")
    files = fp.path_fingerprint(model)["files"]
    assert sorted(files) == ["config.json", os.path.join("sub", "deep", "weights.bin")]
    nested = files[os.path.join("sub", "deep", "weights.bin")]
    assert nested["sha256"] == hashlib.sha256(b"old weights").hexdigest()
    assert nested["size"] == len(b"old weights")
    before = fp.content_digest(model)
    # a same-size edit of the nested file changes the directory's digest (so its task keys)
    (model / "sub" / "deep" / "weights.bin").write_bytes(b"new weights")
    assert fp.content_digest(model) != before


def test_every_data_file_of_a_config_is_an_input_public_too():
    data = {k: f"/data/{k}.txt" for k in ("corpus", "members", "nonmembers", "test", "public")}
    cfg = SimpleNamespace(
        data={**data, "extra": "/data/not-an-input.txt"},
        target=SimpleNamespace(model_dir="/m", tokenizer_dir=None),
        classifier_dir=None,
        audit={},
        epsilon={},
        shadow=None,
        bench=None,
    )
    got = fp.config_inputs(cfg)
    assert got == {f"data.{k}": v for k, v in data.items()} | {"target.model_dir": "/m"}


def test_no_hash_is_cached_for_a_file_that_changed_while_it_was_hashed(
    tmp_path, cache, monkeypatch
):
    monkeypatch.setattr(fp, "RACY_SECONDS", -1.0)  # the racy-clean rule out of the way
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 100)
    st = f.stat()
    # unchanged while hashed: cached under the key of what was stat'ed
    assert fp.file_sha256(f) == hashlib.sha256(b"a" * 100).hexdigest()
    assert fp._cache().get(fp.cache_key(f, st)) == hashlib.sha256(b"a" * 100).hexdigest()

    g = tmp_path / "g.bin"
    g.write_bytes(b"b" * 100)
    st = g.stat()
    monkeypatch.setattr(fp, "HASH_HOOKS", [lambda p: p.write_bytes(b"c" * 101)])
    fp.file_sha256(g)  # edited between the stat and the read (a size change: never in
    # the same timestamp tick unnoticed)
    # the digest read does not describe the file as stat'ed: it must not stand for it
    assert fp._cache().get(fp.cache_key(g, st)) is None
    fp._cache().flush()
    assert hashlib.sha256(b"c" * 101).hexdigest() not in cache.read_text(encoding="utf-8")
