"""Scoring in chunks (audit/scale/stream.py, issue 38 item 5): a run killed mid-scoring
resumes from its finished chunks with the same numbers, an edited text or a changed model
invalidates what it changes, and the transient memory does not grow with n."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from privacy_audit.audit.scale import stream
from privacy_audit.targets import scoring
from tests.own_models import build_causal_lm, random_texts, save, word_tokenizer, write_lines

FIELDS = ("token_ids", "log_probs", "mean_log_prob", "var_log_prob", "top1_ids")


class Crash(Exception):
    pass


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream")
    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), seed=3, d=32), tok, root / "m")
    return root / "m"


def _release(path):
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release

    return load_causal_lm_release(
        load_audit_target(path), 32, PrivacyClaim.none(), "cpu", batch_size=4
    )


def _texts(n=70):  # varied lengths, so length bucketing reorders inside a chunk
    return [t for k in range(n) for t in random_texts(1, 100 + k, length=3 + k % 9)]


def _assert_same(a, b, texts):
    for x, y in zip(a.token_stats(texts), b.token_stats(texts), strict=True):
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f))
            assert getattr(x, f).dtype == getattr(y, f).dtype
    np.testing.assert_array_equal(a.hidden(texts), b.hidden(texts))


def _crash_in_chunk(monkeypatch, at_batch: int):
    """Make the ``at_batch``-th forward pass raise (a kill in the middle of a chunk)."""
    real, calls = scoring.score_batch, {"n": 0}

    def batch(*a, **k):
        calls["n"] += 1
        if calls["n"] == at_batch:
            raise Crash
        return real(*a, **k)

    monkeypatch.setattr(scoring, "score_batch", batch)


def test_resume_after_a_crash_mid_chunk_equals_an_uninterrupted_run(
    model_dir, tmp_path, monkeypatch
):
    texts = _texts()
    whole = _release(model_dir)
    scoring.score_texts(whole.model, whole.tokenizer, [texts[0]], 32)  # warm
    key = stream.scoring_key(whole)
    info = stream.stream_token_stats(
        whole, texts, stream.ChunkStore(tmp_path / "a", key), chunk_texts=16
    )
    assert info == {"chunks": 5, "chunk_texts": 16, "reused": 0, "scored": 5}
    # n <= one chunk is the whole-set path itself
    plain = _release(model_dir)
    plain.token_stats(texts[:16])
    _assert_same(plain, whole, texts[:16])

    crashed = _release(model_dir)
    store = stream.ChunkStore(tmp_path / "b", stream.scoring_key(crashed))
    assert store.key == key  # same model contents and settings
    with monkeypatch.context() as mp:
        _crash_in_chunk(mp, at_batch=4 + 4 + 2)  # 16 texts = 4 batches: inside chunk 3
        with pytest.raises(Crash):
            stream.stream_token_stats(crashed, texts, store, chunk_texts=16)
    assert len(list((tmp_path / "b").iterdir())) == 2  # chunks 1-2 whole, no partial file

    resumed = _release(model_dir)
    scored = []
    real = scoring.score_texts
    monkeypatch.setattr(
        scoring,
        "score_texts",
        lambda m, t, part, *a, **k: scored.append(len(part)) or real(m, t, part, *a, **k),
    )
    info = stream.stream_token_stats(resumed, texts, store, resume=True, chunk_texts=16)
    assert info["reused"] == 2 and info["scored"] == 3 and scored == [16, 16, 6]
    _assert_same(whole, resumed, texts)

    # without --resume nothing is read back
    fresh = _release(model_dir)
    assert stream.stream_token_stats(fresh, texts, store, chunk_texts=16)["reused"] == 0


def test_an_edited_text_or_a_changed_model_invalidates_what_it_changes(model_dir, tmp_path):
    texts = _texts()
    first = _release(model_dir)
    store = stream.ChunkStore(tmp_path / "c", stream.scoring_key(first))
    stream.stream_token_stats(first, texts, store, chunk_texts=16)
    edited = list(texts)
    edited[20] = edited[20] + " secret"  # chunk 2 of 5
    again = _release(model_dir)
    info = stream.stream_token_stats(again, edited, store, resume=True, chunk_texts=16)
    assert (info["reused"], info["scored"]) == (4, 1)
    direct = _release(model_dir)
    stream.stream_token_stats(direct, edited, chunk_texts=16)  # no checkpoints at all
    _assert_same(direct, again, edited)
    assert not np.array_equal(
        again.token_stats([edited[20]])[0].log_probs, first.token_stats([texts[20]])[0].log_probs
    )

    # a damaged checkpoint is scored again, never trusted
    victim = sorted((tmp_path / "c").iterdir())[0]
    victim.write_bytes(victim.read_bytes()[:100])
    third = _release(model_dir)
    assert (
        stream.stream_token_stats(third, edited, store, resume=True, chunk_texts=16)["scored"] >= 1
    )
    _assert_same(direct, third, edited)

    # other weights in the same directory: every chunk's key changes
    tok = word_tokenizer()
    other = tmp_path / "m2"
    save(build_causal_lm("gpt2", len(tok), seed=3, d=32), tok, other)
    assert stream.scoring_key(_release(other)) == store.key  # same bytes, same key
    save(build_causal_lm("gpt2", len(tok), seed=4, d=32), tok, other)
    changed = _release(other)
    assert stream.scoring_key(changed) != store.key


def _transient_peak(model_dir, texts, chunk):
    """Peak traced bytes above what the scoring keeps (the per-text results)."""
    rel = _release(model_dir)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        stream.stream_token_stats(rel, texts, chunk_texts=chunk)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert current - base > 0 and len(rel._token_stats_cache) == len(set(texts))
    return peak - current


def test_transient_memory_does_not_grow_with_n(model_dir):
    """At 2n texts the memory scoring needs beyond its per-text results is about that at
    n (one chunk's encodings and one batch), while the unchunked pass's grows with n (the
    measurement can see growth)."""
    n = 600
    texts = random_texts(2 * n, 7, length=10)
    _transient_peak(model_dir, texts[:8], 4)  # warm imports and caches
    chunked = [_transient_peak(model_dir, texts[:k], 100) for k in (n, 2 * n)]
    whole = [_transient_peak(model_dir, texts[:k], k) for k in (n, 2 * n)]
    assert whole[1] > 1.6 * whole[0], whole  # the unchunked pass: ~2x
    assert chunked[1] < 1.25 * chunked[0], chunked
    assert chunked[1] < 0.6 * whole[1], (chunked, whole)


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def _scores(res: dict) -> dict:
    return {
        a["attack"]: (a.get("metrics"), a.get("scores"), a.get("members"))
        for a in res["runs"][0]["attacks"]
    }


def test_run_model_resumes_mid_scoring_end_to_end(model_dir, tmp_path, monkeypatch, cli):
    """``run --model`` killed in the middle of scoring, then ``--resume``: results.json
    equals the uninterrupted run's, and the finished chunks were not scored again."""
    monkeypatch.setattr(stream, "CHUNK_TEXTS", 16)
    write_lines(tmp_path / "members.txt", random_texts(30, 21, length=8))
    write_lines(tmp_path / "nonmembers.txt", random_texts(30, 22, length=8))
    args = ["run", "--model", str(model_dir), "--members", str(tmp_path / "members.txt")]
    args += ["--nonmembers", str(tmp_path / "nonmembers.txt"), "--quiet"]
    full = cli([*args, "--out", str(tmp_path / "full")])
    assert full.code == 0, full.stderr[-2000:]
    with monkeypatch.context() as mp:
        # run --model scores in batches of 32 (> a chunk here): the 4th pass is chunk 4's
        _crash_in_chunk(mp, at_batch=4)
        crashed = cli([*args, "--out", str(tmp_path / "o")])
    assert crashed.code != 0
    assert len(list((tmp_path / "o" / "run" / "scoring").glob("*.npz"))) == 3
    scored = []
    real = scoring.score_texts
    monkeypatch.setattr(
        scoring,
        "score_texts",
        lambda m, t, part, *a, **k: scored.append(len(part)) or real(m, t, part, *a, **k),
    )
    resumed = cli([*args, "--out", str(tmp_path / "o"), "--resume"])
    assert resumed.code == 0, resumed.stderr[-2000:]
    assert scored == [60 - 48]  # only the unfinished chunk
    assert _scores(_results(tmp_path / "o")) == _scores(_results(tmp_path / "full"))


def test_free_heap_pages_go_back_every_trim_texts(model_dir, monkeypatch):
    """The scorer hands the heap's free pages back every TRIM_TEXTS scored texts (the
    resident memory does not grow with n; audit/scale/malloc.py), same numbers."""
    from privacy_audit.audit.scale import malloc

    calls = []
    monkeypatch.setattr(stream, "TRIM_TEXTS", 8)
    monkeypatch.setattr(malloc, "release_free_memory", lambda: calls.append(1) or True)
    texts = _texts(40)
    rel = _release(model_dir)  # batches of 4
    stream.stream_token_stats(rel, texts, chunk_texts=16)
    assert len(calls) == 40 // 8
    monkeypatch.setattr(malloc, "release_free_memory", lambda: False)
    kept = _release(model_dir)
    stream.stream_token_stats(kept, texts, chunk_texts=16)  # the same chunks, no trimming
    _assert_same(rel, kept, texts)
