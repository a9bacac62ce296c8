"""``privacy-audit canaries make | audit``: the one-run ε audit of a training pipeline the
suite does not run (make canaries -> the user trains -> audit the trained model). The
steps themselves are :func:`privacy_audit.audit.epsilon.pipeline.make` and
:func:`privacy_audit.audit.epsilon.pipeline.audit`."""

from __future__ import annotations

NAME = "canaries"


def add_parser(sub) -> None:
    from privacy_audit.audit.epsilon.input_canaries import LM_CANARY_DESIGNS

    c = sub.add_parser(
        "canaries",
        help="one-run ε audit of your own training pipeline: make canaries, train, audit",
    )
    csub = c.add_subparsers(dest="canaries_command", required=True, parser_class=type(c))
    m = csub.add_parser("make", help="write canaries to mix into your training text")
    m.add_argument("--design", required=True, help=f"one of {', '.join(LM_CANARY_DESIGNS)}")
    m.add_argument("--n", type=int, default=1000, help="number of canaries (default 1000)")
    m.add_argument("--tokenizer", required=True, help="local tokenizer directory of your model")
    m.add_argument("--out", required=True, help="output directory")
    m.add_argument("--data", help="your training text, one example per line (prefixes; bigram)")
    m.add_argument("--base-model", help="local model before training (search-token, synthetic)")
    m.add_argument("--repeat", type=int, default=1, help="copies of each included canary")
    m.add_argument("--secret-tokens", type=int, default=8)
    m.add_argument("--prefix-tokens", type=int, default=4)
    m.add_argument("--temperature", type=float, default=2.0, help="synthetic sampling temperature")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--force", action="store_true", help="replace canaries already in --out")
    a = csub.add_parser("audit", help="score the canaries on the trained model; ε lower bound")
    a.add_argument("--model", help="local directory of the trained causal LM")
    a.add_argument("--canaries", help="the directory written by 'canaries make'")
    a.add_argument("--tokenizer", help="tokenizer directory (default: the model's)")
    a.add_argument(
        "--reference",
        "--base-model",
        dest="reference",
        metavar="DIR",
        help="the model before training (new-token: saved right after "
        "resize_token_embeddings; else the base model); each canary is then scored by "
        "log p(secret) after training minus log p(secret) under it",
    )
    a.add_argument("--config", help="TOML config with [epsilon] model_dir / canaries_dir")
    a.add_argument("--claimed-epsilon", type=float)
    a.add_argument("--claimed-delta", type=float)
    a.add_argument("--delta", type=float, help="δ of the bound (default 1e-5)")
    a.add_argument("--confidence", type=float, help="confidence (default 0.95)")
    a.add_argument("--out", default="canary-audit", help="output directory")
    a.add_argument("--force", action="store_true", help="replace an audit already in --out")
    a.add_argument(
        "--aggregate-only", action="store_true", help="aggregates only (always true here)"
    )
    a.add_argument("--quiet", action="store_true")


def run(args) -> int:
    from privacy_audit.audit.epsilon.pipeline import audit, make

    return make(args) if args.canaries_command == "make" else audit(args)
