"""NLI label mapping from id2label and the batched, de-duplicated NLI runner (vs one model call per pair): pairs
assembled from texts encoded once (vs the tokenizer's own pair encoding), the fallback, and token-budget batching."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from much_metric.baselines import NliBatching, NliScorer
from much_metric.baselines._arrays import token_arrays
from much_metric.baselines._pair_encoding import PairTemplate, plain_encode, template_encode
from much_metric.baselines.methods.ccp import ccp_pairs
from much_metric.baselines.nli import nli_label_indices, nli_signal_suffix, resolve_nli, token_budget_batches
from tests.much_metric._baselines_helpers import LABELS_3, MUSHROOM, mushroom_rows, one_torch_thread, tiny_nli_parts


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


@pytest.mark.parametrize(
    ("id2label", "expected"),
    [
        ({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}, (2, 0, 1, 3)),  # microsoft/deberta-*-mnli
        ({0: "entailment", 1: "neutral", 2: "contradiction"}, (0, 2, 1, 3)),  # XNLI models
        ({0: "entailment", 1: "not_entailment"}, (0, 1, None, 2)),  # MoritzLaurer ... -binary (hub labels)
        ({"0": "Entailment", "1": "Non-Entailment"}, (0, 1, None, 2)),
    ],
)
def test_label_indices(id2label, expected):
    labels = nli_label_indices(id2label)
    assert (labels.entailment, labels.contradiction, labels.neutral, labels.n_labels) == expected


@pytest.mark.parametrize(
    ("id2label", "message"),
    [
        ({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, "cannot infer"),
        ({0: "neutral", 1: "contradiction"}, "no entailment class"),
        ({0: "entailment", 1: "neutral"}, "no contradiction class"),
        ({0: "entailment", 1: "entailed", 2: "contradiction"}, "two labels map to entailment"),
        ({1: "entailment", 2: "contradiction"}, "keys must be 0..n-1"),
        ({}, "non-empty"),
    ],
)
def test_label_indices_errors(id2label, message):
    with pytest.raises(ValueError, match=message):
        nli_label_indices(id2label)


def test_signal_suffixes_and_resolve():
    assert nli_signal_suffix(None) == nli_signal_suffix("microsoft/deberta-large-mnli") == ""
    assert nli_signal_suffix("microsoft/deberta-base-mnli") == "_M"
    assert nli_signal_suffix("/models/My_XNLI.model/") == "_my-xnli-model"
    with pytest.raises(TypeError, match="predict_proba"):
        resolve_nli(object())


def _pairs(n: int) -> tuple[list[str], list[str]]:
    lines = (MUSHROOM / "mushroom.en-tst.v1.extra.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["model_output_text"][:120] for line in lines[: n + 1]]
    premises = texts[:n]
    hypotheses = [t[: len(t) // 2] for t in texts[1:]]
    # Duplicates, as a split produces them (repeated answers; candidates decoding to the same text).
    return premises + premises[:3] + [premises[0]], hypotheses + hypotheses[:3] + [premises[0]]


def test_batched_deduplicated_equals_one_model_call_per_pair():
    import torch

    model, tokenizer = tiny_nli_parts()
    premises, hypotheses = _pairs(10)
    scorer = NliScorer(model, tokenizer, batching=NliBatching(batch_size=4), progress=False)
    ours = scorer.predict_proba(premises, hypotheses)
    assert ours.shape == (len(premises), 3)
    with torch.inference_mode():
        direct = np.stack([
            torch.softmax(model(**tokenizer(p, h, return_tensors="pt")).logits[0], -1).numpy()
            for p, h in zip(premises, hypotheses, strict=True)
        ])
    np.testing.assert_allclose(ours, direct, atol=1e-5)
    np.testing.assert_allclose(ours.sum(axis=1), 1.0, atol=1e-6)
    # Duplicated pairs get identical rows (they were computed once).
    np.testing.assert_array_equal(ours[10:13], ours[:3])
    # The argmax decisions (what CCP uses) are not all the same class: the test can tell labels apart.
    assert len(set(ours.argmax(axis=1).tolist())) > 1


def test_options_and_left_padding_do_not_change_results():
    model, tokenizer = tiny_nli_parts()
    premises, hypotheses = _pairs(8)
    reference = NliScorer(model, tokenizer, batching=NliBatching(batch_size=1, deduplicate=False, sort_by_length=False),
                          progress=False).predict_proba(premises, hypotheses)
    for options in ({"batch_size": 64}, {"batch_size": 3, "sort_by_length": False}, {"deduplicate": False}):
        got = NliScorer(model, tokenizer, progress=False, batching=NliBatching(**options)).predict_proba(premises,
                                                                                                       hypotheses)
        np.testing.assert_allclose(got, reference, atol=1e-5)
    left = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer, pad_token=tokenizer.pad_token,
                               padding_side="left")
    got = NliScorer(model, left, batching=NliBatching(batch_size=5), progress=False).predict_proba(premises, hypotheses)
    assert got.shape == reference.shape
    assert np.isfinite(got).all()


def test_scorer_errors_and_empty_input():
    model, tokenizer = tiny_nli_parts()
    scorer = NliScorer(model, tokenizer, progress=False)
    assert scorer.predict_proba([], []).shape == (0, 3)
    with pytest.raises(ValueError, match="2 premises but 1 hypotheses"):
        scorer.predict_proba(["a", "b"], ["c"])
    for bad in (0, -3, 2.5, True, "8"):
        with pytest.raises(ValueError, match="NliBatching: batch_size must be a positive integer"):
            NliBatching(batch_size=bad)
        with pytest.raises(ValueError, match="NliBatching: max_batch_tokens must be a positive integer"):
            NliBatching(max_batch_tokens=bad)
    with pytest.raises(ValueError, match="NliBatching: deduplicate must be True or False"):
        NliBatching(deduplicate="yes")
    with pytest.raises(TypeError, match="batching must be an NliBatching"):
        NliScorer(model, tokenizer, batching={"batch_size": 4})
    batched = NliScorer(model, tokenizer, batching=NliBatching(batch_size=7, sort_by_length=False), progress=False)
    assert (batched.batch_size, batched.max_batch_tokens, batched.deduplicate, batched.sort_by_length) == \
        (7, 16_384, True, False)
    no_pad = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer)
    with pytest.raises(ValueError, match="no pad token"):
        NliScorer(model, no_pad)



# --- pairs assembled from texts encoded once --------------------------------------------------------------------


def _direct(model, tokenizer, premises, hypotheses) -> np.ndarray:
    """One model call per pair on ``tokenizer([premise], [hypothesis])``: what NliScorer must equal.

    (Lists: transformers encodes ``tokenizer(premise, "")`` as a single text, but a batch's empty hypothesis as a
    pair, and NliScorer encodes batches.)
    """
    import torch

    with torch.inference_mode():
        return np.stack([
            torch.softmax(model(**tokenizer([p], [h], return_tensors="pt")).logits[0], -1).numpy()
            for p, h in zip(premises, hypotheses, strict=True)
        ])


def _assert_same_encoding(tokenizer, encoded, premises, hypotheses):
    """Every assembled pair equals ``tokenizer(premise, hypothesis)``: ids and token type ids, exactly."""
    direct = tokenizer(list(premises), list(hypotheses), truncation=False, padding=False)
    for row in range(len(premises)):
        ids, types = encoded.pair(row)
        assert ids == list(direct["input_ids"][row]), (premises[row], hypotheses[row])
        assert (types is None) == ("token_type_ids" not in direct)
        if types is not None:
            assert types == list(direct["token_type_ids"][row]), (premises[row], hypotheses[row])
    # Padded batches too (both sides): the same arrays as padding the tokenizer's own pair encodings.
    plain = plain_encode(tokenizer, list(premises), list(hypotheses))
    rows = np.arange(len(premises))[::-1]
    for left in (False, True):
        got, expected = encoded.batch(rows, 7, left=left), plain.batch(rows, 7, left=left)
        assert got.keys() == expected.keys()
        for key in got:
            np.testing.assert_array_equal(got[key], expected[key])


_EDGE_PAIRS = (
    ("", "an empty premise"),
    ("an empty hypothesis", ""),
    ("", ""),
    ("  leading and trailing spaces  ", "\ttab\nnewline"),
    ("Ünïcödé — ça marche, 東京 🙂", "Straße"),
    ("ends with the end-of-text token<|eot_id|>", "[SEP] [CLS] <s> </s>"),
)


def _llama_ccp_pairs(tokenizer) -> tuple[list[str], list[str]]:
    """Real CCP pairs of English and French answers (with EOS decoded as text), SAR's swapped pairs, edge cases."""
    premises, hypotheses = [], []
    for lang in ("en", "fr"):
        rows = mushroom_rows(tokenizer, 3, lang=lang, repeat_first=False, max_tokens=12)
        work = ccp_pairs(token_arrays(rows), tokenizer.batch_decode, delta=4, sigma=3)
        premises += work["premises"]
        hypotheses += work["hypotheses"]
    return premises + hypotheses[:20] + [p for p, _ in _EDGE_PAIRS], hypotheses + premises[:20] + [
        h for _, h in _EDGE_PAIRS]


def test_llama3_pairs_assembled_from_texts_equal_the_tokenizer_pair_encoding():
    model, tokenizer = tiny_nli_parts()
    scorer = NliScorer(model, tokenizer, progress=False)
    assert scorer.pair_template is not None
    premises, hypotheses = _llama_ccp_pairs(tokenizer)
    assert len(premises) > 150 and any("<|eot_id|>" in h for h in hypotheses)
    _assert_same_encoding(tokenizer, template_encode(tokenizer, scorer.pair_template, premises, hypotheses),
                          premises, hypotheses)


def _bert_words() -> list[str]:
    lines = (MUSHROOM / "mushroom.en-tst.v1.extra.jsonl").read_text(encoding="utf-8").splitlines()[:6]
    words = " ".join(json.loads(line)["model_output_text"] for line in lines).lower().split()
    return sorted({w.strip(".,;:!?()\"'") for w in words} - {""})[:150]


@functools.cache
def _bert_tokenizer(single: str | None, pair: str | None):
    """A BERT-style fast tokenizer built offline: WordPiece on a small vocabulary, the given post-processor."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {token: i for i, token in enumerate(specials + _bert_words() + ["##s", "##ed", "##ing", "a", "e"])}
    backend = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    if single is not None:
        backend.post_processor = processors.TemplateProcessing(
            single=single, pair=pair, special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]",
                                   model_input_names=["input_ids", "token_type_ids", "attention_mask"])


_BERT_LAYOUTS = [
    ("[CLS] $A [SEP]", "[CLS] $A [SEP] $B:1 [SEP]:1"),  # BERT
    ("[CLS] $A [SEP]", "[CLS] $A [SEP] [SEP] $B [SEP]"),  # RoBERTa's layout
    ("$A [SEP]", "$A [SEP]:1 $B:1 [CLS]:0"),  # no prefix; specials of both types
    (None, None),  # no post-processor: the texts' own type ids (0 then 1)
]


@functools.cache
def _tiny_bert_nli(single: str | None, pair: str | None):
    """A tiny random DeBERTa-v2 classifier over the BERT-style vocabulary that uses token type ids."""
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    tokenizer = _bert_tokenizer(single, pair)
    config = DebertaV2Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=512, type_vocab_size=2,
                             pad_token_id=tokenizer.pad_token_id, id2label=LABELS_3,
                             label2id={v: k for k, v in LABELS_3.items()})
    torch.manual_seed(1)
    model = DebertaV2ForSequenceClassification(config).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(300.0)
    return model, tokenizer


@pytest.mark.parametrize(("single", "pair"), _BERT_LAYOUTS)
def test_bert_style_pairs_with_token_types_equal_the_tokenizer_pair_encoding(single, pair):
    model, tokenizer = _tiny_bert_nli(single, pair)
    scorer = NliScorer(model, tokenizer, progress=False)
    template = scorer.pair_template
    assert template is not None and template.has_types
    premises, hypotheses = _pairs(40)
    premises, hypotheses = premises + hypotheses + [p for p, _ in _EDGE_PAIRS], hypotheses + premises + [
        h for _, h in _EDGE_PAIRS]
    encoded = template_encode(tokenizer, template, premises, hypotheses)
    _assert_same_encoding(tokenizer, encoded, premises, hypotheses)
    if pair is None or ":1" in pair:
        assert set(encoded.pair(0)[1]) == {0, 1}  # both type ids are exercised
    if pair is not None and pair.startswith("[CLS] $A [SEP] $B:1"):
        vocab = tokenizer.get_vocab()
        assert template == PairTemplate((vocab["[CLS]"],), (0,), 0, (vocab["[SEP]"],), (0,), 1, (vocab["[SEP]"],),
                                        (1,), True)
        # The model reads the type ids: the scorer's probabilities equal one call per pair.
        np.testing.assert_allclose(scorer.predict_proba(premises, hypotheses),
                                   _direct(model, tokenizer, premises, hypotheses), atol=1e-5)


class _Delegate:
    """A tokenizer stand-in that forwards everything to a real tokenizer (subclasses change one thing)."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __call__(self, text, text_pair=None, **kwargs):
        return self.inner(text, text_pair, **kwargs)


class _NotFast(_Delegate):
    is_fast = False  # e.g. a slow (Python) tokenizer: its pair layout is not inferred


class _Joined(_Delegate):
    """Encodes a pair as one text "premise hypothesis": not two separately encoded texts, no template fits."""

    def __call__(self, text, text_pair=None, **kwargs):
        if text_pair is None:
            return self.inner(text, **kwargs)
        if isinstance(text, str):
            return self.inner(f"{text} {text_pair}", **kwargs)
        return self.inner([f"{a} {b}" for a, b in zip(text, text_pair, strict=True)], **kwargs)


@pytest.mark.parametrize("stub", [_NotFast, _Joined])
def test_tokenizer_without_inferable_layout_falls_back_to_plain_pair_encoding(stub):
    model, tokenizer = tiny_nli_parts()
    tokenizer = stub(tokenizer)
    premises, hypotheses = _pairs(8)
    scorer = NliScorer(model, tokenizer, batching=NliBatching(batch_size=5), progress=False)
    assert scorer.pair_template is None
    np.testing.assert_allclose(scorer.predict_proba(premises, hypotheses),
                               _direct(model, tokenizer, premises, hypotheses), atol=1e-5)


def test_assembled_pairs_that_differ_from_the_tokenizer_fall_back_at_run_time():
    model, tokenizer = tiny_nli_parts()
    premises, hypotheses = _pairs(8)
    reference = _direct(model, tokenizer, premises, hypotheses)
    scorer = NliScorer(model, tokenizer, progress=False)
    # As if the tokenizer had changed after construction (e.g. a BOS token switched on).
    scorer.pair_template = PairTemplate((tokenizer.eos_token_id,), (0,), 0, (), (), 0, (), (), False)
    with pytest.warns(RuntimeWarning, match="does not follow the template"):
        got = scorer.predict_proba(premises, hypotheses)
    assert scorer.pair_template is None
    np.testing.assert_allclose(got, reference, atol=1e-5)


def test_backend_left_truncating_or_padding_does_not_change_text_encodings():
    from tokenizers import Tokenizer

    model, tokenizer = tiny_nli_parts()
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    own = tokenizer.__class__(tokenizer_object=backend, pad_token=tokenizer.pad_token)
    scorer = NliScorer(model, own, progress=False)
    assert scorer.pair_template is not None
    premises, hypotheses = _pairs(8)
    expected = _direct(model, tokenizer, premises, hypotheses)
    # State left on the Rust backend by other calls (e.g. own(..., truncation=True, max_length=4, padding=True)).
    backend.enable_truncation(4)
    backend.enable_padding(pad_id=own.pad_token_id, pad_token=own.pad_token, length=64)
    np.testing.assert_allclose(scorer.predict_proba(premises, hypotheses), expected, atol=1e-5)
    assert scorer.pair_template is not None


# --- token-budget batching --------------------------------------------------------------------------------------


def test_token_budget_batches_respect_both_limits():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 60, 500)
    lengths[[7, 300]] = 120  # longer than the smallest budget: run alone
    for sort in (True, False):
        order = np.argsort(lengths, kind="stable") if sort else rng.permutation(len(lengths))
        for batch_size, budget in ((256, 16_384), (7, 16_384), (1000, 100), (64, 500), (1, 1)):
            batches = token_budget_batches(lengths, order, batch_size, budget)
            np.testing.assert_array_equal(np.concatenate(batches), order)
            for rows in batches:
                assert 1 <= len(rows) <= batch_size
                assert len(rows) * lengths[rows].max() <= budget or len(rows) == 1
            if sort:  # greedy on sorted lengths: a batch stops only when the next pair would break a limit
                for rows, following in zip(batches[:-1], batches[1:], strict=True):
                    wider = max(lengths[rows].max(), lengths[following[0]])
                    assert len(rows) == batch_size or (len(rows) + 1) * wider > budget
    assert token_budget_batches(lengths, np.arange(0), 4, 10) == []


class _ShapeSpy:
    """Wraps a model and records the (batch, width) of every forward pass."""

    def __init__(self, model):
        self.model, self.config, self.shapes = model, model.config, []

    def to(self, **kwargs):
        self.model.to(**kwargs)
        return self

    def eval(self):
        self.model.eval()
        return self

    def __call__(self, **inputs):
        self.shapes.append(tuple(inputs["input_ids"].shape))
        return self.model(**inputs)


def test_token_budget_bounds_every_forward_pass_and_leaves_results_unchanged():
    model, tokenizer = tiny_nli_parts()
    premises, hypotheses = _pairs(30)
    premises.append(" ".join(premises[:6]))  # one pair longer than the small budgets: it runs alone
    hypotheses.append(hypotheses[0])
    reference = _direct(model, tokenizer, premises, hypotheses)
    longest = max(len(ids) for ids in tokenizer(premises, hypotheses)["input_ids"])
    for batch_size, budget in ((256, 16_384), (256, 120), (8, 200), (3, 1)):
        spy = _ShapeSpy(model)
        got = NliScorer(spy, tokenizer, batching=NliBatching(batch_size=batch_size, max_batch_tokens=budget),
                        progress=False).predict_proba(premises, hypotheses)
        np.testing.assert_allclose(got, reference, atol=1e-5)
        assert sum(n for n, _ in spy.shapes) == len(set(zip(premises, hypotheses, strict=True)))
        for n, width in spy.shapes:
            assert n <= batch_size
            assert n * width <= budget or n == 1
        assert (1, longest) in spy.shapes or longest * 2 <= budget


def test_half_precision_path_runs_and_stays_close_on_cpu():
    """The GPU default (half precision) exercised on the CPU with bfloat16: same shapes, probabilities close to
    float32, the model really converted. (The float16-on-CUDA timing needs a GPU; see BENCHMARKS.md.)"""
    import copy

    import torch

    from much_metric.baselines.nli import _torch_dtype

    model, tokenizer = tiny_nli_parts()
    premises = ["Paris is the capital of France.", "The cat sat.", "It rained in 1999."] * 3
    hypotheses = ["Lyon is the capital of France.", "The dog sat.", "It snowed in 1999."] * 3
    full = NliScorer(copy.deepcopy(model), tokenizer, device="cpu", progress=False).predict_proba(premises, hypotheses)
    half = NliScorer(copy.deepcopy(model), tokenizer, device="cpu", dtype="bfloat16", progress=False)
    assert next(half.model.parameters()).dtype == torch.bfloat16
    probabilities = half.predict_proba(premises, hypotheses)
    assert probabilities.dtype == np.float64 and probabilities.shape == full.shape
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(probabilities, full, atol=0.1)
    assert _torch_dtype(None, "cuda") == torch.float16 and _torch_dtype(None, "cpu") == torch.float32
    with pytest.raises(ValueError, match="unknown torch dtype"):
        _torch_dtype("float17", "cpu")
