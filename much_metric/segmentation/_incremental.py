"""Real-time claim segmentation: push token ids as they are generated, get each claim once it is final.

Every claim emitted before :meth:`IncrementalSegmenter.finish` is final: the concatenation of everything emitted
equals :func:`much_metric.segmentation.segment` on the decoded text with the same ids. Three facts make this possible
while reading only a bounded tail of the text at each step (linear overall):

* Token ends are final when a token is pushed (``_segmenter_spans.IncrementalSpans``); text before the decoding
  anchor never changes.
* Treebank tokenization is local: a whitespace-delimited run of the text is tokenized the same whatever follows it,
  except the *last* run (end-of-text rules such as the final-period split). And at a run that follows a literal
  space, tokenizing the text from that run on gives the same words as tokenizing the whole text (every rule that
  looks left of a run sees a space there, as it sees Treebank's padding space at the start of a string). So words
  of all but the last run are committed for good, and only the text from the last such restart point is re-read.
* The EOS cut is at the first *listed* EOS string that occurs anywhere; until the end, a word is committed only if
  it ends before every position where a listed EOS string could still start.

With ``compat="0.3.0"`` a claim is emitted one claim late: the final claim may still be merged into the previous
one (final punctuation merge), so a claim is final once the claim after it is closed.
"""

from __future__ import annotations

from much_metric.segmentation._spans import IncrementalSpans, profile
from much_metric.segmentation._words import (
    COMPAT_VERSIONS,
    close_starts,
    eos_index,
    joins_previous_claim,
    word_flags,
    words,
)

__all__ = ["IncrementalSegmenter"]


class IncrementalSegmenter:
    """Segment a generation token by token.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        The generating model's tokenizer.
    compat : {"0.3.0", "0.2.1"}, keyword-only
        Reference version to reproduce (see :func:`much_metric.segmentation.segment`).

    Examples
    --------
    Each claim comes out, as a list of token indices, once no later token can change it; on a sample row they are
    the dataset's ``token_chunks``:

    >>> import much_dataset
    >>> from much_metric.models import load_tokenizer
    >>> from much_metric.segmentation import IncrementalSegmenter
    >>> row = much_dataset.load("sample", "en", split="test")[0]
    >>> seg = IncrementalSegmenter(load_tokenizer("smollm2"))
    >>> claims = []
    >>> for token_id in row["output_tokens"]:
    ...     claims += seg.push(token_id)
    >>> claims += seg.finish()
    >>> claims == row["token_chunks"], claims[0]
    (True, [0])
    """

    def __init__(self, tokenizer, *, compat: str = "0.3.0") -> None:
        if compat not in COMPAT_VERSIONS:
            raise ValueError(f"compat must be one of {COMPAT_VERSIONS}, got {compat!r}")
        self._tokenizer = tokenizer
        self._compat = compat
        self._prof = profile(tokenizer)
        self._spans = IncrementalSpans(tokenizer)
        # Treebank side
        self._starts: list[int] = []  # committed claim starts (final)
        self._restart = 0  # tail re-tokenization starts here (a run start after a literal space, or 0)
        self._committed_upto = 0  # end of the last committed word
        self._frontier = 0  # every claim start still to come is >= min(frontier, EOS bound)
        self._previous_stop = False
        self._next_is_stop = False
        self._seen_stable = -1
        self._last_run = -1
        self._held_back = False
        self._held_stop = 0
        self._eos_found: list[int | None] = [None] * len(self._prof.eos_strings)
        self._eos_scan = [0] * len(self._prof.eos_strings)
        # token side
        self._undecided = 0  # first token whose claim membership is not decided yet
        self._pointer = 0  # next claim start in self._starts
        self._current: list[int] = []
        self._closed: list[list[int]] = []  # closed, not yet emitted (0.3.0 keeps the last one back)
        self._emitted: list[list[int]] = []
        self._finished = False

    @property
    def token_ids(self) -> list[int]:
        """Ids pushed so far."""
        return list(self._spans.ids)

    @property
    def claims(self) -> list[list[int]]:
        """Claims emitted so far (final)."""
        return [list(claim) for claim in self._emitted]

    @property
    def eos_ids(self) -> frozenset[int]:
        """The tokenizer's end-of-sequence ids (a claim made only of them is the EOS claim)."""
        return frozenset(self._prof.eos_ids)

    def text_of(self, first: int, last: int) -> str:
        """The decoded text of pushed tokens ``first..last`` (inclusive), as the segmenter sees it."""
        spans = self._spans
        start = spans.ends[first - 1] if first else 0
        return spans.text_from(start)[: spans.ends[last] - start]

    def push(self, token_id: int) -> list[list[int]]:
        """Add the next generated token; return the claims that became final (often none)."""
        if self._finished:
            raise RuntimeError("push() after finish(); create a new IncrementalSegmenter")
        self._spans.push(int(token_id))
        stable = self._spans.stable_length
        if stable != self._seen_stable:
            self._seen_stable = stable
            self._scan_eos(stable)
            self._commit_words(stable)
        self._decide(final=False)
        return self._emit(final=False)

    def finish(self) -> list[list[int]]:
        """Declare the generation complete; return the remaining claims."""
        if self._finished:
            return []
        self._finished = True
        text = self._spans.text
        eos = eos_index(text, self._prof.eos_strings)
        tail = text[self._restart :]
        spans = [(a + self._restart, b + self._restart) for a, b, _, _ in words(tail)]
        reached_eos = False
        for start, stop in (span for span in spans if span[0] >= self._committed_upto):
            if stop >= eos:
                reached_eos = True
                break
            self._add_word(start, stop, text[start:stop])
        if reached_eos and (self._compat == "0.2.1" or eos < len(text)):
            self._starts.append(eos)
        self._starts = close_starts(self._starts, len(text), compat=self._compat)
        self._decide(final=True)
        if self._current:
            self._closed.append(self._current)
            self._current = []
        if self._compat == "0.3.0":
            self._merge_last()
        return self._emit(final=True)

    # -- Treebank words -------------------------------------------------------------------------------------------

    def _scan_eos(self, stable: int) -> None:
        for k, marker in enumerate(self._prof.eos_strings):
            if self._eos_found[k] is not None or not marker:
                continue
            scan = self._eos_scan[k]
            text = self._spans.text_from(scan)[: stable - scan]
            position = text.find(marker)
            if position >= 0:
                self._eos_found[k] = scan + position
                continue
            # The marker can still start only where the stable text ends with a prefix of it.
            first = max(0, len(text) - len(marker) + 1)
            while first < len(text) and not marker.startswith(text[first:]):
                first += 1
            self._eos_scan[k] = scan + first

    def _eos_bound(self) -> int:
        """A lower bound on the final EOS cut (the first listed marker found anywhere, else the text length)."""
        bound = None
        for k, marker in enumerate(self._prof.eos_strings):
            found = self._eos_found[k]
            if found is not None:
                return found if bound is None else min(bound, found)
            if not marker:
                return 0  # the reference finds "" at index 0
            bound = self._eos_scan[k] if bound is None else min(bound, self._eos_scan[k])
        return self._seen_stable if bound is None else min(bound, self._seen_stable)

    def _commit_words(self, stable: int) -> None:
        tail = self._spans.text_from(self._restart)[: stable - self._restart]
        stripped = tail.rstrip()
        if not stripped:
            return
        # Start of the last whitespace-delimited run: words before it are final.
        last_run = self._restart + len(stripped) - len(stripped.split()[-1])
        bound = self._eos_bound()
        if last_run == self._last_run and (not self._held_back or bound <= self._held_stop):
            return  # nothing new can be committed: Treebank runs about once per word, not once per token
        self._last_run = last_run
        self._held_back = False
        for a, b, _, _ in words(tail):
            start, stop = a + self._restart, b + self._restart
            if start < self._committed_upto:
                continue
            if stop > last_run:
                break
            if stop >= bound:
                self._held_back, self._held_stop = True, stop
                break
            self._add_word(start, stop, tail[a:b])
        self._frontier = min(last_run, self._committed_upto) if self._held_back else last_run
        if not self._held_back and last_run > self._restart and tail[last_run - self._restart - 1] == " ":
            self._restart = last_run

    def _add_word(self, start: int, stop: int, word: str) -> None:
        (is_stop,), (ends_dot,) = word_flags([word])
        is_stop = is_stop or self._next_is_stop
        if is_stop and not self._previous_stop and start != 0:
            self._starts.append(start)
        self._previous_stop, self._next_is_stop = is_stop, ends_dot
        self._committed_upto = stop

    # -- tokens ---------------------------------------------------------------------------------------------------

    def _decide(self, *, final: bool) -> None:
        ends = self._spans.ends
        starts = self._starts
        # Every claim start still to come is at or after ``lower``: a token ending there cannot pass one.
        lower = None if final else min(self._frontier, self._eos_bound())
        while self._undecided < len(ends):
            i = self._undecided
            if i == 0:
                self._current.append(0)
            elif self._pointer < len(starts):
                if ends[i] > starts[self._pointer]:
                    self._closed.append(self._current)
                    self._current = [i]
                    self._pointer += 1
                else:
                    self._current.append(i)
            elif final or ends[i] <= lower:
                self._current.append(i)  # no claim start can come before this token's end
            else:
                return
            self._undecided += 1

    def _merge_last(self) -> None:
        closed = self._emitted + self._closed
        if len(closed) < 2:
            return
        if joins_previous_claim(closed[-1], self._spans.ids, self._tokenizer.decode, self._prof.eos_ids):
            # The previous claim is still held back (one-claim delay), so it can absorb the last one.
            last = self._closed.pop()
            self._closed[-1] = self._closed[-1] + last

    def _emit(self, *, final: bool) -> list[list[int]]:
        keep = 0 if final or self._compat == "0.2.1" else 1
        ready = self._closed[: len(self._closed) - keep] if keep else self._closed
        self._closed = self._closed[len(ready) :]
        self._emitted.extend(ready)
        return [list(claim) for claim in ready]
