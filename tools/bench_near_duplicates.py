"""Near-duplicate stage of the split check, before / after issue 38, side by side.

Times ``near_duplicates`` (process CPU time, rounds interleaved in one process) of this
tree and of an older ``split_check.py`` on the same texts: ``score``'s benchmark texts
(8-30 words ``w<k>`` from a 20,000-word vocabulary) and real sentences (pydoc topics,
installed packages' descriptions, Debian changelogs), half members, half non-members.
Usage::

    git show 017a24b:audit/split_check.py > /tmp/split_check_old.py
    OMP_NUM_THREADS=1 nice -n 10 python tools/bench_near_duplicates.py N ROUNDS old|new [OLD.py]
"""

import importlib.util
import json
import sys
import time

import numpy as np

from privacy_audit.stats import near_duplicates as new

spec = importlib.util.spec_from_file_location(
    "old_sc", sys.argv[4] if len(sys.argv) > 4 else "/tmp/split_check_old.py"
)
old = None
if sys.argv[3] == "old":
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_sc"] = old
    spec.loader.exec_module(old)


def bench_texts(n, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(8, 31, size=n)
    words = rng.integers(0, 20000, size=int(lengths.sum())).tolist()
    out = []
    pos = 0
    for k in lengths.tolist():
        out.append(" ".join(f"w{w}" for w in words[pos : pos + k]))
        pos += k
    return out


def prose_texts(n, seed=0):
    import glob
    import gzip
    import pydoc_data.topics as topics
    from importlib import metadata

    paras = []
    for t in topics.topics.values():
        paras += [" ".join(p.split()) for p in t.split("\n\n")]
    for d in metadata.distributions():
        paras += [" ".join(p.split()) for p in (d.metadata.get_payload() or "").split("\n\n")]
    for f in glob.glob("/usr/share/doc/*/changelog.Debian.gz"):
        try:
            paras += [
                " ".join(p.split())
                for p in gzip.open(f, "rt", errors="replace").read().split("\n\n")
            ]
        except Exception:
            pass
    sents = []
    for p in paras:
        for s in p.split(". "):
            if len(s) >= 40:
                sents.append(s[:200])
    sents = list(dict.fromkeys(sents))
    rng = np.random.default_rng(seed)
    return [sents[i] for i in rng.permutation(len(sents))[:n]], len(sents)


n = int(sys.argv[1])
rounds = int(sys.argv[2])
with_old = sys.argv[3] == "old"
res = {}
for kind in ("bench", "prose"):
    texts = bench_texts(n) if kind == "bench" else prose_texts(n)[0]
    print(kind, len(texts), flush=True)
    m, nm = texts[: len(texts) // 2], texts[len(texts) // 2 :]
    impls = {"new": new} | ({"old": old} if with_old else {})
    times = {k: [] for k in impls}
    for r in range(rounds):
        for k, mod in impls.items():
            t = time.process_time()
            p = mod.near_duplicates(m, nm)
            times[k].append(time.process_time() - t)
            print(kind, k, r, round(times[k][-1], 3), len(p), flush=True)
    res[kind] = {k: sorted(v) for k, v in times.items()} | {"n_texts": len(texts)}
print(json.dumps(res))
