"""Model directories load without running code: safetensors, or a ``pytorch_model.bin``
that ``torch.load(weights_only=True)`` reads as a plain state dict. A pickle whose
``__reduce__`` would run a command is refused with one clear line, and never executed.
"""

from __future__ import annotations

import json
import os
import pickle
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from privacy_audit.ground.errors import AuditError
from privacy_audit.ground.safe_load import verify_weights_only
from privacy_audit.targets.loading import TargetSpec, load_trained_classifier

LABELS = ["account", "billing", "shipping", "technical"]
REFUSED = "is a pickle with code or non-tensor objects; refusing to load it"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


class Payload:
    """Unpickling this calls ``os.system("touch MARKER")``: the classic pickle exploit."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


def write_malicious_bin(path: Path, marker: Path, kind: str) -> Path:
    """A ``pytorch_model.bin`` that looks like a state dict but carries the payload."""
    evil = {"classifier.weight": torch.zeros(4, 128), "classifier.bias": Payload(marker)}
    if kind == "zip":  # torch.save's default format: a zip with data.pkl
        torch.save(evil, path)
    elif kind == "legacy":  # the pre-1.6 format: pickles back to back
        torch.save(evil, path, _use_new_zipfile_serialization=False)
    elif kind == "raw-pickle":  # not torch's format at all
        with path.open("wb") as fh:
            pickle.dump(Payload(marker), fh, protocol=2)
    else:
        raise ValueError(kind)
    return path


@pytest.fixture(scope="module")
def tiny():
    return TargetSpec("tiny", max_length=32).build(LABELS, seed=5)


def model_dir(tmp_path: Path, tiny, weights: str | None = "safetensors") -> Path:
    """A Hugging Face classifier directory: config.json, tokenizer and the given weights."""
    model, tok = tiny
    d = tmp_path / "classifier"
    d.mkdir()
    model.config.save_pretrained(d)
    tok.save_pretrained(d)
    if weights == "safetensors":
        model.save_pretrained(d)
        assert (d / "model.safetensors").is_file()
    elif weights == "bin":
        torch.save(model.state_dict(), d / "pytorch_model.bin")
    return d


# --------------------------------------------------------------------------- #
# the payload is real, and it is never run
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("kind", ["zip", "legacy", "raw-pickle"])
def test_payload_runs_under_an_unrestricted_loader(tmp_path, kind):
    """Control: the same file loaded the unsafe way does run the command (in a child
    process), so the refusal tests below test something real."""
    marker = tmp_path / "pwned-control"
    path = write_malicious_bin(tmp_path / "pytorch_model.bin", marker, kind)
    load = (
        "import pickle,sys; pickle.load(open(sys.argv[1], 'rb'))"
        if kind == "raw-pickle"
        else "import sys,torch; torch.load(sys.argv[1], weights_only=False)"
    )
    subprocess.run([sys.executable, "-c", load, str(path)], capture_output=True, timeout=120)
    assert marker.exists()


@pytest.mark.parametrize("kind", ["zip", "legacy", "raw-pickle"])
def test_malicious_pickle_is_refused_and_never_runs(tmp_path, tiny, kind):
    d = model_dir(tmp_path, tiny, weights=None)
    marker = tmp_path / "pwned"
    write_malicious_bin(d / "pytorch_model.bin", marker, kind)

    with pytest.raises(AuditError) as info:
        load_trained_classifier(d)
    msg = str(info.value)
    assert REFUSED in msg and "pytorch_model.bin" in msg
    assert "Convert it to safetensors" in msg
    assert "\n" not in msg
    # The same refusal when the directory is a base model to fine-tune.
    with pytest.raises(AuditError, match="refusing to load it"):
        TargetSpec(model_dir=str(d)).build(LABELS, seed=0)
    assert not marker.exists(), "the pickle payload ran"


def test_verify_weights_only_refuses_before_building_any_object(tmp_path):
    marker = tmp_path / "pwned"
    path = write_malicious_bin(tmp_path / "pytorch_model.bin", marker, "zip")
    with pytest.raises(AuditError, match=REFUSED):
        verify_weights_only(path)
    assert not marker.exists()


def test_cli_run_refuses_a_malicious_classifier_dir(tmp_path, tiny, cli):
    d = model_dir(tmp_path, tiny, weights=None)
    marker = tmp_path / "pwned"
    write_malicious_bin(d / "pytorch_model.bin", marker, "zip")
    rows = [{"id": f"r{i}", "text": "where is my parcel", "label": "shipping"} for i in range(4)]
    for name in ("members", "nonmembers"):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps({**r, "id": f"{name}-{r['id']}"}) + "\n" for r in rows),
            encoding="utf-8",
        )
    config = tmp_path / "audit.toml"
    config.write_text(
        f"""
[target]
classifier_dir = {json.dumps(str(d))}
[data]
members = "members.jsonl"
nonmembers = "nonmembers.jsonl"
[metrics]
bootstrap = 100
""",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    outcome = cli(["run", str(config), "--out", str(out), "--quiet"])

    assert outcome.code == 2, (outcome.code, outcome.stderr)
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("privacy-audit: error: ")
    assert REFUSED in lines[0]
    assert "Traceback" not in outcome.stderr + outcome.stdout
    assert not (out / "report.html").exists() and not (out / "results.json").exists()
    assert not marker.exists(), "the pickle payload ran"


def test_safetensors_wins_over_a_pickle_next_to_it(tmp_path, tiny):
    """With model.safetensors present the .bin is never opened."""
    d = model_dir(tmp_path, tiny, weights="safetensors")
    marker = tmp_path / "pwned"
    write_malicious_bin(d / "pytorch_model.bin", marker, "zip")
    model, _ = load_trained_classifier(d)
    assert torch.equal(model.classifier.weight, tiny[0].classifier.weight)
    assert not marker.exists()


def test_config_naming_a_pickle_as_its_weights_is_refused(tmp_path, tiny):
    """config.json's "transformers_weights" overrides use_safetensors in transformers."""
    d = model_dir(tmp_path, tiny, weights="safetensors")
    marker = tmp_path / "pwned"
    write_malicious_bin(d / "adapter_model.bin", marker, "zip")
    cfg = json.loads((d / "config.json").read_text(encoding="utf-8"))
    cfg["transformers_weights"] = "adapter_model.bin"
    (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    with pytest.raises(AuditError, match="only safetensors checkpoints may be named there"):
        load_trained_classifier(d)
    assert not marker.exists()


# --------------------------------------------------------------------------- #
# legitimate checkpoints load
# --------------------------------------------------------------------------- #
def test_safetensors_directory_loads(tmp_path, tiny):
    d = model_dir(tmp_path, tiny, weights="safetensors")
    model, tok = load_trained_classifier(d)
    assert torch.equal(model.classifier.weight, tiny[0].classifier.weight)
    assert not model.training
    assert tok("where is my parcel")["input_ids"]


def test_weights_only_bin_directory_loads(tmp_path, tiny):
    d = model_dir(tmp_path, tiny, weights="bin")
    assert not (d / "model.safetensors").exists()
    verify_weights_only(d / "pytorch_model.bin")
    model, _ = load_trained_classifier(d)
    ref = tiny[0].state_dict()
    for name, value in model.state_dict().items():
        assert torch.equal(value, ref[name]), name
    base, _ = TargetSpec(model_dir=str(d)).build(LABELS, seed=0)
    assert torch.equal(
        base.bert.embeddings.word_embeddings.weight, ref["bert.embeddings.word_embeddings.weight"]
    )


def test_sharded_safetensors_directory_loads(tmp_path, tiny):
    d = model_dir(tmp_path, tiny, weights=None)
    tiny[0].save_pretrained(d, max_shard_size="200KB")
    assert (d / "model.safetensors.index.json").is_file()
    assert not (d / "model.safetensors").exists()
    model, _ = load_trained_classifier(d)
    assert torch.equal(model.classifier.weight, tiny[0].classifier.weight)


# --------------------------------------------------------------------------- #
# everything else is refused with one line
# --------------------------------------------------------------------------- #
def test_non_tensor_objects_in_a_bin_are_refused(tmp_path, tiny):
    d = model_dir(tmp_path, tiny, weights=None)
    torch.save({"classifier.weight": torch.zeros(2), "note": "hello"}, d / "pytorch_model.bin")
    with pytest.raises(AuditError, match="not a state dict of tensors"):
        load_trained_classifier(d)


def test_truncated_bin_is_refused(tmp_path, tiny):
    d = model_dir(tmp_path, tiny, weights="bin")
    data = (d / "pytorch_model.bin").read_bytes()
    (d / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(AuditError, match="refusing to load it") as info:
        load_trained_classifier(d)
    assert "\n" not in str(info.value)


def test_torchscript_archive_is_refused(tmp_path, tiny):
    d = model_dir(tmp_path, tiny, weights=None)
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(d / "pytorch_model.bin"))
    with pytest.raises(AuditError, match="refusing to load it"):
        load_trained_classifier(d)


def test_corrupt_safetensors_is_an_input_error(tmp_path, tiny):
    d = model_dir(tmp_path, tiny, weights="safetensors")
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(AuditError, match="could not load a classifier"):
        load_trained_classifier(d)


def test_weights_of_the_wrong_shape_are_an_input_error(tmp_path, tiny):
    d = model_dir(tmp_path, tiny, weights=None)
    state = dict(tiny[0].state_dict())
    state["classifier.weight"] = torch.zeros(7, 3)
    torch.save(state, d / "pytorch_model.bin")
    with pytest.raises(AuditError, match="could not load a classifier"):
        load_trained_classifier(d)


@pytest.mark.parametrize(
    "files",
    [
        [],
        ["pytorch_model.bin.index.json", "pytorch_model-00001-of-00001.bin"],
        ["tf_model.h5"],
        ["flax_model.msgpack"],
        ["model.ckpt.index"],
    ],
)
def test_other_formats_are_refused(tmp_path, tiny, files):
    d = model_dir(tmp_path, tiny, weights=None)
    for name in files:
        (d / name).write_bytes(b"not loaded")
    with pytest.raises(AuditError, match="only safetensors and weights-only PyTorch"):
        load_trained_classifier(d)
