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
    monkeypatch.setattr(fp, "CACHES", {})
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
        own_model={},
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
    assert fp.hash_cache().get(fp.cache_key(f, st)) == hashlib.sha256(b"a" * 100).hexdigest()

    g = tmp_path / "g.bin"
    g.write_bytes(b"b" * 100)
    st = g.stat()
    monkeypatch.setattr(fp, "HASH_HOOKS", [lambda p: p.write_bytes(b"c" * 101)])
    fp.file_sha256(g)  # edited between the stat and the read (a size change: never in
    # the same timestamp tick unnoticed)
    # the digest read does not describe the file as stat'ed: it must not stand for it
    assert fp.hash_cache().get(fp.cache_key(g, st)) is None
    fp.hash_cache().flush()
    assert hashlib.sha256(b"c" * 101).hexdigest() not in cache.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- #
# issue 49: one-line mutants that survived the suite
# --------------------------------------------------------------------------- #
def _cfg(data=None, own_model=None):
    return SimpleNamespace(
        data=data or {},
        target=SimpleNamespace(model_dir=None, tokenizer_dir=None),
        classifier_dir=None,
        own_model=own_model or {},
        epsilon={},
        shadow=None,
        bench=None,
    )


def test_racy_clean_reads_the_later_of_mtime_and_ctime(tmp_path, cache, monkeypatch):
    import time

    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 10)
    old = time.time() - 3600
    os.utime(f, (old, old))  # mtime an hour back; ctime is now (utime itself moves it)
    st = f.stat()
    fp.file_sha256(f)
    assert fp.hash_cache().get(fp.cache_key(f, st)) is None  # changed 0 s ago by its ctime
    # an hour later both times are old: the hash is cached
    later = time.time() + 3600
    monkeypatch.setattr(fp, "time", SimpleNamespace(time=lambda: later))
    fp.file_sha256(f)
    assert fp.hash_cache().get(fp.cache_key(f, st)) == hashlib.sha256(b"x" * 10).hexdigest()


def test_the_hash_cache_keeps_the_newest_entries_and_reads_its_own_unflushed_ones(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(fp, "_CACHE_LIMIT", 2)
    c = fp.HashCache(tmp_path / "c.json")
    c.put("k1", "d1")
    assert c.get("k1") == "d1"  # before any flush
    c.put("k2", "d2")
    c.put("k3", "d3")
    c.flush()
    assert set(fp.HashCache(tmp_path / "c.json").entries) == {"k2", "k3"}


def test_bundled_fixtures_are_not_an_input_and_reference_dirs_win():
    got = fp.config_inputs(_cfg(data={"members": "fixtures", "nonmembers": "/n.txt"}))
    assert got == {"data.nonmembers": "/n.txt"}
    got = fp.config_inputs(
        _cfg(own_model={"reference_dirs": ["/r1", "/r2"], "reference_dir": "/r0"})
    )
    assert got == {"target.reference_dir": "/r1", "target.reference_dirs[1]": "/r2"}


def test_a_file_of_exactly_one_segment_is_hashed_flat(tmp_path, cache, monkeypatch):
    monkeypatch.setattr(fp, "SEGMENT", 16)
    f = tmp_path / "s.bin"
    f.write_bytes(b"y" * 16)
    assert fp.file_sha256(f, use_cache=False) == hashlib.sha256(b"y" * 16).hexdigest()
    f.write_bytes(b"y" * 17)
    assert fp.file_sha256(f, use_cache=False).startswith("tree-")


def test_input_changes_are_noted_on_resume_only(tmp_path, cache):
    (tmp_path / fp.MANIFEST).write_text(
        '{"format": 2, "inputs": {"data.members": {"path": "/a", "sha256": "0", "size": 1}}}',
        encoding="utf-8",
    )
    events = []
    rd = SimpleNamespace(path=tmp_path, log=lambda *a: events.append(a))
    new = {"data.members": {"path": "/a", "sha256": "1", "size": 1}}
    lines: list[str] = []
    fp.note_changes(rd, new, False, lines.append)
    assert lines == [] and events == []
    fp.note_changes(rd, new, True, lines.append)
    assert len(lines) == 1 and "changed contents" in lines[0]


def test_touching_a_file_keeps_its_digest_and_a_same_size_edit_changes_it(tmp_path, cache):
    f = tmp_path / "d.txt"
    f.write_bytes(b"same bytes")
    before = fp.content_digest(f)
    os.utime(f, (1_000_000_000, 1_000_000_000))  # a copy or a checkout: new mtime only
    assert fp.content_digest(f) == before
    st = f.stat()
    f.write_bytes(b"SAME BYTES")  # same size, time put back
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert fp.content_digest(f) != before


def test_a_hidden_file_in_a_model_directory_is_not_an_input(tmp_path, cache):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_bytes(b"{}")
    (tmp_path / "m" / ".DS_Store").write_bytes(b"finder")
    assert list(fp.path_fingerprint(tmp_path / "m")["files"]) == ["config.json"]
