"""Issues #53/#54: a samples pack is checked like an internals pack -- on open (``load_samples``, ``iter_pack_rows``
for ``replay``/``verify``) and on resume (``builder samples``) -- and its values are validated where they enter.

Packs are written by the builder's own PackWriter (no model); a "forged" shard is rewritten under its new content
address with the manifest following it, so that sizes and hashes match and only the value or the layout is wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from builder.cli import main
from builder.generation.dtype import run_dtype
from builder.generation.rows import EngineInfo, EngineResult, RowLimits, make_record
from much_dataset.offline_tokenizers import file_sha256
from much_dataset.samples import SamplesError, iter_pack_rows, load_samples
from tests.builder._samples_fakes import CONFIG, VOCAB, edit_manifest, fake_identity, fake_pack, fake_rows, forge

ANSWERS = [{"generation_id": gid, "generation_config": "theirs", "question_id": f"q-{gid}", "lang": "en",
            "wiki_url": f"https://en.wikipedia.org/wiki/{gid}", "prompt": f"question {gid}"} for gid in "abc"]


def _rows() -> list[dict]:
    return [row for answer in ANSWERS for row in fake_rows(answer["generation_id"], range(4),
                                                           prompt=answer["prompt"])]


def _pack(tmp_path: Path, **kwargs) -> Path:
    pack = tmp_path / "pack"
    fake_pack(pack, _rows(), **kwargs)  # one shard per answer (4 samples)
    return pack


def _manifest(pack: Path) -> dict:
    return json.loads((pack / "manifest.json").read_text())


def _shard_of(pack: Path, gid: str = "a") -> str:
    [shard] = _manifest(pack)["rows"][gid]
    return shard


def _value(change: Callable[[dict], None]):
    """A forge change that edits the first sample row only."""
    def apply(rows: list[dict], target: pa.Schema) -> tuple[list[dict], pa.Schema]:
        change(rows[0])
        return rows, target
    return apply


def _cast(column: str, kind: pa.DataType):
    def apply(rows: list[dict], target: pa.Schema) -> tuple[list[dict], pa.Schema]:
        if kind == pa.string():
            rows = [{**r, column: str(r[column])} for r in rows]
        return rows, target.set(target.get_field_index(column), pa.field(column, kind))
    return apply


def _drop(column: str):
    def apply(rows: list[dict], target: pa.Schema) -> tuple[list[dict], pa.Schema]:
        return [{k: v for k, v in r.items() if k != column} for r in rows], target.remove(
            target.get_field_index(column))
    return apply


def _set(path: tuple, value) -> Callable[[dict], None]:
    def change(row: dict) -> None:
        holder = row
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value
    return change


def _unsort(row: dict) -> None:
    values = row["logits_values"][1]
    values[0], values[1] = values[1], values[0]


def _one_position_fewer(row: dict) -> None:
    row["logits_values"] = row["logits_values"][:-1]
    row["logits_token_ids"] = row["logits_token_ids"][:-1]


def _empty(row: dict) -> None:
    row.update(output_tokens=[], logits_token_ids=[], logits_values=[], output="")


def _seed(row: dict) -> None:
    row["sampling"]["seed"] += 7


#: id -> (forge change, column named, words the message holds): each one loads silently on main.
VALUE_CASES = {
    "nan": (_value(_set(("logits_values", 1, 2), math.nan)), "logits_values", "token 1: probability NaN"),
    "inf": (_value(_set(("logits_values", 1, 0), math.inf)), "logits_values", "token 1: probability NaN, infinite"),
    "seven": (_value(_set(("logits_values", 2, 0), 7.0)), "logits_values", "token 2: probability"),
    "negative": (_value(_set(("logits_values", 0, 23), -0.5)), "logits_values", "token 0: probability"),
    "unsorted": (_value(_unsort), "logits_values", "token 1: probabilities not sorted"),
    "one position fewer": (_value(_one_position_fewer), "logits_token_ids", "2 entries for 3 output tokens"),
    "token id 1e9": (_value(_set(("output_tokens", 1), 10**9)), "output_tokens", "token 1: token id 1000000000 is "
                     f"not in [0, {VOCAB})"),
    "candidate id 1e9": (_value(_set(("logits_token_ids", 2, 5), 10**9)), "logits_token_ids", "token 2: a candidate"),
    "empty sample": (_value(_empty), "output_tokens", "no output tokens"),
    "seed rule": (_value(_seed), "sampling", "breaks the seed rule"),
    "sampler": (_value(_set(("sampling", "top_p"), 0.5)), "sampling", "field 'top_p'"),
}


@pytest.mark.parametrize("case", sorted(VALUE_CASES))
def test_a_bad_value_is_refused_naming_pack_shard_sample_column_and_position(tmp_path, case):
    change, column, words = VALUE_CASES[case]
    pack = _pack(tmp_path)
    shard = forge(pack, change)
    for read in (lambda: load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache"),
                 lambda: list(iter_pack_rows(pack))):  # what replay and verify read
        with pytest.raises(SamplesError) as raised:
            read()
        message = str(raised.value)
        for part in (str(pack), shard, "generation_id='a'", "sample_index 0", f"column {column!r}", words):
            assert part in message, (part, message)


#: id -> (forge change, words of the refusal): a shard whose layout is not a samples shard's.
LAYOUT_CASES = {
    "float64 probabilities": (_cast("logits_values", pa.list_(pa.list_(pa.float64()))), "double>>, a samples shard "
                              "stores"),
    "no logits_values": (_drop("logits_values"), "has no column 'logits_values'"),
    "sample_index of strings": (_cast("sample_index", pa.string()), "column 'sample_index' is string"),
    "a sample stored twice": (lambda rows, target: (rows + rows[:1], target), "stores generation_id='a', "
                              "sample_index 0 twice"),
}


@pytest.mark.parametrize("case", sorted(LAYOUT_CASES))
def test_a_shard_of_another_layout_is_refused_naming_it(tmp_path, case):
    change, words = LAYOUT_CASES[case]
    pack = _pack(tmp_path)
    shard = forge(pack, change)
    with pytest.raises(SamplesError) as raised:
        load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache")
    assert shard in str(raised.value) and words in str(raised.value), str(raised.value)
    assert "does not match its manifest" in str(raised.value)


def _flip_last_byte(pack: Path) -> None:
    path = pack / "shards" / _shard_of(pack)
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same name, same size, other bytes


def _list_twice(manifest: dict) -> None:
    [(shard, indices)] = manifest["rows"]["a"].items()
    indices.append(indices[0])


def _list_in_two_shards(manifest: dict) -> None:
    [other] = manifest["rows"]["b"]
    manifest["rows"]["a"].setdefault(other, []).append(0)


def _claim_bfloat16(manifest: dict) -> None:
    from much_dataset.samples_checks import identity_digest

    manifest["dtype"] = "bfloat16"
    manifest["identity_sha256"] = identity_digest(manifest)  # only the shards' own record is left to tell


#: id -> (damage, words): the shard untouched (or edited in place) and the manifest saying something else.
MANIFEST_CASES = {
    "edited in place": (_flip_last_byte, "hash"),
    "bytes wrong": (lambda pack: edit_manifest(pack, lambda m: m["shards"][_shard_of(pack)].update(
        bytes=m["shards"][_shard_of(pack)]["bytes"] + 1)), "bytes"),
    "sha256 wrong": (lambda pack: edit_manifest(pack, lambda m: m["shards"][_shard_of(pack)].update(
        sha256="0" * 64)), "the manifest lists sha256 0000000000000000..., but the file's bytes hash to its name"),
    "bfloat16 over float32 shards": (lambda pack: edit_manifest(pack, lambda m: m.update(dtype="bfloat16")),
                                     "identity (dtype 'bfloat16'"),
    "bfloat16 over float32 shards, digest forged too": (lambda pack: edit_manifest(pack, _claim_bfloat16),
                                                        "written with dtype 'float32', the manifest says 'bfloat16'"),
    "an index listed twice": (lambda pack: edit_manifest(pack, _list_twice), "sample_index 0 2 times"),
    "an index listed in two shards": (lambda pack: edit_manifest(pack, _list_in_two_shards),
                                      "sample_index 0 2 times"),
    "n_samples wrong": (lambda pack: edit_manifest(pack, lambda m: m.update(n_samples=m["n_samples"] + 1)),
                        "field 'n_samples' states 13, but the manifest lists 12"),
    "n_samples not a count": (lambda pack: edit_manifest(pack, lambda m: m.update(n_samples="12")),
                              "field 'n_samples' states '12', but the manifest lists 12"),
    "n_rows wrong": (lambda pack: edit_manifest(pack, lambda m: m.update(n_rows=2)),
                     "field 'n_rows' states 2, but the manifest lists 3"),
}
#: The cases where the manifest itself is named, not a shard: its own digest or counts.
MANIFEST_NAMED = {"bfloat16 over float32 shards", "n_samples wrong", "n_samples not a count", "n_rows wrong"}


@pytest.mark.parametrize("case", sorted(MANIFEST_CASES))
def test_a_pack_that_is_not_what_its_manifest_says_is_refused(tmp_path, case):
    damage, words = MANIFEST_CASES[case]
    pack = _pack(tmp_path)
    shard = _shard_of(pack)
    damage(pack)
    with pytest.raises(SamplesError) as raised:
        load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache")
    named = str(pack / "manifest.json") if case in MANIFEST_NAMED else shard
    assert named in str(raised.value) and words in str(raised.value), str(raised.value)


def test_a_sample_answers_its_rows_question(tmp_path):
    """Rewriting ids must not serve row 0's samples (another question) for row 1."""
    pack = _pack(tmp_path)
    assert load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache").num_rows == 12
    rewritten = [ANSWERS[0], {**ANSWERS[1], "generation_id": "a"}]
    with pytest.raises(SamplesError, match="generation_id='a', sample_index 0, column 'prompt': 'question a' is not "
                                           "the row's 'question b'"):
        load_samples(pack, dataset=rewritten, cache_dir=tmp_path / "cache")
    for field in ("wiki_url", "lang"):
        other = [ANSWERS[0], {**ANSWERS[1], field: "fr" if field == "lang" else "https://x"}]
        with pytest.raises(SamplesError, match=f"generation_id='b', sample_index 0, column '{field}'"):
            load_samples(pack, dataset=other, cache_dir=tmp_path / "cache")


def test_replay_of_a_nan_pack_is_refused_before_any_model(tmp_path, capsys):
    pack = _pack(tmp_path)
    shard = forge(pack, _value(_set(("logits_values", 0, 0), math.nan)))
    assert main(["replay", "--out", str(tmp_path / "r"), "--source", str(pack), "--model", "not-loaded"]) == 2
    err = capsys.readouterr().err
    assert shard in err and "probability NaN" in err and "0 failed" not in err
    assert not (tmp_path / "r" / "replay.jsonl").exists()


@pytest.mark.parametrize("step", ["replay", "verify"])
@pytest.mark.parametrize(("manifest", "words"), [
    ('{"format": ', "manifest.json: not valid JSON"),
    ("[1, 2]", "manifest.json: not a much-samples/1 manifest"),
    (None, "a folder without a manifest.json, so not a samples pack; pass a .jsonl or .parquet file"),
])
def test_a_source_folder_whose_manifest_is_not_a_samples_packs_is_named(tmp_path, capsys, step, manifest, words):
    """A folder --source is read as a samples pack: a manifest that is not JSON (or none) is named, not
    '[Errno 21] Is a directory'."""
    pack = _pack(tmp_path)
    if manifest is None:
        (pack / "manifest.json").unlink()
    else:
        (pack / "manifest.json").write_text(manifest)
    assert main([step, "--out", str(tmp_path / "r"), "--source", str(pack), "--model", "not-loaded"]) == 2
    err = capsys.readouterr().err
    assert str(pack) in err and words in err and "Is a directory" not in err, err


# ----------------------------------------------------------------------------------------------------------------
# Resume: builder samples into a damaged pack finds the damage, names the shard, redraws its samples


class _FakeEngine:
    """Draws valid samples without a model (the run's own checks and writer store them)."""

    name, version, dtype = "hf", "0", "float32"
    limits = RowLimits(vocab_size=VOCAB, max_new_tokens=CONFIG.max_new_tokens)

    def generate(self, questions):
        for question in questions:
            row = fake_rows("x", range(1), prompt=question["prompt"])[0]
            result = EngineResult(tokens=row["output_tokens"], ids=row["logits_token_ids"],
                                  probs=row["logits_values"], output=row["output"], finished=True)
            yield question, make_record(CONFIG, question, result, engine=EngineInfo("hf", "0"))


def _resume_setup(tmp_path: Path, monkeypatch) -> tuple[Path, list[str]]:
    source = tmp_path / "answers"
    source.mkdir()
    (source / "generations.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ANSWERS))
    model = source / "generations.jsonl"  # a file: its sha256 is the pack's weights hash
    identity = fake_identity(weights=file_sha256(model), dtype=run_dtype("hf", None, None))
    pack = tmp_path / "pack"
    fake_pack(pack, _rows(), identity=identity)
    monkeypatch.setattr("builder.samples.make_executed_engine", lambda *a, **k: _FakeEngine())
    argv = ["samples", "--source", str(source), "--out", str(pack), "--model", str(model), "--model-name", "fake",
            "--n", "4", "--max-new-tokens", str(CONFIG.max_new_tokens)]
    return pack, argv


def _truncate(pack: Path) -> None:
    path = pack / "shards" / _shard_of(pack)
    path.write_bytes(path.read_bytes()[:-50])


#: id -> (damage, words naming why): each said "12 done, 0 to go" on main.
RESUME_CASES = {
    "truncated": (_truncate, "bytes"),
    "deleted": (lambda pack: (pack / "shards" / _shard_of(pack)).unlink(), "missing"),
    "edited": (_flip_last_byte, "hash"),
    "nan": (lambda pack: forge(pack, _value(_set(("logits_values", 0, 0), math.nan))), "probability NaN"),
    "duplicated": (lambda pack: forge(pack, lambda rows, target: (rows + rows[:1], target)), "twice"),
    # the samples of another question under the answer's generation_id: only the answers can tell
    "other question": (lambda pack: forge(pack, lambda rows, target: ([{**r, "prompt": "question z"} for r in rows],
                                                                      target)),
                       "column 'prompt', 'question z' is not the row's 'question a'"),
}


@pytest.mark.parametrize("case", sorted(RESUME_CASES))
def test_a_resume_into_a_damaged_pack_redraws_the_damaged_shard_and_says_so(tmp_path, monkeypatch, capsys, case):
    damage, words = RESUME_CASES[case]
    pack, argv = _resume_setup(tmp_path, monkeypatch)
    assert main(argv) == 0
    assert "12 done, 0 to go" in capsys.readouterr().out
    damage(pack)
    shard = _shard_of(pack)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "8 done, 4 to go" in out and "12 done" not in out, out
    [said] = [line for line in out.splitlines() if "does not match its manifest" in line]
    assert shard in said and words in said and "4 sample(s) to redraw" in said, said
    samples = load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache")
    assert samples.num_rows == 12
    assert main(argv) == 0
    assert "12 done, 0 to go" in capsys.readouterr().out


def test_a_resume_into_a_pack_whose_manifest_miscounts_is_refused(tmp_path, monkeypatch, capsys):
    pack, argv = _resume_setup(tmp_path, monkeypatch)
    edit_manifest(pack, lambda m: m.update(n_samples=7))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(pack / "manifest.json") in err and "field 'n_samples' states 7, but the manifest lists 12" in err


# ----------------------------------------------------------------------------------------------------------------
# The manifest merge (issue #53) and the step's one Namespace boundary (issue #56)


def _straightforward_merge(manifest: dict, shard, pairs, failures) -> dict:
    """An independent merge: list the pairs no shard lists yet, then record every failure whose pair is not stored."""
    listed = {(gid, i) for gid, by_shard in manifest["rows"].items() for indices in by_shard.values() for i in indices}
    out = json.loads(json.dumps(manifest))
    fresh = []
    for pair in pairs:
        if pair not in listed and pair not in fresh:
            fresh.append(pair)
    if shard is not None and fresh:
        out["shards"][shard[0]] = {"bytes": shard[1], "sha256": shard[0].split(".")[0], "n_samples": shard[2]}
        for gid, i in fresh:
            out["rows"].setdefault(gid, {}).setdefault(shard[0], []).append(i)
            out["failures"].pop(f"{gid}#{i}", None)
    stored = listed | (set(fresh) if shard is not None else set())
    for (gid, i), reason in failures.items():
        if (gid, i) not in stored:
            out["failures"][f"{gid}#{i}"] = reason
    out["n_rows"], out["n_samples"] = len(out["rows"]), len(stored)
    return out


def test_the_manifest_merge_equals_a_straightforward_one():
    import random

    from builder.samples_store import merge_commit

    rng = random.Random(0)
    for _ in range(30):
        manifest = {"rows": {}, "shards": {}, "failures": {"g1#5": "old"}}
        for gid in ("g0", "g1", "g2"):
            manifest["rows"][gid] = {"s0.parquet": sorted(rng.sample(range(6), rng.randint(1, 4)))}
        pairs = [(rng.choice(("g0", "g1", "g3")), rng.randrange(8)) for _ in range(rng.randint(0, 6))]
        failures = {(rng.choice(("g1", "g2", "g3")), rng.randrange(8)): "why" for _ in range(rng.randint(0, 5))}
        shard = ("s1.parquet", 10, len(pairs)) if rng.random() < 0.8 else None
        expected = _straightforward_merge(manifest, shard, pairs, failures)
        merge_commit(manifest, shard, pairs, failures)
        assert manifest == expected
    # its speed against the old merge at MUCH scale: benchmarks/bench_samples_manifest.py (no timing in tests)


def test_samples_reads_its_namespace_once_and_never_changes_it(tmp_path, monkeypatch):
    """Issue #56: one boundary (SamplesOptions.from_args); the answers' own config no longer written into args."""
    import copy
    import inspect

    import builder.samples
    from builder.cli import build_parser

    pack, argv = _resume_setup(tmp_path, monkeypatch)
    # the answers' config is known (configs.jsonl beside them): the pack takes it without --generation-config
    (tmp_path / "answers" / "configs.jsonl").write_text(json.dumps({**CONFIG.to_record(),
                                                                   "generation_config": "theirs"}) + "\n")
    args = build_parser().parse_args(argv)
    def plain() -> dict:
        return copy.deepcopy({k: v for k, v in vars(args).items() if k not in ("func", "step_module")})

    before = plain()
    assert args.func(args) == 0
    assert plain() == before
    public = [name for name in builder.samples.__all__ if callable(getattr(builder.samples, name))]
    taking_args = [name for name in public if "args" in inspect.signature(getattr(builder.samples, name)).parameters]
    assert sorted(taking_args) == ["run"]  # the boundary; add_arguments takes the parser
    items = builder.samples.sample_items(ANSWERS[:1], CONFIG, 2, set())
    assert [(item.generation_id, item.sample_index) for item in items] == [("a", 0), ("a", 1)]
    assert "rsplit" not in inspect.getsource(builder.samples) + inspect.getsource(builder.samples_store)


def test_a_pack_inside_the_source_folder_whose_manifest_is_not_json_is_named_not_read_as_answers(tmp_path):
    """The shards of a samples pack kept inside a source folder are not answers; a pack whose manifest is not JSON
    is named -- its samples were read as answers, each answer once per sample."""
    import pyarrow.parquet as pq

    from builder.samples import read_source

    source = tmp_path / "source"
    (source / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(ANSWERS), source / "data" / "test.parquet")
    fake_pack(source / "samples", _rows())
    answers, _ = read_source(str(source))
    assert sorted(a["generation_id"] for a in answers) == ["a", "b", "c"]
    (source / "samples" / "manifest.json").write_text('{"format": ')
    with pytest.raises(SamplesError, match=r"samples/manifest\.json: not valid JSON"):
        read_source(str(source))
