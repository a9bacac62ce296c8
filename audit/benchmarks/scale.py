"""``privacy-audit bench scale``: the own-model audit at growing n beside a plain loop.

For every ``tokens`` in ``--scale-tokens`` (default 64, 256, 512) and every ``n`` in
``--scale-sizes`` (default 100, 1,000, 10,000 texts *per side*; 100,000 as an option), one
fresh Python process (so that its peak RSS is this case's) does, on one CPU thread:

1. a warm-up: the suite on 8 texts per side (imports, first-call costs; its CPU time is
   reported as ``cold_start_cpu_s``, outside the ratio) and one plain batch;
2. the **plain loop**, first half: ``tokenizer(batch, truncation=True, max_length=tokens)``
   and ``model(input_ids=..., attention_mask=...)`` under ``torch.no_grad()`` in batches of
   32 (the suite's scoring batch), no statistic kept;
3. the **suite**: ``privacy-audit run --model DIR --members F --nonmembers F --max-length
   tokens`` as the CLI runs it (config, data loading, cutting, split check, scoring in
   checkpointed chunks, lm-loss / zlib / min-k with their bootstraps, leakage map, verdicts,
   report.html and results.json), with its stage timer on **process CPU time**;
4. the plain loop, second half (the plain halves sandwich the suite, so a load drift hits
   both alike; CPU time is what load does not inflate).

The plain loop runs over the same 2n texts as the suite, with the same encodings (the
tokenizer adds no special token; every text holds more than ``tokens`` tokens, so each row
is ``tokens`` long in both). Reported per case: suite CPU seconds, plain CPU seconds, their
ratio, the suite's stage breakdown, peak RSS (the process's ``ru_maxrss``, before and after
the suite), the load average; per pair of consecutive sizes at the same tokens: the fitted
growth exponent ``log(t2/t1) / log(n2/n1)`` of the suite, the plain loop and every stage.

The model: GPT-2 shaped, 4 layers x d = 256, 4 heads, 512 positions, random weights (the
cost does not depend on them), with a byte-level BPE tokenizer of 4,096 tokens trained here,
offline, on the Python documentation's prose (``pydoc_data.topics``). Texts: random
sequences of that prose's words (unigram frequencies), ``tokens + 8`` words each, distinct,
members and non-members from the same distribution (the blind baseline sees no shift).
``--quick``: 2 layers x 32, a 512-token vocabulary, 8 and 16 texts per side at 16 tokens.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings

SIZES = (100, 1000, 10000)
TOKENS = (64, 256, 512)
QUICK_SIZES = (8, 16)
QUICK_TOKENS = (16,)
BATCH = 32  # the suite's default scoring batch ([target] batch_size)
TARGETS = {1000: 1.5, 10000: 1.2}  # suite / plain at 256 tokens (the scale target)
EXPONENT_TARGET = 1.05  # no stage faster than n^1.05 from 10^3 to 10^4
MIN_FIT_SECONDS = 0.5  # a stage under this CPU time at the smaller n is not fitted
SHAPE = {"n_layer": 4, "n_embd": 256, "n_head": 4, "n_positions": 512, "vocab": 4096}
#: ``--scale-model``: the acceptance model (4x256) and a small one for 10^5 texts per side
#: on a CPU (tiny: 1 layer x 64, the same tokenizer and vocabulary).
MODELS = {
    "4x256": SHAPE,
    "tiny": {"n_layer": 1, "n_embd": 64, "n_head": 1, "n_positions": 512, "vocab": 4096},
}
#: Seconds between the heartbeats a case writes to ``n<N>-t<T>/partial.json``.
HEARTBEAT_S = 30.0
QUICK_SHAPE = {"n_layer": 2, "n_embd": 32, "n_head": 2, "n_positions": 64, "vocab": 512}


def _progress(msg: str) -> None:
    print(f"[bench scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _corpus() -> str:
    import pydoc_data.topics

    return "\n".join(pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics))


def build_model(
    directory: Path, quick: bool, seed: int = 0, model: str = "4x256"
) -> dict[str, Any]:
    """Train the byte-level BPE tokenizer and save a randomly initialised GPT-2-shaped
    model with it in ``directory`` (skipped when already there)."""
    shape = QUICK_SHAPE if quick else MODELS[model]
    info = {**shape, "tokenizer": "byte-level BPE trained on pydoc_data.topics", "seed": seed}
    info["model"] = "quick" if quick else model
    if (directory / "config.json").is_file():
        return info
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    eos = "<|endoftext|>"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=shape["vocab"],
        special_tokens=[eos],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus().splitlines(), trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=eos, eos_token=eos)
    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=len(hf),
        n_layer=shape["n_layer"],
        n_embd=shape["n_embd"],
        n_head=shape["n_head"],
        n_positions=shape["n_positions"],
        bos_token_id=hf.bos_token_id,
        eos_token_id=hf.eos_token_id,
    )
    model = GPT2LMHeadModel(cfg).eval()
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    hf.save_pretrained(directory)
    info["vocab"] = len(hf)
    return info


def make_texts(n: int, tokens: int, seed: int) -> tuple[list[str], list[str]]:
    """``n`` member and ``n`` non-member texts of ``tokens + 8`` prose words each."""
    import re
    from collections import Counter

    import numpy as np

    counts = Counter(w for w in re.findall(r"[A-Za-z][a-z]+", _corpus()) if len(w) < 14)
    words = np.array(sorted(counts))
    p = np.array([counts[w] for w in words], dtype=float)
    p /= p.sum()
    rng = np.random.default_rng(seed)
    k = tokens + 8
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < 2 * n:
        block = rng.choice(len(words), size=(min(4096, 2 * n - len(out)), k), p=p)
        for row in block:
            t = " ".join(words[row])
            if t not in seen:
                seen.add(t)
                out.append(t)
    return out[:n], out[n:]


def write_lines(path: Path, texts: list[str]) -> Path:
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


#: The suite's stage timer while it runs (read by the case's heartbeat thread).
_LIVE: dict[str, Any] = {}


def timer_snapshot(timer) -> dict[str, float]:
    """Stage CPU seconds so far, the open (innermost) stage included."""
    out = dict(timer.seconds)
    stack = list(timer._stack)
    if stack:
        name, started = stack[-1]
        out[name] = out.get(name, 0.0) + max(timer.clock() - started, 0.0)
    return out


def suite_run(model_dir: Path, members: Path, nonmembers: Path, tokens: int, out: Path) -> dict:
    """One ``run --model`` as the CLI runs it, stages on process CPU time."""
    from privacy_audit.audit.commands import run as run_command
    from privacy_audit.audit.commands.common import command_parser
    from privacy_audit.audit.commands.config_builders import one_line_config
    from privacy_audit.audit.results import write_outputs
    from privacy_audit.audit.runner import run_audit
    from privacy_audit.audit.scale.executors import ExecutorSpec
    from privacy_audit.audit.target_resolution import resolve_targets
    from privacy_audit.audit.timing import StageTimer, active, stage

    c0, w0 = time.process_time(), time.perf_counter()
    timer = StageTimer(clock=time.process_time, root="setup")
    _LIVE["timer"] = timer
    with active(timer):
        args = command_parser([run_command]).parse_args(
            ["run", "--model", str(model_dir), "--members", str(members)]
            + ["--nonmembers", str(nonmembers), "--max-length", str(tokens)]
            + ["--out", str(out), "--quiet"]
        )
        cfg = resolve_targets(one_line_config(args))
        results = run_audit(
            cfg,
            progress=False,
            executor=ExecutorSpec.from_config(cfg.executor),
            run_dir=str(out / "run"),
        )
        with stage("report"):
            write_outputs(results, out)
    timer.stop()
    _LIVE.pop("timer", None)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    rec = timer.record()
    run = results["runs"][0]
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "stages": {s["stage"]: s["seconds"] for s in rec["stages"]},
        "texts_scored": (run.get("target") or {}).get("texts_scored"),
        "level": (run.get("verdict") or {}).get("level"),
    }


def plain_loop(model, hf, texts: list[str], tokens: int) -> dict[str, float]:
    """The plain batched loop: tokenize, forward, nothing kept. CPU seconds per part."""
    import torch

    tok_s = fwd_s = 0.0
    with torch.no_grad():
        for i in range(0, len(texts), BATCH):
            t0 = time.process_time()
            enc = hf(
                texts[i : i + BATCH],
                truncation=True,
                max_length=tokens,
                padding=True,
                return_tensors="pt",
            )
            t1 = time.process_time()
            model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
            t2 = time.process_time()
            tok_s += t1 - t0
            fwd_s += t2 - t1
    return {"tokenize_s": tok_s, "forward_s": fwd_s}


def one_case(
    model_dir: Path, workdir: Path, n: int, tokens: int, seed: int, plain: bool = True
) -> dict[str, Any]:
    """One (n, tokens) case in this process: warm-up, plain half, suite, plain half."""
    import torch

    torch.set_num_threads(1)
    load0 = os.getloadavg()
    case = workdir / f"n{n}-t{tokens}"
    case.mkdir(parents=True, exist_ok=True)
    members, nonmembers = make_texts(n, tokens, seed)
    m_file, n_file = (
        write_lines(case / "members.txt", members),
        write_lines(case / "nonmembers.txt", nonmembers),
    )
    wm, wn = make_texts(8, tokens, seed + 1)
    warm_m, warm_n = write_lines(case / "warm-m.txt", wm), write_lines(case / "warm-n.txt", wn)
    c0 = time.process_time()
    suite_run(model_dir, warm_m, warm_n, tokens, case / "warm-out")
    cold = time.process_time() - c0
    beat = _Heartbeat(case / "partial.json", {"n_per_side": n, "tokens": tokens})
    beat.start()
    try:
        return _measure(
            model_dir,
            case,
            n,
            tokens,
            plain,
            members,
            nonmembers,
            m_file,
            n_file,
            cold,
            load0,
            beat,
        )
    finally:
        beat.stop()


class _Heartbeat:
    """Writes what a case has measured so far (the plain halves done, the suite's stage
    CPU seconds, peak RSS, load) to ``path`` every :data:`HEARTBEAT_S` seconds and at each
    step, so that a case stopped before its end still leaves its partial stages."""

    def __init__(self, path: Path, info: dict[str, Any]) -> None:
        import threading

        self.path, self.info = path, dict(info)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def note(self, **kw: Any) -> None:
        self.info.update(kw)
        self.write()

    def write(self) -> None:
        from privacy_audit.ground.io import atomic_write_bytes

        rec = dict(self.info)
        timer = _LIVE.get("timer")
        if timer is not None:
            try:
                rec["suite_stages_so_far"] = timer_snapshot(timer)
            except RuntimeError:  # a stage opened meanwhile: the next beat has it
                pass
        rec |= {"process_cpu_s": time.process_time(), "peak_rss_mb": _maxrss_mb()}
        rec |= {"load_average": os.getloadavg(), "at": time.strftime("%H:%M:%S")}
        try:
            atomic_write_bytes(self.path, json.dumps(rec, indent=1, default=str).encode())
        except OSError:
            pass  # a heartbeat never stops the measurement

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.write()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _measure(
    model_dir, case, n, tokens, plain, members, nonmembers, m_file, n_file, cold, load0, beat
) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    hf = AutoTokenizer.from_pretrained(model_dir)
    hf.pad_token = hf.eos_token  # padding is masked; every row here is full length anyway
    texts = members + nonmembers
    enc = hf(texts[:2], truncation=True, max_length=tokens)["input_ids"]
    assert all(len(r) == tokens for r in enc), "a text shorter than the token budget"
    plain_loop(model, hf, texts[:BATCH], tokens)  # warm
    half = len(texts) // 2
    rss0 = _maxrss_mb()
    beat.note(step="plain half 1" if plain else "suite")
    p1 = plain_loop(model, hf, texts[:half], tokens) if plain else None
    rss_plain = _maxrss_mb()
    beat.note(step="suite", plain_half_1=p1, rss_after_plain_half_mb=rss_plain)
    suite = suite_run(model_dir, m_file, n_file, tokens, case / "out")
    rss_suite = _maxrss_mb()
    beat.note(step="plain half 2" if plain else "done", suite=suite)
    p2 = plain_loop(model, hf, texts[half:], tokens) if plain else None
    out: dict[str, Any] = {
        "n_per_side": n,
        "tokens": tokens,
        "texts": 2 * n,
        "suite": suite,
        "cold_start_cpu_s": cold,
        "peak_rss_mb": {
            "after_warmup": rss0,
            "after_plain_half": rss_plain,
            "after_suite": rss_suite,
            "end": _maxrss_mb(),
        },
        "load_average": {"start": load0, "end": os.getloadavg()},
        "threads": torch.get_num_threads(),
        "allocator": _allocator(),
    }
    if plain:
        tok_s = p1["tokenize_s"] + p2["tokenize_s"]
        fwd_s = p1["forward_s"] + p2["forward_s"]
        out["plain"] = {"cpu_s": tok_s + fwd_s, "tokenize_s": tok_s, "forward_s": fwd_s}
        out["ratio"] = suite["cpu_s"] / (tok_s + fwd_s)
    return out


def _allocator() -> str:
    """The malloc setting both arms ran under (audit/scale/malloc.py)."""
    from privacy_audit.audit.scale.malloc import applied

    return applied() or "default (not glibc, or mallopt refused)"


def exponent(t1: float, t2: float, n1: int, n2: int) -> float | None:
    """The growth exponent b of t ~ n^b between two sizes (None when t1 is too small to
    fit: under :data:`MIN_FIT_SECONDS` of CPU time, timer noise dominates)."""
    if t1 < MIN_FIT_SECONDS or t2 <= 0 or n1 == n2:
        return None
    return math.log(t2 / t1) / math.log(n2 / n1)


def exponents(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per tokens, between consecutive sizes: exponents of the suite, the plain loop and
    each stage."""
    out = []
    for tokens in sorted({c["tokens"] for c in cases}):
        row = sorted((c for c in cases if c["tokens"] == tokens), key=lambda c: c["n_per_side"])
        for a, b in zip(row, row[1:], strict=False):
            n1, n2 = a["n_per_side"], b["n_per_side"]
            e: dict[str, Any] = {"tokens": tokens, "from_n": n1, "to_n": n2}
            e["suite"] = exponent(a["suite"]["cpu_s"], b["suite"]["cpu_s"], n1, n2)
            if "plain" in a and "plain" in b:
                e["plain"] = exponent(a["plain"]["cpu_s"], b["plain"]["cpu_s"], n1, n2)
            e["stages"] = {
                s: exponent(a["suite"]["stages"][s], b["suite"]["stages"].get(s, 0.0), n1, n2)
                for s in a["suite"]["stages"]
            }
            fitted = {k: v for k, v in e["stages"].items() if v is not None}
            e["fastest_stage"] = max(fitted.items(), key=lambda kv: kv[1]) if fitted else None
            out.append(e)
    return out


def _case_line(c: dict[str, Any]) -> str:
    s = c["suite"]
    top = sorted(s["stages"].items(), key=lambda kv: -kv[1])[:4]
    line = f"n={c['n_per_side']}/side x {c['tokens']} tokens: suite {s['cpu_s']:.1f} s CPU"
    if "plain" in c:
        line += f", plain {c['plain']['cpu_s']:.1f} s, ratio {c['ratio']:.2f}x"
    line += f", peak RSS {c['peak_rss_mb']['end']:.0f} MB, load {c['load_average']['end'][0]:.1f}"
    return line + "; " + ", ".join(f"{k} {v:.1f}" for k, v in top)


def run_case(spec: dict[str, Any]) -> dict[str, Any]:
    """:func:`one_case` in a fresh Python process (its peak RSS is this case's alone)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "privacy_audit.audit.benchmarks.scale", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"bench scale case n={spec['n']} tokens={spec['tokens']} failed:\n{proc.stderr[-3000:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(settings: BenchSettings) -> BenchResult:
    extra = dict(settings.extra or {})
    model_name = extra.get("model") or "4x256"
    sizes = tuple(extra.get("sizes") or (QUICK_SIZES if settings.quick else SIZES))
    token_list = tuple(extra.get("tokens") or (QUICK_TOKENS if settings.quick else TOKENS))
    plain = not extra.get("suite_only", False)
    given = extra.get("workdir")
    tmp = None if given else tempfile.TemporaryDirectory(prefix="privacy-audit-scale-")
    workdir = Path(given) if given else Path(tmp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    partial = workdir / "scale-progress.json"
    try:
        model_dir = workdir / (
            "model-quick"
            if settings.quick
            else ("model" if model_name == "4x256" else f"model-{model_name}")
        )
        info = build_model(model_dir, settings.quick, settings.seed, model_name)
        _progress(
            f"model {info['n_layer']} layers x {info['n_embd']}, vocab {info['vocab']}; sizes "
            f"{list(sizes)} per side x tokens {list(token_list)}; progress in {partial}"
        )
        cases: list[dict[str, Any]] = []
        for tokens in token_list:
            for n in sizes:
                _progress(f"n={n}/side x {tokens} tokens ...")
                spec = {"model_dir": str(model_dir), "workdir": str(workdir), "n": n}
                spec |= {"tokens": tokens, "seed": settings.seed, "plain": plain}
                case = run_case(spec)
                cases.append(case)
                _progress(_case_line(case))
                partial.write_text(json.dumps({"model": info, "cases": cases}, indent=1))
        fits = exponents(cases)
    finally:
        if tmp is not None:
            tmp.cleanup()
    ratios: dict[str, float] = {}
    timings: dict[str, dict[str, Any]] = {}
    targets: dict[str, str] = {}
    for c in cases:
        name = f"n={c['n_per_side']} x {c['tokens']}"
        timings[name] = {
            "median_ms": 1e3 * c["suite"]["cpu_s"],
            "q1_ms": 1e3 * c["suite"]["cpu_s"],
            "q3_ms": 1e3 * c["suite"]["cpu_s"],
            "n": 1,
        }
        if "ratio" in c:
            ratios[name] = c["ratio"]
        if c["tokens"] == 256 and c["n_per_side"] in TARGETS and not settings.quick:
            targets[name] = f"suite / plain <= {TARGETS[c['n_per_side']]}x"
    for e in fits:
        for stage_name, b in e["stages"].items():
            if e["from_n"] == 1000 and e["to_n"] == 10000 and b is not None:
                targets.setdefault(f"exponent {stage_name} @ {e['tokens']}", "<= 1.05")
    notes = [
        "one fresh process per case; CPU time (process_time) on one thread; the plain loop "
        "halves sandwich the suite; cold_start_cpu_s (imports, first calls) is outside "
        "the ratio",
        "both arms run under the same malloc setting, set at the case process's start "
        "(setup.allocator; audit/scale/malloc.py)",
        "exponents: log(t2/t1)/log(n2/n1) between consecutive sizes at the same tokens; "
        f"stages under {MIN_FIT_SECONDS} s CPU at the smaller n are not fitted (None)",
    ]
    if settings.quick:
        notes.append("QUICK: a tiny model and sizes; not for reporting")
    return BenchResult(
        name="scale",
        reference="plain loop (same process, same texts and encodings)",
        cases=timings,
        ratios=ratios,
        setup={"model": info, "sizes_per_side": list(sizes), "tokens": list(token_list)}
        | {"cases": cases, "exponents": fits, "batch_size": BATCH}
        | {"allocator": sorted({c.get("allocator", "unknown") for c in cases})},
        memory={
            f"n={c['n_per_side']} x {c['tokens']}": f"peak RSS {c['peak_rss_mb']['end']:.0f} MB"
            for c in cases
        },
        targets=targets,
        notes=notes,
    )


def _main(argv: list[str]) -> int:
    res = case_from_spec(json.loads(argv[0]))
    sys.stdout.write("\n" + json.dumps(res) + "\n")
    return 0


def case_from_spec(spec: dict[str, Any]) -> dict[str, Any]:
    from privacy_audit.audit.scale.malloc import tune_malloc

    # at the case's start, before either arm allocates: the plain loop gets the same malloc
    # thresholds the suite's scorer sets for itself (a fair comparison; the case says so)
    tune_malloc()
    return one_case(
        Path(spec["model_dir"]),
        Path(spec["workdir"]),
        int(spec["n"]),
        int(spec["tokens"]),
        int(spec["seed"]),
        bool(spec.get("plain", True)),
    )


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
