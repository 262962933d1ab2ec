"""One greedy and one seeded sampled SmolLM2 generation through ClaimMonitor.generate, shared by the monitor tests."""

from __future__ import annotations

import functools

PROMPTS = ("Who wrote Les Misérables?", "What is the capital of Australia?")


def chat_ids(tokenizer, prompt: str):
    import torch

    from much_dataset.schema import chat_messages

    text = tokenizer.apply_chat_template(chat_messages(prompt), tokenize=False, add_generation_prompt=True)
    return torch.tensor([tokenizer.encode(text, add_special_tokens=False)])


@functools.cache
def monitored_runs():
    """[(settings, monitor, claims, generate output)] for a greedy run and a sampled run (T=0.7, seed 1234)."""
    import torch

    from much_metric.monitor import ClaimMonitor
    from tests.builder._smollm import smollm2

    llm = smollm2()
    runs = []
    for prompt, sampling in ((PROMPTS[0], {"do_sample": False}),
                             (PROMPTS[1], {"do_sample": True, "temperature": 0.7, "top_p": 0.9, "top_k": 20})):
        monitor = ClaimMonitor(llm.tokenizer, "token_entropy_24", threshold=0.5)
        ids = chat_ids(llm.tokenizer, prompt)
        torch.manual_seed(1234)
        claims = list(monitor.generate(llm.model, ids, max_new_tokens=40, return_dict_in_generate=True,
                                       output_logits=True, pad_token_id=llm.tokenizer.eos_token_id,
                                       attention_mask=torch.ones_like(ids), **sampling))
        runs.append((sampling, monitor, claims, monitor.last_output, ids.shape[1]))
    return llm, runs
