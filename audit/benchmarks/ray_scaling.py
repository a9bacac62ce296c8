"""``privacy-audit bench ray-scaling``: 8 shadow-model trainings on Ray with 1 vs 2 workers.

One local Ray is started with ``num_cpus=2``; the same 8 ``train-shadow`` tasks (the tiny
target, the suite's real task function) run with at most 1 and at most 2 tasks in flight,
round-robin. Every task requests 1 CPU and runs 1 torch thread (``cpus_per_task``), so two
workers use the two cores without oversubscribing them. The reference case is
``2 workers``: the ratio printed for ``1 worker`` *is* the speed-up (target ≥ 1.6× on an
idle 2-core machine; other load on the machine lowers it, so report it with the load).
"""

from __future__ import annotations

import os

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, ratios_to, time_cases

CONFIG = """
title = "ray scaling benchmark"
seed = 0
[data]
n_members = {n}
n_nonmembers = {n}
n_test = 20
[target]
preset = "tiny"
max_length = 32
[train]
epochs = {epochs}
batch_size = 16
[[defenses]]
name = "none"
[shadow]
n_models = {models}
population = 0
attacks = ["lira-online"]
"""


def run(settings: BenchSettings) -> BenchResult:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.data import load_audit_data
    from privacy_audit.audit.scale.executors import ExecutorSpec, RayExecutor, import_ray
    from privacy_audit.audit.scale.plan import plan

    ray = import_ray()
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    n, epochs, models = (40, 1, 8) if settings.quick else (100, 4, 8)
    cfg = parse_config(tomllib.loads(CONFIG.format(n=n, epochs=epochs, models=models)))
    data = load_audit_data(cfg.data, cfg.seed, train=True)
    the_plan = plan(cfg, False, data)
    (shadows,) = the_plan.shadow_tasks.values()
    batch = [(t, []) for t in shadows]
    started_here = not ray.is_initialized()
    one = RayExecutor(ExecutorSpec(kind="ray", workers=1, num_cpus=2, cpus_per_task=1))
    two = RayExecutor(ExecutorSpec(kind="ray", workers=2, num_cpus=2, cpus_per_task=1))

    def noop(*_):
        pass

    def case(ex):
        return lambda: ex.run(batch, noop, noop)

    try:
        repeats = settings.repeats
        timings = time_cases(
            {"1 worker": case(one), "2 workers": case(two)}, repeats, max(settings.warmup, 1)
        )
        cluster_cpus = ray.cluster_resources().get("CPU")
    finally:
        if started_here:
            ray.shutdown()
    ratios = ratios_to(timings, "2 workers")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return BenchResult(
        name="ray-scaling",
        reference="2 workers",
        cases={k: v.summary() for k, v in timings.items()},
        ratios=ratios,
        setup={
            "tasks": len(batch),
            "task": "train-shadow (tiny BERT, one shadow model each)",
            "members_per_shadow": int(len(data.attack_set()) / 2),
            "epochs": epochs,
            "ray_num_cpus": cluster_cpus,
            "cpus_per_task": 1,
            "torch_threads_per_task": 1,
            "os_cpu_count": os.cpu_count(),
            "load_average_1min_at_start": load_start,
            "load_average_1min_at_end": load,
        },
        targets={"1 worker": "speed-up (this ratio) >= 1.6x on an idle 2-core machine"},
        notes=[
            f"speed-up of 2 workers over 1: {ratios['1 worker']:.2f}x",
            "the ratio shown for '1 worker' is its time over the 2-worker time, i.e. the speed-up",
            "on a loaded machine two workers also win a larger share of the CPU from other "
            "processes, so the speed-up is only meaningful with the load average near 0",
        ],
    )
