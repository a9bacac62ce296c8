"""One live run per output or run directory: a lock file holding the owner's PID.

Two runs into one ``--out`` used to both exit 0 with only the last writer's files left, and
the second run's start cleared the first run's finished tasks. :class:`DirLock` holds
``<dir>/.privacy-audit.lock`` with an exclusive ``flock`` for as long as the run lives; the
kernel drops the lock when the process ends, however it ends, so a crashed run leaves no
lock that anyone has to judge stale. Taking it over is race-free: the earlier
scheme (``O_CREAT | O_EXCL``, then "the PID is dead, delete the file and retry") let two
processes both judge a lock stale, and the slower then deleted the faster one's fresh lock
(2 holders at once in 1 of 40 trials with 16 processes). Now:

1. open the file with ``O_CREAT`` (never truncating) and ``flock(LOCK_EX | LOCK_NB)``: a
   failure means a live holder, exit 2;
2. check that the locked file is still the one at the path (same inode): a releasing run
   unlinks its file, so a process that opened the old inode retries on the new one;
3. read the record: a live PID on this host that is not ours (a run of an older version,
   which held no ``flock``) or another host's run is respected, exit 2; an empty file is
   simply not held (its creator would hold the ``flock``);
4. write ``pid host start-time`` in place and keep the descriptor open; release unlinks
   the file while still holding the lock, then closes it.

No step deletes a file another process holds. On a file system without ``flock``
(``ENOLCK`` / ``EOPNOTSUPP``, some network mounts) the lock falls back to ``O_CREAT |
O_EXCL`` plus an atomic rename of a stale file to a private name before removing it, and a
fresh lock younger than :data:`FRESH_SECONDS` is never judged stale.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import time
from pathlib import Path

from privacy_audit.ground.errors import AuditError

LOCK_NAME = ".privacy-audit.lock"


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), or "" elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # the command name (field 2) may hold spaces and parentheses: split after its last ")"
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except OSError:
        return False
    return True


def lock_owner(path: Path) -> tuple[int, str] | None:
    """``(pid, description)`` of the live run holding the lock file ``path``; ``None``
    when there is no lock or it is stale."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        return None
    parts = text.split()
    try:
        pid = int(parts[0])
    except (IndexError, ValueError):
        return None  # damaged: a run killed while writing it
    host = parts[1] if len(parts) > 1 else ""
    started = parts[2] if len(parts) > 2 else ""
    if host and host != socket.gethostname():
        return pid, f"PID {pid} on host {host}"
    if not _alive(pid):
        return None
    if started and _start_time(pid) and _start_time(pid) != started:
        return None  # the PID now belongs to another process
    return pid, f"PID {pid}"


#: a lock file younger than this is never judged stale in the fallback (its writer may not
#: have written its record yet)
FRESH_SECONDS = 10.0
#: use flock where the file system has it (tests turn it off to exercise the fallback)
USE_FLOCK = True


def _record() -> str:
    return f"{os.getpid()} {socket.gethostname()} {_start_time(os.getpid())}\n"


def _holder(text: str) -> tuple[int, str] | None:
    """The live holder a lock record names (not this process); ``None`` when stale."""
    parts = text.split()
    try:
        pid = int(parts[0])
    except (IndexError, ValueError):
        return None
    host = parts[1] if len(parts) > 1 else ""
    started = parts[2] if len(parts) > 2 else ""
    if host and host != socket.gethostname():
        return pid, f"PID {pid} on host {host}"
    if pid == os.getpid() or not _alive(pid):
        return None
    if started and _start_time(pid) and _start_time(pid) != started:
        return None
    return pid, f"PID {pid}"


class DirLock:
    """Hold ``<directory>/.privacy-audit.lock`` for the duration of a ``with`` block.

    The directory is created if needed; when this lock created it and the block leaves
    nothing in it but the lock (and, for a run directory, no finished task), it is removed
    again, so bad input found later still leaves nothing behind."""

    def __init__(self, directory: str | Path, option: str):
        self.dir = Path(directory)
        self.option = option
        self.file = self.dir / LOCK_NAME
        self.created_dir = False
        self.held = False
        self._fd: int | None = None

    def _busy(self, who: str) -> AuditError:
        self._cleanup_dir()
        return AuditError(
            f"{self.option} {str(self.dir)!r} is in use by another privacy-audit "
            f"run ({who}); wait for it to finish or choose another directory "
            f"(if no run is active, delete {str(self.file)!r})"
        )

    def _oserror(self, exc: OSError) -> AuditError:
        self._cleanup_dir()
        return AuditError(f"cannot write to {self.option} {str(self.dir)!r}: {exc.strerror or exc}")

    def acquire(self) -> None:
        try:
            self.created_dir = not self.dir.exists()
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AuditError(
                f"cannot write to {self.option} {str(self.dir)!r}: {exc.strerror or exc}"
            ) from None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            fcntl = None
        if not USE_FLOCK:
            fcntl = None
        if fcntl is not None:
            for _ in range(100):
                try:
                    fd = os.open(self.file, os.O_CREAT | os.O_RDWR, 0o644)
                except OSError as exc:
                    raise self._oserror(exc) from None
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    owner = lock_owner(self.file)
                    raise self._busy(owner[1] if owner else "it holds the lock") from None
                except OSError as exc:
                    os.close(fd)
                    if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                        break  # no flock here: the fallback below
                    raise self._oserror(exc) from None
                try:  # still the file at the path? (a releasing run unlinks it)
                    same = os.fstat(fd).st_ino == os.stat(self.file).st_ino
                except FileNotFoundError:
                    same = False
                if not same:
                    os.close(fd)
                    continue
                text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                owner = _holder(text)
                if owner is not None:  # a run of an older version (no flock), or remote
                    os.close(fd)
                    raise self._busy(owner[1])
                record = _record().encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, record, 0)
                self._fd = fd
                self.held = True
                return
            else:
                raise AuditError(
                    f"{self.option} {str(self.dir)!r}: the lock file keeps changing; is "
                    "another run starting there?"
                )
        self._acquire_exclusive()

    def _acquire_exclusive(self) -> None:
        """Without flock: ``O_CREAT | O_EXCL``; a stale file is renamed to a private name
        first (atomic: of several processes only one renames it), then removed."""
        record = _record()
        for _ in range(3):
            try:
                fd = os.open(self.file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    text = self.file.read_text(encoding="utf-8", errors="replace")
                    age = time.time() - self.file.stat().st_mtime
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise self._oserror(exc) from None
                owner = _holder(text)
                if owner is not None or (not text.strip() and age < FRESH_SECONDS):
                    raise self._busy(owner[1] if owner else "a lock just created") from None
                grave = self.file.with_name(f"{LOCK_NAME}.stale-{os.getpid()}")
                try:
                    os.rename(self.file, grave)
                except FileNotFoundError:
                    continue  # another process took it over first
                taken = grave.read_text(encoding="utf-8", errors="replace")
                if taken != text:  # we moved a fresh lock of another run: put it back
                    try:
                        os.link(grave, self.file)
                    except FileExistsError:
                        pass
                    grave.unlink(missing_ok=True)
                    raise self._busy("a lock just taken over") from None
                grave.unlink(missing_ok=True)
                continue
            except OSError as exc:
                raise self._oserror(exc) from None
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(record)
            self.held = True
            return
        raise AuditError(
            f"{self.option} {str(self.dir)!r}: another run took the lock at the same moment"
        )

    def release(self) -> None:
        if self.held:
            self.file.unlink(missing_ok=True)  # while still holding the flock
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self.held = False
        self._cleanup_dir()

    def _cleanup_dir(self) -> None:
        if not self.created_dir or not self.dir.is_dir():
            return
        if any((self.dir / "tasks").glob("*.json")):
            return
        if any(p.name not in ("tasks", "events.log") for p in self.dir.iterdir()):
            return
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> DirLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
