"""A scanner for private labels in bytes a server sends (test helper of test_private_leaks.py).

It knows the private rows WITH their labels (the test's own copy, from the sample) and looks, in every byte fed to
it, for the ways labels could come out:

* a row's label vector (rows with at least :data:`MIN_ROW_CLAIMS` claims and both classes; EOS claim kept or
  dropped) as JSON / Python lists (``[-1, 1, ...]``, with or without spaces), comma or space separated numbers, a
  0/1 string (either polarity), booleans (``true``/``True``), and base64 of its int8 bytes or packed bits;
* per-claim arrays: any list of at least :data:`MIN_RUN` values among -1/0/1/true/false, and any 0/1 run of that
  length, that is a window of the private label stream (rows in data order or ``generation_id`` order, either
  polarity) -- the shape of a per-claim array of the whole split or of a subset;
* counts that reveal labels: the number of hallucinated claims of the split, of each language and of each generating
  config (when at least 100: smaller numbers are everywhere in a page) as the number nearest the word "hallucinated" /
  "positive(s)", within 80 characters and no other number between (the way a page states a count; numbers alone, or
  past another number, collide with ports, sizes, timings, ...), unless an id (``"id": 103``: Gradio numbers its
  components with a per-process counter);
* exact metrics: given ``exact`` values (the unrounded private metrics), each with 4 and 5 decimals, unless the
  number found there is one of ``public`` (the board's published metrics, which may share 4 digits by chance).

Label encodings shorter than 4 bytes in base64 are not looked for, and inline ``data:`` URIs (the figures' PNG) are
left out of the text searches (random base64 holds any short string); the 0/1 runs and arrays are searched there too.

``findings`` lists ``(where, what)``; empty means nothing was found.
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from typing import Any

import numpy as np

MIN_ROW_CLAIMS = 8
MIN_RUN = 32
_VALUE = r"(?:-?1|0|true|false|True|False)"
_ARRAY = re.compile(rf"\[\s*(?:{_VALUE}\s*,\s*){{{MIN_RUN - 1},}}{_VALUE}\s*\]")
_BITS = re.compile(rf"[01]{{{MIN_RUN},}}")
_DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")
_NUMBER = re.compile(r"-?\d+\.\d+(?:[eE]-?\d+)?")
# the words a page states a count with ("hallucination", in every page's title, states none)
_COUNT_CONTEXT = re.compile(r"\b(?:hallucinated|positives?)\b", re.IGNORECASE)
# a number that names a thing, not a count: Gradio's component ids (a per-process counter, so they differ between
# runs and test workers) and HTML/JSON ids
_ID_BEFORE = re.compile(r"""(?:["']?\b(?:id|_id|fn_index|target)["']?\s*[:=]\s*["']?)$""")


def _stated_as_count(text: str, start: int, end: int) -> bool:
    """Whether the number at ``text[start:end]`` is the number nearest a word "hallucinated" / "positive" (and not
    an id).

    Within 80 characters and with no other number between them: "310 hallucinated", "hallucinated claims: 310" or a
    table cell next to its header. A number that only shares a sentence with the word, past another number (a public
    row's "2572 hallucinated); runtime 0.00174s; cost 310 ns/claim"), states something else.
    """
    if _ID_BEFORE.search(text, max(0, start - 16), start):
        return False
    before = text[max(0, start - 80): start]
    words_before = list(_COUNT_CONTEXT.finditer(before))
    if words_before and not re.search(r"\d", before[words_before[-1].end():]):
        return True
    after = _COUNT_CONTEXT.search(text, end, end + 80)
    return after is not None and not re.search(r"\d", text[end: after.start()])


def _bits(hallucinated: np.ndarray) -> str:
    return "".join("1" if h else "0" for h in hallucinated)


class LeakScanner:
    def __init__(self, truth: Any, *, exact: dict[str, float] = (), public: set[float] = frozenset()) -> None:
        rows = truth.select_columns(["generation_id", "lang", "generation_config", "labels"]).to_dict()
        self.needles: dict[str, str] = {}
        streams = []
        for order in (range(len(rows["labels"])), np.argsort(rows["generation_id"], kind="stable")):
            stream = "".join(_bits(np.asarray(rows["labels"][i][:-1]) == -1) for i in order)
            streams += [stream, stream.translate(str.maketrans("01", "10"))]
        self.streams = streams
        for gid, labels in zip(rows["generation_id"], rows["labels"], strict=True):
            for vector in (list(labels), list(labels)[:-1]):
                if len(vector) < MIN_ROW_CLAIMS or len(set(vector)) < 2:
                    continue
                self._row_needles(str(gid), [int(v) for v in vector])
        counts = Counter()
        for lang, config, labels in zip(rows["lang"], rows["generation_config"], rows["labels"], strict=True):
            n = sum(1 for v in labels[:-1] if v == -1)
            counts["all"] += n
            counts[f"lang={lang}"] += n
            counts[f"config={config}"] += n
        self.counts = {where: n for where, n in counts.items() if n >= 100}
        self.exact = {name: value for name, value in dict(exact).items()}
        self.public = set(public)
        self.findings: list[tuple[str, str]] = []
        self.fed = 0

    def _row_needles(self, gid: str, vector: list[int]) -> None:
        hallucinated = np.asarray(vector) == -1
        spaced, compact = ", ".join(map(str, vector)), ",".join(map(str, vector))
        bools = [str(bool(h)).lower() for h in hallucinated]
        encodings = {
            "json list": f"[{compact}]", "spaced list": f"[{spaced}]", "comma numbers": compact,
            "space numbers": " ".join(map(str, vector)), "bits": _bits(hallucinated),
            "bits (inverse)": _bits(~hallucinated),
            "json bools": "[" + ",".join(bools) + "]", "python bools": "[" + ", ".join(b.title() for b in bools) + "]",
        }
        if len(vector) >= 32:  # 4 bytes of packed bits at least: shorter base64 strings occur in any blob
            encodings["base64 packed bits"] = base64.b64encode(np.packbits(hallucinated).tobytes()).decode()
        encodings["base64 int8"] = base64.b64encode(np.asarray(vector, np.int8).tobytes()).decode()
        for what, needle in encodings.items():
            self.needles[needle] = f"labels of {gid} ({what})"

    def feed(self, where: str, data: bytes | str) -> None:
        raw = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
        self.fed += len(raw)
        text = _DATA_URI.sub("data:", raw)
        for needle, what in self.needles.items():
            if needle in (raw if what.endswith(("(base64 int8)", "(base64 packed bits)")) else text):
                self.findings.append((where, what))
        for match in _ARRAY.finditer(text):
            values = re.findall(r"-?1|0|true|false|True|False", match.group())
            for bits in ("".join("1" if v in ("-1", "true", "True") else "0" for v in values),
                         "".join("1" if v in ("1", "true", "True") else "0" for v in values)):
                if any(bits in stream for stream in self.streams):
                    self.findings.append((where, f"a per-claim array of {len(values)} private labels"))
                    break
        for match in _BITS.finditer(raw):
            if any(match.group() in stream for stream in self.streams):
                self.findings.append((where, f"a run of {len(match.group())} private label bits"))
        for subset, count in self.counts.items():
            for match in re.finditer(rf"(?<![\d.]){count}(?![\d.])", text):
                if _stated_as_count(text, match.start(), match.end()):
                    self.findings.append((where, f"the number of hallucinated claims of {subset} ({count}): "
                                                 f"{text[max(0, match.start() - 80): match.end() + 80]!r}"))
        for match in _NUMBER.finditer(text):
            number = match.group()
            for name, value in self.exact.items():
                if any(number.startswith(f"{value:.{digits}f}") for digits in (4, 5)) and \
                        not any(abs(float(number) - known) < 1e-12 for known in self.public):
                    self.findings.append((where, f"the exact private metric of {name} ({number}): "
                                                 f"{text[max(0, match.start() - 80): match.end() + 30]!r}"))
