"""Issue #36: detectors on internals packs -- the linear probe and the claim head as detector folders.

Tiny packs are written here (manifest.json + one safetensors shard, the format :func:`much_dataset.load_internals`
reads) for synthetic MUCH-shaped rows, with the claim labels planted in one hidden unit and one attention head.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")
pytest.importorskip("sklearn")

from much_dataset import schema  # noqa: E402
from much_dataset.internals import load_internals  # noqa: E402
from much_dataset.synthetic import make_rows  # noqa: E402
from much_metric.baselines import token_arrays  # noqa: E402
from much_metric.learned import (  # noqa: E402
    KINDS,
    ClaimHeadDetector,
    PackMismatchError,
    ProbeDetector,
    load_detector,
    make_folds,
    row_info,
)

N_LAYERS, N_HEADS, HIDDEN_SIZE, HIDDEN_LAYERS = 3, 2, 8, (1, 2)


def _rows(n: int, seed: int) -> list[dict]:
    rows = make_rows(n, seed=seed, mean_tokens=10.0)
    for index, row in enumerate(rows):  # one article per row (the synthetic rows share one URL)
        row[schema.WIKI_URL] = f"https://{row[schema.LANG]}.wikipedia.org/wiki/Topic_{seed}_{index}"
    return rows


def _token_labels(row: dict) -> np.ndarray:
    labels = np.zeros(len(row[schema.OUTPUT_TOKENS]))
    for chunk, label in zip(row[schema.TOKEN_CHUNKS], row[schema.LABELS], strict=True):
        labels[chunk] = label == schema.HALLUCINATED
    return labels


def _write_pack(folder, rows, *, weights="a" * 64, hidden_layers=HIDDEN_LAYERS, seed=0, edit=None):
    """A pack of ``rows``: hidden unit 0 of every layer and head (0, 0)'s previous-token attention carry the
    token's claim label plus noise; ``edit(gid, arrays)`` may change a row's arrays before writing."""
    from builder.internals_store import write_shard

    rng = np.random.default_rng(seed)
    tensors, entries = {}, {}
    for row in rows:
        gid, label = row[schema.GENERATION_ID], _token_labels(row)
        n = len(label)
        attention = rng.uniform(0.0, 0.5, size=(n, N_LAYERS, N_HEADS)).astype(np.float32)
        attention[:, 0, 0] = np.clip(0.2 + 0.5 * label + rng.normal(0, 0.1, n), 0, 1)  # attention weights
        hidden = rng.standard_normal((n, len(hidden_layers), HIDDEN_SIZE)).astype(np.float32)
        hidden[:, :, 0] += 2.0 * label[:, None]
        arrays = {"attention_to_previous": attention, "hidden": hidden.astype(np.float16)}
        if edit is not None:
            edit(gid, arrays)
        tensors.update({f"{gid}/{name}": np.ascontiguousarray(value) for name, value in arrays.items()})
        entries[gid] = {"n_tokens": n, "max_abs_diff": 0.0}
    folder.mkdir(parents=True, exist_ok=True)
    shard, size = write_shard(folder, tensors)  # content-addressed, as the builder writes it
    manifest = {"format": "much-internals/1", "model": "tiny-observer", "weights_sha256": weights,
                "n_layers": N_LAYERS, "n_heads": N_HEADS, "hidden_size": HIDDEN_SIZE,
                "hidden_layers": list(hidden_layers), "attention_window": 0, "compression": "none",
                "dtypes": {"attention_to_previous": "float32", "hidden": "float16"},
                "rows": {g: {**e, "shard": shard} for g, e in entries.items()},
                "shards": {shard: {"bytes": size, "sha256": shard.split(".")[0]}},
                "n_rows": len(entries), "n_tokens": sum(e["n_tokens"] for e in entries.values())}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return load_internals(folder)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Rows, their pack, a leave-one-language-out fold and a probe and a claim head fitted on it."""
    root = tmp_path_factory.mktemp("internals_detectors")
    rows = _rows(48, seed=3)
    pack = _write_pack(root / "pack", rows)
    fold = make_folds(row_info(rows), "leave-one-language-out", only="de")[0]
    train, validation, test = ([rows[i] for i in part] for part in (fold.train, fold.validation, fold.test))
    probe = ProbeDetector(layer=1, C=1.0).fit(train, validation, internals=pack, progress=False)
    head = ClaimHeadDetector(max_epochs=12, patience=12, learning_rate=0.01, hidden=8)
    head = head.fit(train, validation, internals=pack, progress=False)
    return {"root": root, "rows": rows, "pack": pack, "train": train, "test": test, "probe": probe, "head": head}


@pytest.fixture
def learned_plugin():
    """The ``learned:`` baselines (an entry point; registered here when the environment's metadata predates it)."""
    from much_metric.baselines import registry
    from much_metric.learned import plugin

    known = registry._REGISTRY.all()
    added = [baseline for baseline in plugin.BASELINES if baseline.name not in known]
    for baseline in added:
        registry.register(baseline)
    yield
    for baseline in added:
        registry.unregister(baseline.name)


def test_claim_head_forward_shapes_and_attention_stays_within_a_claim():
    import torch

    from much_metric.learned import _torch

    model = _torch.build(KINDS["claim_head"], 5, random_state=0, hyper={"hidden": 8, "layers": 2, "heads": 2}).eval()
    rng = np.random.default_rng(0)
    inputs = torch.from_numpy(rng.standard_normal((2, 7, 5)).astype(np.float32))
    segments = torch.tensor([[0, 0, 0, 1, 1, 2, -1], [0, 1, 1, 1, 2, 2, 2]])
    with torch.no_grad():
        logits = model(inputs, segments)
        assert logits.shape == (2, 7)
        outside = inputs.clone()
        outside[0, [0, 1, 2, 5, 6]] += 3.0  # every token of sample 0 but claim 1's, padding included
        outside[1] += 3.0  # another sample
        changed = model(outside, segments)
        inside = inputs.clone()
        inside[0, 4] += 3.0
        moved = model(inside, segments)
    assert torch.allclose(changed[0, 3:5], logits[0, 3:5], atol=1e-6)
    assert not torch.allclose(changed[0, :3], logits[0, :3])
    assert not torch.allclose(moved[0, 3], logits[0, 3])  # token 3 attends to token 4 of its claim


def test_claim_inputs_give_the_claim_mask_and_positions():
    from much_metric.baselines._arrays import TokenArrays
    from much_metric.learned.internals import claim_inputs, claim_segments

    arrays = TokenArrays(["a", "b"], np.array([0, 6, 9]), np.zeros(9, np.int64), np.zeros((9, 24), np.int64),
                         np.full((9, 24), 0.01), [[[0, 1, 2], [3], [4, 5]], [[1, 0], [2]]],
                         np.array([0, 1, 0, 0, 0, 0, 0, 0, 1], bool))
    assert claim_segments(arrays).tolist() == [0, 0, 0, 1, 2, 2, 0, 0, 1]
    features = claim_inputs(arrays)
    assert features[:, 0].tolist() == [1, 1, 1, 1, 0, 0, 1, 1, 0]  # the last chunk (EOS) is not a claim
    assert features[:, 1].tolist() == [0, 0.5, 1, 0, 0, 1, 0, 1, 0]
    np.testing.assert_allclose(features[:, 3], np.log([3, 3, 3, 1, 2, 2, 2, 2, 1]), rtol=1e-6)
    assert features[:, 4].tolist() == [0, 1, 0, 0, 0, 0, 0, 0, 1]


def test_a_claims_scores_depend_only_on_its_tokens_internals(world, tmp_path):
    """The fitted claim head on a pack whose attention changed outside one claim (same rows): that claim's token
    scores are unchanged; changed inside it, they move."""
    row = world["test"][0]
    chunks = row[schema.TOKEN_CHUNKS]
    claim = np.asarray(chunks[0])
    others = np.setdiff1d(np.arange(len(row[schema.OUTPUT_TOKENS])), claim)

    def change(tokens):
        def edit(gid, arrays):
            if gid == row[schema.GENERATION_ID]:
                arrays["attention_to_previous"][tokens] = 0.9
        return edit

    before = world["head"].token_scores([row], world["pack"])
    outside = world["head"].token_scores([row], _write_pack(tmp_path / "outside", world["rows"], edit=change(others)))
    inside = world["head"].token_scores([row], _write_pack(tmp_path / "inside", world["rows"], edit=change(claim)))
    np.testing.assert_allclose(outside[claim], before[claim], atol=1e-6)
    assert not np.allclose(outside[others], before[others])
    assert not np.allclose(inside[claim], before[claim])


@pytest.mark.parametrize("name", ["probe", "head"])
def test_save_load_roundtrip_gives_identical_scores(world, tmp_path, name):
    model = world[name]
    folder = model.save(tmp_path / name)
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == ["card.md", "config.json", "training_rows.json",
                                                                      "weights.safetensors"]
    loaded = load_detector(folder)
    assert loaded.config["internals"]["weights_sha256"] == "a" * 64
    np.testing.assert_array_equal(loaded.token_scores(world["test"], world["pack"]),
                                  model.token_scores(world["test"], world["pack"]))
    assert loaded.training_generation_ids == sorted({*model.detector_.training_rows["train"],
                                                     *model.detector_.training_rows["validation"]})


def test_probe_scores_equal_scikit_learn_logistic_regression(world):
    """Differential: a StandardScaler + LogisticRegression pipeline fitted here on the same tokens (each labelled
    claim's non-stopword tokens, its label; the last chunk left out) gives the probe's token logits."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pack, train, test = world["pack"], world["train"], world["test"]

    def features(rows):
        return np.concatenate([np.asarray(pack[r[schema.GENERATION_ID]]["hidden"][:, 0], np.float32) for r in rows])

    targets = []
    for row in train:
        target = np.full(len(row[schema.OUTPUT_TOKENS]), -1)
        for chunk, label in zip(row[schema.TOKEN_CHUNKS][:-1], row[schema.LABELS][:-1], strict=True):
            target[chunk] = 1 if label == schema.HALLUCINATED else 0
        target[np.asarray(row[schema.STOPWORD_MASK], bool)] = -1
        targets.append(target)
    target = np.concatenate(targets)
    keep = target >= 0
    reference = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=500, class_weight="balanced",
                                                                   random_state=0))
    reference.fit(features(train)[keep], target[keep])
    expected = reference.decision_function(features(test))
    got = world["probe"].detector_.token_logits(test, pack)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert np.corrcoef(got, expected)[0, 1] > 0.9999


def test_detectors_find_the_planted_signal(world):
    from much_metric.scoring import score

    test = world["test"]
    for name in ("probe", "head"):
        scores = token_arrays(test).split(world[name].token_scores(test, world["pack"]))
        result = score(scores, [r[schema.TOKEN_CHUNKS] for r in test], [r[schema.LABELS] for r in test],
                       [r[schema.STOPWORD_MASK] for r in test])
        assert result.roc_auc > 0.8, (name, result.roc_auc)


def test_a_pack_of_another_model_or_without_the_layer_is_refused(world, tmp_path):
    probe, head, test = world["probe"].detector_, world["head"].detector_, world["test"]
    other = _write_pack(tmp_path / "other", world["rows"], weights="b" * 64)
    for detector in (probe, head):
        with pytest.raises(PackMismatchError, match=r"manifest\.json: field 'weights_sha256'.*tiny-observer"):
            detector.token_scores(test, other)
    no_layer = _write_pack(tmp_path / "no-layer", world["rows"], hidden_layers=(2,))
    with pytest.raises(PackMismatchError, match=r"no-layer/manifest\.json: field 'hidden_layers' is \[2\].*"
                                                r"hidden_states\[1\]"):
        probe.token_scores(test, no_layer)
    with pytest.raises(ValueError, match="reads an internals pack"):
        probe.token_scores(test)
    with pytest.raises(ValueError, match=r"layer must be an integer in \[0, 4,096\] or None, got -1"):
        ProbeDetector(layer=-1)
    with pytest.raises(ValueError, match="hidden must be a multiple of 4"):
        ClaimHeadDetector(hidden=10)


def _export(folder, rows):
    """An export folder: the first half of the rows as its train split, the rest as its test split."""
    (folder / "rows").mkdir(parents=True)
    for split, part in (("train", rows[: len(rows) // 2]), ("test", rows[len(rows) // 2:])):
        with open(folder / "rows" / f"{split}.jsonl", "w", encoding="utf-8") as handle:
            for row in part:
                handle.write(json.dumps(row) + "\n")
    return folder


def test_much_train_internals_writes_a_folder_much_run_reads_back(world, tmp_path, capsys, learned_plugin):
    from much_metric.cli import main

    data = _export(tmp_path / "data", world["rows"])
    pack, out = str(world["root"] / "pack"), tmp_path / "probe-de"
    assert main(["train", "--source", str(data), "--internals", pack, "--detector", "probe", "--layer", "2",
                 "--fold", "de", "--out", str(out), "--no-progress"]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # prose wraps at 120 columns
    assert "held-out test" in printed and f"--internals {pack}" in printed
    detector = load_detector(out)
    assert detector.config["internals"]["hidden_layer"] == 2 and detector.config["protocol"]["internals"] == pack
    assert main(["run", "--source", str(data), "--internals", pack, "--signals", f"learned:{out},token_likelihood",
                 "--bootstrap", "0", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Learned probe" in printed, printed
    assert f"{len(detector.training_generation_ids)} of 48 rows left out because they trained or validated it" in \
        " ".join(printed.split())  # the training rows are left out, and the output says so (prose wraps at 120)
    # the same folder on a pack of another model, and a probe without a pack: one-line errors, exit 2
    other = tmp_path / "other"
    _write_pack(other, world["rows"], weights="c" * 64)
    assert main(["run", "--source", str(data), "--internals", str(other), "--signals", f"learned:{out}",
                 "--bootstrap", "0", "--no-progress"]) == 2
    assert "weights_sha256" in capsys.readouterr().err
    assert main(["run", "--source", str(data), "--signals", f"learned:{out}", "--bootstrap", "0",
                 "--no-progress"]) == 2
    assert "internals" in capsys.readouterr().err
    assert main(["train", "--source", str(data), "--detector", "probe", "--out", str(tmp_path / "x"),
                 "--no-progress"]) == 2
    assert "--internals PACK" in capsys.readouterr().err
