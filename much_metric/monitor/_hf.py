"""Hugging Face ``generate`` as a token source of :class:`much_metric.monitor.ClaimMonitor`.

Two hooks, both inside ``generate``'s own loop (no second forward pass):

* a ``LogitsProcessor`` that, at each step, turns the step's logits into temperature-scaled probabilities over the
  full vocabulary (:func:`much_metric.capture.scaled_probabilities`, the builder's operation) and returns the logits
  unchanged;
* a streamer whose ``put`` receives the token the step chose; it selects the top-24 candidates (extended down to the
  chosen token when it ranked lower: :func:`much_metric.capture.top_candidates_from_probabilities`, the builder's
  selection) and pushes the token to the monitor, which calls ``on_claim`` for every claim that became final.

The stored values are therefore the builder's (``output_logits=True`` then ``top_candidates``) bit for bit, with
one condition: ``generate`` runs user processors *after* the model's own non-sampling processors (repetition
penalty, ``min_new_tokens``, bad words, ...) and *before* the sampling warpers (temperature, top-k, top-p). With
none of the former (the MUCH setting and the default of most chat models) the processor sees the raw logits, as
``output_logits``. Batch size 1 only (the reference's procedure).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["monitor_hooks", "generate_claims"]

_DONE = object()


def monitor_hooks(monitor, on_claim: Callable[[Any], None], *, temperature: float = 1.0):
    """``(LogitsProcessorList, streamer)`` feeding ``monitor``; ``on_claim(claim)`` receives each final claim.

    ``temperature``: the sampling temperature (1.0 for greedy decoding, as the builder stores greedy runs).
    Calling ``monitor.reset()`` is left to the streamer (on the prompt, i.e. at the start of each ``generate``).
    """
    from time import perf_counter

    import torch
    from transformers import LogitsProcessor, LogitsProcessorList
    from transformers.generation.streamers import BaseStreamer

    from much_metric.capture import scaled_probabilities, top_candidates_from_probabilities

    temperature = float(temperature)
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")

    class CaptureProbabilities(LogitsProcessor):
        def __init__(self) -> None:
            self.pending = None

        def __call__(self, input_ids, scores):
            if scores.shape[0] != 1:
                raise ValueError(f"ClaimMonitor monitors one sequence at a time; generate runs {scores.shape[0]} "
                                 "(batch size, num_beams and num_return_sequences must be 1)")
            started = perf_counter()
            self.pending = scaled_probabilities(scores, temperature=temperature)
            monitor.timings["capture"] = monitor.timings.get("capture", 0.0) + perf_counter() - started
            return scores

    class ClaimStreamer(BaseStreamer):
        def __init__(self) -> None:
            self.prompt_seen = False

        def put(self, value) -> None:
            if not self.prompt_seen:  # generate first puts the prompt
                self.prompt_seen = True
                monitor.reset()
                return
            token = value.reshape(-1)
            if token.numel() != 1:
                raise ValueError("ClaimMonitor monitors one sequence at a time (batch size 1)")
            if processor.pending is None:
                raise RuntimeError("the monitor's streamer got a token without its probabilities: pass the "
                                   "logits_processor returned by hooks() to the same generate call")
            started = perf_counter()
            ids, probs, _, _ = top_candidates_from_probabilities(processor.pending, token.to(torch.long),
                                                                 top_k=monitor.top_k)
            processor.pending = None
            monitor.timings["capture"] = monitor.timings.get("capture", 0.0) + perf_counter() - started
            for claim in monitor.push(int(token[0]), ids[0], probs[0]):
                on_claim(claim)

        def end(self) -> None:
            self.prompt_seen = False
            if monitor.token_ids:
                for claim in monitor.finish():
                    on_claim(claim)

    processor = CaptureProbabilities()
    return LogitsProcessorList([processor]), ClaimStreamer()


def _temperature(model, generate_kwargs: dict[str, Any]) -> float:
    config = generate_kwargs.get("generation_config") or getattr(model, "generation_config", None)
    do_sample = generate_kwargs.get("do_sample", getattr(config, "do_sample", False))
    if not do_sample:
        return 1.0
    temperature = generate_kwargs.get("temperature", getattr(config, "temperature", None))
    return 1.0 if temperature is None else float(temperature)


def generate_claims(monitor, model, input_ids, **generate_kwargs) -> Iterator[Any]:
    """Run ``model.generate(input_ids, ...)`` in a thread; yield each claim as soon as it is final.

    The capture temperature is the one ``generate`` samples with (``temperature`` argument, else the model's
    generation config; 1.0 for greedy decoding). ``logits_processor`` and ``streamer`` must not be passed (the
    monitor brings its own; use :func:`monitor_hooks` to combine with yours). An exception inside ``generate`` is
    raised here. ``monitor.last_output`` gets ``generate``'s return value.
    """
    import torch

    for name in ("streamer", "logits_processor"):
        if name in generate_kwargs:
            raise TypeError(f"generate_claims brings its own {name}; use ClaimMonitor.hooks() to combine it with yours")
    if getattr(input_ids, "ndim", 2) != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must have shape (1, prompt_length), got {tuple(getattr(input_ids, 'shape', ()))}")
    claims: queue.Queue = queue.Queue()
    processor, streamer = monitor_hooks(monitor, claims.put, temperature=_temperature(model, generate_kwargs))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            with torch.inference_mode():
                monitor.last_output = model.generate(input_ids, logits_processor=processor, streamer=streamer,
                                                     **generate_kwargs)
        except BaseException as error:  # noqa: BLE001 -- re-raised in the consuming thread
            failure.append(error)
        finally:
            claims.put(_DONE)

    monitor.last_output = None
    thread = threading.Thread(target=run, name="much-monitor-generate", daemon=True)
    thread.start()
    try:
        while (item := claims.get()) is not _DONE:
            yield item
    finally:
        thread.join()
    if failure:
        raise failure[0]
