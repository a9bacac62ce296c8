"""Tests for the bundled fixture corpus in ``fixtures/``.

Every audit in the suite is exercised on this corpus, so these tests pin the properties
the attacks and defenses rely on: byte-exact reproducibility, disjoint splits, an
attribute that is inferable only indirectly, fictional PII, canaries with exact
repetition counts, and a vocabulary that tokenizes every text without ``[UNK]``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from privacy_audit import fixtures
from privacy_audit.fixtures import generate as gen

REPO_ROOT = Path(__file__).resolve().parents[2]
ALL_FILES = (*gen.DATA_FILES, gen.MANIFEST_FILE)
EMAIL_RE = re.compile(r"[A-Za-z0-9._]+@([A-Za-z0-9.-]+[A-Za-z0-9])")
PHONE_RE = re.compile(r"\b555-0\d\d-\d{4}\b")
REFERENCE_RE = re.compile(r"\b(?:QM-\d{8}|AC-\d{7})\b")


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    return fixtures.load_corpus()


@pytest.fixture(scope="module")
def private(corpus) -> list[dict]:
    return [row for row in corpus if row["split"] == "private"]


@pytest.fixture(scope="module")
def public(corpus) -> list[dict]:
    return [row for row in corpus if row["split"] == "public"]


@pytest.fixture(scope="module")
def canaries() -> list[dict]:
    return fixtures.load_canaries()


@pytest.fixture(scope="module")
def vocab() -> list[str]:
    return fixtures.vocab_path().read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers")
    return fixtures.load_tokenizer()


def _assert_same_files(out_dir: Path) -> None:
    for name in ALL_FILES:
        fresh = (out_dir / name).read_bytes()
        committed = (fixtures.DATA_DIR / name).read_bytes()
        assert fresh == committed, f"{name} differs from the committed file; regenerate fixtures"


# ---------------------------------------------------------------------------------------
# Reproducibility
# ---------------------------------------------------------------------------------------


def test_regeneration_is_byte_identical(tmp_path):
    assert gen.main(["--out", str(tmp_path)]) == 0
    _assert_same_files(tmp_path)


@pytest.mark.parametrize(
    "entry", [["-m", "privacy_audit.fixtures.generate"], ["fixtures/generate.py"]]
)
def test_both_command_lines_reproduce_committed_files(tmp_path, entry):
    subprocess.run(
        [sys.executable, *entry, "--out", str(tmp_path)],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    )
    _assert_same_files(tmp_path)


def test_seed_controls_output():
    documents, _ = gen.generate(seed=gen.DEFAULT_SEED + 1)
    committed = {row["text"] for row in fixtures.load_corpus()}
    assert len({d["text"] for d in documents} & committed) < 0.05 * len(committed)


def test_manifest_matches_files(corpus, vocab):
    manifest = json.loads(fixtures.manifest_path().read_text(encoding="utf-8"))
    assert manifest["seed"] == gen.DEFAULT_SEED
    assert manifest["generator_version"] == gen.GENERATOR_VERSION
    assert manifest["vocab_size"] == len(vocab)
    for name in gen.DATA_FILES:
        data = (fixtures.DATA_DIR / name).read_bytes()
        assert manifest["files"][name]["sha256"] == hashlib.sha256(data).hexdigest()
        assert manifest["files"][name]["bytes"] == len(data)
    for split in fixtures.SPLITS:
        rows = [r for r in corpus if r["split"] == split]
        stats = manifest["splits"][split]
        assert stats["documents"] == len(rows)
        assert stats["label"] == dict(Counter(r["label"] for r in rows))
        assert stats["attribute"] == dict(Counter(r["attribute"] for r in rows))
        assert stats["has_pii"] == sum(r["has_pii"] for r in rows)


def test_data_stays_small():
    total = sum((fixtures.DATA_DIR / name).stat().st_size for name in ALL_FILES)
    assert total < 3_000_000


# ---------------------------------------------------------------------------------------
# Rows and splits
# ---------------------------------------------------------------------------------------


def test_rows_have_the_documented_schema(corpus):
    keys = ["id", "text", "label", "attribute", "split", "has_pii", "canary_id"]
    for row in corpus:
        assert list(row) == keys
        assert re.fullmatch(r"doc-\d{6}", row["id"])
        assert row["split"] in fixtures.SPLITS
        assert isinstance(row["has_pii"], bool)
        assert row["canary_id"] is None or isinstance(row["canary_id"], str)
    assert len({row["id"] for row in corpus}) == len(corpus)


def test_split_sizes(private, public):
    assert len(private) >= 4000
    assert 1800 <= len(public) <= 2200


def test_splits_are_disjoint_and_texts_unique(private, public):
    private_texts = [r["text"] for r in private]
    assert len(set(private_texts)) == len(private_texts)
    assert not set(private_texts) & {r["text"] for r in public}


def test_word_counts_in_range(corpus):
    counts = [len(r["text"].split()) for r in corpus]
    assert min(counts) >= 15
    assert max(counts) <= 45


@pytest.mark.parametrize("split", fixtures.SPLITS)
def test_label_distribution_not_degenerate(corpus, split):
    labels = Counter(r["label"] for r in corpus if r["split"] == split)
    assert set(labels) == {"billing", "shipping", "technical", "account"}
    n = sum(labels.values())
    assert all(0.10 <= c / n <= 0.45 for c in labels.values()), labels


def _naive_bayes_accuracy(train: list[dict], test: list[dict], key: str) -> float:
    """Bernoulli-style naive Bayes over basic-tokenizer word sets (no dependencies)."""
    prior = Counter(r[key] for r in train)
    word_counts: dict[str, Counter] = defaultdict(Counter)
    seen: set[str] = set()
    for r in train:
        words = set(gen.basic_tokenize(r["text"]))
        word_counts[r[key]].update(words)
        seen |= words
    correct = 0
    for r in test:
        words = set(gen.basic_tokenize(r["text"])) & seen

        def score(c: str, words=words) -> float:
            n = prior[c]
            return math.log(n) + sum(math.log((word_counts[c][w] + 1) / (n + 2)) for w in words)

        correct += max(prior, key=score) == r[key]
    return correct / len(test)


def test_topic_is_learnable_but_not_trivial(private, public):
    # A classifier trained on the public split transfers to the private split, but the
    # borderline templates and the 8 % flipped private labels keep it well below 100 %.
    accuracy = _naive_bayes_accuracy(public, private, "label")
    assert 0.60 <= accuracy <= 1 - gen.LABEL_NOISE_RATE + 0.01


# ---------------------------------------------------------------------------------------
# Sensitive attribute
# ---------------------------------------------------------------------------------------


def test_attribute_has_three_skewed_classes(private, public):
    for rows in (private, public):
        counts = Counter(r["attribute"] for r in rows)
        assert len(counts) >= 3
        shares = sorted((c / len(rows) for c in counts.values()), reverse=True)
        assert 0.40 <= shares[0] <= 0.60
        assert 0.20 <= shares[1] <= 0.40
        assert 0.10 <= shares[-1] < shares[1]


def test_attribute_names_never_appear_in_text(corpus, canaries):
    names = {r["attribute"].lower() for r in corpus}
    assert len(names) >= 3
    texts = [r["text"].lower() for r in corpus] + [c["text"].lower() for c in canaries]
    leaks = [(name, t) for t in texts for name in names if name in t]
    assert not leaks, leaks[:3]


def _strong_cues() -> dict[str, str]:
    cues = {}
    for group in (gen.CITIES, gen.TEAMS, gen.FOODS, gen.HABITS):
        for region, strings in group.items():
            cues.update(dict.fromkeys(strings, region))
    return cues


def test_attribute_is_inferable_but_imperfect(private):
    cues = _strong_cues()
    majority = Counter(r["attribute"] for r in private).most_common(1)[0][0]
    correct = cued = 0
    for row in private:
        hits = Counter(region for cue, region in cues.items() if cue in row["text"])
        cued += bool(hits)
        guess = hits.most_common(1)[0][0] if hits else majority
        correct += guess == row["attribute"]
    accuracy = correct / len(private)
    base_rate = Counter(r["attribute"] for r in private)[majority] / len(private)
    # Strong cues are in some but not all documents, and some of them mislead.
    assert 0.30 <= cued / len(private) <= 0.70
    assert base_rate + 0.05 <= accuracy <= 0.90


# ---------------------------------------------------------------------------------------
# PII
# ---------------------------------------------------------------------------------------


def test_pii_present_in_expected_share(corpus):
    n = len(corpus)
    share = sum(r["has_pii"] for r in corpus) / n
    assert 0.50 <= share <= 0.70
    assert sum(bool(EMAIL_RE.search(r["text"])) for r in corpus) >= 0.2 * n
    assert sum(bool(PHONE_RE.search(r["text"])) for r in corpus) >= 0.2 * n


def test_pii_flag_matches_text(corpus):
    for row in corpus:
        if not row["has_pii"]:
            text = row["text"]
            assert not EMAIL_RE.search(text) and not PHONE_RE.search(text), text
            assert not REFERENCE_RE.search(text), text


def test_pii_is_fictional(corpus):
    for row in corpus:
        for domain in EMAIL_RE.findall(row["text"]):
            assert domain.rsplit(".", 1)[-1] in {"test", "example", "invalid"}, domain
        # Any 555 number must be in the fixed fictional 555-0xx-xxxx format.
        assert len(re.findall(r"555-\d", row["text"])) == len(PHONE_RE.findall(row["text"]))


# ---------------------------------------------------------------------------------------
# Canaries
# ---------------------------------------------------------------------------------------


def test_canary_records_are_consistent(canaries):
    assert 15 <= len(canaries) <= 25
    assert {c["repetitions"] for c in canaries} == {1, 4, 16}
    assert len({c["canary_id"] for c in canaries}) == len(canaries)
    assert len({c["secret"] for c in canaries}) == len(canaries)
    for c in canaries:
        assert c["text"] == c["template"].format(secret=c["secret"])
        assert len(c["secret"]) == c["secret_length"]
        assert set(c["secret"]) <= set(c["secret_alphabet"])


def test_every_canary_appears_exactly_repetitions_times(private, public, canaries):
    for c in canaries:
        carriers = [r for r in private if c["text"] in r["text"]]
        assert len(carriers) == c["repetitions"], c["canary_id"]
        assert all(r["canary_id"] == c["canary_id"] for r in carriers)
        tagged = [r for r in private if r["canary_id"] == c["canary_id"]]
        assert len(tagged) == c["repetitions"]
        assert not any(c["secret"] in r["text"] for r in public)
    assert all(r["canary_id"] is None for r in public)
    known = {c["canary_id"] for c in canaries}
    assert {r["canary_id"] for r in private} - {None} == known


# ---------------------------------------------------------------------------------------
# Vocabulary and tokenizer
# ---------------------------------------------------------------------------------------


def test_vocab_structure(vocab, public, canaries):
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(vocab)) == len(vocab)
    assert 1000 <= len(vocab) <= 4000
    chars = [v for v in vocab[5:] if len(v) == 1]
    assert set(chars) >= set("abcdefghijklmnopqrstuvwxyz0123456789")
    assert {f"##{c}" for c in chars} <= set(vocab)
    counts = Counter(t for r in public for t in gen.basic_tokenize(r["text"]))
    words = [v for v in vocab[5:] if len(v) > 1 and not v.startswith("##")]
    assert words == sorted(words)
    assert all(counts[w] >= 2 for w in words), "vocabulary words must come from the public split"
    assert not {c["secret"] for c in canaries} & set(vocab)


def test_tokenizer_loads_with_special_ids(tokenizer, vocab):
    from transformers import BertTokenizerFast

    assert isinstance(tokenizer, BertTokenizerFast)
    assert len(tokenizer) == len(vocab)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert tokenizer.convert_tokens_to_ids(specials) == [0, 1, 2, 3, 4]
    assert (tokenizer.pad_token_id, tokenizer.unk_token_id) == (0, 1)
    assert (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id) == (2, 3, 4)


def test_tokenizer_covers_corpus_within_max_length(tokenizer, corpus, canaries, vocab):
    texts = [r["text"] for r in corpus] + [c["text"] for c in canaries]
    encoded = tokenizer(texts)["input_ids"]
    vocab_set = set(vocab)
    for text, ids in zip(texts, encoded, strict=True):
        assert tokenizer.unk_token_id not in ids, text
        assert len(ids) <= gen.MAX_TOKENS, text
        # The generator's dependency-free WordPiece must agree with the real tokenizer.
        assert gen.wordpiece_length(text, vocab_set) == len(ids), text


def test_vocab_words_are_single_tokens(tokenizer, vocab):
    words = [v for v in vocab[5:] if not v.startswith("##")]
    assert all(tokenizer.tokenize(w) == [w] for w in words)


# ---------------------------------------------------------------------------------------
# Package API
# ---------------------------------------------------------------------------------------


def test_paths_point_into_package_data():
    assert fixtures.DATA_DIR == Path(fixtures.__file__).parent / "data"
    for path in (fixtures.corpus_path(), fixtures.canaries_path(), fixtures.vocab_path()):
        assert path.parent == fixtures.DATA_DIR
        assert path.is_file()


def test_load_corpus_filters_by_split(corpus, private, public):
    assert len(corpus) == len(private) + len(public)
    assert fixtures.load_corpus("private") == private
    assert fixtures.load_corpus("public") == public


@pytest.mark.parametrize("bad", ["train", "Private", ""])
def test_load_corpus_rejects_unknown_split(bad):
    with pytest.raises(ValueError, match=r"'private'.*'public'"):
        fixtures.load_corpus(bad)
