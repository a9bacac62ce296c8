"""Load model checkpoints without running code from them.

A ``pytorch_model.bin`` is a pickle, and unpickling calls whatever its ``__reduce__``
names (``os.system``, ``exec``, ...): loading an untrusted one is running untrusted code.
Checkpoints are therefore accepted in two forms only:

- safetensors (``model.safetensors`` or a sharded ``model.safetensors.index.json``): a
  header and raw tensor bytes, no code; preferred whenever present;
- ``pytorch_model.bin``, and only after ``torch.load(..., weights_only=True)`` has read it
  with the restricted unpickler (tensors, containers and primitive types; anything else
  is refused before a single object is built) and found a state dict of tensors.

Every other format (sharded ``.bin``, TF, Flax, GGUF, remote code) is refused.
"""

from __future__ import annotations

import json
import pickle
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privacy_audit.ground.errors import AuditError

SAFE_WEIGHTS = "model.safetensors"
SAFE_WEIGHTS_INDEX = "model.safetensors.index.json"
PICKLE_WEIGHTS = "pytorch_model.bin"

_CONVERT_HINT = (
    "Convert it to safetensors (load it once in a trusted environment, then "
    "model.save_pretrained(dir, safe_serialization=True)) and audit that directory"
)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def verify_weights_only(path: str | Path) -> None:
    """Raise AuditError unless ``path`` loads with ``torch.load(weights_only=True)`` and
    holds a state dict (a mapping of names to tensors). Nothing in the file is executed:
    the restricted unpickler rejects any global outside torch's allow-list before calling it.
    """
    import torch

    p = Path(path)
    try:
        # mmap: do not hold a second full copy in memory (zip checkpoints only).
        # Warnings (TorchScript, pickle protocol) would break the CLI's one-line errors.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(p, weights_only=True, map_location="cpu", mmap=zipfile.is_zipfile(p))
    except pickle.UnpicklingError:
        raise AuditError(
            f"{str(p)!r} is a pickle with code or non-tensor objects; refusing to load it. "
            f"{_CONVERT_HINT}"
        ) from None
    except (RuntimeError, EOFError, ValueError, OSError) as exc:
        # TorchScript archives, truncated or corrupt files
        raise AuditError(
            f"{str(p)!r} cannot be read as a weights-only PyTorch checkpoint "
            f"({_first_line(exc)}); refusing to load it. {_CONVERT_HINT}"
        ) from None
    if not isinstance(state, Mapping) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise AuditError(
            f"{str(p)!r} is not a state dict of tensors; refusing to load it. {_CONVERT_HINT}"
        )


def checkpoint_kwargs(model_dir: str | Path) -> dict[str, Any]:
    """Check the weights in a local Hugging Face directory and return the
    ``from_pretrained`` keyword arguments that make transformers load exactly those."""
    d = Path(model_dir)
    _check_config(d)
    # Never run code shipped with the model (config.json "auto_map"), and never prompt.
    kwargs: dict[str, Any] = {"trust_remote_code": False, "weights_only": True}
    if (d / SAFE_WEIGHTS).is_file() or (d / SAFE_WEIGHTS_INDEX).is_file():
        # use_safetensors=True: transformers ignores any .bin lying next to it
        return {**kwargs, "use_safetensors": True}
    if (d / PICKLE_WEIGHTS).is_file():
        verify_weights_only(d / PICKLE_WEIGHTS)
        # transformers 5.23 then reads the .bin with weights_only=True too
        # (transformers/modeling_utils.py): load_state_dict(checkpoint_file,
        # map_location="cpu", weights_only=True, ...) (l. 317-364) calls
        # check_torch_load_is_safe() (torch >= 2.6) and ends in torch.load(...,
        # weights_only=weights_only); _load_pretrained_model's "Checkpoints are .bin"
        # branch (l. 4574-4578) calls load_state_dict(ckpt_file, disable_mmap=...), i.e.
        # with that default, and the dtype-detection and DeepSpeed paths (l. 841, 4528)
        # pass from_pretrained's weights_only (default True, passed explicitly here).
        # The check above is therefore a first lock, and gives a clear error.
        return {**kwargs, "use_safetensors": False}
    raise AuditError(
        f"model directory {str(d)!r} has no {SAFE_WEIGHTS}, {SAFE_WEIGHTS_INDEX} or "
        f"{PICKLE_WEIGHTS}; only safetensors and weights-only PyTorch checkpoints are loaded"
    )


def _check_config(d: Path) -> None:
    """config.json may name its own weights file ("transformers_weights"), which
    transformers then loads whatever ``use_safetensors`` says: allow safetensors only."""
    try:
        config = json.loads((d / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise AuditError(
            f"{str(d / 'config.json')!r} is not a readable JSON file: {_first_line(exc)}"
        ) from None
    if not isinstance(config, dict):
        raise AuditError(f"{str(d / 'config.json')!r} is not a JSON object")
    named = config.get("transformers_weights")
    if named is not None and not (
        isinstance(named, str)
        and (named.endswith(".safetensors") or named.endswith(".safetensors.index.json"))
    ):
        raise AuditError(
            f"{str(d / 'config.json')!r} names the weights file {named!r}; "
            "only safetensors checkpoints may be named there"
        )
