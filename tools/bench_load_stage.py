"""The own-model audit's ``load`` stage alone, at two sizes, rounds interleaved in one
process (process CPU time): its growth exponent without the rest of ``bench scale``.

    OMP_NUM_THREADS=1 nice -n 10 python tools/bench_load_stage.py MODEL_DIR N1 N2 TOKENS ROUNDS

MODEL_DIR: a ``bench scale`` model (``--scale-workdir DIR`` keeps it as ``DIR/model``).
N1, N2: texts per side (bench scale's texts). Parts timed as ``audit/own_model.py`` runs
them: read the two files, cap, load the release, cut every text to TOKENS tokens (one
encoding per text, kept), drop texts without a scored token. The model's own loading is
outside (a fixed cost).
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path


def parts(model_dir: Path, work: Path, n: int, tokens: int, loaded) -> dict[str, float]:
    from privacy_audit.audit.benchmarks.scale import make_texts, write_lines
    from privacy_audit.audit.commands import run as run_command
    from privacy_audit.audit.commands.common import command_parser
    from privacy_audit.audit.commands.config_builders import one_line_config
    from privacy_audit.audit.data import drop_cross_duplicates, load_audit_data
    from privacy_audit.audit.own_model import cut_to_max_length, drop_unscored
    from privacy_audit.audit.target_resolution import resolve_targets
    from privacy_audit.audit.textcap import cap_audit_data
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.loading import load_causal_lm_release

    d = work / f"n{n}"
    d.mkdir(exist_ok=True)
    if not (d / "m.txt").is_file():
        m, nm = make_texts(n, tokens, 0)
        write_lines(d / "m.txt", m), write_lines(d / "n.txt", nm)
    argv = ["run", "--model", str(model_dir), "--members", str(d / "m.txt")]
    argv += ["--nonmembers", str(d / "n.txt"), "--max-length", str(tokens), "--quiet"]
    cfg = resolve_targets(one_line_config(command_parser([run_command]).parse_args(argv)))
    t: dict[str, float] = {}

    def timed(name, f):
        c = time.process_time()
        out = f()
        t[name] = time.process_time() - c
        return out

    data = timed("read", lambda: load_audit_data(cfg.data, cfg.seed, train=False, labels=False))
    data = timed("cap", lambda: cap_audit_data(data, tokens))
    rel = timed(
        "release",
        lambda: load_causal_lm_release(loaded, tokens, PrivacyClaim.none("bench"), "cpu"),
    )
    data, n_cut = timed("cut", lambda: cut_to_max_length(data, rel.tokenizer, rel.max_length))
    if n_cut:
        data = timed("cross duplicates", lambda: drop_cross_duplicates(data))
    timed("unscored", lambda: drop_unscored(data, rel))
    t["total"] = sum(t.values())
    return t


def main(argv: list[str]) -> int:
    import torch

    from privacy_audit.targets.loading import load_audit_target

    model_dir, n1, n2, tokens, rounds = Path(argv[0]), *map(int, argv[1:5])
    torch.set_num_threads(1)
    loaded = load_audit_target(str(model_dir), "causal-lm", None, False, "cpu", "auto", "none")
    got: dict[int, list[dict[str, float]]] = {n1: [], n2: []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for n in (n1, n2):
                got[n].append(parts(model_dir, Path(tmp), n, tokens, loaded))
                print(n, {k: round(v, 3) for k, v in got[n][-1].items()}, flush=True)
    for k in got[n1][0]:
        a = sum(r.get(k, 0.0) for r in got[n1])
        b = sum(r.get(k, 0.0) for r in got[n2])
        if a > 0 and b > 0:
            print(
                f"{k}: {a / rounds:.3f} s -> {b / rounds:.3f} s, exponent "
                f"{math.log(b / a) / math.log(n2 / n1):.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
