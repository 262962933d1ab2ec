"""The Gradio application (extra ``leaderboard``): browse, filter, sort, open a submission, submit.

:func:`build_app` builds the ``gr.Blocks`` over a :class:`much_leaderboard.Leaderboard`; :func:`create_server`
mounts it in a FastAPI application next to ``POST /api/submit`` (multipart: ``archive`` file, ``method``,
``authors``, ``link``, repeated ``needs``; JSON answer ``{status, message, submission, signals}``) for scripts and
load tests. The table is plain HTML rendered by the table module (not a dataframe component):
its cells hold values with their intervals on two lines, method names are escaped links to their page, and the
filters select precomputed subsets on the server.

With a private split (:meth:`much_leaderboard.Leaderboard.attach_private`) the main table gains two columns (private
ROC-AUC, rank shift), a "Private split" tab shows the two boards side by side and a submission page its private
lines; with two label sources or more, a "Label sources" tab compares the rankings. ``GET /api/boards`` answers
the public ranking, the private board and the label sources as JSON (:mod:`much_leaderboard._private_pages`).
"""

from __future__ import annotations

import html
import os
from typing import Any

from much_leaderboard._private_pages import (
    boards_json,
    private_columns,
    render_label_sources,
    render_private_board,
    render_private_section,
)
from much_leaderboard._service import NEEDS, RANK_METRIC, Leaderboard
from much_leaderboard._table import (
    INTERNALS_FILTERS,
    metric_choices,
    published_html,
    render_submission,
    render_table,
    subsets,
    table_rows,
)

__all__ = ["build_app", "create_server", "CSS"]

CSS = """
<style>
#much-board-wrap, #much-private-wrap {overflow-x: auto; max-width: 100%}
.much-table {border-collapse: collapse; font-size: 12px !important; width: 100%; line-height: 1.3 !important}
.much-table th, .much-table td {border: 1px solid #ccc; padding: 2px 4px !important; vertical-align: top;
  text-align: right}
.much-table th {white-space: normal; overflow-wrap: break-word; font-size: 11px !important; font-weight: 600}
.much-table td {white-space: nowrap}
.much-table td:has(> .cost) {white-space: normal; min-width: 7em; max-width: 13em}
.much-table .cost {overflow-wrap: anywhere}
.much-table td:nth-child(2), .much-table td:nth-child(3) {text-align: left; white-space: normal; min-width: 9em}
.much-table td:nth-child(2) {max-width: 22em; overflow-wrap: anywhere}
.much-table td:nth-child(3) {max-width: 9em}
.much-table .ci {color: #777; font-size: 10px}
.much-table .signal, .much-table .kind {color: #777; font-size: 10px}
.much-table .flags {color: #a15c00; font-size: 10px}
img.figure {max-width: 100%}
</style>
"""

_KINDS = {"built-in baselines": "baseline", "submissions": "submission"}


def _board_html(board: Leaderboard, subset: str, sort_label: str, kinds: list[str], needs: list[str],
                internals: str = "any") -> str:
    sort = dict(metric_choices()).get(sort_label, "roc_auc")
    stored = board.store.rows()
    rows = table_rows(stored, board.ranking(), subset=subset or "all", sort=sort,
                      kinds=tuple(_KINDS[k] for k in kinds or _KINDS), needs=tuple(needs or ()),
                      internals=INTERNALS_FILTERS.get(internals or "any"))
    extra = private_columns(board.private.table(stored)) if board.private is not None else ()
    return (CSS + '<div id="much-board-wrap">'
            + render_table(rows, langs=board.data.langs, sort=sort, rank_metric=RANK_METRIC, extra_columns=extra)
            + "</div>")


def _private_html(board: Leaderboard) -> str:
    if board.private is None:
        return ""
    return CSS + '<div id="much-private-wrap">' + render_private_board(board.private.table(board.store.rows())) \
        + "</div>"


def _sources_table(board: Leaderboard) -> dict[str, Any]:
    return board.label_sources.table(board.store.rows(), board.store.scores, board.store.version())


def _detail_html(board: Leaderboard, submission: str) -> str:
    page = CSS + render_submission(board.store, submission)
    if board.private is not None:  # nothing for an unknown or pending entry (it has no stored row)
        page += render_private_section(board.private.table(board.store.rows()), submission)
    return page


def _submit(board: Leaderboard, path: str | None, method: str, authors: str, link: str, needs: list[str]) -> str:
    if not path:
        return '<p id="submit-message" class="rejected">rejected: choose a .zip archive first</p>'
    size = os.path.getsize(path)
    if size > board.limits.max_archive_bytes:
        outcome_text = f"rejected: the archive is {size:,} bytes, more than the limit of " \
                       f"{board.limits.max_archive_bytes:,}"
        return f'<p id="submit-message" class="rejected">{html.escape(outcome_text)}</p>'
    with open(path, "rb") as handle:
        data = handle.read()
    outcome = board.submit(data, {"method": method, "authors": authors, "link": link, "needs": list(needs or [])})
    link_html = ""
    if outcome.submission and outcome.status != "rejected":
        link_html = f' <a href="?submission={outcome.submission}">open its page</a>'
    return (f'<p id="submit-message" class="{outcome.status}" data-status="{outcome.status}">'
            f"{html.escape(outcome.message)}{link_html}</p>")


def build_app(board: Leaderboard, *, title: str = "MUCH claim-level hallucination detection leaderboard") -> Any:
    """The Gradio Blocks of the leaderboard (gradio imported here)."""
    import gradio as gr

    choices = subsets(board.data.langs, board.data.models, board.data.selections)
    labels = [label for label, _ in metric_choices()]
    with gr.Blocks(title=title, analytics_enabled=False, fill_width=True) as demo:
        gr.Markdown(f"# {title}\nEvery row is re-scored on this server from the submitted signals with the MUCH "
                    f"toolkit (`much evaluate`), on **{html.escape(board.data.source)}**"
                    f"{f' ({html.escape(board.data.split)} split)' if board.data.split else ''}: product aggregator, "
                    + (f"95 % bootstrap intervals over samples ({board.data.n_resamples} resamples), P(rank) by "
                       "ROC-AUC on the claims every row covers." if board.data.n_resamples else
                       "no bootstrap (started with --bootstrap 0): no intervals, rows ranked by their ROC-AUC on the "
                       "claims every row covers.")
                    + " Submitted numbers are never used.")
        with gr.Tabs(selected="board") as tabs:
            with gr.Tab("Leaderboard", id="board"):
                with gr.Row():
                    subset = gr.Dropdown(choices, value="all", label="subset (language / generating model / selection)",
                                         elem_id="subset-filter")
                    sort = gr.Dropdown(labels, value=labels[0], label="sort by", elem_id="sort-by")
                    kinds = gr.CheckboxGroup(list(_KINDS), value=list(_KINDS), label="rows", elem_id="kinds")
                    needs = gr.CheckboxGroup(list(NEEDS), value=[], label="method needs (any of)",
                                             elem_id="needs-filter")
                    internals = gr.Dropdown(list(INTERNALS_FILTERS), value="any",
                                            label="model internals (hidden states / attention)",
                                            elem_id="internals-filter")
                table = gr.HTML(elem_id="board-table")
                refresh = gr.Button("refresh", size="sm", elem_id="refresh")
                with gr.Accordion("Published rows (paper, not re-scored)", open=False):
                    gr.HTML(CSS + published_html())
            with gr.Tab("Pairwise comparison & cost", id="pairwise"):
                pairwise = gr.HTML(elem_id="board-pairwise")
                pairwise_refresh = gr.Button("refresh", size="sm", elem_id="pairwise-refresh")
            private = None
            if board.private is not None:
                with gr.Tab("Private split", id="private"):
                    private = gr.HTML(elem_id="private-board")
            sources = None
            if len(board.label_sources.sources) > 1:
                with gr.Tab("Label sources", id="sources"):
                    sources = gr.HTML(elem_id="label-sources")
            with gr.Tab("Submission page", id="detail"):
                submission_id = gr.Textbox(label="submission (archive SHA-256)", elem_id="submission-id")
                detail = gr.HTML(elem_id="submission-detail")
            with gr.Tab("Submit", id="submit"):
                gr.Markdown("Upload a MUCH-signals folder as a .zip: `<signal_name>.parquet` or `.jsonl` "
                            "(`generation_id`, `signal_name`, `values`: one value per output token in [0, 1], or one "
                            "per claim for names ending with `@claim`), `timings.json`, `hardware.json`, and "
                            '`submission.json` (`{"internals": ["attention", "hidden_states"]}` for a method that '
                            "reads the model's internals; internals packs themselves are never uploaded). Limits: "
                            f"{board.limits.max_archive_bytes // 2**20} MiB, {board.limits.max_entries} files.")
                archive = gr.File(label="submission archive (.zip)", file_types=[".zip"], type="filepath",
                                  elem_id="archive")
                method = gr.Textbox(label="method name", max_lines=1, elem_id="method-name")
                authors = gr.Textbox(label="authors", max_lines=1, elem_id="authors")
                link = gr.Textbox(label="link (paper or code)", max_lines=1, elem_id="link")
                needs_in = gr.CheckboxGroup(list(NEEDS), label="what the method needs", elem_id="needs")
                send = gr.Button("Submit", variant="primary", elem_id="submit-button")
                result = gr.HTML(elem_id="submit-result")

        def show(subset_value, sort_value, kinds_value, needs_value, internals_value):
            return _board_html(board, subset_value, sort_value, kinds_value, needs_value, internals_value)

        def open_detail(value):
            return _detail_html(board, (value or "").strip())

        def pairwise_view():
            return board.pairwise_html()

        def others():
            return [board.pairwise_html(), *([_private_html(board)] if private is not None else []),
                    *([CSS + render_label_sources(_sources_table(board))] if sources is not None else [])]

        def on_load(request):
            wanted = (request.query_params.get("submission") or "").strip() if request else ""
            page = _board_html(board, "all", labels[0], list(_KINDS), [])
            if wanted:
                return page, gr.Tabs(selected="detail"), wanted, open_detail(wanted), *others()
            return page, gr.Tabs(selected="board"), "", "", *others()

        on_load.__annotations__ = {"request": gr.Request}  # gradio passes the request by this annotation
        controls = [subset, sort, kinds, needs, internals]
        for control in controls:
            control.change(show, controls, table)
        extra_views = [view for view in (pairwise, private, sources) if view is not None]
        refresh.click(show, controls, table)
        refresh.click(others, None, extra_views)
        pairwise_refresh.click(pairwise_view, None, pairwise)
        submission_id.submit(open_detail, submission_id, detail)
        sent = send.click(lambda *a: _submit(board, *a), [archive, method, authors, link, needs_in], result).then(
            show, controls, table)
        sent.then(others, None, extra_views)
        demo.load(on_load, None, [table, tabs, submission_id, detail, *extra_views])
    return demo


def create_server(board: Leaderboard, *, title: str | None = None) -> Any:
    """A FastAPI application: the Gradio app at ``/`` and ``POST /api/submit``."""
    import gradio as gr
    from fastapi import FastAPI, File, Form, Request, UploadFile
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import JSONResponse

    api = FastAPI()

    async def submit(request, archive=File(...), method=Form(""), authors=Form(""), link=Form(""),  # noqa: B008
                     needs=Form([])):  # noqa: B008
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > board.limits.max_archive_bytes + 2**16:
            return {"status": "rejected", "submission": None, "signals": [],
                    "message": f"rejected: the request is {int(declared):,} bytes, more than the archive limit of "
                               f"{board.limits.max_archive_bytes:,}"}
        data = await archive.read(board.limits.max_archive_bytes + 1)
        outcome = await run_in_threadpool(board.submit, data, {"method": method, "authors": authors, "link": link,
                                                                "needs": needs})
        answer = {"status": outcome.status, "message": outcome.message, "submission": outcome.submission,
                  "signals": outcome.signals}
        # a server error (a bug while scoring, logged) is HTTP 500; accepted / duplicate / rejected are answers
        return JSONResponse(answer, status_code=500 if outcome.status == "error" else 200)

    # real annotations (this module's are strings): FastAPI reads the parameter kinds from them
    submit.__annotations__ = {"request": Request, "archive": UploadFile, "method": str, "authors": str, "link": str,
                              "needs": list[str]}
    api.post("/api/submit")(submit)

    async def boards():
        def answer():
            stored = board.store.rows()
            private = board.private.table(stored) if board.private is not None else None
            sources = _sources_table(board) if len(board.label_sources.sources) > 1 else None
            return boards_json(stored, private, sources, board.pairwise(stored), board.ranking())

        return JSONResponse(await run_in_threadpool(answer))

    api.get("/api/boards")(boards)

    demo = build_app(board, **({"title": title} if title else {}))
    return gr.mount_gradio_app(api, demo, path="/", max_file_size=board.limits.max_archive_bytes)


def start(folder: str | os.PathLike, *, data: str = "sample", split: str | None = None, n_resamples: int = 1000,
          baselines: bool = True, mirror: Any = None, daily_limit: int = 5, private: Any = None) -> Leaderboard:
    """Open the store, pull the hub mirror (if any), re-score pending submissions, add the built-in baselines.
    ``split``: only that split of ``data`` (None: all); ``mirror``: a :class:`much_leaderboard.HubMirror` (the
    entries persisted in a hub dataset repository); ``daily_limit``: submissions per submitter in any 24 hours;
    ``private``: a :class:`much_leaderboard.PrivateSplit`, there before anything is re-scored (an entry with private
    values is only valid with it)."""
    from much_leaderboard._scoring import EvaluationData

    board = Leaderboard(folder, data=EvaluationData(data, n_resamples=n_resamples, split=split), mirror=mirror,
                        background=True, daily_limit=daily_limit, private=private)
    if mirror is not None:
        mirror.pull(board.store)
    board.recover()
    if baselines:
        board.add_baselines()
    board.sync()
    return board


def serve(board: Leaderboard, *, host: str = "127.0.0.1", port: int = 7860) -> None:
    """Run the server (blocking) with uvicorn."""
    import uvicorn

    uvicorn.run(create_server(board), host=host, port=port, log_level="warning")
