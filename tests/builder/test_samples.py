"""builder samples: N further answers per stored answer, checked against an independent teacher-forced pass, resumed
after a kill, verified and replayed as a pack; the pack format read by much_dataset.load_samples."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from builder import _llm
from builder.cli import main
from builder.configs import GenerationConfig
from builder.generation import hf as gen
from builder.samples_store import trim_candidates
from much_dataset import schema
from much_dataset.samples import MissingSamplesError, SamplesError, load_samples, sample_seed, samples_by_row
from tests._floats import SAME_PROBABILITIES
from tests.builder import _smollm
from tests.builder._samples_fakes import fake_pack, fake_rows

REPO = Path(__file__).resolve().parents[2]
#: Questions written for this test (not Mu-SHROOM's, not the sample's): the model has not seen them in any fixture.
ANSWERS = [
    {"generation_id": "unseen-en", "generation_config": "cfg", "question_id": "q1", "lang": "en",
     "wiki_url": "https://en.wikipedia.org/wiki/Sydney_Harbour_Bridge",
     "prompt": "Which engineer designed the Sydney Harbour Bridge?"},
    {"generation_id": "unseen-es", "generation_config": "cfg", "question_id": "q2", "lang": "es",
     "wiki_url": "https://es.wikipedia.org/wiki/Mulhac%C3%A9n", "prompt": "¿Cuál es la montaña más alta de la "
     "península ibérica?"},
    {"generation_id": "unseen-de", "generation_config": "cfg", "question_id": "q3", "lang": "de",
     "wiki_url": "https://de.wikipedia.org/wiki/Universit%C3%A4t_Heidelberg",
     "prompt": "In welchem Jahr wurde die Universität Heidelberg gegründet?"},
]
N, MAX_NEW = 4, 16


@pytest.fixture
def llm(monkeypatch):
    loaded = _smollm.smollm2()
    monkeypatch.setattr(_llm, "load_model", lambda *a, **k: loaded)  # the session's model: no second load
    return loaded


def _source(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "generations.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ANSWERS))
    return folder


def _argv(source: Path, pack: Path, *extra: str) -> list[str]:
    return ["samples", "--source", str(source), "--out", str(pack), "--model", _smollm.gguf_path(), "--model-name",
            "smol", "--n", str(N), "--max-new-tokens", str(MAX_NEW), *extra]


def _files(pack: Path) -> dict[str, bytes]:
    return {p.relative_to(pack).as_posix(): p.read_bytes() for p in sorted(pack.rglob("*")) if p.is_file()
            and not p.name.startswith(".")}


def _teacher_forced(llm, prompt: str, tokens: list[int], temperature: float) -> np.ndarray:
    """softmax(logits / T) over the full vocabulary in float64, from one plain forward pass of prompt + tokens."""
    import torch

    messages = [{"role": "system", "content": _llm.SYSTEM_PROMPT + _llm.BRIEF_SUFFIX},
                {"role": "user", "content": prompt}]
    text = llm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = llm.tokenizer.encode(text, add_special_tokens=False)
    with torch.inference_mode():
        logits = llm.model(input_ids=torch.tensor([ids + tokens])).logits[0, len(ids) - 1:-1].double().numpy()
    scaled = logits / temperature
    probs = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    return probs / probs.sum(axis=1, keepdims=True)


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_samples_equal_a_teacher_forced_pass_and_a_rerun_adds_nothing(llm, tmp_path, capsys, temperature):
    source, pack = _source(tmp_path / "answers"), tmp_path / "pack"
    argv = _argv(source, pack, "--temperature", str(temperature))
    assert main(argv) == 0
    samples = load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache")
    assert samples.column_names[:len(schema.SAMPLE_COLUMNS)] == list(schema.SAMPLE_COLUMNS)
    assert [(r["generation_id"], r["sample_index"]) for r in samples.select_columns(
        ["generation_id", "sample_index"])] == [(a["generation_id"], i) for a in ANSWERS for i in range(N)]
    worst = 0.0
    for row in samples:
        assert row["sampling"] == {"temperature": temperature, "top_p": 0.9, "top_k": 20, "max_new_tokens": MAX_NEW,
                                   "seed": sample_seed(1234, row["sample_index"])}
        tokens = row["output_tokens"]
        probs = _teacher_forced(llm, row["prompt"], tokens, temperature)
        for t, (token, ids, values) in enumerate(zip(tokens, row["logits_token_ids"], row["logits_values"],
                                                     strict=True)):
            assert len(ids) == schema.TOP_K and token in ids[:20]  # MUCH's sampler: inside the stored top 20
            worst = max(worst, float(np.abs(probs[t, ids] - np.asarray(values, dtype=np.float64)).max()))
    assert worst <= 5e-5
    # different indices draw different samples (seeded apart): no index repeats another's answers everywhere
    by_index = [tuple(tuple(s["output_tokens"]) for s in samples if s["sample_index"] == i) for i in range(N)]
    assert len(set(by_index)) == N
    before = _files(pack)
    capsys.readouterr()
    assert main(argv) == 0
    assert f"{len(ANSWERS) * N} done, 0 to go" in capsys.readouterr().out
    assert _files(pack) == before  # nothing more, nothing rewritten


@pytest.mark.slow
def test_a_seeded_sample_is_what_generate_draws_with_that_seed(llm):
    """The batched, per-row-seeded sampler draws what transformers' own sampler (generate, batch 1, reseeded) draws
    with the same seed: MUCH's sampler, not a look-alike."""
    config = GenerationConfig(model_name="smol", temperature=0.7, max_new_tokens=MAX_NEW)
    question = {**ANSWERS[0], "question_id": "q"}
    seeds = [sample_seed(config.seed, i) for i in range(3)]
    batched = gen.generate_batch(llm, config, [{**question, "seed": s} for s in seeds])
    for seed, sample in zip(seeds, batched, strict=True):
        [alone] = gen.generate_batch(llm, GenerationConfig(model_name="smol", temperature=0.7, seed=seed,
                                                           max_new_tokens=MAX_NEW), [question])
        assert sample["output_tokens"] == alone["output_tokens"]
        # the batch changes float32 rounding (about 2e-6 here), not the draw
        assert np.allclose(sample["logits_values"], alone["logits_values"], atol=5e-5)


def test_samples_of_several_answers_in_one_batch_are_what_batch_one_draws(llm):
    """The default ``hf`` batch spans several answers (left-padded prompts of different lengths): each sample is still
    the one its answer and seed draw alone at batch 1 (benchmarks/bench_samples.py measures this path's speed)."""
    config = GenerationConfig(model_name="smol", temperature=1.0, max_new_tokens=MAX_NEW)
    items = [{**answer, "question_id": f"{answer['generation_id']}#{i}", "seed": sample_seed(config.seed, i)}
             for answer in ANSWERS for i in range(2)]
    assert len({len(item["prompt"]) for item in items}) > 1  # the batch needs padding
    batched = gen.generate_batch(llm, config, items)
    for item, sample in zip(items, batched, strict=True):
        [alone] = gen.generate_batch(llm, config, [item])
        assert sample["output_tokens"] == alone["output_tokens"], item["question_id"]
        for mine, theirs in zip(sample["logits_values"], alone["logits_values"], strict=True):
            assert np.allclose(mine, theirs, atol=SAME_PROBABILITIES), item["question_id"]


def test_the_default_hf_batch_spans_eight_answers():
    """``builder samples --engine hf`` batches the N samples of 8 answers (the fastest exact path measured on a CPU,
    BENCHMARKS.md); ``--batch-size`` overrides it."""
    from builder.cli import build_parser
    from builder.samples import SamplesOptions

    def _parse(argv: list[str]):
        return build_parser().parse_args(["samples", *argv])

    parser_args = ["--source", "x", "--out", "y", "--engine", "hf", "--model", "m"]
    options = SamplesOptions.from_args(_parse(parser_args))
    assert options.engine_options(4, "float32").batch_size == 32
    assert SamplesOptions.from_args(_parse([*parser_args, "--batch-size", "3"])).engine_options(4, None).batch_size == 3


@pytest.mark.slow
def test_a_killed_run_resumes_without_losing_or_duplicating(llm, tmp_path):
    """SIGKILL while the pack grows (a shard per answer), then resume: every (answer, index) once, and the same
    samples an uninterrupted run draws."""
    source, pack, clean = _source(tmp_path / "answers"), tmp_path / "pack", tmp_path / "clean"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    # one answer per batch and per shard: the pack grows answer by answer, so there is a moment to kill it in (the
    # default batch, 8 answers, draws these answers in one call and stores them together)
    one_by_one = ("--rows-per-shard", "1", "--batch-size", str(N))
    worker = subprocess.Popen([sys.executable, "-m", "builder", *_argv(source, pack, *one_by_one)],
                              cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 1500  # a guard only: a loaded CPU takes minutes to load the GGUF
        while time.time() < deadline and worker.poll() is None:
            manifest = pack / "manifest.json"
            if manifest.is_file() and json.loads(manifest.read_text())["n_samples"] >= N:
                break
            time.sleep(0.2)
        assert worker.poll() is None, "the run ended before it could be killed"
        worker.send_signal(signal.SIGKILL)
    finally:
        worker.wait()
    stored = json.loads((pack / "manifest.json").read_text())["n_samples"]
    assert N <= stored < len(ANSWERS) * N
    assert main(_argv(source, pack, *one_by_one)) == 0
    assert main(_argv(source, clean)) == 0
    resumed = load_samples(pack, cache_dir=tmp_path / "cache").to_pandas()
    reference = load_samples(clean, cache_dir=tmp_path / "cache").to_pandas()
    keys = list(zip(resumed["generation_id"], resumed["sample_index"], strict=True))
    assert len(keys) == len(set(keys)) == len(ANSWERS) * N
    # same draws (tokens, text); sample_id hashes the float32 values, whose last bits differ between the killed
    # process (one torch thread) and this one
    resumed["tokens"] = resumed["output_tokens"].map(tuple)
    reference["tokens"] = reference["output_tokens"].map(tuple)
    columns = ["generation_id", "sample_index", "output", "tokens"]
    assert resumed[columns].sort_values(columns[:2]).values.tolist() == reference[columns].sort_values(
        columns[:2]).values.tolist()


@pytest.mark.slow
def test_verify_and_replay_read_a_pack_with_its_own_settings(llm, tmp_path, capsys):
    source, pack = _source(tmp_path / "answers"), tmp_path / "pack"
    assert main([*_argv(source, pack, "--temperature", "0.7", "--limit", "1"), "--stored-candidates", "8"]) == 0
    capsys.readouterr()
    # no --temperature: the pack's 0.7; 8 stored candidates checked as 8
    assert main(["verify", "--out", str(tmp_path / "v"), "--source", str(pack), "--model", _smollm.gguf_path(),
                 "--rows", "10", "--tolerance", "5e-5"]) == 0
    assert f"verify: {N} rows" in capsys.readouterr().out
    report = json.loads((tmp_path / "v" / "verify.json").read_text())
    assert report["problems"] == [] and report["max_abs_diff"] <= 5e-5
    assert main(["replay", "--out", str(tmp_path / "r"), "--source", str(pack), "--model", _smollm.gguf_path()]) == 0
    replayed = [json.loads(line) for line in (tmp_path / "r" / "replay.jsonl").read_text().splitlines()]
    assert sorted(r["generation_id"] for r in replayed) == [f"unseen-en#{i}" for i in range(N)]
    assert {r["replay_temperature"] for r in replayed} == {0.7}
    # a broken sample is named by answer and index
    from much_dataset.samples import iter_pack_rows
    row = next(iter_pack_rows(pack))
    row = {**row, "generation_id": "unseen-en#0", "output": "tampered"}
    from builder.verify import row_problems
    problems = row_problems(row, eos_ids={2}, decode=lambda t: "x", top=8)
    assert any(p.rule == "output" and p.generation_id == "unseen-en#0" for p in problems)


# ----------------------------------------------------------------------------------------------------------------
# The pack format, without a model


def test_load_samples_orders_by_dataset_then_index_and_names_what_is_missing(tmp_path):
    pack = tmp_path / "pack"
    # written out of order, across shards; a concurrent writer's duplicate of (b, 1) is not listed twice
    fake_pack(pack, fake_rows("b", range(3, -1, -1)) + fake_rows("a", range(4)) + fake_rows("b", range(1, 2)))
    dataset = [{"generation_id": "a"}, {"generation_id": "b"}]
    samples = load_samples(pack, dataset=dataset, cache_dir=tmp_path / "cache")
    assert list(zip(samples["generation_id"], samples["sample_index"], strict=True)) == [
        (g, i) for g in "ab" for i in range(4)]
    grouped = samples_by_row(samples, dataset)
    assert len(grouped) == 2 and grouped.counts == [4, 4]
    assert list(grouped[1]["output"]) == [f"b {i}" for i in range(4)]
    assert load_samples(pack, dataset=dataset[1:], n=2, cache_dir=tmp_path / "cache").num_rows == 2
    with pytest.raises(MissingSamplesError, match=r"generation_id='c'.*samples pack .*pack \(model 'fake'\)"):
        load_samples(pack, dataset=[*dataset, {"generation_id": "c"}], cache_dir=tmp_path / "cache")
    with pytest.raises(MissingSamplesError, match="generation_id='a': sample_index 4"):
        load_samples(pack, dataset=dataset, n=5, cache_dir=tmp_path / "cache")
    with pytest.raises(SamplesError, match="not 'other'"):
        load_samples(pack, model="other")
    with pytest.raises(SamplesError, match="not a samples pack"):
        load_samples(tmp_path / "nowhere")
    # a shard left by a killed run (written, never named by the manifest) is not read
    (pack / "shards" / "orphan.parquet").write_bytes(b"partial")
    assert load_samples(pack, dataset=dataset, cache_dir=tmp_path / "cache").num_rows == 8


def test_trim_candidates_keeps_the_sampled_token():
    row = fake_rows("a", range(1))[0]
    row["output_tokens"] = [row["logits_token_ids"][0][0], row["logits_token_ids"][1][10],
                            row["logits_token_ids"][2][3]]
    trimmed = trim_candidates(row, 4)
    assert [len(ids) for ids in trimmed["logits_token_ids"]] == [4, 5, 4]
    assert trimmed["logits_token_ids"][1][-1] == row["output_tokens"][1]
    assert trimmed["logits_values"][1][-1] == row["logits_values"][1][10]


def test_another_configuration_is_refused_before_the_model_loads(tmp_path, capsys):
    pack = tmp_path / "pack"
    fake_pack(pack, fake_rows("a", range(2)))
    source = _source(tmp_path / "answers")
    assert main(["samples", "--source", str(source), "--out", str(pack), "--model", str(source / "generations.jsonl"),
                 "--n", "2"]) == 2
    assert "built differently" in capsys.readouterr().err


def test_answers_of_several_known_configs_need_one_chosen(tmp_path, capsys):
    """A MUCH folder holds 8 configs (4 models): sampling them all with one model would be wrong."""
    from builder.configs import MUCH_CONFIG_IDS

    source = tmp_path / "answers"
    source.mkdir()
    rows = [{**ANSWERS[0], "generation_id": f"g{i}", "generation_config": config}
            for i, config in enumerate(MUCH_CONFIG_IDS[:2])]
    (source / "generations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["samples", "--source", str(source), "--out", str(tmp_path / "pack"), "--model", "m", "--n", "2"]) == 2
    assert "pass --generation-config" in capsys.readouterr().err
    assert not (tmp_path / "pack").exists()
