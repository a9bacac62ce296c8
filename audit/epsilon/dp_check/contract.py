"""The SETUP.py contract of ``privacy-audit dp-check``: what the user's file defines, read
and validated before anything runs.

Two forms (docs/dp-check.md):

**Opacus** (any ``DPOptimizer`` subclass, any data loader or batch sampler)::

    def make_dataset(): ...             # the training data, or a stand-in of the same kind
    def make_private(dataset): ...      # -> (model, optimizer, data_loader), as the script
                                        #    builds them; ghost clipping's 4-tuple
                                        #    (model, optimizer, criterion, data_loader) too
    CLAIM = {"epsilon": 8.0, "delta": 1e-5, "noise_multiplier": 1.1,
             "max_grad_norm": 1.0, "sample_rate": 0.01, "epochs": 3}
    def train_step(model, optimizer, batch): ...   # optional: the loop body
    def loss_fn(model, batch): ...                  # optional: per-example losses, shape (B,)

**privatize** (a custom loop, JAX through numpy)::

    PARAMS = {"w": (64, 10), "b": (10,)}            # the released tensors' shapes
    def privatize(per_example_grads): ...           # {name: array(B, *shape)} -> {name: array}
    CLAIM = {...}
    def make_dataset(): ...; def make_loader(dataset): ...   # optional: the sampler

Every problem is one :class:`~privacy_audit.ground.errors.AuditError` line naming the
missing or wrong name, raised before any check runs or anything is written.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_audit.ground.errors import AuditError

#: CLAIM keys: name -> what it is
CLAIM_KEYS = {
    "epsilon": "the ε the script prints (> 0)",
    "delta": "its δ, in (0, 1)",
    "noise_multiplier": "σ, the noise std divided by the clipping norm (> 0)",
    "max_grad_norm": "C, the per-example clipping norm (> 0; a list for per-layer clipping)",
    "sample_rate": "q, the sampling rate the accountant was given, in (0, 1]",
    "epochs": "epochs the script trains (>= 1)",
    "steps": "optimizer steps the accountant was given (>= 1)",
    "adjacency": '"add-remove" (default, Opacus) or "replace-one"',
    "sampling": '"poisson" (default: what Opacus\'s accountants assume) or "shuffle"',
    "accountant": "the accountant the script used (reported, e.g. prv, rdp)",
    "unit": '"example" (default) or "user"',
    "dataset_size": "N of the real training set, when make_dataset() returns a stand-in of "
    "another size (then the sampler's scheme is tested, and its rate and steps are the "
    "declared ones)",
}
REQUIRED_CLAIM = ("epsilon", "delta", "noise_multiplier", "max_grad_norm", "sample_rate")
#: the longest schedule dp-check accounts for (steps): far beyond any real run, and below
#: what the accountants handle in seconds
MAX_STEPS = 10_000_000
#: the most released parameters a privatize setup may declare
MAX_PARAMS = 500_000_000
ADJACENCIES = ("add-remove", "replace-one")
SAMPLINGS = ("poisson", "shuffle")
UNITS = ("example", "user")


class SetupError(AuditError):
    """SETUP.py is missing, raises, or defines a name of the wrong type."""


@dataclass(frozen=True)
class Claim:
    """What the script prints and accounted for."""

    epsilon: float
    delta: float
    noise_multiplier: float
    max_grad_norm: float  # the total norm: sqrt(Σ C_l²) for per-layer lists
    sample_rate: float
    epochs: int | None = None
    steps: int | None = None
    adjacency: str = "add-remove"
    sampling: str = "poisson"
    accountant: str | None = None
    unit: str = "example"
    per_layer_norms: tuple[float, ...] | None = None
    dataset_size: int | None = None

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in CLAIM_KEYS if getattr(self, k, None) is not None}
        if self.per_layer_norms:
            d["max_grad_norm"] = list(self.per_layer_norms)
            d["max_grad_norm_total"] = self.max_grad_norm
        return d


def _positive(name: str, v: Any, integer: bool = False, upper: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SetupError(f"CLAIM['{name}'] must be a number, got {type(v).__name__}")
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f) or f <= 0 or (upper is not None and f > upper):
        rng = f" and <= {upper:g}" if upper is not None else ""
        raise SetupError(f"CLAIM['{name}'] must be finite, > 0{rng}; got {v!r}")
    if integer:
        if f != int(f):
            raise SetupError(f"CLAIM['{name}'] must be a whole number, got {v!r}")
        return int(f)
    return f


def parse_claim(raw: Any) -> Claim:
    """Validate the ``CLAIM`` dict; one error line per problem, naming the key."""
    if not isinstance(raw, dict):
        raise SetupError(f"CLAIM must be a dict, got {type(raw).__name__}")
    unknown = sorted(str(k) for k in raw if k not in CLAIM_KEYS)
    if unknown:
        raise SetupError(
            f"CLAIM has an unknown key '{unknown[0]}'; allowed: {', '.join(CLAIM_KEYS)}"
        )
    missing = [k for k in REQUIRED_CLAIM if k not in raw]
    if missing:
        raise SetupError(
            f"CLAIM is missing '{missing[0]}' ({CLAIM_KEYS[missing[0]]}); "
            f"required: {', '.join(REQUIRED_CLAIM)}, and epochs and/or steps"
        )
    if "epochs" not in raw and "steps" not in raw:
        raise SetupError("CLAIM needs 'epochs' and/or 'steps' (the schedule it accounted for)")
    delta = raw["delta"]
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise SetupError(f"CLAIM['delta'] must be a number in (0, 1), got {delta!r}")
    c = raw["max_grad_norm"]
    per_layer = None
    if isinstance(c, (list, tuple)):
        if not c:
            raise SetupError("CLAIM['max_grad_norm'] is an empty list")
        per_layer = tuple(_positive("max_grad_norm", x) for x in c)
        total = math.sqrt(sum(x * x for x in per_layer))
    else:
        total = _positive("max_grad_norm", c)
    choices = {}
    for key, allowed, default in (
        ("adjacency", ADJACENCIES, "add-remove"),
        ("sampling", SAMPLINGS, "poisson"),
        ("unit", UNITS, "example"),
    ):
        v = raw.get(key, default)
        if v not in allowed:
            raise SetupError(f"CLAIM['{key}'] must be one of {', '.join(allowed)}; got {v!r}")
        choices[key] = v
    acc = raw.get("accountant")
    if acc is not None and not isinstance(acc, str):
        raise SetupError("CLAIM['accountant'] must be a string (e.g. 'prv', 'rdp')")
    epochs = _positive("epochs", raw["epochs"], integer=True) if "epochs" in raw else None
    steps = _positive("steps", raw["steps"], integer=True) if "steps" in raw else None
    q = _positive("sample_rate", raw["sample_rate"], upper=1.0)
    implied = steps if steps is not None else epochs / q
    if implied > MAX_STEPS or (epochs is not None and epochs / q > MAX_STEPS):
        raise SetupError(
            f"CLAIM's schedule is {implied:.3g} steps (epochs / sample_rate, or steps); "
            f"dp-check accounts for at most {MAX_STEPS:,}: check 'sample_rate' and 'epochs'"
        )
    return Claim(
        epsilon=_positive("epsilon", raw["epsilon"]),
        delta=float(delta),
        noise_multiplier=_positive("noise_multiplier", raw["noise_multiplier"]),
        max_grad_norm=total,
        sample_rate=q,
        epochs=epochs,
        steps=steps,
        accountant=acc,
        per_layer_norms=per_layer,
        dataset_size=(
            _positive("dataset_size", raw["dataset_size"], integer=True)
            if "dataset_size" in raw
            else None
        ),
        **choices,
    )


@dataclass
class Setup:
    """A loaded SETUP.py: its functions, its claim and which protocol it follows."""

    path: Path | None
    module: Any
    claim: Claim
    protocol: str  # "opacus" | "privatize"
    sha256: str | None = None
    optional: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        return getattr(self.module, name, None)


def _user_error(where: str, exc: BaseException) -> SetupError:
    """One line naming the user's function, the exception and the line of their file."""
    tb = traceback.extract_tb(exc.__traceback__)
    line = ""
    for frame in reversed(tb):
        if "privacy_audit" not in frame.filename and "site-packages" not in frame.filename:
            line = f" ({Path(frame.filename).name}, line {frame.lineno})"
            break
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return SetupError(f"{where} raised {type(exc).__name__}{': ' + msg if msg else ''}{line}")


def load_module(path: str | Path) -> tuple[Any, Path, str]:
    """Import SETUP.py from its path (its folder on sys.path while it imports)."""
    p = Path(path)
    if not p.exists():
        raise SetupError(f"SETUP file {str(p)!r} does not exist")
    if not p.is_file():
        raise SetupError(f"SETUP {str(p)!r} is not a file")
    if p.suffix != ".py":
        raise SetupError(f"SETUP {str(p)!r} must be a Python file (.py)")
    data = p.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    name = f"_privacy_audit_dp_setup_{digest[:12]}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise SetupError(f"cannot import {str(p)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    folder = str(p.resolve().parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    import warnings

    try:
        with warnings.catch_warnings():
            # an accountant's "optimal order is the largest alpha" and the like, printed
            # while the setup computes its claim, say nothing dp-check reports on
            warnings.simplefilter("ignore")
            spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise SetupError(f"{p.name} has a syntax error at line {exc.lineno}: {exc.msg}") from None
    except (Exception, SystemExit) as exc:  # the user's module: any error is theirs to fix
        raise _user_error(f"importing {p.name}", exc) from None
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    return module, p, digest


def _callable(module: Any, name: str, args: str) -> Any:
    f = getattr(module, name, None)
    if f is None:
        return None
    if not callable(f):
        raise SetupError(f"{name} must be a function {name}({args}), got {type(f).__name__}")
    return f


def from_module(module: Any, path: Path | None = None, sha256: str | None = None) -> Setup:
    """Validate the names a SETUP module defines; see the module docstring."""
    if not hasattr(module, "CLAIM"):
        raise SetupError(
            "SETUP defines no CLAIM (a dict: epsilon, delta, noise_multiplier, "
            "max_grad_norm, sample_rate, epochs and/or steps)"
        )
    claim = parse_claim(module.CLAIM)
    make_private = _callable(module, "make_private", "dataset")
    privatize = _callable(module, "privatize", "per_example_grads")
    make_dataset = _callable(module, "make_dataset", "")
    optional = {
        n: _callable(module, n, a)
        for n, a in (
            ("train_step", "model, optimizer, batch"),
            ("loss_fn", "model, batch"),
            ("make_loader", "dataset"),
        )
    }
    if make_private is not None and privatize is not None:
        raise SetupError(
            "SETUP defines both make_private and privatize; define one (make_private for "
            "Opacus code, privatize for any other)"
        )
    if make_private is None and privatize is None:
        raise SetupError(
            "SETUP defines neither make_private(dataset) (Opacus) nor "
            "privatize(per_example_grads) (any other DP code)"
        )
    if make_private is not None:
        if make_dataset is None:
            raise SetupError("SETUP defines make_private but no make_dataset()")
        protocol = "opacus"
    else:
        protocol = "privatize"
        params = getattr(module, "PARAMS", None)
        if not isinstance(params, dict) or not params:
            raise SetupError(
                "privatize needs PARAMS, a non-empty dict {name: shape} of the released tensors"
            )
        for k, shape in params.items():
            if not isinstance(k, str):
                raise SetupError(f"PARAMS keys must be names (str), got {k!r}")
            if not isinstance(shape, (tuple, list)) or not all(
                isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape
            ):
                raise SetupError(f"PARAMS['{k}'] must be a shape of positive ints, got {shape!r}")
        total = sum(math.prod(shape) for shape in params.values())
        if total > MAX_PARAMS:
            big = max(params, key=lambda k: math.prod(params[k]))
            raise SetupError(
                f"PARAMS declares {total:.3g} released parameters (PARAMS['{big}'] is "
                f"{tuple(params[big])}); dp-check handles at most {MAX_PARAMS:,}"
            )
        if optional["make_loader"] is not None and make_dataset is None:
            raise SetupError("SETUP defines make_loader but no make_dataset()")
    return Setup(path, module, claim, protocol, sha256, optional)


def load_setup(path: str | Path) -> Setup:
    module, p, digest = load_module(path)
    return from_module(module, p, digest)


def as_setup(setup: Any) -> Setup:
    """A path, an imported module or any object with the contract's attributes."""
    if isinstance(setup, Setup):
        return setup
    if isinstance(setup, (str, Path)):
        return load_setup(setup)
    return from_module(setup)


def check_seed(seed) -> int:
    """A seed every random generator dp-check seeds accepts (0 ≤ seed < 2³¹)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise SetupError(f"--seed must be a whole number in [0, 2147483647], got {seed!r}")
    return seed


def call_user(where: str, fn, *args):
    """Call one of the user's functions; any exception becomes one SetupError line."""
    try:
        return fn(*args)
    except AuditError:
        raise
    except (Exception, SystemExit) as exc:  # sys.exit() in a setup function is an error too
        raise _user_error(where, exc) from None
