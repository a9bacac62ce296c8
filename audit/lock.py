"""One live run per output or run directory: a lock file holding the owner's PID.

Two runs into one ``--out`` used to both exit 0 with only the last writer's files left, and
the second run's start cleared the first run's finished tasks. :class:`DirLock` creates
``<dir>/.privacy-audit.lock`` with ``O_CREAT | O_EXCL`` (atomic on local file systems and
NFSv3+), holding ``pid host start-time``. A second run finds it and stops with exit 2 before
any work, unless the lock is stale: its PID is gone on this host, or now belongs to a
process that started later (the PID was reused). A lock from another host cannot be
checked, so it is treated as live and the message says how to clear it.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from privacy_audit.audit.errors import AuditError

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

    def acquire(self) -> None:
        try:
            self.created_dir = not self.dir.exists()
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AuditError(
                f"cannot write to {self.option} {str(self.dir)!r}: {exc.strerror or exc}"
            ) from None
        record = f"{os.getpid()} {socket.gethostname()} {_start_time(os.getpid())}\n"
        for _ in range(2):
            try:
                fd = os.open(self.file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = lock_owner(self.file)
                if owner is not None:
                    self._cleanup_dir()
                    raise AuditError(
                        f"{self.option} {str(self.dir)!r} is in use by another privacy-audit "
                        f"run ({owner[1]}); wait for it to finish or choose another directory "
                        f"(if no run is active, delete {str(self.file)!r})"
                    ) from None
                self.file.unlink(missing_ok=True)  # stale: its run is gone
                continue
            except OSError as exc:
                self._cleanup_dir()
                raise AuditError(
                    f"cannot write to {self.option} {str(self.dir)!r}: {exc.strerror or exc}"
                ) from None
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(record)
            self.held = True
            return
        raise AuditError(
            f"{self.option} {str(self.dir)!r}: another run took the lock at the same moment"
        )

    def release(self) -> None:
        if self.held:
            self.file.unlink(missing_ok=True)
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
