"""Local fake HTTP servers for the builder tests: a MediaWiki API and an OpenAI-compatible API.

Both listen on 127.0.0.1 on a random free port, in a daemon thread, only inside a ``with`` block; they never contact
any other address. Tests talk to them with the real clients (urllib for MediaWiki, the ``openai`` package).
:func:`write_sample_artifacts` writes the part-1 artifacts (configs, questions, generations, segments) that these
servers answer about, with real Llama-3 tokens and the real claim segmenter.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


class Trickle(bytes):
    """A payload the fake servers send one byte every ``interval`` seconds (a server that never times out a read)."""

    interval: float = 0.5


class _Server:
    """A ThreadingHTTPServer on 127.0.0.1:0 serving ``handle(method, path, query, body) -> (status, headers, obj)``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                parts = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parts.query))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null") if length else None
                with outer._lock:
                    outer.requests.append({"method": method, "path": parts.path, "query": query, "body": body,
                                           "headers": dict(self.headers)})
                status, headers, payload = outer.handle(method, parts.path, query, body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if not isinstance(payload, Trickle):
                        self.wfile.write(data)
                        return
                    for byte in data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(payload.interval)
                except OSError:  # the client gave up (a timeout under test): no traceback on another test's stderr
                    return

            def do_GET(self) -> None:  # noqa: N802 -- http.server's naming
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def handle(self, method: str, path: str, query: dict, body: Any) -> tuple[int, dict, Any]:
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


# ---------------------------------------------------------------------------------------------------- MediaWiki

CANBERRA_EXTRACT = """Canberra is the capital city of Australia. Founded following the federation of the colonies of \
Australia as the seat of government for the new nation, it is Australia's largest inland city and the eighth-largest \
Australian city by population. The city is located at the northern end of the Australian Capital Territory.

== History ==
The site of Canberra was selected for the location of the nation's capital in 1908 as a compromise between Sydney and \
Melbourne, the two largest cities. It was named Canberra on 12 March 1913 by Lady Denman. The city was designed by \
the American architects Walter Burley Griffin and Marion Mahony Griffin after an international design contest.

=== Federal capital ===
Parliament first met in Canberra in 1927, when the provisional Parliament House was opened by the Duke of York.

== Geography ==
Canberra covers an area of 814.2 square kilometres and is located near the Brindabella Ranges, approximately 150 \
kilometres inland from Australia's east coast. It has a population of 453,558 as of 2021.

== Climate ==
Canberra has an oceanic climate with warm summers and cold winters; frost and fog are common in winter. The last \
section of the page holds this sentence about snow, which the reference pipeline dropped."""

CANBERRA_WIKITEXT = """{{Short description|Capital city of Australia}}
{{Infobox Australian place
| type = city
| name = Canberra
| state = act
| pop = 453,558 <!-- 2021 census -->
| established = 12 March 1913
| area = 814.2
| coordinates = {{coord|35|17|35|S|149|07|37|E|display=inline}}
| mayor = [[Andrew Barr|Barr]]
}}
'''Canberra''' is the capital city of [[Australia]]."""

CURIE_EXTRACT = """Maria Salomea Skłodowska-Curie, known as Marie Curie, was a Polish and naturalised-French physicist \
and chemist who conducted pioneering research on radioactivity. She was the first woman to win a Nobel Prize.

== Life ==
Curie was born in Warsaw on 7 November 1867. She won the Nobel Prize in Physics in 1903 and the Nobel Prize in \
Chemistry in 1911.

== Legacy ==
The element curium was named after Marie and Pierre Curie."""

CURIE_WIKITEXT = """{{Infobox scientist
| name = Marie Curie
| birth_date = {{birth date|1867|11|7|df=y}}
| birth_place = [[Warsaw]], [[Congress Poland]]
| awards = {{plainlist|
* [[Nobel Prize in Physics]] (1903)
* [[Nobel Prize in Chemistry]] (1911)}}
}}
'''Marie Curie''' was a physicist."""

PARIS_EXTRACT = """Paris est la capitale de la France. Elle se situe au cœur d'un vaste bassin sédimentaire.

== Histoire ==
Lutèce est fondée au IIIe siècle av. J.-C. par les Parisii.

== Géographie ==
La Seine traverse Paris d'est en ouest."""

PARIS_WIKITEXT = """{{Infobox Commune de France
| nom = Paris
| région = [[Île-de-France]]
| population = 2102650
}}"""

MERCURY_EXTRACT = """Mercury may refer to:

== Astronomy ==
Mercury (planet)

== Chemistry ==
Mercury (element)"""

#: (lang, title) -> page. Titles use spaces, as MediaWiki returns them.
DEFAULT_PAGES: dict[tuple[str, str], dict[str, Any]] = {
    ("en", "Canberra"): {"extract": CANBERRA_EXTRACT, "wikitext": CANBERRA_WIKITEXT},
    ("en", "Marie Curie"): {"extract": CURIE_EXTRACT, "wikitext": CURIE_WIKITEXT},
    ("fr", "Paris"): {"extract": PARIS_EXTRACT, "wikitext": PARIS_WIKITEXT},
    ("en", "Mercury"): {"extract": MERCURY_EXTRACT, "wikitext": "{{disambiguation}}", "disambiguation": True},
    ("en", "Flaky page"): {"extract": "A page whose first request fails.\n\n== Body ==\nText.", "wikitext": ""},
    ("en", "Throttled page"): {"extract": "A page that is rate limited once.", "wikitext": ""},
    ("en", "Broken page"): {"extract": "never served", "wikitext": ""},
}
DEFAULT_REDIRECTS: dict[tuple[str, str], str] = {("en", "Curie"): "Marie Curie"}


class FakeMediaWiki(_Server):
    """MediaWiki ``api.php`` at ``/<lang>/w/api.php`` (``action=query`` extracts+pageprops, ``action=parse``).

    Failure modes: a missing title, a redirect, a disambiguation page, ``Flaky page`` (HTTP 503 on its first query),
    ``Throttled page`` (HTTP 429 with ``Retry-After: 0`` once) and ``Broken page`` (always HTTP 500).
    """

    def __init__(self, pages: dict | None = None, redirects: dict | None = None) -> None:
        super().__init__()
        self.pages = dict(DEFAULT_PAGES if pages is None else pages)
        self.redirects = dict(DEFAULT_REDIRECTS if redirects is None else redirects)
        self._failed_once: set[str] = set()

    @property
    def api_template(self) -> str:
        return f"http://127.0.0.1:{self.port}/{{lang}}/w/api.php"

    def handle(self, method: str, path: str, query: dict, body: Any) -> tuple[int, dict, Any]:
        match = re.fullmatch(r"/([a-z]+)/w/api\.php", path)
        if method != "GET" or match is None:
            return 404, {}, {"error": "not found"}
        lang = match.group(1)
        title = (query.get("titles") or query.get("page") or "").replace("_", " ")
        if title == "Broken page":
            return 500, {}, {"error": "internal"}
        if title == "Flaky page" and "flaky" not in self._failed_once:
            self._failed_once.add("flaky")
            return 503, {}, {"error": "unavailable"}
        if title == "Throttled page" and "throttled" not in self._failed_once:
            self._failed_once.add("throttled")
            return 429, {"Retry-After": "0"}, {"error": "slow down"}
        redirects = []
        if query.get("redirects") and (lang, title) in self.redirects:
            target = self.redirects[(lang, title)]
            redirects, title = [{"from": title, "to": target}], target
        page = self.pages.get((lang, title))
        if query.get("action") == "query":
            if page is None:
                return 200, {}, {"batchcomplete": True, "query": {"pages": [{"ns": 0, "title": title,
                                                                               "missing": True}]}}
            entry = {"pageid": abs(hash(title)) % 10**6, "ns": 0, "title": title, "extract": page["extract"]}
            if page.get("disambiguation"):
                entry["pageprops"] = {"disambiguation": ""}
            answer = {"pages": [entry]}
            if redirects:
                answer["redirects"] = redirects
            return 200, {}, {"batchcomplete": True, "query": answer}
        if query.get("action") == "parse":
            if page is None:
                return 200, {}, {"error": {"code": "missingtitle", "info": "The page you specified doesn't exist."}}
            return 200, {}, {"parse": {"title": title, "pageid": 1, "wikitext": page["wikitext"]}}
        return 200, {}, {"error": {"code": "badvalue", "info": "unknown action"}}


# ---------------------------------------------------------------------------------------------------- OpenAI

def segments_from_prompt(messages: list[dict[str, str]]) -> list[str]:
    """The numbered claim texts of a judge prompt (lines ``#NN : text`` of the ``# Segmented Output`` section)."""
    user = messages[-1]["content"]
    block = user.split("# Segmented Output", 1)[1].split("# Reference Knowledge", 1)[0]
    return [m.group(1) for m in re.finditer(r"^#\s*\d+ : (.*)$", block, re.MULTILINE)]


def default_truth(segments: list[str]) -> list[int]:
    """The fake judge's 'correct' labels: -1 for a claim naming Sydney or Melbourne (wrong capital), else 1."""
    return [-1 if re.search(r"Sydney|Melbourne", text) else 1 for text in segments]


def hashed_embedding(text: str, dim: int = 64) -> list[float]:
    """A deterministic unit bag-of-words vector (each lowercase word hashed to a dimension)."""
    vector = np.zeros(dim)
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    norm = np.linalg.norm(vector)
    return (vector / norm if norm else vector).tolist()


class FakeOpenAI(_Server):
    """``/v1/chat/completions`` and ``/v1/embeddings``.

    ``script[model]`` is a list of behaviours consumed one per chat request for that model, then ``"correct"``:
    ``correct``, ``wrong_length``, ``out_of_range``, ``not_json``, ``error500``, ``rate_limit``, ``bad_request``,
    ``slow`` (a correct answer after ``slow_seconds``), or a callable ``(segments) -> labels``.
    ``truth(model, segments)`` gives the correct labels (default :func:`default_truth` for every model). Usage:
    prompt tokens = words of the messages, completion tokens = 5 per label.
    """

    def __init__(self, script: dict[str, list] | None = None,
                 truth: Callable[[str, list[str]], list[int]] | None = None) -> None:
        super().__init__()
        self.script = {model: list(items) for model, items in (script or {}).items()}
        self.truth = truth or (lambda model, segments: default_truth(segments))
        self.slow_seconds = 1.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def chat_requests(self, model: str | None = None) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"] == "/v1/chat/completions"
                and (model is None or r["body"]["model"] == model)]

    def handle(self, method: str, path: str, query: dict, body: Any) -> tuple[int, dict, Any]:
        if method == "POST" and path == "/v1/embeddings":
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(text)}
                    for i, text in enumerate(inputs)]
            tokens = sum(len(text.split()) for text in inputs)
            return 200, {}, {"object": "list", "data": data, "model": body["model"],
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        if method != "POST" or path != "/v1/chat/completions":
            return 404, {}, {"error": {"message": "not found"}}
        model = body["model"]
        with self._lock:
            queue = self.script.get(model, [])
            behaviour = queue.pop(0) if queue else "correct"
        if behaviour == "slow":  # computed, but answered after the client's deadline: the client never sees usage
            time.sleep(self.slow_seconds)
            behaviour = "correct"
        if behaviour == "error500":
            return 500, {}, {"error": {"message": "server exploded", "type": "server_error"}}
        if behaviour == "rate_limit":
            return 429, {"Retry-After": "0"}, {"error": {"message": "rate limited", "type": "rate_limit"}}
        if behaviour == "bad_request":
            return 400, {}, {"error": {"message": "bad request", "type": "invalid_request_error"}}
        segments = segments_from_prompt(body["messages"])
        n = len(body["response_format"]["json_schema"]["schema"]["properties"])
        labels = behaviour(segments) if callable(behaviour) else self.truth(model, segments)
        if behaviour == "wrong_length":
            labels = labels + [1]
        elif behaviour == "out_of_range":
            labels = [0] * len(labels)
        content = json.dumps({f"score_chunk_{i}": value for i, value in enumerate(labels)})
        if behaviour == "not_json":
            content = "Sure! Here are the scores: 1, 1, -1"
        assert n == len(segments), f"schema has {n} fields but the prompt {len(segments)} segments"
        prompt_tokens = sum(len(m["content"].split()) for m in body["messages"])
        return 200, {}, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 5 * len(labels),
                      "total_tokens": prompt_tokens + 5 * len(labels)},
        }


# ---------------------------------------------------------------------------------------------------- artifacts

#: (lang, prompt, wiki_url, answer text, flag) of the sample generations; flag None, "no_eos" or "outside_top_k".
SAMPLE_ANSWERS = (
    ("en", "What is the capital of Australia?", "https://en.wikipedia.org/wiki/Canberra",
     "The capital of Australia is Canberra, which was named in 1913.", None),
    ("en", "What is the capital of Australia?", "https://en.wikipedia.org/wiki/Canberra",
     "The capital of Australia is Sydney, the largest city.", None),
    ("en", "When was Marie Curie born?", "https://en.wikipedia.org/wiki/Curie",
     "Marie Curie was born on 7 November 1867 in Warsaw.", None),
    ("fr", "Quelle est la capitale de la France ?", "https://fr.wikipedia.org/wiki/Paris",
     "La capitale de la France est Paris.", None),
    ("en", "What is the capital of Australia?", "https://en.wikipedia.org/wiki/Canberra",
     "Canberra is the capital, and Melbourne was the temporary seat", "no_eos"),
    ("en", "What is the capital of Australia?", "https://en.wikipedia.org/wiki/Canberra",
     "Canberra, founded in 1913.", "outside_top_k"),
    ("en", "What is Mercury?", "https://en.wikipedia.org/wiki/Mercury", "Mercury is a planet.", None),
)
LLAMA_EOT = 128009
#: configs.jsonl row of the sample generations: the reference's Llama-3.2-3B T=1.0 config (iNPhBxMXcn6uNgZtdDG7xQ).
SAMPLE_CONFIG = {"model_name": "meta-llama/Llama-3.2-3B-Instruct", "eager": False, "brief": True, "greedy": False,
                 "seed": 1234, "temperature": 1.0, "top_p": 0.9, "top_k": 20, "max_new_tokens": 500,
                 "generation_config": "iNPhBxMXcn6uNgZtdDG7xQ"}


def _candidates(token: int, rng: np.random.Generator, n: int = 24) -> tuple[list[int], list[float]]:
    others = [int(t) for t in rng.choice(120000, size=n + 5, replace=False) if t != token][: n - 1]
    probs = np.sort(rng.dirichlet(np.ones(n + 8)))[::-1][:n]
    return [token, *others], [float(p) for p in probs]


def write_sample_artifacts(out, tokenizer, answers=SAMPLE_ANSWERS, *, seed: int = 0) -> list[dict[str, Any]]:
    """Write ``configs/questions/generations/segments.jsonl`` of the builder contract for ``answers`` into ``out``.

    Tokens come from ``tokenizer`` (a transformers Llama-3 tokenizer), claims from ``much_metric.segmentation``;
    each sampled token is the top candidate of a 24-candidate row except for the ``outside_top_k`` sample, whose
    third token ranks 25th. Returns the generation rows.
    """
    from pathlib import Path

    from much_metric.segmentation import segment

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    generations, segments, questions = [], [], {}
    for index, (lang, prompt, url, text, flag) in enumerate(answers):
        tokens = tokenizer.encode(text, add_special_tokens=False) + ([] if flag == "no_eos" else [LLAMA_EOT])
        ids, values = zip(*(_candidates(t, rng) for t in tokens), strict=True)
        ids, values = [list(x) for x in ids], [list(x) for x in values]
        if flag == "outside_top_k":
            # 24 other candidates first, then the sampled token ranked 25th (a row longer than 24)
            others = [t for t in range(1, 200) if t not in ids[2]]
            ids[2] = ids[2][1:] + [others[0], ids[2][0]]
            values[2] = values[2] + [values[2][-1] / 2]
        output = tokenizer.decode(tokens, skip_special_tokens=False)
        gid = f"gen{index:02d}"
        generations.append({"generation_id": gid, "generation_config": SAMPLE_CONFIG["generation_config"],
                            "lang": lang, "wiki_url": url, "prompt": prompt, "output": output,
                            "output_tokens": tokens, "logits_token_ids": ids, "logits_values": values})
        segments.append({"generation_id": gid, "token_chunks": segment(output, tokenizer, tokens),
                         "stopword_mask": [False] * len(tokens), "segmenter": "0.3.0"})
        questions[(lang, prompt, url)] = {"question_id": f"q{len(questions)}", "lang": lang, "prompt": prompt,
                                          "wiki_url": url}
    for name, rows in (("configs", [SAMPLE_CONFIG]), ("questions", list(questions.values())),
                       ("generations", generations), ("segments", segments)):
        (out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return generations
