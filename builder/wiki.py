"""wiki: fetch the Wikipedia page (text sections + infobox) of each generated row through the MediaWiki API
(docs/reference-behaviour.md#wikipedia).

The pages are those of ``generations.jsonl`` (questions that were not generated are not fetched);
``--all-questions`` fetches the page of every question of ``questions.jsonl`` instead (a prefetch).

One row per ``wiki_url`` in ``wiki.jsonl``: ``wiki_url, lang, title, resolved_title, status, sections`` (``heading``,
``level``, ``text``; the lead section has heading ``null``), ``markdown`` (``# Title`` then ``##``/``###`` headings --
unlike the reference, the LAST section is kept) and ``infobox`` (a JSON object of the page's ``{{Infobox ...}}`` /
``{{Ficha ...}}`` parameters, ``{}`` when the page has none).

``status``: ``ok``; ``redirected`` (followed; ``resolved_title`` is the target); ``missing`` (no such page) and
``disambiguation`` (a list of links, no usable text) -- both recorded with empty text so ``context`` can skip them.
Network errors, invalid bodies and MediaWiki ``{"error": ...}`` answers (after ``--max-attempts`` tries with
backoff when transient, ``Retry-After`` honoured; ``--timeout`` seconds per request) go to ``wiki.failures.jsonl``
and are retried by a rerun: an error is never cached, and a page whose ``parse`` failed is not stored.
Requests carry a descriptive ``User-Agent`` (Wikimedia's policy), are spaced by at least
``--min-interval`` seconds, and every API answer is cached in an sqlite file keyed by the request URL
(``<out>/wiki_cache.sqlite`` by default), so reruns and other shards never fetch a page twice.
"""

from __future__ import annotations

import argparse
import json
import numbers
import re
import sqlite3
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from builder.store import JsonlStore, Shard, read_store
from much_dataset.params import POSITIVE_INT, Interval, check_param

__all__ = ["parse_wiki_url", "split_sections", "to_markdown", "parse_infobox", "HttpCache", "MediaWikiClient",
           "WikiError", "fetch_page", "add_arguments", "run"]

DEFAULT_API = "https://{lang}.wikipedia.org/w/api.php"
DEFAULT_USER_AGENT = "MUCH-builder/0.1 (MUCH benchmark dataset builder; https://github.com/orailix) python-urllib"
_HEADING = re.compile(r"^(={2,6})\s*(.*?)\s*\1\s*$", re.MULTILINE)
_INFOBOX_START = re.compile(r"\{\{\s*(?:infobox|ficha)\b", re.IGNORECASE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


#: MediaWiki error codes (HTTP 200 answers) worth retrying; ``internal_api_error_*`` too.
_TRANSIENT_ERRORS = frozenset({"maxlag", "ratelimited", "readonly", "backend-fail-internal"})


class WikiError(RuntimeError):
    """A MediaWiki request that failed for good (after retries, or with a non-retryable error)."""


def parse_wiki_url(url: str) -> tuple[str, str]:
    """``(lang, title)`` of a Wikipedia URL: the host's first label, the percent-decoded path after ``/wiki/``.

    Spaces become underscores (the reference's rule); ``/`` inside titles is kept.
    """
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if not host.endswith("wikipedia.org") or "/wiki/" not in parts.path:
        raise ValueError(f"not a Wikipedia article URL: {url!r}")
    title = urllib.parse.unquote(parts.path.split("/wiki/", 1)[1]).replace(" ", "_")
    if not title:
        raise ValueError(f"Wikipedia URL without a title: {url!r}")
    return host.split(".")[0], title


def split_sections(extract: str) -> list[dict[str, Any]]:
    """Sections of a plain-text extract with ``== h ==`` headings: ``[{heading, level, text}]``, lead first."""
    sections: list[dict[str, Any]] = []
    position, heading, level = 0, None, 1
    for match in _HEADING.finditer(extract):
        sections.append({"heading": heading, "level": level, "text": extract[position:match.start()].strip()})
        heading, level, position = match.group(2), len(match.group(1)), match.end()
    sections.append({"heading": heading, "level": level, "text": extract[position:].strip()})
    return [s for s in sections if s["heading"] is not None or s["text"]]


def to_markdown(title: str, sections: list[dict[str, Any]]) -> str:
    """``# title`` then each section as ``## heading`` (``###`` ...) and its text; every section kept."""
    blocks = [f"# {title.replace('_', ' ')}"]
    for section in sections:
        if section["heading"] is not None:
            blocks.append(f"{'#' * section['level']} {section['heading']}")
        if section["text"]:
            blocks.append(section["text"])
    return "\n\n".join(blocks) + "\n"


def _template_end(text: str, start: int) -> int:
    depth, i = 0, start
    while i < len(text) - 1:
        pair = text[i:i + 2]
        if pair == "{{":
            depth, i = depth + 1, i + 2
            continue
        if pair == "}}":
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
            continue
        i += 1
    return -1


def _split_top_level(body: str) -> list[str]:
    parts, depth, current, i = [], 0, [], 0
    while i < len(body):
        pair = body[i:i + 2]
        if pair in ("{{", "[["):
            depth += 1
            current.append(pair)
            i += 2
        elif pair in ("}}", "]]"):
            depth -= 1
            current.append(pair)
            i += 2
        elif body[i] == "|" and depth == 0:
            parts.append("".join(current))
            current, i = [], i + 1
        else:
            current.append(body[i])
            i += 1
    parts.append("".join(current))
    return parts


def parse_infobox(wikitext: str) -> dict[str, str]:
    """Named parameters of the first infobox template in ``wikitext`` (raw wikitext values, comments removed).

    Nested templates and links are kept inside values (``|`` inside them does not split). ``{}`` when none.
    """
    match = _INFOBOX_START.search(wikitext)
    if match is None:
        return {}
    end = _template_end(wikitext, match.start())
    if end < 0:
        return {}
    parts = _split_top_level(_COMMENT.sub("", wikitext[match.start() + 2:end - 2]))
    infobox: dict[str, str] = {}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if sep and key.strip():
            infobox[key.strip()] = value.strip()
    return infobox


class HttpCache:
    """An sqlite table ``url -> response text``; safe to share between threads and processes (shards)."""

    def __init__(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=60, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock, self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (url TEXT PRIMARY KEY, body TEXT NOT NULL)")

    def get(self, url: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM responses WHERE url = ?", (url,)).fetchone()
        return row[0] if row else None

    def put(self, url: str, body: str) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO responses (url, body) VALUES (?, ?)", (url, body))

    def close(self) -> None:
        self._db.close()


class MediaWikiClient:
    """GET requests to ``api_template.format(lang=...)`` with a user agent, spacing, retries and a cache."""

    def __init__(self, *, api_template: str = DEFAULT_API, user_agent: str = DEFAULT_USER_AGENT,
                 min_interval: float = 1.0, max_attempts: int = 4, backoff: float = 2.0, timeout: float = 30.0,
                 cache: HttpCache | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        # each option named alone (not "max_attempts must be >= 1 and min_interval >= 0" for one wrong value)
        check_param("max_attempts", max_attempts, POSITIVE_INT, hint="--max-attempts")
        check_param("min_interval", min_interval, Interval(numbers.Real, 0, None), hint="--min-interval, seconds")
        self.api_template, self.user_agent, self.min_interval = api_template, user_agent, min_interval
        self.max_attempts, self.backoff, self.timeout, self.cache, self._sleep = (
            max_attempts, backoff, timeout, cache, sleep)
        self._last = 0.0
        self.requests_sent = 0

    def url(self, lang: str, params: dict[str, str]) -> str:
        query = urllib.parse.urlencode(sorted({**params, "format": "json", "formatversion": "2"}.items()))
        return f"{self.api_template.format(lang=lang)}?{query}"

    def _wait_turn(self) -> None:
        delay = self._last + self.min_interval - time.monotonic()
        if delay > 0:
            self._sleep(delay)
        self._last = time.monotonic()

    def get(self, lang: str, params: dict[str, str]) -> dict[str, Any]:
        """The JSON answer to one request. Only good answers are cached: an HTTP error, an invalid body or a
        MediaWiki ``{"error": ...}`` (HTTP 200) is retried when transient and else raises :class:`WikiError`, and is
        asked again by the next run (an error cached by an older builder is ignored likewise)."""
        url = self.url(lang, params)
        if self.cache is not None and (cached := self.cache.get(url)) is not None:
            try:
                answer = json.loads(cached)
            except json.JSONDecodeError:
                answer = None
            if isinstance(answer, dict) and "error" not in answer:
                return answer
        reason = ""
        for attempt in range(1, self.max_attempts + 1):
            self._wait_turn()
            retry_after = None
            try:
                request = urllib.request.Request(url, headers={"User-Agent": self.user_agent,
                                                               "Accept": "application/json"})
                self.requests_sent += 1
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    body = response.read().decode("utf-8")
                answer = json.loads(body)
                if not isinstance(answer, dict):
                    raise ValueError(f"expected a JSON object, got {type(answer).__name__}")
                if "error" not in answer:
                    if self.cache is not None:
                        self.cache.put(url, body)
                    return answer
                error_info = answer["error"] if isinstance(answer["error"], dict) else {"info": answer["error"]}
                code = str(error_info.get("code", ""))
                reason = f"MediaWiki error {code or '?'}: {error_info.get('info', '')} for {url}"
                if not (code in _TRANSIENT_ERRORS or code.startswith("internal_api_error")):
                    raise WikiError(reason)
            except urllib.error.HTTPError as error:
                reason = f"HTTP {error.code} for {url}"
                if error.code != 429 and error.code < 500:
                    raise WikiError(reason) from error
                retry_after = error.headers.get("Retry-After")
            except (urllib.error.URLError, TimeoutError, OSError, ValueError) as error:  # incl. invalid JSON
                reason = f"{type(error).__name__}: {error} for {url}"
            if attempt < self.max_attempts:
                delay = self.backoff * 2 ** (attempt - 1)
                if retry_after is not None and retry_after.strip().isdigit():
                    delay = max(delay, min(float(retry_after), 300.0))
                self._sleep(delay)
        raise WikiError(f"gave up after {self.max_attempts} attempts: {reason}")


def fetch_page(client: MediaWikiClient, wiki_url: str) -> dict[str, Any]:
    """The ``wiki.jsonl`` row of one URL (see the module docstring). Raises :class:`WikiError` on network failure."""
    lang, title = parse_wiki_url(wiki_url)
    row: dict[str, Any] = {"wiki_url": wiki_url, "lang": lang, "title": title, "resolved_title": title,
                           "status": "ok", "sections": [], "markdown": "", "infobox": {}}
    answer = client.get(lang, {"action": "query", "prop": "extracts|pageprops", "explaintext": "1",
                               "exsectionformat": "wikitext", "redirects": "1", "titles": title})
    if "error" in answer:
        raise WikiError(f"{wiki_url}: API error {answer['error']}")
    query = answer.get("query", {})
    pages = query.get("pages") or []
    if not pages or pages[0].get("missing") or pages[0].get("invalid"):
        row["status"] = "missing"
        return row
    page = pages[0]
    row["resolved_title"] = page["title"].replace(" ", "_")
    if query.get("redirects"):
        row["status"] = "redirected"
    if "disambiguation" in (page.get("pageprops") or {}):
        row["status"] = "disambiguation"
        return row
    row["sections"] = split_sections(page.get("extract") or "")
    row["markdown"] = to_markdown(page["title"], row["sections"])
    # A failed parse raises (client.get): the page is retried next run, never stored with infobox={} for good.
    parsed = client.get(lang, {"action": "parse", "prop": "wikitext", "redirects": "1", "page": page["title"]})
    wikitext = parsed.get("parse", {}).get("wikitext") if isinstance(parsed.get("parse"), dict) else None
    if isinstance(wikitext, dict):  # formatversion=1 shape
        wikitext = wikitext.get("*")
    if not isinstance(wikitext, str):
        raise WikiError(f"{wiki_url}: the parse answer has no wikitext ({str(parsed)[:200]})")
    row["infobox"] = parse_infobox(wikitext)
    return row


def _wiki_urls(out: Path, *, all_questions: bool = False) -> list[str]:
    """The pages to fetch: those of the generated rows (``generations.jsonl``; ``context`` and ``annotate`` need no
    other), or of every question with ``all_questions`` (a prefetch)."""
    from builder.errors import BuilderError

    names = ("questions.jsonl", "generations.jsonl") if all_questions else ("generations.jsonl",)
    if not all_questions and not (out / "generations.jsonl").is_file():
        raise BuilderError(f"no {out / 'generations.jsonl'}: `wiki` fetches the pages of the generated rows; run "
                           "`python -m builder generate` first, or pass --all-questions to fetch every question's page")
    urls = {r["wiki_url"] for name in names for r in read_store(out / name)}
    # Mu-SHROOM imports carry wiki_url="None": there is no page to fetch.
    return sorted(url for url in urls if url and url != "None")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", default=DEFAULT_API, help="MediaWiki API URL template with {lang}")
    parser.add_argument("--user-agent", default=DEFAULT_USER_AGENT, help="descriptive User-Agent with a contact")
    parser.add_argument("--min-interval", type=float, default=1.0, help="seconds between requests (rate limit)")
    parser.add_argument("--max-attempts", type=int, default=4)
    parser.add_argument("--backoff", type=float, default=2.0, help="first retry delay in seconds (doubles)")
    parser.add_argument("--cache", default=None, help="sqlite cache file (default <out>/wiki_cache.sqlite)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per HTTP request before a retry")
    parser.add_argument("--all-questions", action="store_true",
                        help="fetch the page of every question in questions.jsonl (default: only the pages of the "
                             "generated rows, generations.jsonl)")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    out = Path(args.out)
    store = JsonlStore(out / "wiki.jsonl", key="wiki_url")
    cache = HttpCache(args.cache or out / "wiki_cache.sqlite")
    client = MediaWikiClient(api_template=args.api, user_agent=args.user_agent, min_interval=args.min_interval,
                             max_attempts=args.max_attempts, backoff=args.backoff, cache=cache,
                             timeout=args.timeout)
    urls = [url for url in Shard.parse(args.shard).select(_wiki_urls(out, all_questions=args.all_questions))
            if url not in store]
    statuses: dict[str, int] = {}
    failed = 0
    for url in tqdm(urls, desc="wiki"):
        try:
            row = fetch_page(client, url)
        except (WikiError, ValueError) as error:
            store.record_failure(url, str(error))
            failed += 1
            continue
        store.append(row)
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    cache.close()
    print(f"wiki: {len(urls)} pages, {statuses}, {failed} failed, {client.requests_sent} HTTP requests")
    return 0 if failed == 0 else 1
