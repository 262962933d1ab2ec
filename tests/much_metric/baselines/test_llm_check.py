"""LLM-Check's attention score: the stored attention diagonal gives the log-determinant of the attention matrix of an
independent eager forward pass; registered as needing internals; printed by ``much run --internals PACK``."""

from __future__ import annotations

import numpy as np
import pytest

from much_metric.baselines import resolve, signal_groups, token_arrays
from much_metric.baselines.methods import llm_check
from tests.much_metric.baselines._packs import write_random_pack

PROMPT, TOKENS = [3, 7, 11, 2, 9], [5, 17, 23, 4, 8, 30, 12, 6]


def _tiny_llama():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(3)
    config = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=6,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    config._attn_implementation = "eager"
    return transformers.LlamaForCausalLM(config).eval()


def _rows(n_tokens, gid="g0"):
    ids = [[t, *(u for u in range(40, 63))] for t in n_tokens]
    return [{"generation_id": gid, "output_tokens": list(n_tokens), "logits_token_ids": ids,
             "logits_values": [[0.5, *([0.5 / 23] * 23)] for _ in n_tokens]}]


def test_stored_diagonal_gives_the_log_determinant_of_the_attention_matrix():
    import torch

    from builder import internals

    model = _tiny_llama()
    options = internals.InternalsOptions(hidden_layers=(1,), attention_to_self=True)
    arrays, _, _ = internals.forward_internals(model, PROMPT, TOKENS, options)
    stored = arrays["attention_to_self"]
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([PROMPT + TOKENS]), output_attentions=True)
    p, n, heads = len(PROMPT), len(TOKENS), 4
    pack = {"g0": {"attention_to_self": stored}}
    data = token_arrays(_rows(TOKENS))
    for layer in range(6):
        (scores,) = llm_check.llm_check_attention(data, internals=pack, layers=[layer])
        full = out.attentions[layer][0].double().numpy()  # (heads, seq, seq)
        for begin, end in ((0, n), (2, 6), (5, 6)):  # the response, a claim-like span, one token
            # independent: LU-based log-determinant of each head's block over the span (lower-triangular: det > 0)
            expected = 0.0
            for head in range(heads):
                block = full[head, p + begin : p + end, p + begin : p + end]
                assert np.allclose(block, np.tril(block))  # causal
                sign, logdet = np.linalg.slogdet(block)
                assert sign > 0
                expected += logdet / (end - begin)
            got = llm_check.span_attention_score(scores[begin:end], heads)
            assert got == pytest.approx(expected, rel=1e-5, abs=1e-5)
    # the default layers: the middle third, the mean over layers and heads of the log diagonal
    (default,) = llm_check.llm_check_attention(data, internals=pack)
    layers = [2, 3, 4]
    logs = np.log(np.stack([[np.diagonal(out.attentions[layer][0, h].double().numpy())[p:] for h in range(heads)]
                            for layer in layers]))
    np.testing.assert_allclose(default, 1 - np.exp(logs.mean(axis=(0, 1))), rtol=1e-5)
    assert ((default >= 0) & (default < 1)).all()


def test_a_pack_without_the_diagonal_or_of_another_length_is_named():
    data = token_arrays(_rows([1, 2, 3]))
    with pytest.raises(ValueError, match="generation_id='g0'.*no 'attention_to_self'.*--attention-to-self"):
        llm_check.llm_check_attention(data, internals={"g0": {"attention_to_previous": np.ones((3, 2, 2))}})
    with pytest.raises(ValueError, match="generation_id='g0'.*2 rows for 3 output tokens"):
        llm_check.llm_check_attention(data, internals={"g0": {"attention_to_self": np.ones((2, 3, 2))}})
    # a weight that underflowed to 0 is floored, not -inf
    (scores,) = llm_check.llm_check_attention(data, internals={"g0": {"attention_to_self": np.zeros((3, 3, 2))}})
    assert np.isfinite(scores).all() and (scores <= 1).all()


def test_registered_as_needing_internals_and_not_in_the_all_group():
    spec = resolve("llm_check_attention")
    assert spec.needs == ("internals",) and spec.display == "LLM-Check attention"
    assert "llm_check_attention" not in signal_groups()["all"]


def test_much_run_prints_an_llm_check_row(tmp_path, capsys):
    """``much run --source sample --config en --internals PACK --signals llm_check_attention`` on a pack written by the
    builder's writers (random self-attention weights for every English sample row)."""
    import much_dataset
    from much_metric.cli import main

    data = much_dataset.load("sample", config="en", split="test")
    write_random_pack(tmp_path, data, attention_to_self=True)
    code = main(["run", "--source", "sample", "--config", "en", "--internals", str(tmp_path), "--signals",
                 "llm_check_attention", "--bootstrap", "0", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert any(line.lstrip("│| ").startswith("LLM-Check attention") for line in out.splitlines()), out
