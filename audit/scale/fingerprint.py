"""Content fingerprints of a run's input files and model directories, for task keys.

A task's key used to hash the config, which names its data by path: ``--resume`` then
reused tasks computed on a file whose contents had since changed, and the published result
mixed old and new data. Every input a task reads is now fingerprinted into its key:

- a file: its size, mtime and the SHA-256 of its contents;
- a directory (a model, an adapter, a saved dataset): the same for every file below it,
  except that a ``.safetensors`` file is fingerprinted by its size and the SHA-256 of its
  header (tensor names, dtypes, shapes and byte offsets, plus the writer's metadata) rather
  than by gigabytes of weights.

mtime alone is not trusted (a copy keeps it, an edit within one second may not change
it), size alone misses same-length edits; the content hash decides. mtime is kept so that
the manifest shows what changed when.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Any

from privacy_audit.audit.errors import AuditError

#: Where the last run's fingerprints are kept in the run directory.
MANIFEST = "inputs.json"
_CHUNK = 1 << 20
#: A safetensors header larger than this is not read (the format caps it at 100 MB).
_MAX_HEADER = 100_000_000


def _sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _safetensors_header(p: Path) -> str:
    """SHA-256 of a safetensors file's length prefix and JSON header."""
    with open(p, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return _sha256_file(p)
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER:
            return _sha256_file(p)
        return hashlib.sha256(head + fh.read(n)).hexdigest()


def file_fingerprint(p: Path) -> dict[str, Any]:
    st = p.stat()
    if p.suffix == ".safetensors":
        return {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "header_sha256": _safetensors_header(p),
        }
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": _sha256_file(p)}


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
    return None


def config_inputs(cfg) -> dict[str, str]:
    """``{config key: path}`` of every data file and model directory a config names."""
    out: dict[str, str] = {}
    for key in ("corpus", "members", "nonmembers", "test", "public"):
        v = cfg.data.get(key)
        if isinstance(v, str) and v != "fixtures":
            out[f"data.{key}"] = v
    target = cfg.target
    for key in ("model_dir",):
        v = getattr(target, key, None)
        if isinstance(v, str):
            out[f"target.{key}"] = v
    if isinstance(cfg.classifier_dir, str):
        out["target.audit_dir"] = cfg.classifier_dir
    for key in ("adapter_dir", "reference_dir"):
        v = cfg.audit.get(key)
        if isinstance(v, str):
            out[f"target.{key}"] = v
    for key in ("canaries_dir", "model_dir", "reference_dir"):
        v = cfg.epsilon.get(key)
        if isinstance(v, str):
            out[f"epsilon.{key}"] = v
    if isinstance(cfg.bench, str):
        out["report.bench"] = cfg.bench
    return out


def input_fingerprints(cfg) -> dict[str, Any]:
    """``{config key: {"path", fingerprint...}}`` for :func:`config_inputs`."""
    return {
        key: {"path": path, **(path_fingerprint(path) or {"missing": True})}
        for key, path in sorted(config_inputs(cfg).items())
    }


def _content(fp: dict[str, Any]) -> Any:
    """What decides a change: content hashes and sizes (not mtimes)."""
    if "files" in fp:
        return {k: _content(v) for k, v in fp["files"].items()}
    return {k: v for k, v in fp.items() if k not in ("mtime_ns",)}


def task_inputs(fingerprints: dict[str, Any]) -> dict[str, Any]:
    """The part of the fingerprints that goes into task keys: contents only, so touching
    a file (a copy, a checkout) does not re-run anything, and any edit does."""
    return {k: _content(v) for k, v in fingerprints.items()}


def changed_inputs(old: Any, new: dict[str, Any]) -> list[str]:
    """One line per input whose contents differ between two manifests."""
    if not isinstance(old, dict):
        return []
    lines = []
    for key, fp in new.items():
        before = old.get(key)
        if not isinstance(before, dict):
            lines.append(f"{key} ({fp.get('path')}) is new to this run directory")
            continue
        if before.get("path") != fp.get("path"):
            lines.append(f"{key} now names {fp.get('path')} (was {before.get('path')})")
        elif _content(before) != _content(fp):
            lines.append(f"{key} ({fp.get('path')}) changed contents since the last run")
    return lines
