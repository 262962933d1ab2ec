"""The annotation guidelines (paper figure 5, section 3.4), the judge prompt, its answer schema and chunk decoding.

The same guidelines are shown to the LLM judges (``annotate``) and to the human annotators (``human``), as in the
paper. The prompt follows the reference's layout (docs/reference-behaviour.md#judge-prompt): instruction block,
``# Question``, ``# Model Output``,
``# Segmented Output`` (one numbered line per claim, the EOS claim left out), ``# Reference Knowledge`` with the
infobox and the top-3 Wikipedia chunks. The structured answer has one integer field ``score_chunk_<i>`` per non-EOS
claim, each restricted to -1 / 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from much_dataset.schema import CORRECT, HALLUCINATED, LABEL_VALUES

__all__ = [
    "GUIDELINES",
    "SYSTEM_PROMPT",
    "build_user_prompt",
    "build_messages",
    "response_format",
    "parse_labels",
    "format_segments",
    "chunk_texts",
    "load_decoder",
    "InvalidAnswer",
]

SYSTEM_PROMPT = "You are a factuality evaluation assistant."

GUIDELINES = """\
# Task
Given the original **question**, the model's **answer**, a **segmented version** of that answer, and some \
**reference knowledge**, assign a factuality score to each segment.

# Scoring convention
-1 -> Factually incorrect / contradicts previous ideas / unverifiable / approximative
 1 -> Factually correct

Be **tough and rigorous**: only assign "1" when the content is clearly factually correct and relevant to the \
question.

# Edge cases
1. Denial of answer: if the model explicitly states it cannot answer or denies having information (e.g. "I did not \
find any information..."), assign 1. The denial itself is factually correct.
2. Targeted labels: when a segment is incorrect, put the label on the specific factual claim, not on the surrounding \
phrasing. Example: question "Who was the first Carolingian king?", answer "The first Carolingian king was Clovis.": \
the incorrect part is "Clovis", not the framing "The first Carolingian...".
3. Numbers.
   3a. Exact values required (dates, rank in a competition, small quantities < 100): exact match -> 1, otherwise -1.
   3b. Approximate values acceptable (population, area): exact match -> 1; within 10% error with "around", \
"approximately" or similar context -> 1; within 10% error without such context -> -1; larger error -> -1.
4. Chunk granularity: if a chunk contains any factually false statement, the entire chunk is labelled -1.
5. Overgeneration and false details: if the answer adds details to an incorrect claim (the citizenship or birth date \
of the wrong person, details of an event that did not occur), assign -1 to the incorrect claim and to every \
overgenerated or unverifiable detail attached to it.
6. EOS token: end-of-sequence tokens such as <eos>, </s> or <|eot_id|> are labelled 1, unless they share a chunk \
with incorrect information (rule 4).
"""


class InvalidAnswer(ValueError):
    """A judge answer that does not hold exactly one -1/1 integer per non-EOS claim."""


def format_segments(texts: Sequence[str]) -> str:
    """``#` + index right-aligned on 2 characters + `` : `` + the claim text with newlines replaced by spaces."""
    return "\n".join(f"#{index:>2} : {text.replace(chr(10), ' ')}" for index, text in enumerate(texts))


def _reference_block(infobox: dict[str, Any] | None, context_chunks: Sequence[str]) -> str:
    infobox_text = json.dumps(infobox or {}, indent=4, ensure_ascii=False)
    chunks = "\n\n".join(context_chunks) if context_chunks else "(no relevant chunk found)"
    return (f"# Reference Knowledge\n\n## Wikipedia Infobox\n\n{infobox_text}\n\n"
            f"## Relevant chunks from Wikipedia text\n\n{chunks}")


def build_user_prompt(*, question: str, output: str, segments: Sequence[str],
                      infobox: dict[str, Any] | None, context_chunks: Sequence[str]) -> str:
    """The user message: guidelines, question, output, the numbered non-EOS ``segments`` and the reference knowledge."""
    return (f"{GUIDELINES}\n# Question\n\n{question}\n\n# Model Output\n\n{output.strip()}\n\n"
            f"# Segmented Output\n\n{format_segments(segments)}\n\n{_reference_block(infobox, context_chunks)}\n")


def build_messages(**kwargs: Any) -> list[dict[str, str]]:
    """Chat messages (system + user) for one sample; keyword arguments as :func:`build_user_prompt`."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": build_user_prompt(**kwargs)}]


def response_format(n_segments: int) -> dict[str, Any]:
    """OpenAI ``response_format`` (strict JSON schema): integer fields ``score_chunk_0..n-1``, each -1 or 1."""
    properties = {f"score_chunk_{i}": {"type": "integer", "enum": [HALLUCINATED, CORRECT]} for i in range(n_segments)}
    schema = {"type": "object", "properties": properties, "required": list(properties),
              "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "claim_scores", "strict": True, "schema": schema}}


def parse_labels(content: str | None, n_segments: int) -> list[int]:
    """Labels of the non-EOS claims from a judge's JSON answer, in claim order.

    Raises :class:`InvalidAnswer` (with the reason) unless the answer is a JSON object holding exactly the fields
    ``score_chunk_0 .. score_chunk_{n_segments-1}``, each an integer in {-1, 1}. Unlike the reference, values are
    validated and a wrong count is never silently accepted.
    """
    if not content:
        raise InvalidAnswer("empty answer")
    try:
        answer = json.loads(content)
    except json.JSONDecodeError as error:
        raise InvalidAnswer(f"answer is not JSON ({error})") from error
    if not isinstance(answer, dict):
        raise InvalidAnswer(f"answer is a {type(answer).__name__}, expected a JSON object")
    expected = {f"score_chunk_{i}" for i in range(n_segments)}
    if set(answer) != expected:
        missing, extra = sorted(expected - set(answer))[:3], sorted(set(answer) - expected)[:3]
        raise InvalidAnswer(f"answer has {len(answer)} fields, expected {n_segments} "
                            f"(missing {missing}, extra {extra})")
    labels = [answer[f"score_chunk_{i}"] for i in range(n_segments)]
    bad = [value for value in labels if isinstance(value, bool) or not isinstance(value, int)
           or value not in LABEL_VALUES]
    if bad:
        raise InvalidAnswer(f"labels must be -1 or 1, got {bad[:3]}")
    return labels


def chunk_texts(tokens: Sequence[int], chunks: Sequence[Sequence[int]],
                decode: Callable[[list[int]], str]) -> list[str]:
    """Decoded text of each claim: ``decode(tokens[chunk])`` (special tokens kept, so the EOS claim shows its text)."""
    return [decode([int(tokens[i]) for i in chunk]) for chunk in chunks]


def load_decoder(spec: str) -> Callable[[list[int]], str]:
    """A ``decode(ids) -> str`` function of the generating model's tokenizer.

    ``spec`` is a ``tokenizer.json`` file (read with ``tokenizers``, fast), a ``.gguf`` file, a folder, or a hub id
    (both with ``transformers.AutoTokenizer``). Special tokens are kept, as in the dataset's ``output`` column.
    """
    path = Path(spec)
    if path.is_file() and path.suffix == ".json":
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path))
        return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)
    from much_metric.models import load_tokenizer

    hf_tokenizer = load_tokenizer(spec)
    return lambda ids: hf_tokenizer.decode(ids, skip_special_tokens=False)
