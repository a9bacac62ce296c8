"""What reference models buy on the user's own LM: AUC and TPR at 1 % FPR against K.

The suite's own LM shape (the ``tiny-gpt2-word`` preset: a GPT-2 config, d = 64, 2
layers, 2 heads) with a Hugging Face word-level tokenizer over the fixture corpus, handled
exactly as a user's model is, through :func:`privacy_audit.audit.runner.run_audit` (what ``privacy-audit
run`` does):

- **base**: trained from scratch on the public fixture texts (the user's pretrained model);
- **target**: a LoRA adapter (peft, rank 8) fine-tuned from the base on the members,
  saved with ``save_pretrained``;
- **K = 0**: ``lm-loss`` (no reference);
- **K = 1**: the adapter's base model, the default reference with ``adapter_dir``:
  ``reference`` (loss difference), offline LiRA and offline RMIA (same run as K = 0), and
  offline RMIA once more with a = 1 (RMIA's offline p(x) = ½((1 + a)·p_OUT(x) + 1 − a): at
  the paper's a = 0.3 and LM sequence probabilities exp(−mean loss) ≪ 1, p(x) is nearly
  the constant (1 − a)/2 and RMIA ranks like ``lm-loss``);
- **K = 2, 4, 8**: ``[shadow] base_dir`` fine-tunes K LoRA references from the base, with
  the target's recipe, on random halves of the audited + population texts (each text IN
  exactly K/2 of them): online and offline LiRA and RMIA.

Every row: AUC and TPR at 1 % FPR with their bootstrap 95 % CIs (the suite's metrics) and
the numbers of members and non-members. One seed; K = 2, 4, 8 each train their own
references (2 + 4 + 8 fine-tunings).

Reproduce (a few minutes on one CPU thread; writes JSON and prints a table)::

    OMP_NUM_THREADS=1 python -m experiments.references_k --out docs/records/references-k.json

Not registered in ``privacy-audit bench`` (which measures time, not attack power).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from privacy_audit.ground.io import atomic_write_text

DEFAULTS = {
    "members": 128,
    "nonmembers": 128,
    "population": 128,
    "public": 1000,
    "base_epochs": 3,
    "lr": 3e-3,
    "epochs": 6,
    "rank": 8,
    "batch_size": 8,
    "max_length": 64,
    "ks": [2, 4, 8],
}
QUICK = {**DEFAULTS, "members": 24, "nonmembers": 24, "population": 16, "public": 200}
QUICK.update(base_epochs=1, epochs=2, ks=[2])


def _tokenizer(texts: list[str]):
    """A lower-casing word-level HF tokenizer over ``texts`` (GPT-2-like: one
    ``<|endoftext|>`` as BOS and EOS, no pad token)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pre = pre_tokenizers.Whitespace()
    vocab = {"<|endoftext|>": 0, "<unk>": 1}
    for t in texts:
        for w, _ in pre.pre_tokenize_str(t.lower()):
            vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<unk>",
    )


def _models(root: Path, s: dict, seed: int, log) -> dict:
    """Write base (pretrained on public texts), the LoRA target and the data files."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    from privacy_audit import fixtures
    from privacy_audit.targets.lm import LM_PRESETS, train_lm
    from privacy_audit.targets.scoring import HFTokenizer

    private = [r["text"] for r in fixtures.load_corpus("private")]
    public = [r["text"] for r in fixtures.load_corpus("public")][: s["public"]]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(private))
    n_in, n_out, n_pop = s["members"], s["nonmembers"], s["population"]
    members = [private[i] for i in order[:n_in]]
    nonmembers = [private[i] for i in order[n_in : n_in + n_out]]
    population = [private[i] for i in order[n_in + n_out : n_in + n_out + n_pop]]
    hf = _tokenizer(public + private)
    tok = HFTokenizer(hf)
    p = LM_PRESETS["tiny-gpt2-word"]
    cfg = GPT2Config(
        vocab_size=len(hf),
        n_embd=p["n_embd"],
        n_layer=p["n_layer"],
        n_head=p["n_head"],
        n_positions=p["n_positions"],
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(seed)
    base = GPT2LMHeadModel(cfg)
    t0 = time.perf_counter()
    info = train_lm(base, tok, public, s["base_epochs"], 32, 1e-3, s["max_length"], seed=seed)
    log(
        f"base: {len(public)} public texts, {s['base_epochs']} epochs, "
        f"loss {info['final_train_loss']:.3f} ({time.perf_counter() - t0:.0f} s)"
    )
    base.eval()
    base.save_pretrained(root / "base")
    hf.save_pretrained(root / "base")
    torch.manual_seed(seed + 1)
    target = get_peft_model(
        GPT2LMHeadModel.from_pretrained(root / "base"),
        LoraConfig(r=s["rank"], lora_alpha=2 * s["rank"], lora_dropout=0.0, task_type="CAUSAL_LM"),
    )
    info = train_lm(
        target, tok, members, s["epochs"], s["batch_size"], s["lr"], s["max_length"], seed=seed
    )
    log(
        f"target: LoRA r={s['rank']} on {n_in} members, {s['epochs']} epochs, "
        f"loss {info['final_train_loss']:.3f}"
    )
    target.save_pretrained(root / "lora")
    acfg = json.loads((root / "lora" / "adapter_config.json").read_text())
    acfg["base_model_name_or_path"] = str(root / "base")
    (root / "lora" / "adapter_config.json").write_text(json.dumps(acfg))
    for name, texts in (
        ("members", members),
        ("nonmembers", nonmembers),
        ("population", population),
    ):
        (root / f"{name}.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    return {"vocab": len(hf), "target_final_train_loss": info["final_train_loss"]}


WANTED = {
    1: ("lm-loss", "reference", "lira-offline", "rmia-offline"),
    2: ("lira-online", "lira-offline", "rmia-online", "rmia-offline"),
}


def _audit(root: Path, s: dict, seed: int, k: int, bootstrap: int, rmia_a=None) -> dict:
    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.runner import run_audit

    raw = {
        "title": f"references K={k}",
        "seed": seed,
        "device": "cpu",
        "target": {"adapter_dir": str(root / "lora"), "max_length": s["max_length"]},
        "data": {
            "members": str(root / "members.txt"),
            "nonmembers": str(root / "nonmembers.txt"),
        },
        "metrics": {"bootstrap": bootstrap},
    }
    raw["attacks"] = {"names": ["lm-loss", "reference"]}
    if rmia_a is not None:  # [shadow] without base_dir: options for the given reference
        raw["shadow"] = {"rmia_offline_a": rmia_a, "attacks": ["rmia-offline"]}
    if k >= 2:
        raw["shadow"] = {
            "n_models": k,
            "base_dir": str(root / "base"),
            "population": str(root / "population.txt"),
            "learning_rate": s["lr"],
            "epochs": s["epochs"],
            "lora_rank": s["rank"],
            "lora_alpha": 2 * s["rank"],
            "batch_size": s["batch_size"],
        }
    cfg = parse_config(raw, source="references_k")
    res = run_audit(cfg, progress=False, run_dir=root / f"run-k{k}", resume=True)
    wanted = WANTED[min(k, 2)] if rmia_a is None else ("rmia-offline",)
    run = res["runs"][0]
    rows = []
    for a in run["attacks"]:
        if a["status"] != "ok" and a["attack"] in wanted:
            rows.append({"attack": a["attack"], "status": a["status"], "reason": a.get("reason")})
            continue
        if a["attack"] not in wanted:
            continue  # lm-loss and the base-model reference come from the K = 1 run
        m = a["metrics"]
        rows.append(
            {
                "attack": a["attack"] + (f" (a = {rmia_a})" if rmia_a is not None else ""),
                "references": (
                    "none"
                    if a["attack"] == "lm-loss"
                    else "base model"
                    if k == 1
                    else f"{k} fine-tuned"
                ),
                "auc": m["auc"],
                "tpr_at_fpr_0.01": m["tpr_at_fpr_0.01"],
                "n_members": a["n_members"],
                "n_nonmembers": a["n_nonmembers"],
            }
        )
    return {
        "k": k,
        "rows": rows,
        "target": {k_: v for k_, v in run["target"].items() if k_ != "path"},
    }


def _ci(m: dict) -> str:
    f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    return f"{f(m.get('value'))} [{f(m.get('ci_low'))}, {f(m.get('ci_high'))}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="a tiny smoke-test setting")
    ap.add_argument("--workdir", help="keep models and run directories here (resumable)")
    args = ap.parse_args(argv)
    s = QUICK if args.quick else DEFAULTS

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.workdir or tmp)
        root.mkdir(parents=True, exist_ok=True)
        setup = _models(root, s, args.seed, log)
        results = []
        for k, a in [(1, None), (1, 1.0), *((k, None) for k in s["ks"])]:
            t0 = time.perf_counter()
            results.append(_audit(root, s, args.seed, k, args.bootstrap, a))
            log(f"K={k}: {time.perf_counter() - t0:.0f} s")
            for r in results[-1]["rows"]:
                if "auc" in r:
                    log(
                        f"  {r['attack']:<13} AUC {_ci(r['auc'])}  TPR@1%FPR {_ci(r['tpr_at_fpr_0.01'])}"
                    )
    out = {
        "benchmark": "references-k",
        "settings": {**s, "seed": args.seed, "bootstrap": args.bootstrap},
        "model": "GPT-2 config of the tiny-gpt2-word preset (d=64, 2 layers, 2 heads), "
        "word-level HF tokenizer over the fixture corpus",
        "setup": setup,
        "intervals": "bootstrap 95% CIs of the suite's metrics (stats/metrics.py)",
        "results": results,
        "seconds": round(time.perf_counter() - start, 1),
    }
    atomic_write_text(Path(args.out), json.dumps(out, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
