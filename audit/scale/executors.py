"""Executor layer: pure, serialisable tasks run in-process, on a process pool, or on Ray.

A :class:`Task` names a function by ``"module:function"`` and carries a JSON-serialisable
``payload``; its ``key`` is a hash of both (plus the keys of the tasks it depends on), so
the same work always has the same key. A task function is ``fn(payload, deps) -> dict``
where ``deps`` are the results of the tasks named in ``Task.deps``; it must depend on
nothing else (no globals, no files written by other tasks), which is what lets any
executor run it anywhere.

:func:`run_tasks` skips tasks whose result is already in the :class:`RunDir`, submits the
rest to an executor, and writes each result atomically the moment it arrives, so a crash
or kill loses only the tasks in flight. Every result is passed through strict JSON before
anyone reads it, so a result read back from disk is the same as a fresh one.

Every task runs with ``cpus_per_task`` torch threads (default 1) on every executor: the
thread count changes floating-point summation order, and the same config must give the
same numbers wherever it runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_audit.ground.errors import AuditError
from privacy_audit.ground.io import atomic_write_text, dumps_json

TASK_FORMAT = 1  # bump when a task's meaning changes, so old results are not reused
#: Keys a finished task's result must have (one of), by task kind: a resumed run checks
#: every reused file before any work.
RESULT_KEYS: dict[str, tuple[str, ...]] = {
    "audit-trial": ("run",),
    "train-shadow": ("loss", "unavailable"),
    "score-attack": ("attack",),
    "train-reference": ("loss",),
}


def _key_fn(fn: str) -> str:
    """A task function's name as keys hash it: without the ``privacy_audit.`` import root,
    i.e. as named before the root existed, so a run directory written before
    then still resumes instead of silently recomputing every task."""
    return fn.removeprefix("privacy_audit.")


@dataclass(frozen=True)
class Task:
    kind: str  # "audit-trial" | "train-shadow" | "score-attack" | ...
    fn: str  # "module:function"
    payload: dict[str, Any]
    deps: tuple[str, ...] = ()
    label: str = ""  # for progress lines
    _key: str = field(default="", compare=False, repr=False)

    @property
    def key(self) -> str:
        if not self._key:
            blob = json.dumps(
                {
                    "format": TASK_FORMAT,
                    "kind": self.kind,
                    "fn": _key_fn(self.fn),
                    "payload": self.payload,
                    "deps": list(self.deps),
                },
                sort_keys=True,
                separators=(",", ":"),
                default=str,
            )
            object.__setattr__(self, "_key", hashlib.sha256(blob.encode()).hexdigest()[:24])
        return self._key


@dataclass(frozen=True)
class ExecutorSpec:
    kind: str = "local"  # local | ray
    # local: None/1 = in-process, > 1 = a process pool; ray: the most tasks in flight
    # (None: as many as the cluster schedules)
    workers: int | None = None
    address: str | None = None  # ray: None starts a local Ray; else an existing cluster
    cpus_per_task: int = 1
    memory_mb: int | None = None  # ray: memory request per task
    num_cpus: int | None = None  # ray.init(num_cpus=...) for a local Ray (tests, benchmarks)

    @classmethod
    def from_config(cls, section: dict[str, Any], **overrides: Any) -> ExecutorSpec:
        merged = {**section, **{k: v for k, v in overrides.items() if v is not None}}
        return cls(
            kind=merged.get("kind", "local"),
            workers=merged.get("workers"),
            address=merged.get("address"),
            cpus_per_task=int(merged.get("cpus_per_task", 1)),
            memory_mb=merged.get("memory_mb"),
            num_cpus=merged.get("num_cpus"),
        )


def _resolve(fn: str) -> Callable[..., dict[str, Any]]:
    module, name = fn.split(":")
    return getattr(importlib.import_module(module), name)


def execute(fn: str, payload: dict[str, Any], deps: list[dict[str, Any]], threads: int) -> str:
    """Run one task function with ``threads`` torch threads; return its result as strict JSON
    (the form it is stored in; every executor returns exactly this string)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return dumps_json(_resolve(fn)(payload, deps))
    finally:
        torch.set_num_threads(before)


def _num_list(x: Any) -> bool:
    return isinstance(x, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in x
    )


def _attack_problem(a: Any, where: str) -> str | None:
    """What is wrong with one stored attack record (``None``: nothing the run reads)."""
    if not isinstance(a, dict):
        return f"{where} is not an object"
    if not isinstance(a.get("attack"), str):
        return f"{where} has no attack name"
    if not isinstance(a.get("status"), str):
        return f"{where} has no status"
    if a["status"] == "ok":
        metrics = a.get("metrics")
        auc = metrics.get("auc") if isinstance(metrics, dict) else None
        value = auc.get("value") if isinstance(auc, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"{where} is 'ok' but has no numeric metrics.auc.value"
        ex = a.get("examples")
        if ex is not None and not (
            isinstance(ex, dict)
            and isinstance(ex.get("ids"), list)
            and _num_list(ex.get("scores"))
            and _num_list(ex.get("members"))
            and len(ex["ids"]) == len(ex["scores"]) == len(ex["members"])
        ):
            return f"{where} has malformed per-example scores"
    return None


def result_problem(kind: str, result: dict[str, Any]) -> str | None:
    """Why a finished task's stored result cannot be what that task returned (``None``:
    it can). Checked before any work on ``--resume``, so a damaged file is exit 2, not an
    internal error halfway through assembling the report."""
    if kind == "audit-trial":
        run = result["run"]
        if not isinstance(run.get("name"), str):
            return "its run has no name"
        if not isinstance(run.get("defense", ""), str):
            return "its run's defense is not text"
        attacks = run.get("attacks")
        if not isinstance(attacks, list):
            return "its run has no attacks list"
        for i, a in enumerate(attacks):
            why = _attack_problem(a, f"attack #{i + 1}")
            if why:
                return why
        for key in ("leakage",):
            if key in run and not (
                isinstance(run[key], list) and all(isinstance(x, dict) for x in run[key])
            ):
                return f"its run's {key} is not a list of objects"
        for key in ("claim", "training", "epsilon_audit"):
            if run.get(key) is not None and not isinstance(run[key], dict):
                return f"its run's {key} is not an object"
        if "pool" in result:
            pool = result["pool"]
            if not isinstance(pool, dict) or ("loss" in pool and not _num_list(pool["loss"])):
                return "its shadow pool losses are not a list of numbers"
    elif kind == "train-shadow":
        if "loss" in result and not _num_list(result["loss"]):
            return "its losses are not a list of numbers"
    elif kind == "score-attack":
        return _attack_problem(result, "the attack")
    return None


class RunDir:
    """``<dir>/tasks/<key>.json`` per finished task, written atomically, and an append-only
    ``events.log`` (``start``/``done`` lines with task keys) recording what ran when."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.tasks = self.path / "tasks"

    def _file(self, key: str) -> Path:
        return self.tasks / f"{key}.json"

    def has(self, key: str) -> bool:
        return self._file(key).is_file()

    def load(self, key: str, kind: str = "") -> dict[str, Any]:
        """A finished task's result; AuditError (exit 2, before any work) when the file is
        unreadable or not the result of a task of this ``kind``."""
        from privacy_audit.ground.io import parse_json

        f = self._file(key)
        try:
            data = f.read_bytes()
        except OSError as exc:
            raise AuditError(
                f"run directory {str(self.path)!r}: task {key} is unreadable: {exc.strerror or exc}"
            ) from None
        what = f"run directory {str(self.path)!r}: task file {f.name}"
        result = parse_json(data, what)
        need = RESULT_KEYS.get(kind, ())
        if not isinstance(result, dict) or (need and not any(k in result for k in need)):
            raise AuditError(
                f"{what} is not a finished {kind or 'task'} result (no "
                f"{' or '.join(repr(k) for k in need) or 'object'}); delete it or run without "
                "--resume"
            )
        if kind == "audit-trial" and not isinstance(result.get("run"), dict):
            raise AuditError(f"{what} has no run record; delete it or run without --resume")
        problem = result_problem(kind, result)
        if problem is not None:
            raise AuditError(f"{what} is damaged ({problem}); delete it or run without --resume")
        return result

    def save(self, key: str, text: str) -> None:
        atomic_write_text(self._file(key), text)

    def log(self, event: str, key: str, label: str = "") -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / "events.log", "a", encoding="utf-8") as fh:
            fh.write(f"{time.time():.3f} {event} {key} {label}\n")
            fh.flush()
            os.fsync(fh.fileno())

    def clear(self) -> None:
        """Forget finished tasks (a fresh run without ``--resume``)."""
        if self.tasks.is_dir():
            for f in self.tasks.glob("*.json"):
                f.unlink()
        (self.path / "events.log").unlink(missing_ok=True)


class Executor:
    """Runs a batch of independent tasks; ``on_done(task, result_json)`` as each finishes."""

    def __init__(self, spec: ExecutorSpec):
        self.spec = spec

    def run(self, batch: list[tuple[Task, list[dict]]], on_start, on_done) -> None:
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


def _exit_when_orphaned(parent: int, interval: float) -> None:
    while True:
        time.sleep(interval)
        if os.getppid() != parent:
            os._exit(1)  # the driver is gone: nobody will read this worker's result


def pool_worker_init(parent: int, interval: float = 0.5) -> None:
    """Initializer of every pool worker: end it when the driver dies, even by SIGKILL
    (no ``atexit`` or pool shutdown runs then). On Linux ``PR_SET_PDEATHSIG`` has the
    kernel send SIGKILL at once; everywhere a daemon thread also polls ``getppid()``
    (re-parenting to init or a subreaper changes it) and exits within ``interval``."""
    import threading

    if os.getppid() != parent:
        os._exit(1)
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            PR_SET_PDEATHSIG = 1
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:  # died between the fork and the prctl
            os._exit(1)
    threading.Thread(
        target=_exit_when_orphaned, args=(parent, interval), name="orphan-watch", daemon=True
    ).start()


class LocalExecutor(Executor):
    """In-process (``workers = 1``) or a spawn-context process pool (``workers > 1``)."""

    def __init__(self, spec: ExecutorSpec):
        super().__init__(spec)
        self._pool = None

    def run(self, batch, on_start, on_done) -> None:
        threads = self.spec.cpus_per_task
        if (self.spec.workers or 1) <= 1:
            for task, deps in batch:
                on_start(task)
                on_done(task, execute(task.fn, task.payload, deps, threads))
            return
        import concurrent.futures as cf
        import multiprocessing as mp

        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(
                self.spec.workers,
                mp_context=mp.get_context("spawn"),
                initializer=pool_worker_init,
                initargs=(os.getpid(),),
            )
        futures = {}
        for task, deps in batch:
            on_start(task)
            futures[self._pool.submit(execute, task.fn, task.payload, deps, threads)] = task
        for fut in cf.as_completed(futures):
            on_done(futures[fut], fut.result())

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


RAY_MISSING = (
    "the Ray executor needs Ray, which is not installed; install the extra with "
    'pip install "privacy-audit[ray]" (or pip install ".[ray]" in a checkout)'
)


def import_ray():
    try:
        import ray
    except ImportError:
        raise AuditError(RAY_MISSING) from None
    return ray


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast with one line when a ``host:port`` / ``ray://host:port`` address does not
    answer (``ray.init`` would otherwise retry for a minute). ``auto`` is left to Ray."""
    import socket

    if address == "auto":
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise AuditError(f"Ray address {address!r} is not host:port, ray://host:port or 'auto'")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise AuditError(
            f"cannot reach the Ray cluster at {address!r}: {exc.strerror or exc}; "
            "check the address (ray start --head prints it) or drop --address for a local Ray"
        ) from None


def ray_start_error(spec: ExecutorSpec, exc: BaseException) -> str:
    """One line: which Ray failed (address or a local one), with the resources asked for,
    and the first line of Ray's message."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    first = lines[0] if lines else type(exc).__name__
    asked = [f"cpus_per_task={spec.cpus_per_task}"]
    if spec.workers is not None:
        asked.append(f"workers={spec.workers}")
    if spec.memory_mb is not None:
        asked.append(f"memory_mb={spec.memory_mb}")
    if spec.address:
        what = f"cannot connect to the Ray cluster at {spec.address!r}"
        hint = "check the address (ray start --head prints it) or drop --address"
    else:
        cpus = f"num_cpus={spec.num_cpus}" if spec.num_cpus is not None else "num_cpus=all"
        asked.insert(0, cpus)
        what = "cannot start a local Ray"
        hint = "rerun when the machine is less loaded, or use --executor local"
    return f"{what} ({', '.join(asked)}): {type(exc).__name__}: {first}; {hint}"


class RayExecutor(Executor):
    """Submits the same tasks to Ray: ``ray.init()`` (a local Ray) or ``ray.init(address)``.

    Each task requests ``cpus_per_task`` CPUs and, if set, ``memory_mb`` of memory; at most
    ``workers`` tasks are in flight when ``workers > 1`` (else as many as Ray schedules), and
    results stream back in completion order with ``ray.wait``."""

    def __init__(self, spec: ExecutorSpec):
        super().__init__(spec)
        ray = import_ray()
        self.ray = ray
        self._started = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if spec.address:
                _check_reachable(spec.address)
                kwargs["address"] = spec.address
            else:
                if spec.num_cpus is not None:
                    kwargs["num_cpus"] = spec.num_cpus
                # workers import this package: give them the driver's import path
                path = os.pathsep.join(p for p in sys.path if p)
                kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
            try:
                ray.init(**kwargs)
            except Exception as exc:  # noqa: BLE001 - any failure to start or connect is exit 2
                # Ray raises plain Exception too ("The current node timed out during
                # startup ... raylet failed to startup"): one line naming what was tried,
                # never an internal error
                with contextlib.suppress(Exception):
                    ray.shutdown()  # a half-started local Ray leaves no processes behind
                raise AuditError(ray_start_error(spec, exc)) from None
            self._started = True
        options: dict[str, Any] = {"num_cpus": spec.cpus_per_task, "max_retries": 0}
        if spec.memory_mb:
            options["memory"] = int(spec.memory_mb) * 1024 * 1024
        self._remote = ray.remote(**options)(execute)

    def run(self, batch, on_start, on_done) -> None:
        ray = self.ray
        limit = self.spec.workers or len(batch)
        pending: dict[Any, Task] = {}
        queue = list(batch)
        while queue or pending:
            while queue and len(pending) < limit:
                task, deps = queue.pop(0)
                on_start(task)
                ref = self._remote.remote(task.fn, task.payload, deps, self.spec.cpus_per_task)
                pending[ref] = task
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    text = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    # a user-fixable error inside a task stays one clear line
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, AuditError):
                        raise cause from None
                    raise
                on_done(task, text)

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False


def make_executor(spec: ExecutorSpec) -> Executor:
    if spec.kind == "ray":
        return RayExecutor(spec)
    if spec.kind == "local":
        if spec.address:
            raise AuditError("--address applies only with --executor ray")
        return LocalExecutor(spec)
    raise AuditError(f"unknown executor {spec.kind!r}; allowed: local, ray")


def run_tasks(
    tasks: list[Task],
    executor: Executor,
    run_dir: RunDir | None = None,
    progress: Callable[[str], None] | None = None,
    results: dict[str, dict] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run ``tasks`` (a batch whose deps are all in ``results`` or the run dir); return
    ``{key: result}`` for all of them. Finished tasks in ``run_dir`` are not run again."""
    results = {} if results is None else results
    todo: list[tuple[Task, list[dict]]] = []
    for task in tasks:
        if task.key in results:
            continue
        if run_dir is not None and run_dir.has(task.key):
            results[task.key] = run_dir.load(task.key, task.kind)
            continue
        deps = []
        for d in task.deps:
            if d not in results:
                if run_dir is None or not run_dir.has(d):
                    raise RuntimeError(f"task {task.label or task.key} runs before its input {d}")
                results[d] = run_dir.load(d)
            deps.append(results[d])
        todo.append((task, deps))
    total, done = len(todo), [0]
    skipped = len(tasks) - total
    if progress and skipped:
        progress(f"resume: {skipped} finished task(s) reused")
    started = time.perf_counter()

    def on_start(task: Task) -> None:
        if run_dir is not None:
            run_dir.log("start", task.key, task.label)

    def on_done(task: Task, text: str) -> None:
        if run_dir is not None:
            run_dir.save(task.key, text)
            run_dir.log("done", task.key, task.label)
        results[task.key] = json.loads(text)
        done[0] += 1
        if progress:
            from privacy_audit.ground.progress import fmt_seconds

            elapsed = time.perf_counter() - started
            eta = elapsed / done[0] * (total - done[0])
            progress(
                f"[{done[0]}/{total}] {task.kind}: {task.label} "
                f"(elapsed {fmt_seconds(elapsed)}, ETA {fmt_seconds(eta)})"
            )

    if todo:
        executor.run(todo, on_start, on_done)
    return results
