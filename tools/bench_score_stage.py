"""The score stage of ``run --model`` beside the plain batched loop, rounds interleaved in
one process, in user / system CPU and minor page faults (issue 38: the score stage's
excess over the plain loop).

    OMP_NUM_THREADS=1 nice -n 10 python tools/bench_score_stage.py N ROUNDS [--mallopt] [--no-trim] [--full-run] [--arm=plain|suite]
        [--trace-rss [--trim] [--chunk=K]]

N texts per side at 256 tokens on ``bench scale``'s 4 x 256 model (its own ``build_model``
and ``make_texts``). Each round runs both arms over the same 2N texts, alternating which
goes first: the plain loop (``tokenizer(batch)`` + ``model(...)`` in batches of 32) and
the suite's chunked streaming scorer exactly as ``run --model`` calls it
(:func:`~privacy_audit.audit.scale.stream.stream_token_stats` with chunk checkpoints, on the
release :func:`~privacy_audit.targets.loading.load_causal_lm_release` builds). The
suite's arm is broken down by wrapping its parts (encoding, the model's forward, the
statistics, the checkpoint write; the rest of ``forward_stats`` is the pooled hidden
state and the batch assembly). ``--mallopt`` applies
:func:`privacy_audit.audit.scale.malloc.tune_malloc` at process start (both arms).
``--full-run``: the suite's arm is the whole ``run --model`` as ``bench scale`` runs it
(``suite_run``: data loading, split check, scoring, attacks, report), its score stage's parts
read as above, so the score stage is measured in the process state the run leaves it.
``--no-trim``: the scorer does not hand free heap pages back every
:data:`~privacy_audit.audit.scale.stream.TRIM_TEXTS` texts (as before that was added).
``--trace-rss``: resident and peak RSS at each chunk's end (``--trim``: a malloc_trim there
too; ``--chunk=K``: K texts per chunk).
``--arm=plain`` or ``--arm=suite``: that arm alone (its peak RSS).
Prints one JSON line per round and a summary; peak RSS (ru_maxrss) at the end.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path


def usage() -> dict[str, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"user": r.ru_utime, "sys": r.ru_stime, "minflt": float(r.ru_minflt)}


def delta(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: b[k] - a[k] for k in a}


class Acc:
    """Accumulated rusage deltas of the wrapped calls."""

    def __init__(self) -> None:
        self.parts: dict[str, dict[str, float]] = {}

    def wrap(self, name, fn):
        def inner(*a, **k):
            u0 = usage()
            try:
                return fn(*a, **k)
            finally:
                d = delta(u0, usage())
                p = self.parts.setdefault(name, {"user": 0.0, "sys": 0.0, "minflt": 0.0})
                for key, v in d.items():
                    p[key] += v

        return inner


def main(argv: list[str]) -> int:
    n, rounds = int(argv[0]), int(argv[1])
    from privacy_audit.audit.scale import malloc

    if "--mallopt" in argv:
        tuned = malloc.tune_malloc()
    else:  # glibc's defaults in both arms: the scorer's own call becomes a no-op
        malloc._tried, tuned = True, None
    if "--no-trim" in argv:  # the scorer keeps the heap's free pages (no malloc_trim)
        malloc.release_free_memory = lambda: False
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from privacy_audit.audit.benchmarks.scale import build_model, make_texts, plain_loop
    from privacy_audit.audit.scale import stream
    from privacy_audit.targets import scoring
    from privacy_audit.targets.loading import (
        load_audit_target,
        load_causal_lm_release,
    )

    torch.set_num_threads(1)
    tokens = 256
    work = Path(tempfile.mkdtemp(prefix="score-stage-"))
    model_dir = Path("/tmp/score-stage-model")
    build_model(model_dir, quick=False)
    members, nonmembers = make_texts(n, tokens, 0)
    texts = members + nonmembers

    # loaded even for --arm=suite (a few MB at 4 x 256), so both arms' processes hold both
    plain_model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    hf = AutoTokenizer.from_pretrained(model_dir)
    hf.pad_token = hf.eos_token

    loaded = load_audit_target(model_dir, "causal-lm")
    release = load_causal_lm_release(loaded, tokens, None, "cpu")
    acc = Acc()
    scoring.encode_lengths = acc.wrap("encode", scoring.encode_lengths)
    scoring.token_statistics_from_logits = acc.wrap(
        "statistics", scoring.token_statistics_from_logits
    )
    release.model.forward = acc.wrap("model_forward", release.model.forward)
    stream.ChunkStore.save = acc.wrap("checkpoint_write", stream.ChunkStore.save)
    scoring.forward_stats = acc.wrap("forward_stats", scoring.forward_stats)
    key = stream.scoring_key(release)
    for a in argv:
        if a.startswith("--chunk="):  # texts per chunk (default stream.CHUNK_TEXTS)
            stream.CHUNK_TEXTS = int(a.split("=", 1)[1])
    if "--trace-rss" in argv:  # resident and peak MB at each chunk's end
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        save = stream.ChunkStore.save

        def traced(self, *a, **k):
            save(self, *a, **k)
            if "--trim" in argv:
                libc.malloc_trim(0)
            pages = int(Path("/proc/self/statm").read_text().split()[1])
            print(
                json.dumps(
                    {
                        "chunk_end_rss_mb": pages * 4096 / 2**20,
                        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                    }
                ),
                flush=True,
            )

        stream.ChunkStore.save = traced

    def plain(texts=texts) -> dict[str, float]:
        u0 = usage()
        plain_loop(plain_model, hf, texts, tokens)  # the bench's own plain loop
        return delta(u0, usage())

    full = "--full-run" in argv
    stream.stream_token_stats = acc.wrap("score_stage", stream.stream_token_stats)
    if full:
        from privacy_audit.audit.benchmarks.scale import suite_run, write_lines

        m_file = write_lines(work / "members.txt", members)
        n_file = write_lines(work / "nonmembers.txt", nonmembers)

    def suite(r: int, texts=texts) -> dict[str, float]:
        if full:  # the whole run --model (split check and all); its score stage's parts
            acc.parts = {}
            u0 = usage()
            rec = suite_run(model_dir, m_file, n_file, tokens, work / f"out{r}")
            return delta(u0, usage()) | {"parts": acc.parts, "stages": rec["stages"]}

        release.__dict__.pop("_token_stats_cache", None)
        release._hidden_cache = {}
        store = stream.ChunkStore(work / f"round{r}" / "scoring", key)
        acc.parts = {}
        u0 = usage()
        stream.stream_token_stats(release, texts, store, resume=False)
        return delta(u0, usage()) | {"parts": acc.parts}

    arms = ("plain", "suite")
    only = [a.split("=", 1)[1] for a in argv if a.startswith("--arm=")]
    if only:  # one arm alone: the process's peak RSS is that arm's
        arms = (only[0],)
    run = {"plain": plain, "suite": suite}
    for arm in arms:  # warm: first-call costs, on 64 texts
        run[arm](-1, texts[:64]) if arm == "suite" else run[arm](texts[:64])
    tot = {"plain": {"user": 0.0, "sys": 0.0, "minflt": 0.0}, "suite": {}}
    tot["suite"] = dict(tot["plain"])
    for r in range(rounds):
        res = {}
        for arm in arms if r % 2 == 0 else arms[::-1]:
            res[arm] = plain() if arm == "plain" else suite(r)
            for k in ("user", "sys", "minflt"):
                tot[arm][k] += res[arm][k]
        print(json.dumps({"round": r, **res}), flush=True)
    summary = {
        "texts": len(texts),
        "tokens": tokens,
        "rounds": rounds,
        "mallopt": tuned,
        "totals": tot,
        "arms": list(arms),
        "ratio_cpu": (tot["suite"]["user"] + tot["suite"]["sys"])
        / (tot["plain"]["user"] + tot["plain"]["sys"])
        if len(arms) == 2
        else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "at": time.strftime("%H:%M:%S"),
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
