"""Privacy monitoring during training: the plain-PyTorch monitor and the Trainer callback."""

from __future__ import annotations

import re

import pytest
import torch

from privacy_audit import fixtures
from privacy_audit.audit.integrations.callbacks import PrivacyAuditCallback, PrivacyMonitor
from privacy_audit.defenses.base import Examples
from privacy_audit.targets.classifier import encode, forward_kwargs, trim_padding
from privacy_audit.targets.loading import TargetSpec

LABELS = ["account", "billing", "shipping", "technical"]
MAX_LENGTH = 32


def _pairs(start: int, stop: int) -> tuple[list[str], list[int]]:
    rows = fixtures.load_corpus("private")[start:stop]
    return [r["text"] for r in rows], [LABELS.index(r["label"]) for r in rows]


TRAIN = _pairs(0, 64)  # what the Trainer trains on
HELD_OUT = _pairs(64, 96)  # never trained on
MEMBERS = (TRAIN[0][:32], TRAIN[1][:32])  # a sample of the training data


def _fresh_model():
    return TargetSpec("tiny", max_length=MAX_LENGTH).build(LABELS, 0)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"members": ([], [])}, "members is empty"),
        ({"nonmembers": Examples(ids=[], texts=[], labels=[])}, "nonmembers is empty"),
        ({"members": (["one text"], [0])}, "at least 2 members"),
        ({"members": (["a", "b"], ["billing", "account"])}, "class indices"),
        ({"members": ["a", "b", "c"]}, "(texts, labels) pair"),
        ({"every_n_steps": 0}, "every_n_steps must be an integer >= 1"),
        ({"every_n_steps": -5}, "every_n_steps must be an integer >= 1"),
        ({"every_n_steps": 2.5}, "every_n_steps must be an integer >= 1"),
        ({"attacks": ["loss", "shadow-models"]}, "allowed: confidence, entropy, loss"),
        ({"attacks": []}, "no attacks given"),
        ({"stop_if": {"max_acu": 0.7}}, "allowed: max_auc, max_tpr_at_1pct_fpr, max_epsilon_lb"),
        ({"stop_if": {"max_auc": "high"}}, "must be a finite number"),
        ({"n_boot": 0}, "n_boot must be an integer >= 1"),
    ],
)
def test_monitor_rejects_bad_arguments(kwargs, message):
    args = {"members": MEMBERS, "nonmembers": HELD_OUT, **kwargs}
    members, nonmembers = args.pop("members"), args.pop("nonmembers")
    with pytest.raises(ValueError, match=re.escape(message)):
        PrivacyMonitor(None, None, members, nonmembers, **args)
    with pytest.raises(ValueError, match=re.escape(message)):
        PrivacyAuditCallback(members, nonmembers, **args)


def test_callback_needs_something_to_do():
    with pytest.raises(ValueError, match="nothing to monitor"):
        PrivacyAuditCallback(MEMBERS, HELD_OUT, every_n_steps=None, every_epoch=False)


def test_monitor_rejects_negative_step_and_missing_tokenizer():
    model, _ = _fresh_model()
    monitor = PrivacyMonitor(model, None, MEMBERS, HELD_OUT, every_n_steps=1)
    with pytest.raises(ValueError, match="global_step must be >= 0"):
        monitor.step(-1)
    with pytest.raises(ValueError, match="no tokenizer"):
        monitor.step(1)


# --------------------------------------------------------------------------- plain monitor


def test_monitor_runs_when_due_without_disturbing_training():
    model, tokenizer = _fresh_model()
    monitor = PrivacyMonitor(
        model,
        tokenizer,
        MEMBERS,
        HELD_OUT,
        attacks=["loss", "confidence", "loss"],
        every_n_steps=5,
        stop_if={"max_auc": 0.0, "max_epsilon_lb": None},
        max_length=MAX_LENGTH,
        n_boot=50,
    )
    assert monitor.attacks == ("loss", "confidence")
    # leave gradients in place, as a loop between backward() and step() would
    ids, mask = trim_padding(*encode(tokenizer, MEMBERS[0][:4], MAX_LENGTH))
    out = model(**forward_kwargs(model, ids, mask))
    torch.nn.functional.cross_entropy(out.logits, torch.tensor(MEMBERS[1][:4])).backward()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.train()
    rng = torch.get_rng_state()

    ran = {step: monitor.step(step) for step in range(13)}

    assert [s for s, m in ran.items() if m is not None] == [0, 5, 10]
    assert [h["step"] for h in monitor.history] == [0, 5, 10]
    assert monitor.step(10) is None  # already evaluated at this step
    metrics = ran[5]
    for key in (
        "privacy/loss/auc",
        "privacy/loss/tpr_at_fpr_0.01",
        "privacy/loss/epsilon_lower_bound",
        "privacy/confidence/auc",
        "privacy/max_auc",
    ):
        assert key in metrics
    assert 0.0 <= metrics["privacy/loss/auc"] <= 1.0
    assert metrics["privacy/max_auc"] == max(
        metrics["privacy/loss/auc"], metrics["privacy/confidence/auc"]
    )
    assert set(monitor.last_results) == {"loss", "confidence"}
    # the threshold of 0 is crossed at the first evaluation, and the reason names it
    assert monitor.should_stop
    assert monitor.stopped_reason.startswith("at step 0: privacy/max_auc = ")
    assert "max_auc = 0" in monitor.stopped_reason
    # train mode restored, gradients untouched, no torch randomness consumed
    assert model.training
    after = [p.grad for p in model.parameters() if p.grad is not None]
    assert all(torch.equal(a, b) for a, b in zip(grads, after, strict=True))
    assert torch.equal(rng, torch.get_rng_state())


def test_monitor_without_schedule_only_evaluates_on_request():
    model, tokenizer = _fresh_model()
    model.eval()
    monitor = PrivacyMonitor(
        model, tokenizer, MEMBERS, HELD_OUT, every_n_steps=None, max_length=MAX_LENGTH, n_boot=20
    )
    assert all(monitor.step(s) is None for s in range(5))
    assert monitor.evaluate(3)["privacy/loss/auc"] >= 0.0
    assert [h["step"] for h in monitor.history] == [3]
    assert not model.training  # eval mode restored as it was
    assert not monitor.should_stop and monitor.stopped_reason is None


@pytest.mark.slow
def test_monitor_sees_memorisation_in_a_hand_written_loop():
    """32 examples, 20 epochs: the model memorises them and the loss attack's AUC rises."""
    model, tokenizer = _fresh_model()
    members, nonmembers = (TRAIN[0][:32], TRAIN[1][:32]), HELD_OUT
    monitor = PrivacyMonitor(
        model,
        tokenizer,
        members,
        nonmembers,
        every_n_steps=10,
        stop_if={"max_auc": 0.99},
        max_length=MAX_LENGTH,
    )
    ids, mask = encode(tokenizer, members[0], MAX_LENGTH)
    labels = torch.tensor(members[1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model.train()
    monitor.step(0)  # baseline before training
    global_step = 0
    for _epoch in range(20):
        order = torch.randperm(32, generator=generator)
        for i in range(0, 32, 16):
            batch = order[i : i + 16]
            b_ids, b_mask = trim_padding(ids[batch], mask[batch])
            out = model(**forward_kwargs(model, b_ids, b_mask))
            loss = torch.nn.functional.cross_entropy(out.logits, labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            global_step += 1
            monitor.step(global_step)
            if monitor.should_stop:
                break
        if monitor.should_stop:
            break

    steps = [h["step"] for h in monitor.history]
    assert steps == list(range(0, global_step + 1, 10))
    first, last = monitor.history[0], monitor.history[-1]
    assert last["privacy/loss/auc"] > 0.6
    assert last["privacy/loss/auc"] > first["privacy/loss/auc"] + 0.1
    # the AUC CI at the end lies above chance: the monitor measures a real leak
    assert last["privacy/loss/auc_ci_low"] > 0.5


# --------------------------------------------------------------------------- Trainer callback


class _TokenisedDataset(torch.utils.data.Dataset):
    def __init__(self, tokenizer, texts, labels):
        self.ids, self.mask = encode(tokenizer, texts, MAX_LENGTH)
        self.labels = torch.tensor(labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.labels[i]}


def _trainer(tmp_path, callback, max_steps: int, with_processing_class: bool):
    import accelerate  # noqa: F401 - transformers.Trainer needs it; a test dependency
    from transformers import Trainer, TrainingArguments, default_data_collator

    model, tokenizer = _fresh_model()
    args = TrainingArguments(
        output_dir=str(tmp_path),
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        max_steps=max_steps,
        logging_steps=2,
        per_device_train_batch_size=16,
        learning_rate=2e-3,
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
    )
    return Trainer(
        model=model,
        args=args,
        train_dataset=_TokenisedDataset(tokenizer, *TRAIN),
        data_collator=default_data_collator,
        processing_class=tokenizer if with_processing_class else None,
        callbacks=[callback] if callback is not None else None,
    ), tokenizer


def _privacy_entries(log_history):
    return [e for e in log_history if "privacy/max_auc" in e]


@pytest.mark.slow
def test_trainer_callback_logs_at_steps_and_epoch_ends(tmp_path):
    # 64 examples at batch 16: 4 steps an epoch, so 8 steps are 2 epochs
    callback = PrivacyAuditCallback(
        MEMBERS, HELD_OUT, every_n_steps=3, every_epoch=True, max_length=MAX_LENGTH
    )
    trainer, _ = _trainer(tmp_path, callback, max_steps=8, with_processing_class=True)
    trainer.train()

    entries = _privacy_entries(trainer.state.log_history)
    # steps 3 and 6 by the step schedule, 4 and 8 at epoch ends (8 once, not twice)
    assert [e["step"] for e in entries] == [3, 4, 6, 8]
    assert [h["step"] for h in callback.history] == [3, 4, 6, 8]
    for entry in entries:
        for attack in ("loss", "confidence"):
            for key in ("auc", "tpr_at_fpr_0.01", "epsilon_lower_bound"):
                assert f"privacy/{attack}/{key}" in entry
            assert 0.0 <= entry[f"privacy/{attack}/auc"] <= 1.0
        assert entry["epoch"] == pytest.approx(entry["step"] / 4)
    assert trainer.state.global_step == 8
    assert callback.stopped_reason is None
    # the Trainer's own loss logging is untouched
    assert any("loss" in e and "privacy/max_auc" not in e for e in trainer.state.log_history)


@pytest.mark.slow
def test_trainer_callback_stops_training_when_a_threshold_is_crossed(tmp_path):
    trainer, tokenizer = _trainer(tmp_path, None, max_steps=12, with_processing_class=False)
    callback = PrivacyAuditCallback(
        MEMBERS,
        HELD_OUT,
        every_n_steps=2,
        every_epoch=False,
        stop_if={"max_auc": 0.0},
        tokenizer=tokenizer,
        max_length=MAX_LENGTH,
        n_boot=50,
    )
    callback.attach(trainer)  # logs through trainer.log, so integrations see the metrics
    assert callback.attach(trainer) is callback
    assert trainer.callback_handler.callbacks.count(callback) == 1
    trainer.train()

    assert trainer.state.global_step == 2 < 12
    assert callback.should_stop
    assert callback.stopped_reason.startswith("at step 2: privacy/max_auc = ")
    entries = _privacy_entries(trainer.state.log_history)
    assert len(entries) == len(callback.history) == 1
    assert entries[0]["step"] == 2 and "epoch" in entries[0]
