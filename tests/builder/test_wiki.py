"""wiki: URL parsing, sections/markdown, infobox parsing, and the step against a fake MediaWiki server."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder import wiki
from builder.cli import main
from builder.store import read_store
from tests.builder.fake_servers import CANBERRA_EXTRACT, CANBERRA_WIKITEXT, FakeMediaWiki


@pytest.mark.parametrize("url, expected", [
    ("https://en.wikipedia.org/wiki/Canberra", ("en", "Canberra")),
    ("https://fr.wikipedia.org/wiki/Cath%C3%A9drale_Notre-Dame_de_Paris", ("fr", "Cathédrale_Notre-Dame_de_Paris")),
    ("https://de.wikipedia.org/wiki/AC/DC", ("de", "AC/DC")),
    ("https://es.wikipedia.org/wiki/Isla de Pascua", ("es", "Isla_de_Pascua")),
    ("https://en.m.wikipedia.org/wiki/Paris", ("en", "Paris")),
])
def test_parse_wiki_url(url, expected):
    assert wiki.parse_wiki_url(url) == expected


@pytest.mark.parametrize("url", ["None", "https://example.org/wiki/Paris", "https://en.wikipedia.org/w/index.php",
                                 "https://en.wikipedia.org/wiki/"])
def test_parse_wiki_url_rejects_non_article_urls(url):
    with pytest.raises(ValueError, match="Wikipedia"):
        wiki.parse_wiki_url(url)


def test_sections_and_markdown_keep_every_section_including_the_last():
    sections = wiki.split_sections(CANBERRA_EXTRACT)
    assert [(s["heading"], s["level"]) for s in sections] == [
        (None, 1), ("History", 2), ("Federal capital", 3), ("Geography", 2), ("Climate", 2)]
    assert sections[-1]["text"].endswith("which the reference pipeline dropped.")
    markdown = wiki.to_markdown("Canberra", sections)
    assert markdown.startswith("# Canberra\n\nCanberra is the capital city")
    assert "\n## History\n" in markdown and "\n### Federal capital\n" in markdown
    assert "reference pipeline dropped." in markdown  # the reference lost the last section's body


@settings(deadline=None, max_examples=50)
@given(st.lists(st.tuples(st.sampled_from(["==", "==="]), st.from_regex(r"[A-Za-z][A-Za-z ]{0,10}[A-Za-z]",
                                                                       fullmatch=True),
                          st.from_regex(r"[a-z]{1,8}( [a-z]{1,8}){0,5}\.", fullmatch=True)), max_size=6),
       st.from_regex(r"[A-Z][a-z]{1,8}( [a-z]{1,8}){0,5}\.", fullmatch=True))
def test_split_sections_loses_no_text(body, lead):
    extract = lead + "".join(f"\n\n{marks} {heading} {marks}\n{text}" for marks, heading, text in body)
    sections = wiki.split_sections(extract)
    assert [s["heading"] for s in sections[1:]] == [heading for _, heading, _ in body]
    assert [s["text"] for s in sections] == [lead] + [text for _, _, text in body]


def test_parse_infobox_handles_nested_templates_links_and_comments():
    infobox = wiki.parse_infobox(CANBERRA_WIKITEXT)
    assert infobox["name"] == "Canberra"
    assert infobox["pop"] == "453,558"  # comment removed
    assert infobox["coordinates"] == "{{coord|35|17|35|S|149|07|37|E|display=inline}}"  # | inside {{}} kept
    assert infobox["mayor"] == "[[Andrew Barr|Barr]]"  # | inside [[]] kept
    assert "Short description" not in json.dumps(infobox)
    assert wiki.parse_infobox("no template here {{cite web|url=x}}") == {}
    assert wiki.parse_infobox("{{Ficha de país\n| nombre = España\n}}") == {"nombre": "España"}
    assert wiki.parse_infobox("{{Infobox broken | a = 1") == {}  # unterminated


def _urls(out, urls):
    """Questions with these pages, each generated once (wiki fetches the pages of generations.jsonl)."""
    rows = [{"question_id": f"q{i}", "lang": "en", "prompt": "?", "wiki_url": url} for i, url in enumerate(urls)]
    (out / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    generated = [{"generation_id": f"g{i}", "question_id": r["question_id"], "wiki_url": r["wiki_url"]}
                 for i, r in enumerate(rows)]
    (out / "generations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in generated))


def test_only_the_pages_of_generated_questions_are_fetched(tmp_path):
    """Two questions, one generated: wiki fetches only that one's page; --all-questions fetches both; without
    generations.jsonl it says what to run."""
    _urls(tmp_path, URLS[:1])
    extra = {"question_id": "q-not-generated", "lang": "fr", "prompt": "?", "wiki_url": URLS[7]}
    with (tmp_path / "questions.jsonl").open("a") as handle:
        handle.write(json.dumps(extra) + "\n")
    with FakeMediaWiki() as server:
        argv = ["wiki", "--out", str(tmp_path), "--api", server.api_template, "--min-interval", "0"]
        assert main(argv) == 0
        assert [r["wiki_url"] for r in read_store(tmp_path / "wiki.jsonl")] == [URLS[0]]
        assert not [r for r in server.requests if "/fr/" in r["path"]]
        assert main([*argv, "--all-questions"]) == 0
        assert sorted(r["wiki_url"] for r in read_store(tmp_path / "wiki.jsonl")) == sorted([URLS[0], URLS[7]])
    (tmp_path / "generations.jsonl").unlink()
    assert main(["wiki", "--out", str(tmp_path), "--api", "http://127.0.0.1:9/{lang}", "--min-interval", "0"]) == 2


URLS = ["https://en.wikipedia.org/wiki/Canberra", "https://en.wikipedia.org/wiki/Curie",
        "https://en.wikipedia.org/wiki/Mercury", "https://en.wikipedia.org/wiki/Atlantis_(nonexistent)",
        "https://en.wikipedia.org/wiki/Flaky_page", "https://en.wikipedia.org/wiki/Throttled_page",
        "https://en.wikipedia.org/wiki/Broken_page", "https://fr.wikipedia.org/wiki/Paris", "None"]


def test_wiki_step_handles_every_failure_mode_and_caches(tmp_path):
    _urls(tmp_path, URLS)
    with FakeMediaWiki() as server:
        argv = ["wiki", "--out", str(tmp_path), "--api", server.api_template, "--min-interval", "0",
                "--backoff", "0", "--max-attempts", "3", "--user-agent", "MUCH-test/1.0 (test@example.org)"]
        assert main(argv) == 1  # Broken page failed
        first = len(server.requests)
        rows = {r["wiki_url"]: r for r in read_store(tmp_path / "wiki.jsonl")}
        status = {url.rsplit("/", 1)[1]: row["status"] for url, row in rows.items()}
        assert status == {"Canberra": "ok", "Curie": "redirected", "Mercury": "disambiguation",
                          "Atlantis_(nonexistent)": "missing", "Flaky_page": "ok", "Throttled_page": "ok",
                          "Paris": "ok"}
        curie = rows["https://en.wikipedia.org/wiki/Curie"]
        assert curie["resolved_title"] == "Marie_Curie" and curie["infobox"]["birth_place"].startswith("[[Warsaw]]")
        assert "Nobel Prize in Chemistry in 1911" in curie["markdown"]
        canberra = rows["https://en.wikipedia.org/wiki/Canberra"]
        assert canberra["infobox"]["established"] == "12 March 1913"
        assert "## Climate" in canberra["markdown"]
        assert rows["https://fr.wikipedia.org/wiki/Paris"]["infobox"]["région"] == "[[Île-de-France]]"
        assert rows["https://en.wikipedia.org/wiki/Mercury"]["markdown"] == ""
        failures = list(read_store(tmp_path / "wiki.failures.jsonl"))
        assert [f["wiki_url"] for f in failures] == ["https://en.wikipedia.org/wiki/Broken_page"]
        assert "HTTP 500" in failures[0]["reason"] and "3 attempts" in failures[0]["reason"]
        assert all(r["headers"].get("User-Agent") == "MUCH-test/1.0 (test@example.org)" for r in server.requests)
        assert all(r["path"] in ("/en/w/api.php", "/fr/w/api.php") for r in server.requests)

        # rerun: only the broken page is asked again (3 attempts), no row is duplicated
        assert main(argv) == 1
        assert len(server.requests) == first + 3
        assert len(list(read_store(tmp_path / "wiki.jsonl"))) == len(rows)

        # a fresh output folder sharing the cache answers from disk without any request
        other = tmp_path / "other"
        other.mkdir()
        _urls(other, URLS[:2])
        assert main([*argv[:2], str(other), *argv[3:], "--cache", str(tmp_path / "wiki_cache.sqlite")]) == 0
        assert len(server.requests) == first + 3
        assert len(list(read_store(other / "wiki.jsonl"))) == 2


def test_client_spaces_requests_and_honours_retry_after(tmp_path):
    waits = []
    with FakeMediaWiki() as server:
        client = wiki.MediaWikiClient(api_template=server.api_template, min_interval=5.0, backoff=0.5,
                                      sleep=waits.append)
        client.get("en", {"action": "query", "titles": "Throttled page"})
        client.get("en", {"action": "query", "titles": "Canberra"})
    assert client.requests_sent == 3
    # backoff after the 429, then the min-interval spacing before each following request
    assert len(waits) == 3 and waits[0] == pytest.approx(0.5) and all(0 < w <= 5.0 for w in waits[1:])


def test_shards_split_the_urls(tmp_path):
    _urls(tmp_path, URLS[:2] + URLS[7:8])
    with FakeMediaWiki() as server:
        for shard in ("0/2", "1/2"):
            assert main(["wiki", "--out", str(tmp_path), "--shard", shard, "--api", server.api_template,
                         "--min-interval", "0"]) == 0
    assert len(list(read_store(tmp_path / "wiki.jsonl"))) == 3


class _ErroringMediaWiki(FakeMediaWiki):
    """Answers HTTP 200 with a MediaWiki error for ``action`` while ``failing`` holds it (then behaves)."""

    def __init__(self, failing: set[str], code: str = "badvalue") -> None:
        super().__init__()
        self.failing, self.code = failing, code

    def handle(self, method, path, query, body):
        if query.get("action") in self.failing:
            return 200, {}, {"error": {"code": self.code, "info": "something went wrong"}}
        return super().handle(method, path, query, body)


@pytest.mark.parametrize("action", ["query", "parse"])
def test_mediawiki_errors_are_recorded_not_cached_and_retried(tmp_path, action):
    _urls(tmp_path, URLS[:1])
    with _ErroringMediaWiki({action}) as server:
        argv = ["wiki", "--out", str(tmp_path), "--api", server.api_template, "--min-interval", "0",
                "--backoff", "0", "--max-attempts", "2", "--timeout", "5"]
        assert main(argv) == 1
        assert not list(read_store(tmp_path / "wiki.jsonl"))  # never stored as OK with infobox={}
        failures = list(read_store(tmp_path / "wiki.failures.jsonl"))
        assert [f["wiki_url"] for f in failures] == [URLS[0]] and "badvalue" in failures[0]["reason"]
        server.failing.clear()  # the server is healthy again: the rerun asks again and succeeds
        before = len(server.requests)
        assert main(argv) == 0
        assert len(server.requests) > before
        (row,) = read_store(tmp_path / "wiki.jsonl")
        assert row["infobox"]["established"] == "12 March 1913"


def test_transient_mediawiki_errors_are_retried_within_the_run(tmp_path):
    with _ErroringMediaWiki({"query"}, code="maxlag") as server:
        client = wiki.MediaWikiClient(api_template=server.api_template, min_interval=0, backoff=0, max_attempts=3)
        with pytest.raises(wiki.WikiError, match="maxlag"):
            client.get("en", {"action": "query", "titles": "Canberra"})
    assert client.requests_sent == 3


def test_an_error_cached_by_an_older_builder_is_asked_again(tmp_path):
    cache = wiki.HttpCache(tmp_path / "cache.sqlite")
    with FakeMediaWiki() as server:
        client = wiki.MediaWikiClient(api_template=server.api_template, min_interval=0, cache=cache)
        params = {"action": "query", "titles": "Canberra", "prop": "extracts"}
        cache.put(client.url("en", params), json.dumps({"error": {"code": "badvalue"}}))
        assert "query" in client.get("en", params) and client.requests_sent == 1
        assert "query" in client.get("en", params) and client.requests_sent == 1  # the good answer is cached


class _GarbageMediaWiki(FakeMediaWiki):
    def handle(self, method, path, query, body):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 1:
            return 200, {}, b'{"batchcomplete": true, "query": {"pag'  # truncated body
        if self.calls == 2:
            return 200, {}, [1, 2, 3]  # JSON, but not an object
        return super().handle(method, path, query, body)


def test_truncated_and_non_object_bodies_are_retried(tmp_path):
    with _GarbageMediaWiki() as server:
        client = wiki.MediaWikiClient(api_template=server.api_template, min_interval=0, backoff=0, max_attempts=3)
        assert "query" in client.get("en", {"action": "query", "titles": "Canberra"})
    assert client.requests_sent == 3


@pytest.mark.parametrize(("flag", "value", "named"), [
    ("--max-attempts", "0", "max_attempts must be a positive integer, got 0"),
    ("--min-interval", "-1", "min_interval must be a number in [0, inf), got -1.0"),
])
def test_each_bad_wiki_option_is_named_alone(tmp_path, capsys, flag, value, named):
    """Not 'max_attempts must be >= 1 and min_interval >= 0': the one wrong option, its value, exit 2."""
    other = "min_interval" if flag == "--max-attempts" else "max_attempts"
    assert main(["wiki", "--out", str(tmp_path), flag, value]) == 2
    err = capsys.readouterr().err
    assert named in err and flag in err and other not in err, err
