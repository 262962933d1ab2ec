"""The cases of ``tests/audit/audit_bad_inputs.py`` (helpers in ``cases.py``); ``reported`` = issue #31 on main."""

from __future__ import annotations

from tests.audit.cases import (
    SMOLLM2_VOCAB,
    Case,
    _edit_config,
    _edit_weights,
    _infinite_bias,
    _weights_to_dev_zero,
    _wrong_gru_shape,
    always,
    both,
    builder_out,
    detector,
    failures_file,
    failures_recorded,
    hub_layout,
    neighbours_garbage,
    questions,
    replay_rows,
    run_folder,
    segment_input,
    signals_file,
    stored_row_problem,
    truncated_checkpoint,
    warned,
)
from tests.audit.packs import (
    damaged_smollm_pack,
    edit_manifest,
    edit_shard_in_place,
    embedded_samples_pack,
    foreign_rows,
    foreign_training_rows,
    nan_probability,
    nothing_at,
    pack_complete,
    random_pack,
    source_rows,
    spoiled_pack,
)

EVAL = ("much", "evaluate", "--source", "sample", "--bootstrap", "0")
RUN = ("much", "run", "--source", "sample", "--no-nli", "--signals", "max_likelihood", "--bootstrap", "0",
       "--no-progress")
SEGMENT = ("much", "segment", "--tokenizer", "smollm2", "--compat", "0.2.1")
REPLAY_OPTS = ("--model", "{gguf}", "--prompt-style", "user", "--out-of-top", "swap")
LEARNED = ("much", "run", "--source", "sample", "--config", "en", "--no-nli", "--signals", "learned:det",
           "--bootstrap", "0", "--no-progress")
TRAIN = ("much", "train", "--source", "sample", "--detector", "linear", "--fold", "en", "--max-epochs", "1",
         "--no-progress")
MAX_NEW = 6
GENERATE = ("builder", "generate", "--out", "g", "--model", "fake-model", "--engine", "openai", "--base-url", "{url}",
            "--tokenizer", "smollm2", "--backoff", "0", "--max-attempts", "1", "--workers", "1",
            "--max-new-tokens", str(MAX_NEW), "--timeout", "10")
MONITOR = ("much", "monitor", "--base-url", "{url}", "--model", "m", "--tokenizer", "smollm2", "--prompt", "q",
           "--method", "max_likelihood", "--max-new-tokens", str(MAX_NEW), "--timeout", "5")
SERVER = ("127.0.0.1",)
SLOW = 300.0  # commands that load a model or torch: minutes on a loaded 2-core machine

CASES: list[Case] = []


def add(*cases: Case) -> None:
    CASES.extend(cases)


# ---------------------------------------------------------------- data loss: outputs over inputs / foreign files
def _export_existing(ctx) -> None:
    builder_out(ctx)
    ctx.write("pub/mine.txt", "a file the user owns\n")


add(
    Case("export-folder-existing", "builder export", ("builder", "export", "--out", "b", "--folder", "pub",
                                                     "--no-check"),
         _export_existing, names=("pub",), foreign=("pub/mine.txt",), keep=("pub/mine.txt",), reported="silent"),
    Case("export-folder-equals-out", "builder export", ("builder", "export", "--out", "b", "--folder", "b",
                                                       "--no-check"),
         builder_out, names=("b",), keep=("b/generations.jsonl", "b/segments.jsonl", "b/labels.gpt-4o.jsonl"),
         reported="silent"),
    Case("evaluate-json-equals-scores", "much evaluate", (*EVAL, "--scores", "s.parquet", "--json", "s.parquet"),
         signals_file(), names=("s.parquet",), keep=("s.parquet",), reported="silent"),
    Case("evaluate-report-equals-scores", "much evaluate", (*EVAL, "--scores", "s.parquet", "--report",
                                                           "s.parquet"),
         signals_file(), names=("s.parquet",), keep=("s.parquet",), reported="silent"),
    Case("segment-output-equals-input", "much segment", (*SEGMENT, "--input", "in.jsonl", "--output", "in.jsonl"),
         segment_input, names=("in.jsonl",), keep=("in.jsonl",), reported="silent"),
    Case("run-json-inside-out", "much run", (*RUN, "--out", "run", "--json", "run/max_likelihood.parquet"),
         run_folder, names=("max_likelihood.parquet",), keep=("run/max_likelihood.parquet",), reported="silent"),
    Case("neighbours-output-equals-corpus", "much neighbours",
         ("much", "neighbours", "--tokenizer", "smollm2", "--files", "corpus.txt", "--out", "w", "--output",
          "corpus.txt", "--block-size", "2", "--no-progress"),
         lambda ctx: ctx.write("corpus.txt", "the cat sat on the mat\nthe dog ate the bone\n"),
         names=("corpus.txt",), keep=("corpus.txt",), reported="silent"),
    Case("replay-source-equals-output", "builder replay",
         ("builder", "replay", "--out", "r", "--source", "r/replay.jsonl", "--limit", "2", *REPLAY_OPTS),
         lambda ctx: replay_rows(ctx, "r/replay.jsonl"), names=("replay.jsonl",), keep=("r/replay.jsonl",),
         deadline=SLOW, reported="silent"),
)

# device nodes and a link to the process's standard output, as outputs
for _flag, _base, _setup, _surface in (
        ("--json", (*EVAL, "--scores", "s.parquet"), signals_file(), "much evaluate"),
        ("--output", (*SEGMENT, "--input", "in.jsonl"), segment_input, "much segment"),
        ("--json", (*RUN, "--out", "run"), run_folder, "much run")):
    _name = _surface.split()[1]
    add(
        Case(f"{_name}{_flag}-dev-full-copy", _surface, (*_base, _flag, "full"),
             both(_setup, lambda ctx: ctx.device("full", 7)), names=("full|space",), keep=("full",),
             reported="silent"),
        Case(f"{_name}{_flag}-dev-null-copy", _surface, (*_base, _flag, "null"),
             both(_setup, lambda ctx: ctx.device("null", 3)), names=("null",), keep=("null",),
             exit0_ok=always, reported="silent"),
        Case(f"{_name}{_flag}-link-to-stdout", _surface, (*_base, _flag, "stdout-link"),
             both(_setup, lambda ctx: ctx.path("stdout-link").symlink_to("/proc/self/fd/1")),
             names=("stdout-link",), keep=("stdout-link",), exit0_ok=always, reported="silent"),
    )

# ---------------------------------------------------------------- data from a server
_BAD_DATA = ("nan", "prob_gt1", "sum_gt1", "oov", "dup_ids", "too_many_tokens", "null_top_logprobs", "non_utf8")
_MONITOR_NAMES = {"nan": "nan|finite|logprob", "prob_gt1": "probab|logprob|> 1|above", "sum_gt1": "sum",
                  "oov": "999999|vocab", "dup_ids": "duplicate", "too_many_tokens": "token|max",
                  "null_top_logprobs": "top_logprobs", "non_utf8": "utf"}
for _mode in _BAD_DATA:
    add(Case(f"generate-openai-{_mode}", "builder generate", GENERATE, questions, server=_mode, timeout=10,
             names=(_MONITOR_NAMES[_mode],),
             check=stored_row_problem("g/generations.jsonl", vocab=SMOLLM2_VOCAB, max_tokens=MAX_NEW),
             exit0_ok=failures_recorded("g/generations.jsonl"), clear_codes=(1, 2),
             message_files=(failures_file("g/generations.jsonl"),),
             reported="silent" if _mode not in ("null_top_logprobs", "non_utf8") else ""))
    add(Case(f"monitor-base-url-{_mode}", "much monitor", MONITOR, server=_mode, timeout=5,
             names=(_MONITOR_NAMES[_mode],),
             reported="silent" if _mode in ("oov", "null_top_logprobs", "non_utf8") else "clear"))
add(
    Case("generate-openai-good-server", "builder generate", GENERATE, questions, server="ok", timeout=10,
         expect="ok", check=stored_row_problem("g/generations.jsonl", vocab=SMOLLM2_VOCAB, max_tokens=MAX_NEW)),
    Case("monitor-base-url-good-server", "much monitor", MONITOR, server="ok", timeout=5, expect="ok"),
)

# ---------------------------------------------------------------- monitor against a failing server
add(
    Case("monitor-closed-mid-chunk", "much monitor", MONITOR, server="closed_mid_chunk", timeout=5,
         names=SERVER, reported="traceback"),
    Case("monitor-non-streamed", "much monitor", MONITOR, server="non_streamed", timeout=5,
         names=("stream",), reported="generic"),
    *(Case(f"monitor-http-{code}", "much monitor", MONITOR, server=f"http{code}", timeout=5,
           names=(*SERVER, code), reported="generic") for code in ("500", "401", "404")),
    Case("monitor-connection-refused", "much monitor",
         tuple(p.replace("{url}", "http://127.0.0.1:{closed}/v1") for p in MONITOR), timeout=5,
         names=(*SERVER, "refused|connect"), reported="generic"),
)

# ---------------------------------------------------------------- deadlines and bounded options
add(
    Case("generate-openai-drip", "builder generate", GENERATE, questions, server="drip", timeout=10,
         names=("10|timeout|deadline",), exit0_ok=failures_recorded("g/generations.jsonl"), clear_codes=(1, 2),
         message_files=(failures_file("g/generations.jsonl"),),
         check=stored_row_problem("g/generations.jsonl", vocab=SMOLLM2_VOCAB, max_tokens=MAX_NEW),
         reported="hang"),
    Case("monitor-drip", "much monitor", MONITOR, server="drip", timeout=5, names=("5|timeout|deadline",),
         reported="hang"),
    Case("run-bootstrap-1e8", "much run", (*RUN[:-3], "--bootstrap", "100000000", "--no-progress"),
         names=("bootstrap",), deadline=60, reported="hang"),
    Case("evaluate-bootstrap-1e8", "much evaluate", ("much", "evaluate", "--source", "sample", "--scores", "s.parquet",
                                                     "--bootstrap", "100000000"),
         signals_file(), names=("bootstrap",), deadline=60, reported="hang"),
)

# ---------------------------------------------------------------- learned detector folders
add(
    Case("learned-hidden-200000", "learned", LEARNED, detector("sequence", _edit_config(hidden=200_000)),
         names=("hidden|config.json",), memory_gb=6, deadline=SLOW, reported="traceback"),
    Case("learned-gru-wrong-shape", "learned", LEARNED, detector("sequence", _edit_weights(_wrong_gru_shape)),
         names=("gru|shape",), deadline=SLOW, reported="traceback"),
    Case("learned-weights-link-dev-zero", "learned", LEARNED, detector("linear", _weights_to_dev_zero),
         names=("weights.safetensors",), memory_gb=6, deadline=SLOW, reported="traceback"),
    Case("learned-infinite-bias", "learned", LEARNED, detector("linear", _edit_weights(_infinite_bias)),
         names=("bias|finite|inf",), deadline=SLOW, reported="silent"),
    Case("learned-other-aggregator", "learned", (*LEARNED, "--aggregator", "max"), detector("linear"),
         names=("aggregator",), exit0_ok=warned("aggregator", "product"), deadline=SLOW, reported="silent"),
    Case("train-learning-rate-1e300", "much train", (*TRAIN, "--learning-rate", "1e300", "--out", "t"),
         names=("learning",), deadline=SLOW, reported="traceback"),
    Case("train-truncated-checkpoint", "much train", (*TRAIN, "--out", "det"), truncated_checkpoint,
         names=("checkpoint",), deadline=SLOW, reported="traceback"),
    Case("learned-good-folder", "learned", LEARNED, detector("linear"), expect="ok", deadline=SLOW),
)

# ---------------------------------------------------------------- replay / verify
def _nan_row(rows) -> None:
    rows[0]["logits_values"][0][0] = float("nan")


VERIFY = ("builder", "verify", "--out", "v", "--source", "rows.jsonl", "--rows", "1", *REPLAY_OPTS)
add(
    Case("verify-stored-nan", "builder verify", VERIFY, lambda ctx: replay_rows(ctx, spoil=_nan_row),
         names=("nan|finite",), clear_codes=(1, 2), deadline=SLOW, reported="silent"),
    Case("verify-empty-source", "builder verify", VERIFY, lambda ctx: ctx.write("rows.jsonl", ""),
         names=("rows.jsonl|empty|no row",), deadline=SLOW, reported="silent"),
    Case("verify-tolerance-negative", "builder verify", (*VERIFY, "--tolerance", "-1"), replay_rows,
         names=("tolerance",), deadline=SLOW, reported="generic"),
    Case("verify-good-rows", "builder verify", VERIFY, replay_rows, expect="ok", deadline=SLOW),
)

# ---------------------------------------------------------------- regressions since the previous audit
add(
    Case("hub-layout-without-stopword-mask", "regressions", (*EVAL, "--source", "hub", "--scores", "s.parquet"),
         both(hub_layout, signals_file()), expect="ok", reported="refused"),
    *(Case(f"neighbours-reduce-garbage-block{suffix}", "regressions",
           ("much", "neighbours", "--tokenizer", "smollm2", "--out", "nw", "--reduce", "--no-progress"),
           neighbours_garbage(magic), names=(".npz",), reported="traceback")
      for suffix, magic in (("", True), ("-not-zip", False))),
    Case("leaderboard-host-no-such-host", "regressions",
         ("leaderboard", "serve", "--host", "no such host", "--port", "{closed}", "--store", "st", "--no-baselines"),
         names=("no such host",), deadline=60, reported="generic"),
)

# ---------------------------------------------------------------- issue #54: samples packs opened by much run
SAMPLES_RUN = ("much", "run", "--source", "sample", "--config", "en", "--no-nli", "--signals", "sample_rouge1",
               "--samples", "sp", "--bootstrap", "0", "--no-progress")
add(
    Case("samples-pack-shard-edited-in-place", "issue54 samples packs", SAMPLES_RUN,
         embedded_samples_pack(edit_shard_in_place), names=("sp", "shard", "hash"), reported="silent"),
    Case("samples-pack-manifest-bfloat16", "issue54 samples packs", SAMPLES_RUN,
         embedded_samples_pack(edit_manifest(lambda m: m.update(dtype="bfloat16"))), names=("sp", "manifest", "dtype"),
         reported="silent"),
    Case("samples-pack-index-listed-twice", "issue54 samples packs", SAMPLES_RUN,
         embedded_samples_pack(edit_manifest(lambda m: next(iter(next(iter(m["rows"].values())).values())).append(0))),
         names=("sp", "sample_index 0"), reported="silent"),
    Case("samples-pack-nan-probability", "issue54 samples packs", SAMPLES_RUN, embedded_samples_pack(nan_probability),
         names=("sp", "generation_id", "logits_values", "token 1"), reported="silent"),
)

# ---------------------------------------------------------------- issue #44: packs, server rows, learned rows, exits
INTERNALS = ("builder", "internals", "--out", "p", "--source", "{sample}", "--model", "{gguf}", "--prompt-style",
             "user", "--limit", "3", "--rows-per-shard", "1")
PACK_RUN = ("much", "run", "--source", "sample", "--config", "en", "--no-nli", "--signals", "rauq", "--internals",
            "pack", "--bootstrap", "0", "--no-progress")
add(
    # inputs overwritten
    Case("run-json-over-internals-manifest", "issue44 outputs", (*PACK_RUN, "--json", "pack/manifest.json"),
         random_pack(), names=("manifest.json",), keep=("pack/manifest.json",), reported="silent"),
    Case("evaluate-json-over-internals-manifest", "issue44 outputs",
         (*EVAL, "--scores", "s.parquet", "--internals", "pack", "--json", "pack/manifest.json"),
         both(signals_file(), random_pack()), names=("manifest.json",), keep=("pack/manifest.json",),
         reported="silent"),
    Case("verify-source-is-its-report", "issue44 outputs",
         ("builder", "verify", "--out", "v", "--source", "v/verify.json", "--rows", "1", *REPLAY_OPTS),
         lambda ctx: replay_rows(ctx, "v/verify.json"), names=("verify.json",), keep=("v/verify.json",),
         reported="silent"),
    Case("internals-source-inside-its-pack", "issue44 outputs",
         ("builder", "internals", "--out", "pack", "--source", "pack/manifest.json", "--model", "{gguf}"),
         random_pack(), names=("manifest.json",), keep=("pack/manifest.json",)),
    # a pack against its manifest
    *(Case(f"internals-resume-{how}d-shard", "issue44 packs", INTERNALS, damaged_smollm_pack(how),
           names=("manifest",), exit0_ok=lambda ctx, out, err: "does not match its manifest" in out
           and "to recompute" in out, check=pack_complete("p", 3), deadline=SLOW, reported="silent")
      for how in ("truncate", "delete")),
    Case("pack-manifest-claims-other-layers", "issue44 packs", PACK_RUN,
         random_pack(edit=edit_manifest(lambda m: m.update(n_layers=30, n_heads=9))),
         names=("manifest",), reported="silent"),
    Case("pack-rows-of-another-pack", "issue44 packs", PACK_RUN, random_pack(edit=edit_manifest(foreign_rows)),
         names=("manifest|shard",), reported="silent"),
    # the free check, values
    Case("internals-other-prompt-than-the-rows", "issue44 packs",
         tuple(part if part != "user" else "much" for part in INTERNALS), names=("tolerance",),
         check=nothing_at("p/manifest.json"), deadline=SLOW, reported="silent"),
    Case("internals-temperature-nan", "issue44 packs", (*INTERNALS, "--temperature", "nan"), names=("--temperature",),
         reported="silent"),
    *(Case(f"pack-attention-{label}", "issue44 packs", PACK_RUN, spoiled_pack((1, 2, 0), value),
           names=("pack", "attention_to_previous", "token 1, layer 2, head 0"), reported="silent")
      for label, value in (("negative", -0.5), ("seven", 7.0), ("nan", float("nan")))),
    # bad input is exit 2, named
    Case("internals-rows-without-output-tokens", "issue44 exits", (*INTERNALS[:5], "rows.jsonl", *INTERNALS[6:]),
         source_rows(lambda rows: rows[0].pop("output_tokens")), names=("output_tokens",), reported="generic"),
    Case("internals-token-id-1e9", "issue44 exits", (*INTERNALS[:5], "rows.jsonl", *INTERNALS[6:]),
         source_rows(lambda rows: rows[0]["output_tokens"].__setitem__(1, 10**9)),
         names=("output_tokens", "1000000000"), deadline=SLOW, reported="generic"),
    Case("internals-device-bogus", "issue44 exits", (*INTERNALS, "--device", "bogus"), names=("--device",),
         reported="generic"),
    Case("internals-dtype-bogus", "issue44 exits", (*INTERNALS, "--dtype", "bogus"), names=("--dtype",),
         reported="generic"),
    Case("run-peer-signal-without-plugin", "issue44 exits",
         ("much", "run", "--source", "sample", "--signals", "lmpolygraph:MaximumClaimProbability", "--bootstrap", "0"),
         names=("much-peers",), reported="generic"),
    # quiet edge cases
    Case("internals-limit-negative", "issue44 quiet", (*INTERNALS, "--limit", "-1"), names=("--limit",),
         reported="silent"),
    Case("generate-limit-negative", "issue44 quiet", (*GENERATE, "--limit", "-1"), questions, names=("--limit",),
         reported="silent"),
    Case("internals-empty-source", "issue44 quiet", (*INTERNALS[:5], "empty.jsonl", *INTERNALS[6:]),
         lambda ctx: ctx.write("empty.jsonl", ""), names=("empty.jsonl",), reported="silent"),
    *(Case(f"generate-backoff-{label}", "issue44 quiet", (*GENERATE, "--backoff", value),
           questions, names=("--backoff",), reported="silent") for label, value in (("negative", "-1"),
                                                                                   ("nan", "nan"))),
    # a learned detector's rows
    Case("learned-training-rows-of-nobody", "issue44 learned", LEARNED, detector("linear", foreign_training_rows),
         names=("training_rows.json",), deadline=SLOW, reported="silent"),
)
# rows a server's sampler cannot have produced
for _mode, _names in (("outside_top_k", "top_k"), ("outside_top_p", "top_p"), ("stop_without_eos", "EOS"),
                      ("eos_in_middle", "stop token")):
    add(Case(f"generate-openai-{_mode}", "issue44 server rows", GENERATE, questions, server=_mode, timeout=10,
             names=(_names,), exit0_ok=failures_recorded("g/generations.jsonl"), clear_codes=(1, 2),
             message_files=(failures_file("g/generations.jsonl"),), reported="silent"))


# ---------------------------------------------------------------- older surfaces: controls
OLD: list[tuple[str, str, tuple[str, ...], object, tuple[str, ...]]] = [
    ("run-data-missing", "much run", (*RUN, "--source", "no-such-folder"), None, ("no-such-folder",)),
    ("run-data-a-file", "much run", (*RUN, "--source", "x.txt"), lambda c: c.write("x.txt", "hi"), ("x.txt",)),
    ("run-data-garbage-parquet", "much run", (*RUN, "--source", "gd"),
     lambda c: c.write("gd/data/en/test-00000-of-00001.parquet", b"garbage" * 20), ("gd|parquet",)),
    ("run-signals-unknown", "much run", ("much", "run", "--source", "sample", "--no-nli", "--signals", "nope",
                                         "--bootstrap", "0"), None, ("nope",)),
    ("run-signals-empty", "much run", ("much", "run", "--source", "sample", "--no-nli", "--signals", "",
                                       "--bootstrap", "0"), None, ("signal",)),
    *((f"run-bootstrap-{n}", "much run", (*RUN[:-3], "--bootstrap", n, "--no-progress"), None, ("bootstrap",))
      for n in ("1", "5", "39", "-1", "abc")),
    ("run-config-unknown", "much run", (*RUN, "--config", "xx"), None, ("xx",)),
    ("run-split-unknown", "much run", (*RUN, "--split", "nope"), None, ("nope",)),
    ("run-aggregator-unknown", "much run", (*RUN, "--aggregator", "nope"), None, ("nope",)),
    ("run-out-is-a-file", "much run", (*RUN, "--out", "o.txt"), lambda c: c.write("o.txt", "mine"), ("o.txt",)),
    ("evaluate-scores-missing", "much evaluate", (*EVAL, "--scores", "missing.parquet"), None, ("missing.parquet",)),
    ("evaluate-scores-garbage", "much evaluate", (*EVAL, "--scores", "g.parquet"),
     lambda c: c.write("g.parquet", b"garbage" * 30), ("g.parquet",)),
    ("evaluate-scores-empty-jsonl", "much evaluate", (*EVAL, "--scores", "e.jsonl"), lambda c: c.write("e.jsonl", ""),
     ("e.jsonl",)),
    ("evaluate-scores-wrong-columns", "much evaluate", (*EVAL, "--scores", "w.jsonl"),
     lambda c: c.write("w.jsonl", '{"a": 1}\n'), ("w.jsonl|generation_id",)),
    ("evaluate-signal-absent", "much evaluate", (*EVAL, "--scores", "s.parquet", "--signal", "nope"),
     signals_file(), ("nope",)),
    ("evaluate-by-unknown", "much evaluate", (*EVAL, "--scores", "s.parquet", "--by", "nope"), signals_file(),
     ("nope",)),
    ("evaluate-min-coverage-2", "much evaluate", (*EVAL, "--scores", "s.parquet", "--min-coverage", "2"),
     signals_file(), ("coverage",)),
    *((f"evaluate-bootstrap-{n}", "much evaluate",
       ("much", "evaluate", "--source", "sample", "--scores", "s.parquet", "--bootstrap", n), signals_file(),
       ("bootstrap",)) for n in ("1", "39", "-5")),
    ("evaluate-rank-unknown", "much evaluate", (*EVAL, "--scores", "s.parquet", "--rank", "nope"), signals_file(),
     ("nope",)),
    ("segment-input-missing", "much segment", (*SEGMENT, "--input", "missing.jsonl"), None, ("missing.jsonl",)),
    ("segment-input-garbage", "much segment", (*SEGMENT, "--input", "g.jsonl"), lambda c: c.write("g.jsonl", "{{{\n"),
     ("g.jsonl",)),
    ("segment-input-wrong-type", "much segment", (*SEGMENT, "--input", "t.jsonl"),
     lambda c: c.write("t.jsonl", '{"generation_id": "a", "output": 3, "output_tokens": [1]}\n'), ("output",)),
    ("segment-compat-unknown", "much segment", ("much", "segment", "--tokenizer", "smollm2", "--compat", "9",
                                                "--input", "in.jsonl"), segment_input, ("compat",)),
    ("train-detector-unknown", "much train", ("much", "train", "--detector", "bogus"), None, ("detector",)),
    ("train-max-epochs-0", "much train", (*TRAIN[:-3], "--max-epochs", "0", "--out", "t"), None, ("epochs",)),
    ("train-validation-fraction-1.5", "much train", (*TRAIN, "--validation-fraction", "1.5", "--out", "t"), None,
     ("validation",)),
    ("train-batch-size-0", "much train", (*TRAIN, "--batch-size", "0", "--out", "t"), None, ("batch",)),
    ("train-fold-unknown", "much train", ("much", "train", "--source", "sample", "--fold", "xx", "--out", "t",
                                          "--no-progress"), None, ("xx",)),
    ("export-out-missing", "builder export", ("builder", "export", "--out", "nope", "--no-check"), None,
     ("nope|generations",)),
    ("generate-openai-no-base-url", "builder generate", ("builder", "generate", "--out", "g", "--model", "m",
                                                         "--engine", "openai"), questions, ("base-url",)),
    ("verify-rows-0", "builder verify", (*VERIFY[:6], "--rows", "0", *REPLAY_OPTS), replay_rows, ("rows",)),
    ("replay-source-missing", "builder replay", ("builder", "replay", "--out", "r", "--source", "missing.jsonl",
                                                 *REPLAY_OPTS), None, ("missing.jsonl",)),
    ("monitor-threshold-2", "much monitor", (*MONITOR, "--threshold", "2"), None, ("threshold",)),
    ("monitor-top-logprobs-negative", "much monitor", (*MONITOR, "--top-logprobs", "-1"), None, ("top-logprobs",)),
    ("neighbours-shard-3-of-2", "much neighbours", ("much", "neighbours", "--tokenizer", "smollm2", "--files",
                                                    "c.txt", "--out", "w", "--shard", "3/2"),
     lambda c: c.write("c.txt", "a b\n"), ("shard",)),
    ("neighbours-files-missing", "much neighbours", ("much", "neighbours", "--tokenizer", "smollm2", "--files",
                                                     "missing.txt", "--out", "w"), None, ("missing.txt",)),
]
for _id, _surface, _argv, _setup, _names in OLD:
    add(Case(_id, _surface, _argv, _setup, names=_names, era="old"))
add(
    Case("evaluate-good-scores", "much evaluate", (*EVAL, "--scores", "s.parquet"), signals_file(), expect="ok",
         era="old", keep=("s.parquet",)),
    Case("segment-good-input", "much segment", (*SEGMENT, "--input", "in.jsonl", "--output", "out.jsonl"),
         segment_input, expect="ok", era="old", keep=("in.jsonl",)),
)
