"""Options that used to go unheard (issue 54, "quiet options") and the one encoder rule (issue 53): a resource option
no asked signal reads is named in a note (a missing folder too); an unknown ``--encoder`` is refused naming the
option, the value and the known names before anything loads; no ``--encoder`` means MiniLM whatever is installed,
and without its extra that is an error naming the extra and ``--encoder``, never another encoder in silence."""

from __future__ import annotations

import pytest

from tests.much_metric.baselines._sampling import sample_split


@pytest.fixture()
def folder(tmp_path):
    split = sample_split()
    for lang in sorted(set(split["lang"])):
        (tmp_path / "data" / lang).mkdir(parents=True)
        split.filter(lambda r, lang=lang: r["lang"] == lang).to_parquet(
            tmp_path / "data" / lang / "test-00000-of-00001.parquet")
    return tmp_path


@pytest.fixture()
def no_model_loads(monkeypatch):
    """Any encoder construction (a hub download for an unknown name) fails the test."""
    from much_metric.baselines import encoders

    def forbidden(*args, **kwargs):
        raise AssertionError(f"an encoder was loaded: {args}")

    monkeypatch.setattr(encoders.SentenceEncoder, "__init__", forbidden)
    monkeypatch.setattr(encoders.ObserverEncoder, "__init__", forbidden)


def test_resource_options_no_asked_signal_reads_are_named(folder, tmp_path, capsys):
    from much_metric.cli import main

    missing = tmp_path / "no_such_pack"
    code = main(["run", "--source", str(folder), "--signals", "token_likelihood", "--samples", str(missing),
                 "--reference", str(folder), "--encoder", "minilm", "--bootstrap", "0", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    notes = " ".join(printed.split())  # notes wrap at the terminal width
    assert f"note: --samples {missing} is not used: no asked signal reads samples of every row (and {missing} " \
           "does not exist)" in notes
    assert f"note: --reference {folder} is not used: no asked signal reads the reference articles" in notes
    assert "note: --encoder minilm is not used: no asked signal reads a text encoder" in notes


def test_an_option_a_signal_reads_gets_no_note(folder, capsys):
    from much_metric.cli import main

    code = main(["run", "--source", str(folder), "--signals", "token_likelihood,sample_rouge1", "--samples",
                 "sample", "--tokenizer", "smollm2", "--bootstrap", "0", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "is not used" not in printed


@pytest.mark.parametrize("signals", ["semantic_isotropy", "token_likelihood"])
def test_an_unknown_encoder_is_refused_before_anything_loads(folder, capsys, no_model_loads, signals):
    from much_metric.cli import main

    code = main(["run", "--source", str(folder), "--signals", signals, "--encoder", "bogus", "--samples", "sample",
                 "--bootstrap", "0", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--encoder 'bogus': not an encoder; known: minilm, observer[:MODEL[@LAYER]]" in err
    assert "missing key" not in err  # the error is a sentence, not a KeyError's repr


@pytest.mark.parametrize("name", ["bogus", "minilm2", "./no/such/folder", "a/b/c", "observer:smollm2@last", ""])
def test_only_a_known_name_a_folder_or_an_owner_name_hub_id_is_an_encoder(name, no_model_loads):
    from much_dataset.params import InvalidParameterError
    from much_metric.baselines.encoders import check_encoder_name, load_encoder

    with pytest.raises(InvalidParameterError, match="--encoder"):
        load_encoder(name)
    for accepted in ("minilm", "observer", "observer:smollm2@-2", "sentence-transformers/all-MiniLM-L6-v2"):
        assert check_encoder_name(accepted) == accepted


def test_an_existing_folder_is_an_encoder(tmp_path):
    from much_metric.baselines.encoders import check_encoder_name

    assert check_encoder_name(str(tmp_path)) == str(tmp_path)


def test_the_default_encoder_does_not_depend_on_what_is_installed(monkeypatch, no_model_loads):
    """Without the sampling extra the default is an error naming the extra and --encoder -- not SmolLM2's hidden
    states in silence (which gave other numbers for the same command on another machine)."""
    from much_metric.baselines import encoders
    from much_metric.commands import error_message

    monkeypatch.setattr(encoders, "_minilm_path", lambda: None)
    assert encoders.default_encoder_name() == "minilm"
    with pytest.raises(ModuleNotFoundError) as raised:
        encoders.load_encoder(None)
    message = error_message(raised.value, "run")
    assert "--encoder minilm" in message and "'sampling' extra" in message and "--encoder: observer" in message
    assert "pip install '.[sampling]'" in message


@pytest.mark.parametrize("read", ["neighbours", "internals"])
def test_a_manifest_that_is_not_json_is_named(tmp_path, read):
    """A truncated manifest.json is refused naming the file, not with a bare JSONDecodeError ("Expecting value")."""
    (tmp_path / "manifest.json").write_text('{"format": ', encoding="utf-8")
    if read == "neighbours":
        from much_metric.baselines.neighbour_job import reduce_shards

        call = lambda: reduce_shards(tmp_path, tokenizer=None)  # noqa: E731
    else:
        from builder.internals_store import read_manifest

        call = lambda: read_manifest(tmp_path)  # noqa: E731
    with pytest.raises(ValueError, match=r"manifest\.json: not valid JSON") as raised:
        call()
    assert str(tmp_path) in str(raised.value)


@pytest.mark.parametrize(("make", "bad", "other"), [
    ("generation", {"top_k": -1}, "max_new_tokens"),
    ("generation", {"max_new_tokens": 0}, "top_k"),
    ("generation", {"top_p": 1.5}, "top_k"),
    ("ktc", {"tau": -0.1}, "alpha"),
    ("ktc", {"alpha": 1.5}, "tau"),
])
def test_each_bad_option_is_named_alone(make, bad, other):
    """Not 'top_k must be >= 0 and max_new_tokens >= 1': the message names the one option that is wrong, and its
    value."""
    from much_dataset.params import InvalidParameterError

    if make == "generation":
        from builder.configs import GenerationConfig as Config
    else:
        from much_metric.baselines.methods.ktc import KTCConfig as Config
    (name, value), = bad.items()
    with pytest.raises(InvalidParameterError) as raised:
        Config(**bad)
    message = str(raised.value)
    assert f"{name} must be" in message and f"got {value!r}" in message
    assert other not in message


def test_the_degradation_grid_names_the_resources_it_does_not_read(folder, capsys):
    from much_metric.cli import main

    code = main(["run", "--source", str(folder), "--top-k-grid", "0,24", "--signals", "token_likelihood",
                 "--samples", "sample", "--bootstrap", "0", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "note: --samples is not used by --top-k-grid" in " ".join(printed.split())
