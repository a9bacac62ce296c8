"""Atomic output: a reader never sees a half-written report or results file."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same directory and ``os.replace``.

    ``os.replace`` is atomic on POSIX when source and target share a filesystem, which a
    sibling temporary file guarantees.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; outputs are ordinary files
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def json_safe(obj: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats to strict JSON values.

    Non-finite floats become ``None``: strict JSON has no NaN or Infinity, and a consumer
    in another language must be able to parse the file.
    """
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return json_safe(obj.tolist())
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")


#: Lists of at least this many plain scalars are encoded on one line by the C encoder
#: (``json.dumps`` with ``indent`` runs the pure-Python encoder, ~10x slower): the per-example
#: scores, ids and members of a large audit (``score`` on 10^6 rows).
_FLAT_LIST = 256
_SCALARS = (str, int, float, bool, type(None))


def _flat_json(obj: list) -> str | None:
    """``obj`` as one line of strict JSON if it is a long list of plain finite scalars."""
    if len(obj) < _FLAT_LIST or not all(type(v) in _SCALARS for v in obj):
        return None
    try:
        return json.dumps(obj, allow_nan=False, ensure_ascii=False)
    except ValueError:  # NaN or infinity: the general path writes null for them
        return None


def dumps_json(obj: Any) -> str:
    """Strict, indented JSON; long lists of scalars take one line each (same values)."""
    import secrets

    token = f"@@flat-{secrets.token_hex(8)}-"  # a data string cannot guess it
    flat: list[str] = []

    def walk(o: Any) -> Any:
        if isinstance(o, dict):
            return {str(k): walk(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)) or (hasattr(o, "tolist") and not isinstance(o, str)):
            items = o.tolist() if hasattr(o, "tolist") else list(o)
            if not isinstance(items, list):  # a numpy scalar
                return json_safe(items)
            text = _flat_json(items)
            if text is not None:
                flat.append(text)
                return f"{token}{len(flat) - 1}"
            return [walk(v) for v in items]
        return json_safe(o)

    out = json.dumps(walk(obj), indent=2, allow_nan=False, ensure_ascii=False) + "\n"
    if flat:
        import re

        out = re.sub(f'"{re.escape(token)}([0-9]+)"', lambda m: flat[int(m[1])], out)
    return out


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, dumps_json(obj))


#: Deepest nesting a results/config JSON file may have (results.json is about 8 deep).
MAX_JSON_DEPTH = 64
_JSON_OPEN = frozenset(b"[{")
_JSON_CLOSE = frozenset(b"]}")


def json_depth(data: bytes) -> int:
    """Maximum ``[``/``{`` nesting of a JSON document, ignoring brackets inside strings.

    A linear byte scan: Python's ``json`` module recurses once per level and raises
    ``RecursionError`` (not a ``JSONDecodeError``) on documents nested thousands deep.
    """
    depth = best = 0
    in_string = escaped = False
    for b in data:
        if in_string:
            if escaped:
                escaped = False
            elif b == 0x5C:  # backslash
                escaped = True
            elif b == 0x22:  # quote
                in_string = False
        elif b == 0x22:
            in_string = True
        elif b in _JSON_OPEN:
            depth += 1
            if depth > best:
                best = depth
        elif b in _JSON_CLOSE:
            depth -= 1
    return best


def parse_json(data: bytes, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON from bytes, or an :class:`~privacy_audit.ground.errors.DataError` naming ``what``.

    Guards what ``json.loads`` lets escape: nesting deeper than ``max_depth`` (a
    RecursionError), integers past Python's digit limit (a ValueError), NaN and Infinity
    (not JSON; read as ``None`` would hide a non-finite metric, so they are kept as
    floats for the caller to reject), invalid UTF-8."""
    from privacy_audit.ground.errors import DataError

    if data.count(b"[") + data.count(b"{") > max_depth and json_depth(data) > max_depth:
        raise DataError(f"{what} is not valid JSON for this tool: nested deeper than {max_depth}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{what} is not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{what} is not valid JSON: {exc}") from None
    except ValueError as exc:  # int() past the 4300-digit limit
        raise DataError(f"{what} is not valid JSON: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise DataError(f"{what} is not valid JSON: nested too deeply") from None


def read_json(path: str | os.PathLike, what: str = "JSON file") -> Any:
    """Read ``path`` with :func:`parse_json`; a missing or unreadable file is a DataError."""
    from privacy_audit.ground.errors import DataError

    p = Path(path)
    label = f"{what} {str(p)!r}"
    if not p.is_file():
        raise DataError(f"{label} does not exist" + (" (it is a directory)" if p.is_dir() else ""))
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {label}: {exc.strerror or exc}") from None
    return parse_json(data, label)


_TMP_PREFIXES = (".report.html.", ".results.json.", ".write-check-")


def _write_temp(directory: Path, name: str, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def publish_together(directory: str | os.PathLike, files: list[tuple[str, str]]) -> list[Path]:
    """Publish several files of one output as a set: every temporary is written and
    fsynced first, then each is renamed into place **in the given order**, so the last
    file marks completion. ``write_outputs`` passes report.html first and results.json
    last: a results.json newer than the report never exists, and a reader that waits for
    results.json sees both. A failure before the renames leaves the old files untouched
    and no temporaries; a kill leaves at most ``.NAME.*.tmp`` files, which
    :func:`remove_stale_temporaries` deletes at the next start."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    temps: list[tuple[str, Path]] = []
    try:
        for name, text in files:
            temps.append((_write_temp(out, name, text.encode("utf-8")), out / name))
        for tmp, final in temps:
            os.replace(tmp, final)
    except BaseException:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        raise
    try:  # make the renames durable in order
        dfd = os.open(out, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return [final for _, final in temps]


def remove_stale_temporaries(directory: str | os.PathLike) -> list[Path]:
    """Delete temporaries a killed run left in an output directory (``.report.html.*.tmp``,
    ``.results.json.*.tmp``, ``.write-check-*``); returns what was removed."""
    out = Path(directory)
    removed = []
    if not out.is_dir():
        return removed
    for f in out.iterdir():
        if f.name.startswith(_TMP_PREFIXES) and f.is_file():
            try:
                f.unlink()
                removed.append(f)
            except OSError:
                pass
    return removed
