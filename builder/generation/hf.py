"""The ``hf`` engine: the reference procedure (docs/reference-behaviour.md#generation), Hugging Face ``generate``.

Every question starts from the same RNG state (reseed before each batch), sampling uses the config's top_p / top_k
(MUCH's 0.9 / 20), the RAW logits of each step are divided by T and soft-maxed over the full vocabulary; the 24
largest probabilities and their ids are kept, sorted descending, plus the entries down to the sampled token when it
ranked below 24 (the filter step trashes those rows). ``batch_size`` 1 is the reference (the global RNG, reseeded
before each question). Larger batches left-pad the prompts (attention mask; generate derives the position ids from
it) and draw every row from its own generator seeded with the config's seed (:class:`SeededSampler`, the state batch
1 reseeds to), so on a CPU each row is the one batch 1 draws (same tokens, probabilities within float32 rounding)
whatever its batch: the exact batched path, ``generate``'s default on a CPU (:data:`HF_QUESTIONS_PER_BATCH`).

Questions that carry a ``seed`` (the items of ``python -m builder samples``) are drawn each from its own generator:
:class:`SeededSampler` applies transformers' own temperature, top-k and top-p warpers (MUCH's sampler) and draws row
``i`` with ``torch.Generator().manual_seed(seed_i)``, so a batch of N samples of one prompt (one prefill, one
decoding loop) gives each sample the tokens a batch of one with that seed gives, and the global RNG is not touched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from builder.configs import GenerationConfig
from builder.generation.engine import EngineOptions, distribution_version
from builder.generation.rows import EngineInfo, EngineResult, RowLimits, make_record, stop_tokens
from much_dataset import schema

__all__ = ["HFEngine", "HF_QUESTIONS_PER_BATCH", "SeededSampler", "hf_default_batch_size", "generate_batch"]

#: Questions ``generate --engine hf`` answers per ``model.generate`` call by default on a CPU: the exact batched path
#: (each row what batch 1 draws; ``benchmarks/bench_generate_engines.py`` measures it against batch 1).
HF_QUESTIONS_PER_BATCH = 64


def hf_default_batch_size(device: str) -> int:
    """``generate``'s hf batch on ``device``: the exact batched path on a CPU; 1 (the reference) elsewhere, where
    batch 1 draws from the device's RNG and the per-row generators (CPU) would not reproduce it."""
    return HF_QUESTIONS_PER_BATCH if device == "cpu" else 1


def _trim(tokens: list[int], eos_ids: set[int]) -> list[int]:
    # Keep everything up to and including the first EOS: what follows in a batch is padding.
    for position, token in enumerate(tokens):
        if token in eos_ids:
            return tokens[: position + 1]
    return tokens


class SeededSampler:
    """A transformers ``LogitsProcessor`` that samples each batch row with its own seeded generator.

    It applies transformers' own warpers in generate's order (temperature, top-k, top-p, with ``min_tokens_to_keep``
    1), draws one token per row as ``generate`` does (``torch.multinomial`` of the softmax), but from row ``i``'s
    ``torch.Generator`` seeded with ``seeds[i]``, and returns scores that are ``-inf`` except at the drawn token, so
    greedy decoding (``do_sample=False``) emits it. The raw logits ``generate`` returns are untouched.
    """

    def __init__(self, config: GenerationConfig, seeds: Sequence[int]) -> None:
        import torch
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        self.temperature = config.temperature
        #: The raw logits of the step being drawn (the model's last position, float32, as ``generate`` keeps them
        #: with ``output_logits``), set by :meth:`watch`'s forward hook: the scores this processor receives may
        #: already be changed by the model's own processors (a repetition penalty), the stored candidates may not.
        self.raw_logits: Any = None
        #: Per step, ``(ids, probabilities)`` of every row: :func:`much_metric.capture.top_candidates` of the raw
        #: logits and the drawn token, taken step by step, so no (batch, steps, vocabulary) tensor is kept.
        self.captured: list[tuple[list[list[int]], list[list[float]]]] = []

        self.warpers: list[Any] = []
        if config.temperature != 1.0:
            self.warpers.append(TemperatureLogitsWarper(config.temperature))
        if config.top_k:
            self.warpers.append(TopKLogitsWarper(top_k=config.top_k, min_tokens_to_keep=1))
        if config.top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p=config.top_p, min_tokens_to_keep=1))
        self.generators = [torch.Generator().manual_seed(int(seed)) for seed in seeds]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Warp each row's scores, then draw its next token with the row's own seeded generator."""
        import torch

        from much_metric.capture import scaled_probabilities, top_candidates_from_probabilities

        if self.raw_logits is None:
            raise RuntimeError("SeededSampler.watch(model) must wrap the generate call (no raw logits seen)")
        for warper in self.warpers:
            scores = warper(input_ids, scores)
        probs = torch.nn.functional.softmax(scores, dim=-1)
        drawn = torch.cat([torch.multinomial(probs[row: row + 1].cpu(), num_samples=1, generator=generator)
                           for row, generator in enumerate(self.generators)]).to(scores.device)
        ids, values, _, _ = top_candidates_from_probabilities(
            scaled_probabilities(self.raw_logits, temperature=self.temperature), drawn[:, 0])
        self.captured.append((ids, values))
        self.raw_logits = None
        return torch.full_like(scores, float("-inf")).scatter_(1, drawn, 0.0)

    @contextmanager
    def watch(self, model: Any) -> Iterator[None]:
        """Keep each forward pass's last-position logits while ``model.generate`` runs inside the block."""
        def keep(_module: Any, _args: Any, output: Any) -> None:
            self.raw_logits = output.logits[:, -1, :].float()

        handle = model.register_forward_hook(keep)
        try:
            yield
        finally:
            handle.remove()

    def candidates(self, row: int, length: int) -> tuple[list[list[int]], list[list[float]]]:
        """The stored candidates (ids, probabilities) of ``row``'s first ``length`` tokens."""
        steps = self.captured[:length]
        return [ids[row] for ids, _ in steps], [values[row] for _, values in steps]


def generate_batch(llm: Any, config: GenerationConfig, questions: list[dict[str, Any]], *,
                   prompt_style: str = "much") -> list[dict[str, Any]]:
    """Generate the answers of ``questions`` (one ``model.generate`` call) and return generation records.

    With one question this is exactly the reference's procedure; with several, prompts are left-padded and every row
    is drawn from its own generator (:class:`SeededSampler`): seeded with the question's ``seed`` when the questions
    carry one each (samples), else with the config's seed, the state the reference reseeds to before each question.
    """
    import torch

    from builder._llm import eos_token_ids, prompt_text, reseed, top_candidates

    tokenizer, model = llm.tokenizer, llm.model
    prompts = [prompt_text(tokenizer, q[schema.PROMPT], style=prompt_style, brief=config.brief) for q in questions]
    seeds = [q.get("seed") for q in questions]
    if any(seed is not None for seed in seeds) and (None in seeds or config.greedy):
        raise ValueError("either every question of a batch carries a seed (sampling) or none does")
    if seeds[0] is None and not config.greedy and len(questions) > 1:
        seeds = [config.seed] * len(questions)  # the exact batch: each row from the RNG state batch 1 starts in
    seeded = seeds[0] is not None
    eos_ids = eos_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos_ids or [0])[0]
    if len(prompts) == 1:
        input_ids = torch.tensor([tokenizer.encode(prompts[0], add_special_tokens=False)], device=llm.device)
        attention = torch.ones_like(input_ids)
    else:
        encoded = [tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        width = max(map(len, encoded))
        input_ids = torch.tensor([[pad_id] * (width - len(e)) + e for e in encoded], device=llm.device)
        attention = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], device=llm.device)
    sampler = SeededSampler(config, seeds) if seeded else None
    if sampler is not None:  # each row its own generator; generate decodes greedily from the one-hot scores
        sampling: dict[str, Any] = {"logits_processor": [sampler], "temperature": None, "top_p": None,
                                    "top_k": None}
    else:
        reseed(config.seed)
        sampling = {} if config.greedy else {"temperature": config.temperature, "top_p": config.top_p,
                                             "top_k": config.top_k}
    # A seeded batch captures its candidates step by step (memory: one step's logits); batch 1 of the reference keeps
    # generate's raw logits (one row's steps) and captures after.
    with torch.inference_mode(), sampler.watch(model) if sampler is not None else nullcontext():
        out = model.generate(
            input_ids=input_ids, attention_mask=attention, do_sample=not (config.greedy or seeded), **sampling,
            max_new_tokens=config.max_new_tokens, return_dict_in_generate=True, output_logits=sampler is None,
            pad_token_id=pad_id,
        )
    new_tokens = out.sequences[:, input_ids.shape[1]:]
    logits = None if sampler is not None else torch.stack(out.logits, dim=1)  # (batch, steps, vocab), raw
    temperature = 1.0 if config.greedy else config.temperature
    info = EngineInfo("hf", distribution_version("transformers"), dtype=str(llm.dtype).removeprefix("torch."))
    records = []
    for row, question in enumerate(questions):
        tokens = _trim(new_tokens[row].tolist(), set(eos_ids))
        if sampler is not None:
            ids, probs = sampler.candidates(row, len(tokens))
        else:
            ids, probs, _, _ = top_candidates(logits[row, :len(tokens)], torch.tensor(tokens),
                                              temperature=temperature)
        # finished = ended with the model's EOS (not cut at max_new_tokens); export trashes unfinished rows.
        result = EngineResult(tokens=tokens, ids=ids, probs=probs, finished=bool(tokens) and tokens[-1] in eos_ids,
                              output=tokenizer.decode(tokens, skip_special_tokens=False))
        records.append(make_record(config, question, result, engine=info))
    return records


class HFEngine:
    """The reference engine; ``generate`` yields per question, in batches of ``options.batch_size``."""

    name = "hf"

    def __init__(self, config: GenerationConfig, options: EngineOptions) -> None:
        from builder import _llm
        from builder.errors import load_or_stop

        self.config, self.options = config, options
        self.llm = load_or_stop(_llm.load_model, options.model, device=options.device, dtype=options.dtype)
        self.version = distribution_version("transformers")
        self.dtype = str(self.llm.dtype).removeprefix("torch.")
        vocab = getattr(getattr(self.llm.model, "config", None), "vocab_size", None)
        eos_ids, special_ids = stop_tokens(self.llm.tokenizer,
                                           extra=_llm.eos_token_ids(self.llm.model, self.llm.tokenizer))
        self.limits = RowLimits(vocab_size=vocab if isinstance(vocab, int) else None,
                                max_new_tokens=config.max_new_tokens, extend=True, top_k=config.top_k,
                                top_p=config.top_p, greedy=config.greedy, eos_ids=eos_ids, special_ids=special_ids)

    def generate(self, questions: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], Any]]:
        """Rows (or per-question errors) in batches of ``options.batch_size`` questions."""
        size = self.options.batch_size
        for start in range(0, len(questions), size):
            batch = list(questions[start: start + size])
            try:
                records = generate_batch(self.llm, self.config, batch, prompt_style=self.options.prompt_style)
            except Exception as error:  # noqa: BLE001 - reported per question, the run goes on
                for question in batch:
                    yield question, error
                continue
            yield from zip(batch, records, strict=True)
