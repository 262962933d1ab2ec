"""The single source of truth for MUCH columns, dtypes and conventions.

Every other module (loader, builder, metric, baselines, exporter) imports its column names and conventions from
here. Importing this module is cheap: the ``datasets`` feature objects are only built by :func:`features`.

Conventions (docs/reference-behaviour.md#hub-columns):

* One row = one LLM generation. ``output_tokens`` are the generated token ids (prompt excluded); the last one is
  the EOS/EOT token, and ``output`` is their decoding with special tokens kept.
* ``logits_values[i]`` are **probabilities**, despite the name: softmax over the full vocabulary of
  ``raw_logits / temperature``, restricted to the top :data:`TOP_K` and *not* renormalised (rows sum to < 1),
  sorted by decreasing probability. ``logits_token_ids[i]`` are the matching vocabulary ids. Row ``i`` is the
  distribution that produced ``output_tokens[i]``; the sampled token is always among the 24 in MUCH.
* ``token_chunks`` are the claims: lists of consecutive indices into ``output_tokens``, contiguous and exhaustive.
  The last chunk is the EOS token alone (the "EOS claim"), which evaluation drops.
* ``labels`` has one entry per chunk: :data:`HALLUCINATED` (-1) = factually incorrect / unverifiable,
  :data:`CORRECT` (+1). The EOS claim's label is always +1. In metrics the positive class is "hallucinated".
* ``human_labels_0`` / ``human_labels_1`` use the same convention, or the sentinel :data:`NO_HUMAN_LABEL` (``[0]``)
  when that annotator did not label the sample.
* :data:`LABEL_COLUMNS` are the labels; a split whose labels are withheld (a hidden test split: ``python -m builder
  export --withhold-labels``) has every column but these (:data:`UNLABELLED_COLUMNS`), and its labels live in a
  label file on the leaderboard's server only (:mod:`much_dataset.label_files`). :data:`LABEL_DERIVED_FIELDS` names
  the builder's per-row fields computed from labels (judge outputs, agreement, filter reasons, per-claim
  annotations): never published with a withheld split either.
* ``stopword_mask`` (our exports only; the hub lacks it) is, per output token, whether that token decoded alone is
  in the evaluation stopword set (:data:`much_dataset.stopwords.EVALUATION_STOPWORDS`).
* Token-level uncertainty scores everywhere in this project: one float per output token (EOS included),
  **higher = more uncertain**.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # pragma: no cover
    import datasets

__all__ = [
    "TOP_K",
    "HALLUCINATED",
    "CORRECT",
    "LABEL_VALUES",
    "NO_HUMAN_LABEL",
    "LANGUAGES",
    "SPLITS",
    "GENERATION_ID",
    "GENERATION_CONFIG",
    "LANG",
    "WIKI_URL",
    "PROMPT",
    "OUTPUT",
    "OUTPUT_TOKENS",
    "LOGITS_TOKEN_IDS",
    "LOGITS_VALUES",
    "TOKEN_CHUNKS",
    "LABELS",
    "HUMAN_LABELS_0",
    "HUMAN_LABELS_1",
    "STOPWORD_MASK",
    "HUB_COLUMNS",
    "DERIVED_COLUMNS",
    "COLUMNS",
    "LABEL_COLUMNS",
    "UNLABELLED_COLUMNS",
    "LABEL_DERIVED_FIELDS",
    "missing_label_columns",
    "TOKEN_ALIGNED_COLUMNS",
    "HUB_REPO_ID",
    "CONFIGS_REPO_ID",
    "SIGNALS_REPO_ID",
    "TRASH_REPO_ID",
    "SIGNAL_COLUMNS",
    "SAMPLE_INDEX",
    "SAMPLE_ID",
    "FINISHED",
    "SAMPLING",
    "SAMPLE_COLUMNS",
    "MUCH_CONFIGS",
    "SYSTEM_PROMPT",
    "BRIEF_SUFFIX",
    "chat_messages",
    "features",
    "signal_features",
]

#: MUCH's system prompt (docs/reference-behaviour.md#prompt): it decides every stored probability, so every chat of
#: the toolkit (builder generate/samples, much monitor, the generation-time estimate) is built from this one constant.
SYSTEM_PROMPT: Final = "You are a helpful assistant. Always answer questions directly."
#: The brevity sentence MUCH's chats append to :data:`SYSTEM_PROMPT` (``brief=True``, the default).
BRIEF_SUFFIX: Final = " Your answers should be very concise and precise."


def chat_messages(question: str, *, brief: bool = True) -> list[dict[str, str]]:
    """MUCH's chat: the system prompt (+ the brevity sentence) and the question as one user message."""
    system = SYSTEM_PROMPT + (BRIEF_SUFFIX if brief else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


#: Number of candidate probabilities stored per generated token.
TOP_K: Final = 24

#: Label of a hallucinated (factually incorrect or unverifiable) claim; the positive class of every metric.
HALLUCINATED: Final = -1
#: Label of a correct claim.
CORRECT: Final = 1
LABEL_VALUES: Final = frozenset({HALLUCINATED, CORRECT})
#: ``human_labels_*`` value when that annotator did not label the sample.
NO_HUMAN_LABEL: Final = (0,)

#: Languages of MUCH, which are also the dataset configs besides ``"all"``.
LANGUAGES: Final = ("en", "fr", "es", "de")
#: Published splits; ``trash`` is the reproducibility-only split of annotator disagreements.
SPLITS: Final = ("train", "test")

# Column names of orailix/MUCH (docs/reference-behaviour.md#hub-columns), in the hub's order.
GENERATION_ID: Final = "generation_id"
GENERATION_CONFIG: Final = "generation_config"
LANG: Final = "lang"
WIKI_URL: Final = "wiki_url"
PROMPT: Final = "prompt"
OUTPUT: Final = "output"
OUTPUT_TOKENS: Final = "output_tokens"
LOGITS_TOKEN_IDS: Final = "logits_token_ids"
LOGITS_VALUES: Final = "logits_values"
TOKEN_CHUNKS: Final = "token_chunks"
LABELS: Final = "labels"
HUMAN_LABELS_0: Final = "human_labels_0"
HUMAN_LABELS_1: Final = "human_labels_1"
# Derived column our exports add.
STOPWORD_MASK: Final = "stopword_mask"

HUB_COLUMNS: Final = (
    GENERATION_ID, GENERATION_CONFIG, LANG, WIKI_URL, PROMPT, OUTPUT, OUTPUT_TOKENS,
    LOGITS_TOKEN_IDS, LOGITS_VALUES, TOKEN_CHUNKS, LABELS, HUMAN_LABELS_0, HUMAN_LABELS_1,
)
DERIVED_COLUMNS: Final = (STOPWORD_MASK,)
COLUMNS: Final = HUB_COLUMNS + DERIVED_COLUMNS
#: The label columns: withheld together from a hidden split (the only columns a detector never reads).
LABEL_COLUMNS: Final = (LABELS, HUMAN_LABELS_0, HUMAN_LABELS_1)
#: What a split whose labels are withheld publishes: every column a detector needs, no label.
UNLABELLED_COLUMNS: Final = tuple(name for name in COLUMNS if name not in LABEL_COLUMNS)
#: Per-row fields of the builder's artifacts that are labels or computed from them (judge outputs and their
#: reasons, human annotations, agreement statistics, the filter's label-dependent reasons, Mu-SHROOM's per-claim
#: annotations): a withheld export publishes none of them (it writes :data:`UNLABELLED_COLUMNS` only, by name).
LABEL_DERIVED_FIELDS: Final = frozenset({
    *LABEL_COLUMNS,
    "judge", "rule",  # labels.<judge>.jsonl: which judge / span rule produced the labels
    "annotator",  # human.<annotator>.jsonl
    "labels_reference", "labels_hard", "soft_max",  # import-mushroom: per-claim label variants and annotations
    "split", "reason",  # filter.jsonl: trash when the judges disagree
})
#: Columns with one entry per output token.
TOKEN_ALIGNED_COLUMNS: Final = (OUTPUT_TOKENS, LOGITS_TOKEN_IDS, LOGITS_VALUES, STOPWORD_MASK)

HUB_REPO_ID: Final = "orailix/MUCH"
CONFIGS_REPO_ID: Final = "orailix/MUCH-configs"
SIGNALS_REPO_ID: Final = "orailix/MUCH-signals"
TRASH_REPO_ID: Final = "orailix/MUCH-trash-only-for-reproducibility"

# Samples packs (much_dataset.samples, written by ``python -m builder samples``): N further answers per row.
#: Which of a row's samples (0..N-1); the sample's seed is ``sampling["seed"]`` (much_dataset.samples.sample_seed).
SAMPLE_INDEX: Final = "sample_index"
#: The sample's own id (the ``generation_id`` the generate step would give that generation).
SAMPLE_ID: Final = "sample_id"
#: Whether the answer ended with the model's EOS (not cut at max_new_tokens), as in generate rows.
FINISHED: Final = "finished"
#: The sampler of the row (temperature, top_p, top_k, max_new_tokens, seed, ...).
SAMPLING: Final = "sampling"
#: A sample row's first columns: the answer's ``generation_id``, the ``sample_index``, then a generate row's
#: ``output``, ``output_tokens``, ``logits_token_ids``, ``logits_values`` (per position the top candidates,
#: ``stored_candidates`` of the pack's manifest, 24 unless it says fewer, plus the sampled token when it ranked lower),
#: ``finished`` and ``sampling``.
SAMPLE_COLUMNS: Final = (GENERATION_ID, SAMPLE_INDEX, OUTPUT, OUTPUT_TOKENS, LOGITS_TOKEN_IDS, LOGITS_VALUES,
                         FINISHED, SAMPLING)

#: Columns of orailix/MUCH-signals (docs/reference-behaviour.md#signal-files): one row per (generation, signal), one
#: value per output token.
SIGNAL_COLUMNS: Final = ("generation_id", "signal_name", "values")


#: The 8 generation configs of MUCH (docs/reference-behaviour.md#generation-configs): ``generation_config`` id -> (model
#: name, temperature). All share
#: seed 1234, top_p 0.9, top_k 20, max_new_tokens 500. ``output_tokens`` / ``logits_token_ids`` of a row are ids of
#: that model's tokenizer.
MUCH_CONFIGS: Final = {
    "iNPhBxMXcn6uNgZtdDG7xQ": ("meta-llama/Llama-3.2-3B-Instruct", 1.0),
    "bESSWQcqIaYZslTy7sy1Hg": ("meta-llama/Llama-3.2-3B-Instruct", 0.7),
    "HmRDWrH188fefK4uXNC_ew": ("meta-llama/Llama-3.1-8B-Instruct", 1.0),
    "h_RExrbMa9DSQoKjgXVAmw": ("meta-llama/Llama-3.1-8B-Instruct", 0.7),
    "YRYI5VveUmgxhdPi8apIgA": ("mistralai/Ministral-8B-Instruct-2410", 1.0),
    "ErZg41d6uehYNo-QcoCVAQ": ("mistralai/Ministral-8B-Instruct-2410", 0.7),
    "Q6U-toJrtxVpeYhI11BKiQ": ("google/gemma-3-4b-it", 1.0),
    "XRKCmRjxLGlxWmIyqYQVCA": ("google/gemma-3-4b-it", 0.7),
}


def missing_label_columns(column_names: Any) -> list[str]:
    """The label columns (:data:`LABEL_COLUMNS`) that ``column_names`` lacks: all three for a split whose labels
    are withheld, none for a labelled one."""
    present = set(column_names)
    return [name for name in LABEL_COLUMNS if name not in present]


def features(*, with_stopword_mask: bool = True, with_labels: bool = True) -> datasets.Features:
    """The typed ``datasets.Features`` of a MUCH split.

    ``logits_token_ids`` and ``logits_values`` are ``Array2D((None, 24))`` (int32 / float32), so a batch in numpy
    format comes out as ``(n_tokens, 24)`` arrays without a Python loop. Ids are int32, labels int8.
    ``with_labels=False``: the features of a split whose labels are withheld (no :data:`LABEL_COLUMNS`).
    """
    import datasets

    columns = {
        GENERATION_ID: datasets.Value("string"),
        GENERATION_CONFIG: datasets.Value("string"),
        LANG: datasets.Value("string"),
        WIKI_URL: datasets.Value("string"),
        PROMPT: datasets.Value("string"),
        OUTPUT: datasets.Value("string"),
        OUTPUT_TOKENS: datasets.List(datasets.Value("int32")),
        LOGITS_TOKEN_IDS: datasets.Array2D(shape=(None, TOP_K), dtype="int32"),
        LOGITS_VALUES: datasets.Array2D(shape=(None, TOP_K), dtype="float32"),
        TOKEN_CHUNKS: datasets.List(datasets.List(datasets.Value("int32"))),
        LABELS: datasets.List(datasets.Value("int8")),
        HUMAN_LABELS_0: datasets.List(datasets.Value("int8")),
        HUMAN_LABELS_1: datasets.List(datasets.Value("int8")),
    }
    if with_stopword_mask:
        columns[STOPWORD_MASK] = datasets.List(datasets.Value("bool"))
    if not with_labels:
        columns = {name: value for name, value in columns.items() if name not in LABEL_COLUMNS}
    return datasets.Features(columns)


def signal_features() -> datasets.Features:
    """Features of an orailix/MUCH-signals-style table (higher value = more uncertain)."""
    import datasets

    return datasets.Features(
        {
            "generation_id": datasets.Value("string"),
            "signal_name": datasets.Value("string"),
            "values": datasets.List(datasets.Value("float64")),  # float64: reading back gives the same metrics
        }
    )


#: The 8 generation configs of MUCH (docs/reference-behaviour.md#generation-configs): id -> model and sampling
#: temperature, for ``by=`` breakdowns
#: (from :data:`MUCH_CONFIGS`).
MUCH_GENERATION_CONFIGS: dict[str, dict[str, Any]] = {
    config_id: {"model": model, "temperature": temperature}
    for config_id, (model, temperature) in MUCH_CONFIGS.items()
}
