"""Content fingerprints of a run's input files and model directories, for task keys.

A task's key used to hash the config, which names its data by path: ``--resume`` then
reused tasks computed on a file whose contents had since changed, and the published result
mixed old and new data. Every input a task reads is now fingerprinted into its key:

- a file: its size, mtime and the SHA-256 of **all** its bytes;
- a directory (a model, an adapter, a tokenizer, a saved dataset): the same for every file
  below it (hidden files aside). Model weights are hashed in full: the format-2 manifest
  replaced the earlier header-only fingerprint of ``.safetensors`` files, under which two
  checkpoints of the same shapes and different weights looked equal and ``--resume``
  reused results of the old weights.

Hashing gigabytes on every resume would be slow, so the SHA-256 of a file is cached
(:class:`HashCache`, a JSON file under the user's cache directory;
``PRIVACY_AUDIT_HASH_CACHE`` names another file, ``off`` disables it) under the key
(resolved path, size, mtime_ns, ctime_ns, device:inode). An unchanged 14 GB checkpoint is
read once; any write changes its mtime and ctime, so its key. ctime is in the key because
``os.utime`` can set mtime back after a same-size edit, and nothing can set ctime. A file
changed less than :data:`RACY_SECONDS` before it was hashed is not cached (git's "racy
clean" rule: an edit within the same timestamp tick would keep both times). The hash
streams the file in 8 MiB reads; a file over 64 MiB is hashed as 64 MiB segments on several
threads (SHA-256 of the segments' SHA-256s), so that hashing keeps up with the disk
(``privacy-audit bench input-hash``; docs/executors-and-resumable-runs.md gives the measured throughput).

mtime alone is not trusted (a copy keeps it, an edit within one tick may not change it),
size alone misses same-length edits; the content hash decides. mtime is kept so that the
manifest shows what changed when.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from privacy_audit.ground.errors import AuditError

#: Where the last run's fingerprints are kept in the run directory.
MANIFEST = "inputs.json"
#: Manifest format: 2 = full content hashes of every file (1, unversioned: safetensors
#: files by header only).
FORMAT = 2
CHUNK_BYTES = 8 << 20
#: files larger than this are hashed per segment, in parallel (see :func:`_sha256_file`)
SEGMENT = 64 << 20
HASH_THREADS = max(1, min(8, os.cpu_count() or 1))
#: A file modified this recently when hashed is not cached (racy-clean rule).
RACY_SECONDS = 2.0
CACHE_ENV = "PRIVACY_AUDIT_HASH_CACHE"
_CACHE_LIMIT = 20_000  # entries kept (oldest dropped first)

#: Called with each path whose bytes are actually read and hashed (tests count re-reads).
HASH_HOOKS: list = []


def cache_file() -> Path | None:
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "privacy-audit" / "file-hashes.json"


class HashCache:
    """``{key: sha256}`` kept in a JSON file; a lost or damaged cache only costs time."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries: dict[str, str] = {}
        self.dirty: dict[str, str] = {}
        if path is not None:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(data, dict) and isinstance(data.get("hashes"), dict):
                    self.entries = {k: v for k, v in data["hashes"].items() if isinstance(v, str)}
            except (OSError, ValueError):
                pass

    def get(self, key: str) -> str | None:
        return self.dirty.get(key) or self.entries.get(key)

    def put(self, key: str, digest: str) -> None:
        self.dirty[key] = digest

    def flush(self) -> None:
        """Merge new entries into the file (re-read first: another run may have added)."""
        if self.path is None or not self.dirty:
            return
        fresh = HashCache(self.path).entries
        fresh.update(self.dirty)
        if len(fresh) > _CACHE_LIMIT:
            fresh = dict(list(fresh.items())[-_CACHE_LIMIT:])
        try:
            from privacy_audit.ground.io import atomic_write_text

            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps({"format": 1, "hashes": fresh}))
        except OSError:
            return  # an unwritable cache directory: hashes are recomputed next time
        self.entries, self.dirty = fresh, {}


CACHES: dict[str, HashCache] = {}


def hash_cache() -> HashCache:
    f = cache_file()
    k = str(f)
    if k not in CACHES:
        CACHES[k] = HashCache(f)
    return CACHES[k]


def _sha256_range(p: Path, start: int, length: int) -> bytes:
    h = hashlib.sha256()
    buf = bytearray(min(CHUNK_BYTES, max(length, 1)))
    view = memoryview(buf)
    with open(p, "rb", buffering=0) as fh:
        fh.seek(start)
        left = length
        while left > 0:
            n = fh.readinto(view[: min(len(buf), left)])
            if not n:
                break
            h.update(view[:n])  # hashlib releases the GIL on large updates
            left -= n
    return h.digest()


def _sha256_file(p: Path) -> str:
    """SHA-256 of the file's bytes; a file over one :data:`SEGMENT` is hashed as SHA-256
    of its segments' SHA-256 digests (a hash tree of one level), segments read and hashed
    on :data:`HASH_THREADS` threads, so the hash keeps up with a fast disk (docs/executors-and-resumable-runs.md)."""
    for hook in HASH_HOOKS:
        hook(p)
    size = p.stat().st_size
    if size <= SEGMENT:
        return _sha256_range(p, 0, size).hex()
    from concurrent.futures import ThreadPoolExecutor

    starts = range(0, size, SEGMENT)
    with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        parts = list(pool.map(lambda s: _sha256_range(p, s, min(SEGMENT, size - s)), starts))
    top = hashlib.sha256(f"segments:{SEGMENT}:{size}:".encode())
    for d in parts:
        top.update(d)
    return "tree-" + top.hexdigest()


def cache_key(p: Path, st: os.stat_result) -> str:
    # ctime too: a same-size edit whose mtime was set back (os.utime, touch -d, rsync -t)
    # still moves ctime, which no user call can set
    return (
        f"{p.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_dev}:{st.st_ino}"
    )


def file_sha256(p: str | Path, use_cache: bool = True) -> str:
    """SHA-256 of a file's bytes, from the cache when (path, size, mtime_ns, inode) match."""
    p = Path(p)
    st = p.stat()
    key = cache_key(p, st)
    cache = hash_cache() if use_cache else None
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return hit
    started = time.time()
    digest = _sha256_file(p)
    after = p.stat()
    unchanged = (after.st_mtime_ns, after.st_ctime_ns, after.st_size) == (
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_size,
    )
    if cache is not None and unchanged:
        if started - max(st.st_mtime_ns, st.st_ctime_ns) / 1e9 >= RACY_SECONDS:
            cache.put(key, digest)
    return digest


def file_fingerprint(p: Path) -> dict[str, Any]:
    st = p.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": file_sha256(p)}


def path_fingerprint(path: str | Path) -> dict[str, Any] | None:
    """The fingerprint of a file or directory; ``None`` when the path does not exist."""
    p = Path(path)
    try:
        if p.is_file():
            return file_fingerprint(p)
        if p.is_dir():
            files = {}
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(names):
                    if name.startswith("."):
                        continue
                    f = Path(root) / name
                    if f.is_file():
                        files[str(f.relative_to(p))] = file_fingerprint(f)
            return {"files": files}
    except OSError as exc:
        raise AuditError(f"input {str(p)!r} cannot be read: {exc.strerror or exc}") from None
    finally:
        hash_cache().flush()
    return None


def content_digest(path: str | Path) -> str | None:
    """One SHA-256 over a file's or directory's contents (names, sizes, content hashes;
    not mtimes): equal for two copies of one model. ``None`` when the path is missing."""
    fp = path_fingerprint(path)
    if fp is None:
        return None
    return hashlib.sha256(json.dumps(_content(fp), sort_keys=True).encode()).hexdigest()


def config_inputs(cfg) -> dict[str, str]:
    """``{config key: path}`` of every data file and model directory a config names."""
    out: dict[str, str] = {}
    for key in ("corpus", "members", "nonmembers", "test", "public"):
        v = cfg.data.get(key)
        if isinstance(v, str) and v != "fixtures":
            out[f"data.{key}"] = v
    target = cfg.target
    for key in ("model_dir", "tokenizer_dir"):
        v = getattr(target, key, None)
        if isinstance(v, str):
            out[f"target.{key}"] = v
    if isinstance(cfg.classifier_dir, str):
        out["target.audit_dir"] = cfg.classifier_dir
    for key in ("adapter_dir",):
        v = cfg.own_model.get(key)
        if isinstance(v, str):
            out[f"target.{key}"] = v
    refs = list(cfg.own_model.get("reference_dirs") or [])
    if not refs and isinstance(cfg.own_model.get("reference_dir"), str):
        refs = [cfg.own_model["reference_dir"]]
    for i, v in enumerate(refs):
        out["target.reference_dir" if i == 0 else f"target.reference_dirs[{i}]"] = v
    for key in ("canaries_dir", "model_dir", "reference_dir"):
        v = cfg.epsilon.get(key)
        if isinstance(v, str):
            out[f"epsilon.{key}"] = v
    if cfg.shadow is not None:
        for key in ("base_dir", "population"):
            v = cfg.shadow.get(key)
            if isinstance(v, str):
                out[f"shadow.{key}"] = v
    if isinstance(cfg.bench, str):
        out["report.bench"] = cfg.bench
    return out


def input_fingerprints(cfg) -> dict[str, Any]:
    """``{config key: {"path", fingerprint...}}`` for :func:`config_inputs`."""
    return {
        key: {"path": path, **(path_fingerprint(path) or {"missing": True})}
        for key, path in sorted(config_inputs(cfg).items())
    }


def manifest(fingerprints: dict[str, Any]) -> dict[str, Any]:
    """What ``inputs.json`` holds: the format and the fingerprints."""
    return {"format": FORMAT, "inputs": fingerprints}


def _content(fp: dict[str, Any]) -> Any:
    """What decides a change: content hashes and sizes (not mtimes)."""
    if "files" in fp:
        return {k: _content(v) for k, v in fp["files"].items()}
    return {k: v for k, v in fp.items() if k not in ("mtime_ns",)}


def task_inputs(fingerprints: dict[str, Any]) -> dict[str, Any]:
    """The part of the fingerprints that goes into task keys: contents only, so touching
    a file (a copy, a checkout) does not re-run anything, and any edit does."""
    return {k: _content(v) for k, v in fingerprints.items()}


def _changed_files(before: dict, after: dict) -> str:
    """`` (config.json, model.safetensors)``: which files of a directory differ."""
    if "files" not in before or "files" not in after:
        return ""
    b, a = before["files"], after["files"]
    names = sorted(
        n
        for n in set(a) | set(b)
        if not isinstance(b.get(n), dict) or _content(b[n]) != _content(a.get(n) or {})
    )
    if not names:
        return ""
    return (
        " (" + ", ".join(names[:4]) + (f", +{len(names) - 4} more" if len(names) > 4 else "") + ")"
    )


def changed_inputs(old: Any, new: dict[str, Any]) -> list[str]:
    """One line per input whose contents differ between a saved manifest (any format)
    and the current fingerprints."""
    if not isinstance(old, dict):
        return []
    if "format" not in old:  # format 1: a flat {key: fingerprint}
        legacy = [
            k
            for k, fp in old.items()
            if isinstance(fp, dict)
            and any(
                "header_sha256" in f
                for f in (fp.get("files") or {}).values()
                if isinstance(f, dict)
            )
        ]
        lines = [
            f"{k} ({old[k].get('path')}) was fingerprinted by its .safetensors headers only "
            "(a run directory of an older version); its weights are now hashed in full"
            for k in legacy
        ]
        old = {k: v for k, v in old.items() if k not in legacy}
    else:
        lines = []
        if old.get("format") != FORMAT:
            return [f"inputs.json has format {old.get('format')!r}, this version writes {FORMAT}"]
        old = old.get("inputs") if isinstance(old.get("inputs"), dict) else {}
    for key, fp in new.items():
        if any(ln.startswith(f"{key} (") for ln in lines):
            continue
        before = old.get(key)
        if not isinstance(before, dict):
            lines.append(f"{key} ({fp.get('path')}) is new to this run directory")
            continue
        if before.get("path") != fp.get("path"):
            lines.append(f"{key} now names {fp.get('path')} (was {before.get('path')})")
        elif _content(before) != _content(fp):
            lines.append(
                f"{key} ({fp.get('path')}) changed contents since the last run"
                + _changed_files(before, fp)
            )
    return lines


def record_inputs(rd, inputs: dict[str, Any], resume: bool, log) -> None:
    """:func:`note_changes`, then :func:`save_manifest`."""
    note_changes(rd, inputs, resume, log)
    save_manifest(rd, inputs)


def note_changes(rd, inputs: dict[str, Any], resume: bool, log) -> None:
    """On ``--resume``, log one line per input that changed since the run directory's last
    run (and write it to ``events.log`` as ``input-changed``).
    ``rd``: a :class:`privacy_audit.audit.scale.executors.RunDir` (``None``: nothing kept)."""
    if rd is None:
        return
    if resume and (rd.path / MANIFEST).is_file():
        from privacy_audit.ground.io import read_json

        try:
            before = read_json(rd.path / MANIFEST, "run directory manifest")
        except AuditError:
            before = None
            log(f"resume: {MANIFEST} of the run directory is unreadable; inputs not compared")
        if isinstance(before, dict) and "format" not in before:
            log(
                "resume: the run directory was written by an older privacy-audit (input "
                "fingerprints of format 1, weights by header only): task keys now hash every "
                "input in full, so its finished tasks are not reused and every task runs again"
            )
        for line in changed_inputs(before, inputs):
            log(f"resume: {line}: the tasks that read it run again")
            rd.log("input-changed", line.split(" ", 1)[0], line)
    elif resume and rd.path.is_dir():
        log(f"resume: the run directory has no {MANIFEST}; inputs not compared")


def save_manifest(rd, inputs: dict[str, Any]) -> None:
    """Write ``inputs.json`` (the fingerprints this run used) into the run directory."""
    if rd is None:
        return
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    rd.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(rd.path / MANIFEST, dumps_json(manifest(inputs)))
