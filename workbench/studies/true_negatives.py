"""Study: MLM pre-training on true negatives (notebook 03).

Zhang, Zhao, Utiyama, Sumita, "Language Model Pre-training on True Negatives"
(AAAI 2023). Hard correction (HC, eq. 2) drops a masked position from the loss
when the prediction r_k is in the synonym list of the gold token w_k; the paper's
rule applies to single tokens only (footnote 5: words of several pieces are not
corrected), the workbench's ``word`` level extends it to whole jieba words for
Chinese. Soft regularization (SR, eq. 3) adds 1 - cos(e_k, e'_k) between the
input embeddings of gold and predicted token; its sentence-level variant (Sec. 5)
adds KL(H_p || H_s) between the prediction-filled and the original sentence.
Masking strategies: random tokens, whole words (WWM) and knowledge-based dynamic
masking (KDM, from the PCL/QBQTC solution).

The functions here run the notebook's experiments and return tables (the figures are
in ``workbench.viz``):

* masking: :func:`mask_draws`, :func:`masking_illustration`, :func:`single_draw_masks`,
  :func:`masked_share_summary` (including the transformers ``whole_word_mask``
  all-or-nothing pitfall on unspaced Chinese);
* pre-training: :func:`pretraining_grid` (masking x objective variant, :data:`OBJECTIVE_VARIANTS`),
  :func:`synonym_source_runs` (HC with other synonym tables), :func:`loss_history`;
* the paper's Table 2 per checkpoint: :func:`epoch_table` (every run's per-epoch held-out eval
  loss, perplexity and HC rates, and training-time HC rates, from its metrics.json) and
  :func:`table2` (one run in the paper's layout);
* correction statistics on held-out text at the token and word levels:
  :func:`heldout_texts`, :func:`correction_statistics`, :func:`correction_table`,
  :func:`corrected_examples`, and :func:`worked_example` (the paper's Figure 3);
* synonym sources (Table 6, second block): :func:`word_vectors` (:func:`corpus_word_vectors`,
  :func:`model_word_vectors`), :func:`embedding_lookup`, :func:`write_lexicon_tsv`, :func:`lexicon_coverage`, :func:`neighbours`;
* downstream: :func:`downstream_grid` and :func:`downstream_summary` (mean ± std over seeds);
* results: :func:`results_table`, :func:`synonym_source_table` and :func:`sr_level_table`
  (Table 6's two comparisons), :func:`headline_metrics` (metrics.json).
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from transformers import DataCollatorForLanguageModeling, PreTrainedModel
from transformers.utils import logging as transformers_logging

from workbench.checks import check_choice, check_int, check_number, check_seeds
from workbench.config import HC_LEVELS, Config, DataConfig, MaskingSpec, load_config
from workbench.data import load_texts
from workbench.lexicon import SynonymTable, token_text
from workbench.losses import IGNORE_INDEX, CorrectionStats, HardCorrectionLoss
from workbench.masking import JiebaSegmenter, build_collator, encode_words
from workbench.models import build_masked_lm
from workbench.stats import formatted, row_statistics, summarize
from workbench.train import finetune, pretrain_mlm
from workbench.vocab import load_tokenizer

STRATEGIES = ("random", "wwm", "kdm")
OBJECTIVES = ("plain", "hc", "sr")
"""The three objective names of the config (``objective.name``)."""
OBJECTIVE_VARIANTS: dict[str, dict[str, str]] = {
    "plain": {"name": "plain"},
    "hc": {"name": "hc", "hc_level": "token"},
    "hc_word": {"name": "hc", "hc_level": "word"},
    "sr": {"name": "sr", "level": "token"},
    "sr_sentence": {"name": "sr", "level": "sentence"},
}
"""The objectives a pre-training run can use, as ``objective`` overrides of the base config:
``hc`` is the paper's token rule (eq. 2, footnote 5), ``hc_word`` the workbench's whole-word
extension, ``sr`` the paper's eq. 3 (its "word-level" SR of Table 6: one cosine per masked token)
and ``sr_sentence`` the sentence-level KL of Sec. 5. Every other ``objective`` setting (SR weight,
prediction, KL direction, lexicon; ``hc_level`` for the held-out HC rates of plain and SR runs)
comes from the base config."""
DEFAULT_SOURCE = "lexicon"
"""The ``synonyms`` label of runs that use the base config's ``objective.lexicon``."""
TRANSFORMERS_WWM = "transformers_wwm"
"""transformers' ``DataCollatorForLanguageModeling(whole_word_mask=True)``, for the pitfall illustration."""
ILLUSTRATION_STRATEGIES = (*STRATEGIES, TRANSFORMERS_WWM)
BLANK = "＿"
DOWNSTREAM_METRICS = ("macro_f1", "accuracy")
RATE_KEYS = ("prediction_rate", "iteration_rate")
EMBEDDING_SOURCES = ("corpus", "model")


# --------------------------------------------------------------------------
# Masking illustration
# --------------------------------------------------------------------------


def _check_strategies(strategies: Sequence[str], allowed: Sequence[str]) -> None:
    unknown = [strategy for strategy in strategies if strategy not in allowed]
    if unknown or not strategies:
        raise ValueError(f"strategies: must be a non-empty list from {', '.join(allowed)}, got {list(strategies)!r}")


def _transformers_draws(tokenizer: Any, texts: Sequence[str], draws: int, mlm_probability: float, seed: int):
    encoded = tokenizer(list(texts), padding=True, return_offsets_mapping=True, return_special_tokens_mask=True)
    features = [{key: encoded[key][row] for key in encoded} for row in range(len(texts))]
    maskable = np.array(encoded["attention_mask"], dtype=bool) & ~np.array(encoded["special_tokens_mask"], dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it warns that whole-word masking needs a fast tokenizer's offsets
        collator = DataCollatorForLanguageModeling(tokenizer, whole_word_mask=True, mlm_probability=mlm_probability, seed=seed)
        chosen = np.stack([collator(features)["labels"].numpy() != IGNORE_INDEX for _ in range(draws)])
    return chosen, maskable


def mask_draws(
    texts: Sequence[str],
    strategy: str,
    masking: MaskingSpec | Mapping[str, Any] | None = None,
    tokenizer: Any = None,
    draws: int = 100,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Which tokens ``strategy`` chooses for prediction in ``draws`` successive batches of ``texts``.

    ``strategy`` is ``random``, ``wwm``, ``kdm`` (the workbench collators, as
    :func:`~workbench.train.pretrain_mlm` builds them from ``masking``'s probability and
    n-gram setting; KDM's IDF from ``texts``) or ``transformers_wwm``. Returns
    ``(chosen, maskable)``: chosen is a bool array (draws, n_texts, width), True where the
    label is kept (the 80/10/10 replacement does not matter here); maskable (n_texts, width)
    marks the non-special tokens.
    """
    _check_strategies([strategy], ILLUSTRATION_STRATEGIES)
    check_int("draws", draws, 1)
    if not texts:
        raise ValueError("texts: must hold at least one text, got none")
    masking = MaskingSpec.from_mapping(masking)
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer()
    if strategy == TRANSFORMERS_WWM:
        return _transformers_draws(tokenizer, texts, draws, masking.mlm_probability, seed)
    features = encode_words(tokenizer, texts, JiebaSegmenter())
    collator = build_collator(
        masking.replace(strategy=strategy),
        tokenizer,
        seed,
        return_word_ids=True,
        segmented_texts=[feature["words"] for feature in features],
    )
    batches = [collator(features) for _ in range(draws)]
    chosen = np.stack([(batch["labels"] != IGNORE_INDEX).numpy() for batch in batches])
    return chosen, batches[0]["word_ids"].numpy() >= 0


def _token_words(text: str, tokenizer: Any) -> pd.DataFrame:
    feature = encode_words(tokenizer, [text], JiebaSegmenter())[0]
    keep = [index for index, word in enumerate(feature["word_ids"]) if word >= 0]
    tokens = tokenizer.convert_ids_to_tokens([feature["input_ids"][index] for index in keep])
    words = [feature["words"][feature["word_ids"][index]] for index in keep]
    return pd.DataFrame({"token": tokens, "word": words, "pos": [feature["word_pos"][index] for index in keep]})


def masking_illustration(
    text: str,
    strategies: Sequence[str] = ILLUSTRATION_STRATEGIES,
    draws: int = 200,
    masking: MaskingSpec | Mapping[str, Any] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Per token of ``text``: its jieba word and POS tag, and for each strategy the share of
    ``draws`` masks that chose it (shipped tokenizer; the sentence masked alone)."""
    _check_strategies(strategies, ILLUSTRATION_STRATEGIES)
    tokenizer = load_tokenizer()
    table = _token_words(text, tokenizer)
    for strategy in strategies:
        chosen, maskable = mask_draws([text], strategy, masking, tokenizer, draws, seed)
        table[strategy] = chosen[:, 0, maskable[0]].mean(axis=0)
    return table


def single_draw_masks(
    text: str,
    strategies: Sequence[str] = ILLUSTRATION_STRATEGIES,
    masking: MaskingSpec | Mapping[str, Any] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """One mask per strategy: ``text`` with every chosen token shown as ＿ (columns strategy, masked)."""
    _check_strategies(strategies, ILLUSTRATION_STRATEGIES)
    tokenizer = load_tokenizer()
    tokens = _token_words(text, tokenizer)["token"].tolist()
    rows = []
    for strategy in strategies:
        chosen, maskable = mask_draws([text], strategy, masking, tokenizer, 1, seed)
        picked = chosen[0, 0, maskable[0]]
        rows.append({"strategy": strategy, "masked": "".join(BLANK if hit else token for token, hit in zip(tokens, picked))})
    return pd.DataFrame(rows)


def masked_share_summary(
    texts: Sequence[str],
    strategies: Sequence[str] = ILLUSTRATION_STRATEGIES,
    draws: int = 100,
    masking: MaskingSpec | Mapping[str, Any] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Per strategy, over ``draws`` x ``texts`` (sentence, draw) pairs: the mean share of a
    sentence's tokens chosen, and the share of pairs with nothing / everything chosen.

    The workbench collators hit the budget round(p n) in every sentence; transformers'
    whole-word masking treats an unspaced Chinese sentence as one word (docs/masking.md),
    so each sentence is chosen entirely (with probability about p) or not at all.
    """
    _check_strategies(strategies, ILLUSTRATION_STRATEGIES)
    tokenizer = load_tokenizer()
    rows = []
    for strategy in strategies:
        chosen, maskable = mask_draws(texts, strategy, masking, tokenizer, draws, seed)
        share = (chosen & maskable).sum(axis=2) / maskable.sum(axis=1)
        rows.append(
            {
                "strategy": strategy,
                "mean_masked_share": float(share.mean()),
                "share_nothing_masked": float((share == 0).mean()),
                "share_fully_masked": float((share == 1).mean()),
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------
# Pre-training runs
# --------------------------------------------------------------------------


def _check_objectives(objectives: Sequence[str]) -> None:
    if not objectives or any(objective not in OBJECTIVE_VARIANTS for objective in objectives):
        raise ValueError(f"objectives: must be a non-empty list from {', '.join(OBJECTIVE_VARIANTS)}, got {list(objectives)!r}")


def encoder_name(masking: str, objective: str, synonyms: str = DEFAULT_SOURCE) -> str:
    """``<masking>-<objective>``, with ``@<synonyms>`` when the run used another synonym source than the lexicon."""
    return f"{masking}-{objective}" + ("" if synonyms == DEFAULT_SOURCE else f"@{synonyms}")


def _pretrain_row(
    base: Config,
    output_dir: Path,
    strategy: str,
    objective: str,
    seed: int,
    synonyms: str = DEFAULT_SOURCE,
    lexicon: str | None = None,
) -> dict[str, Any]:
    overrides: dict[str, Any] = dict(OBJECTIVE_VARIANTS[objective])
    if lexicon is not None:
        overrides["lexicon"] = str(lexicon)
    config = base.replace(
        output_dir=str(output_dir), masking={"strategy": strategy}, objective=overrides, training={"seed": seed}
    )
    metrics = pretrain_mlm(config).metrics
    correction = metrics.get("correction", {})
    final = metrics["epochs"][-1] if metrics.get("epochs") else {}
    return {
        "encoder": encoder_name(strategy, objective, synonyms),
        "masking": strategy,
        "objective": objective,
        "synonyms": synonyms,
        "hc_level": config.objective.hc_level,
        "seed": seed,
        "train_loss": metrics["train_loss"],
        "eval_loss": metrics["eval_loss"],
        "perplexity": np.nan if metrics.get("perplexity") is None else metrics["perplexity"],
        "eval_prediction_rate": final.get("eval_hc_prediction_rate", np.nan),
        "eval_iteration_rate": final.get("eval_hc_iteration_rate", np.nan),
        "train_prediction_rate": correction.get("prediction_rate", np.nan),
        "train_iteration_rate": correction.get("iteration_rate", np.nan),
        "time": metrics["time"],
        "output_dir": str(output_dir),
    }


def pretraining_grid(
    base_config: Config | Mapping[str, Any],
    output_root: str | Path,
    strategies: Sequence[str] = STRATEGIES,
    objectives: Sequence[str] = OBJECTIVES,
    seed: int = 0,
    extra_runs: Sequence[Sequence[str]] = (),
) -> pd.DataFrame:
    """Run :func:`~workbench.train.pretrain_mlm` for every (masking strategy, objective variant),
    then for each ``(strategy, objective)`` pair of ``extra_runs`` not already in the grid.

    ``base_config`` is a pretrain_mlm config (docs/training.md; its ``output_dir`` is
    replaced); each run gets ``masking.strategy``, the objective variant's overrides
    (:data:`OBJECTIVE_VARIANTS`), ``training.seed = seed`` and the folder
    ``output_root/<masking>-<objective>``. Returns one row per run: encoder, masking, objective,
    synonyms (``"lexicon"``), hc_level, seed, train_loss, the final held-out eval_loss and
    perplexity (the trainer's fixed-mask eval blocks), the HC rates there after the last epoch
    (``eval_prediction_rate``, ``eval_iteration_rate``: the run's synonym table and ``hc_level``),
    the training-time HC rates over the run (``train_prediction_rate``, ``train_iteration_rate``;
    NaN for plain and SR, which correct nothing), time and output_dir.
    """
    _check_strategies(strategies, STRATEGIES)
    _check_objectives(objectives)
    plan = [(strategy, objective) for strategy in strategies for objective in objectives]
    for pair in extra_runs:
        if len(pair) != 2:
            raise ValueError(f"extra_runs: must hold (strategy, objective) pairs, got {pair!r}")
        _check_strategies([pair[0]], STRATEGIES)
        _check_objectives([pair[1]])
        if tuple(pair) not in plan:
            plan.append((pair[0], pair[1]))
    base = load_config(base_config, task="pretrain_mlm")
    rows = [
        _pretrain_row(base, Path(output_root) / f"{strategy}-{objective}", strategy, objective, seed)
        for strategy, objective in plan
    ]
    return pd.DataFrame(rows)


def synonym_source_runs(
    base_config: Config | Mapping[str, Any],
    output_root: str | Path,
    lexicons: Mapping[str, str | Path],
    strategy: str = "wwm",
    objective: str = "hc_word",
    seed: int = 0,
) -> pd.DataFrame:
    """HC pre-training with other synonym sources (the paper's Table 6, second block): one
    :func:`~workbench.train.pretrain_mlm` run per ``name -> lexicon file`` of ``lexicons``
    (Cilin format, or a WordNet-style ``.tsv`` such as :func:`write_lexicon_tsv` writes), with
    ``strategy`` and the HC variant ``objective``; folder ``output_root/<strategy>-<objective>@<name>``.
    Rows as :func:`pretraining_grid`'s, ``synonyms = name``."""
    _check_strategies([strategy], STRATEGIES)
    _check_objectives([objective])
    if OBJECTIVE_VARIANTS[objective]["name"] != "hc":
        raise ValueError(f"objective: must be a hard-correction variant (hc, hc_word), got {objective!r}")
    if not lexicons or DEFAULT_SOURCE in lexicons:
        raise ValueError(f"lexicons: must name at least one source other than {DEFAULT_SOURCE!r}, got {list(lexicons)!r}")
    base = load_config(base_config, task="pretrain_mlm")
    rows = [
        _pretrain_row(
            base,
            Path(output_root) / encoder_name(strategy, objective, name),
            strategy,
            objective,
            seed,
            synonyms=name,
            lexicon=str(path),
        )
        for name, path in lexicons.items()
    ]
    return pd.DataFrame(rows)


def run_names(runs: pd.DataFrame) -> pd.Series:
    """The encoder name of each pre-training run: its ``encoder`` column, else ``<masking>-<objective>``."""
    if "encoder" in runs.columns:
        return runs["encoder"]
    return runs["masking"] + "-" + runs["objective"]


def _metrics_file(output_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(output_dir) / "metrics.json").read_text(encoding="utf-8"))


def loss_history(runs: pd.DataFrame) -> pd.DataFrame:
    """The logged training loss of every run of :func:`pretraining_grid` (from its metrics.json):
    columns masking, objective (with ``@<source>`` for another synonym source), step, loss."""
    rows = []
    names = run_names(runs)
    for run, name in zip(runs.itertuples(), names):
        label = name.split("-", 1)[1] if name.startswith(f"{run.masking}-") else run.objective
        history = _metrics_file(run.output_dir)["history"]
        rows += [
            {"masking": run.masking, "objective": label, "step": entry["step"], "loss": entry["loss"]}
            for entry in history
            if "loss" in entry
        ]
    return pd.DataFrame(rows, columns=["masking", "objective", "step", "loss"])


# --------------------------------------------------------------------------
# Table 2 per checkpoint (the trainer's per-epoch records)
# --------------------------------------------------------------------------

EPOCH_COLUMNS = (
    "encoder",
    "masking",
    "objective",
    "synonyms",
    "epoch",
    "step",
    "checkpoint",
    "eval_loss",
    "perplexity",
    "eval_prediction_rate",
    "eval_iteration_rate",
    "eval_wrong",
    "eval_corrected",
    "train_prediction_rate",
    "train_iteration_rate",
    "train_wrong",
    "train_corrected",
)


def epoch_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Every run's per-epoch records (metrics.json ``epochs``, written by pretrain_mlm after each
    epoch), one row per (run, epoch): :data:`EPOCH_COLUMNS`.

    ``checkpoint`` is the share of the run's optimisation steps done, in % (the paper's Table 2
    "Check.": "the checkpoint saved at the specific training steps (%)"); ``eval_*`` are measured on
    the run's held-out blocks with fixed whole-word masks (plain MLM loss, perplexity = exp(loss),
    and the HC rates of the model's predictions there with the run's synonym table and ``hc_level``);
    ``train_*`` are the HC rates of that epoch's training batches (HC runs only, NaN otherwise).
    Rates are fractions: prediction = corrected / wrong, iteration = sequences with a correction /
    sequences.
    """
    rows = []
    for run, name in zip(runs.itertuples(), run_names(runs)):
        epochs = _metrics_file(run.output_dir).get("epochs", [])
        last_step = max((record["step"] for record in epochs), default=0)
        for record in epochs:
            rows.append(
                {
                    "encoder": name,
                    "masking": run.masking,
                    "objective": run.objective,
                    "synonyms": getattr(run, "synonyms", DEFAULT_SOURCE),
                    "epoch": record["epoch"],
                    "step": record["step"],
                    "checkpoint": 100.0 * record["step"] / last_step if last_step else np.nan,
                    "eval_loss": record["eval_loss"],
                    "perplexity": record["perplexity"],
                    "eval_prediction_rate": record.get("eval_hc_prediction_rate", np.nan),
                    "eval_iteration_rate": record.get("eval_hc_iteration_rate", np.nan),
                    "eval_wrong": record.get("eval_hc_wrong", np.nan),
                    "eval_corrected": record.get("eval_hc_corrected", np.nan),
                    "train_prediction_rate": record.get("train_hc_prediction_rate", np.nan),
                    "train_iteration_rate": record.get("train_hc_iteration_rate", np.nan),
                    "train_wrong": record.get("train_hc_wrong", np.nan),
                    "train_corrected": record.get("train_hc_corrected", np.nan),
                }
            )
    return pd.DataFrame(rows, columns=list(EPOCH_COLUMNS))


def table2(epochs: pd.DataFrame, encoder: str) -> pd.DataFrame:
    """One run of :func:`epoch_table` in the layout of the paper's Table 2, in %: ``Check.`` (share of
    training done), ``Iter.`` and ``Pred.`` (iteration- and prediction-level correction rates) on the
    held-out blocks and on the epoch's training batches (NaN when the run does not correct), and the
    held-out eval loss and perplexity."""
    rows = epochs[epochs["encoder"] == encoder]
    if rows.empty:
        raise ValueError(f"encoder: must be one of {sorted(set(epochs['encoder']))}, got {encoder!r}")
    return pd.DataFrame(
        {
            "Check.": rows["checkpoint"].to_numpy(),
            "held-out Iter.": 100 * rows["eval_iteration_rate"].to_numpy(),
            "held-out Pred.": 100 * rows["eval_prediction_rate"].to_numpy(),
            "train Iter.": 100 * rows["train_iteration_rate"].to_numpy(),
            "train Pred.": 100 * rows["train_prediction_rate"].to_numpy(),
            "eval loss": rows["eval_loss"].to_numpy(),
            "perplexity": rows["perplexity"].to_numpy(),
        }
    )


# --------------------------------------------------------------------------
# Correction statistics on held-out text (token and word level) and examples (Figure 3)
# --------------------------------------------------------------------------


def heldout_texts(data: DataConfig | Mapping[str, Any], n_texts: int) -> list[str]:
    """``n_texts`` texts of ``data`` that pre-training did not see.

    ``data`` is a config ``data`` section with ``max_train_samples`` = m set:
    pre-training reads the first m texts (``load_texts``); these are the next
    ``n_texts``. Raises ValueError when m is unset or the source has too few texts.
    """
    check_int("n_texts", n_texts, 1)
    data = DataConfig.from_mapping(data)
    limit = data.max_train_samples
    if limit is None:
        raise ValueError("data.max_train_samples: must be set so that the texts after it are held out, got None")
    texts, _ = load_texts(data.replace(max_train_samples=None))
    if len(texts) < limit + n_texts:
        raise ValueError(
            f"n_texts: the source has {len(texts)} texts, fewer than max_train_samples + n_texts = {limit + n_texts}"
        )
    return texts[limit : limit + n_texts]


@contextmanager
def _no_loading_bar() -> Iterator[None]:
    """transformers' "Loading weights" progress bar off while a checkpoint loads (restored after)."""
    was_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            transformers_logging.enable_progress_bar()


def _model_and_tokenizer(model: str | Path | PreTrainedModel, tokenizer: Any) -> tuple[Any, Any]:
    if isinstance(model, (str, Path)):
        with _no_loading_bar():
            loaded = build_masked_lm(model_name_or_path=model)
        return loaded, tokenizer if tokenizer is not None else load_tokenizer(model)
    if tokenizer is None:
        raise ValueError("tokenizer: required when model is a module rather than a checkpoint path")
    return model, tokenizer


def _masked_batches(
    model: Any, tokenizer: Any, texts: Sequence[str], masking: MaskingSpec, seed: int, batch_size: int, max_length: int
) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor, list[str], list[dict]]]:
    """(batch, logits, texts, features) per chunk of ``texts`` masked by ``masking``'s collator, model in
    eval mode on the GPU when there is one (logits come back as float32 on the CPU)."""
    check_int("batch_size", batch_size, 1)
    if not texts:
        raise ValueError("texts: must hold at least one text, got none")
    features = encode_words(tokenizer, texts, JiebaSegmenter(), max_length=max_length)
    collator = build_collator(
        masking, tokenizer, seed, return_word_ids=True, segmented_texts=[feature["words"] for feature in features]
    )
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device).eval()
    with torch.no_grad():
        for start in range(0, len(features), batch_size):
            chunk = features[start : start + batch_size]
            batch = collator(chunk)
            inputs = {key: batch[key].to(device) for key in ("input_ids", "attention_mask", "token_type_ids")}
            logits = model(**inputs).logits.float().cpu()
            yield batch, logits, list(texts[start : start + batch_size]), chunk


def correction_statistics(
    model: str | Path | PreTrainedModel,
    texts: Sequence[str],
    table: SynonymTable,
    masking: MaskingSpec | Mapping[str, Any] | None = None,
    tokenizer: Any = None,
    seed: int = 0,
    batch_size: int = 64,
    max_length: int = 128,
    level: str = "token",
) -> dict[str, float]:
    """Hard-correction counts of a masked LM on ``texts`` (no training), as the paper's Table 2.

    Masks ``texts`` with ``masking`` (seeded; default WWM), predicts, and asks
    :meth:`HardCorrectionLoss.correction_counts <workbench.losses.mlm.HardCorrectionLoss>` at
    ``level`` (``token``: the paper's rule, only words of one token are corrected; ``word``: whole
    jieba words). Returns :meth:`CorrectionStats.as_dict` (masked, wrong, corrected, sequences,
    sequences_with_correction, prediction_rate = corrected / wrong, iteration_rate = sequences
    with a correction / sequences) plus ``accuracy`` = (masked - wrong) / masked and
    ``synonym_accuracy`` = (masked - wrong + corrected) / masked, the accuracy when a synonym
    counts as right.
    """
    check_choice("level", level, HC_LEVELS)
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    correction = HardCorrectionLoss(tokenizer, table, level)
    stats = CorrectionStats()
    for batch, logits, _, _ in _masked_batches(
        model, tokenizer, texts, MaskingSpec.from_mapping(masking), seed, batch_size, max_length
    ):
        stats.update(correction.correction_counts(logits, batch["labels"], batch["word_ids"]))
    result = stats.as_dict()
    masked = max(stats.masked, 1)
    result["accuracy"] = (stats.masked - stats.wrong) / masked
    result["synonym_accuracy"] = (stats.masked - stats.wrong + stats.corrected) / masked
    return result


CORRECTION_COLUMNS = ("prediction_rate", "iteration_rate", "accuracy", "synonym_accuracy", "wrong", "corrected")


def correction_table(
    runs: pd.DataFrame,
    texts: Sequence[str],
    table: SynonymTable,
    masking: MaskingSpec | Mapping[str, Any] | None = None,
    seed: int = 0,
    levels: Sequence[str] = HC_LEVELS,
    **options: Any,
) -> pd.DataFrame:
    """:func:`correction_statistics` of every pre-trained model in ``runs`` (:func:`pretraining_grid`)
    on the same held-out ``texts`` with the same masks (``masking``, ``seed``) and the same synonym
    ``table``, at each HC level of ``levels``: one row per (run, level) with encoder, masking,
    objective, level, prediction_rate, iteration_rate, accuracy, synonym_accuracy, wrong, corrected.
    ``options`` go to :func:`correction_statistics`."""
    if not levels or any(level not in HC_LEVELS for level in levels):
        raise ValueError(f"levels: must be a non-empty list from {', '.join(HC_LEVELS)}, got {list(levels)!r}")
    rows = []
    for run, name in zip(runs.itertuples(), run_names(runs)):
        model, tokenizer = _model_and_tokenizer(run.output_dir, None)
        for level in levels:
            stats = correction_statistics(model, texts, table, masking, tokenizer, seed=seed, level=level, **options)
            rows.append({"encoder": name, "masking": run.masking, "objective": run.objective, "level": level, **stats})
    return pd.DataFrame(rows, columns=["encoder", "masking", "objective", "level", *CORRECTION_COLUMNS])


def _unit_text(tokenizer: Any, ids: Sequence[int]) -> str:
    return token_text(tokenizer.convert_ids_to_tokens(list(ids)))


def _corrected_units(counts_labels: torch.Tensor, labels: torch.Tensor, word_ids: torch.Tensor) -> list[tuple[int, int]]:
    """(row, word) of every unit hard correction removed from the loss."""
    dropped = (labels != IGNORE_INDEX) & (counts_labels == IGNORE_INDEX)
    rows, columns = torch.nonzero(dropped, as_tuple=True)
    return sorted({(int(row), int(word_ids[row, column])) for row, column in zip(rows, columns)})


def corrected_examples(
    model: str | Path | PreTrainedModel,
    texts: Sequence[str],
    table: SynonymTable,
    masking: MaskingSpec | Mapping[str, Any] | None = None,
    tokenizer: Any = None,
    limit: int = 10,
    seed: int = 0,
    batch_size: int = 64,
    max_length: int = 128,
    level: str = "token",
) -> pd.DataFrame:
    """Up to ``limit`` masked words that hard correction at ``level`` removes on ``texts``: columns
    text, masked_input (chosen tokens shown as ＿), gold, predicted, gold_synonyms. Empty when the
    model predicts no synonym (e.g. untrained). Same masks as :func:`correction_statistics`."""
    check_int("limit", limit, 1)
    check_choice("level", level, HC_LEVELS)
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    correction = HardCorrectionLoss(tokenizer, table, level)
    rows: list[dict[str, str]] = []
    batches = _masked_batches(model, tokenizer, texts, MaskingSpec.from_mapping(masking), seed, batch_size, max_length)
    for batch, logits, chunk_texts, chunk in batches:
        labels, word_ids = batch["labels"], batch["word_ids"]
        counts = correction.correction_counts(logits, labels, word_ids)
        predictions = logits.argmax(dim=-1)
        for row, word in _corrected_units(counts.labels, labels, word_ids):
            span = word_ids[row] == word
            gold = _unit_text(tokenizer, labels[row][span].tolist())
            maskable = word_ids[row] >= 0
            tokens = tokenizer.convert_ids_to_tokens(chunk[row]["input_ids"])
            masked_input = "".join(
                BLANK if bool(labels[row, index] != IGNORE_INDEX) else tokens[index]
                for index in torch.nonzero(maskable).flatten().tolist()
            )
            rows.append(
                {
                    "text": chunk_texts[row],
                    "masked_input": masked_input,
                    "gold": gold,
                    "predicted": _unit_text(tokenizer, predictions[row][span].tolist()),
                    "gold_synonyms": " ".join(sorted(table.synonyms(gold))),
                }
            )
            if len(rows) == limit:
                return pd.DataFrame(rows)
    return pd.DataFrame(rows, columns=["text", "masked_input", "gold", "predicted", "gold_synonyms"])


def worked_example(
    model: str | Path | PreTrainedModel,
    text: str,
    word: str,
    table: SynonymTable,
    tokenizer: Any = None,
    top_k: int = 5,
    level: str = "token",
) -> dict[str, Any]:
    """The paper's Figure 3 on one sentence: mask every token of the jieba word ``word`` in ``text``
    (its first occurrence) with [MASK], predict, and apply hard correction at ``level``.

    Returns text, masked_input, gold, predicted (argmax per token, joined), synonyms (of the
    gold word in ``table``), level, corrected (HC at ``level`` drops the word; at ``token`` level a
    word of several tokens never is, paper footnote 5), loss_plain (mean cross-entropy over the
    word's tokens), loss_hc (HC's loss: 0 when corrected) and candidates, a DataFrame of the
    ``top_k`` predictions per masked position (position, rank, token, probability).
    """
    check_int("top_k", top_k, 1)
    check_choice("level", level, HC_LEVELS)
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    feature = encode_words(tokenizer, [text], JiebaSegmenter())[0]
    if word not in feature["words"]:
        raise ValueError(f"word: {word!r} is not a jieba word of the text; its words are {feature['words']}")
    word_index = feature["words"].index(word)
    input_ids = torch.tensor([feature["input_ids"]])
    word_ids = torch.tensor([feature["word_ids"]])
    span = word_ids == word_index
    labels = torch.where(span, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    masked_ids = torch.where(span, torch.full_like(input_ids, tokenizer.mask_token_id), input_ids)
    model.eval()
    with torch.no_grad():
        logits = (
            model(
                input_ids=masked_ids,
                attention_mask=torch.tensor([feature["attention_mask"]]),
                token_type_ids=torch.tensor([feature["token_type_ids"]]),
            )
            .logits.float()
            .cpu()
        )
    correction = HardCorrectionLoss(tokenizer, table, level)
    loss_plain = torch.nn.functional.cross_entropy(logits[span], input_ids[span])
    counts = correction.correction_counts(logits, labels, word_ids)
    loss_hc, _ = correction.loss_and_items(logits, labels, word_ids=word_ids)
    probabilities = logits[span].softmax(dim=-1)
    top = probabilities.topk(top_k, dim=-1)
    candidates = pd.DataFrame(
        [
            {
                "position": position,
                "rank": rank + 1,
                "token": tokenizer.convert_ids_to_tokens(int(token)),
                "probability": float(p),
            }
            for position, (tokens, probs) in enumerate(zip(top.indices, top.values))
            for rank, (token, p) in enumerate(zip(tokens, probs))
        ]
    )
    maskable = word_ids[0] >= 0
    return {
        "text": text,
        "masked_input": "".join(
            "[MASK]" if bool(hit) else token
            for token, hit, keep in zip(tokenizer.convert_ids_to_tokens(feature["input_ids"]), span[0], maskable)
            if keep
        ),
        "gold": word,
        "predicted": _unit_text(tokenizer, logits[span].argmax(dim=-1).tolist()),
        "synonyms": sorted(table.synonyms(word)),
        "level": level,
        "corrected": counts.sequences_with_correction == 1,
        "loss_plain": float(loss_plain),
        "loss_hc": float(loss_hc),
        "candidates": candidates,
    }


# --------------------------------------------------------------------------
# Synonym sources: a lexicon against embedding look-up (Table 6, second block)
# --------------------------------------------------------------------------

_HAS_WORD_CHARACTER = re.compile(r"\w")
_NOT_IN_A_LEXICON_FILE = re.compile(r"[\s_]")


@lru_cache(maxsize=1)
def _segmenter() -> JiebaSegmenter:
    """One segmenter for the corpus-word functions, so its per-text cache serves them all."""
    return JiebaSegmenter()


def _corpus_words(texts: Sequence[str]) -> list[list[str]]:
    """The jieba words of each text (the segmentation pre-training uses), without punctuation and
    without words a lexicon file cannot hold (white space, underscores)."""
    segmenter = _segmenter()
    return [
        [word for word in segmenter.words(text) if _HAS_WORD_CHARACTER.search(word) and not _NOT_IN_A_LEXICON_FILE.search(word)]
        for text in texts
    ]


def corpus_word_vectors(texts: Sequence[str], dim: int = 50, window: int = 2, min_count: int = 2) -> tuple[np.ndarray, list[str]]:
    """Word vectors learnt from ``texts`` alone: ``(vectors, words)``, one row of ``vectors`` per word.

    A count-based stand-in for the Word2Vec / GloVe vectors of the paper (which needs no
    download): the jieba words seen at least ``min_count`` times; co-occurrence counts n(w, c) of
    words at most ``window`` words apart; positive PMI with context-distribution smoothing,
    PPMI(w, c) = max(0, log(n(w, c) N / (n(w) n_0.75(c)))) with n_0.75(c) = N n(c)^0.75 / sum_c' n(c')^0.75
    (Levy, Goldberg & Dagan 2015; skip-gram with negative sampling factorises a shifted PMI matrix,
    Levy & Goldberg 2014); then the truncated SVD U_d S_d^(1/2) with d = min(``dim``, words).
    Deterministic (dense SVD up to 4,000 words, ARPACK with a fixed start vector beyond).
    Words are ordered by count, then text.
    """
    check_int("dim", dim, 1)
    check_int("window", window, 1)
    check_int("min_count", min_count, 1)
    documents = _corpus_words(texts)
    counts = Counter(word for document in documents for word in document)
    words = sorted((word for word, count in counts.items() if count >= min_count), key=lambda word: (-counts[word], word))
    if len(words) < 2:
        raise ValueError(f"texts: need at least two words seen min_count={min_count} times, got {len(words)}")
    index = {word: number for number, word in enumerate(words)}
    pairs: Counter[tuple[int, int]] = Counter()
    for document in documents:
        ids = [index.get(word, -1) for word in document]
        for position, word in enumerate(ids):
            if word < 0:
                continue
            for other in ids[max(0, position - window) : position] + ids[position + 1 : position + window + 1]:
                if other >= 0:
                    pairs[(word, other)] += 1
    from scipy import sparse  # scipy comes with scikit-learn

    rows, columns = (np.array(side, dtype=np.int64) for side in zip(*pairs)) if pairs else (np.zeros(0, np.int64),) * 2
    values = np.array(list(pairs.values()), dtype=np.float64)
    size = len(words)
    word_counts = np.bincount(rows, weights=values, minlength=size)
    context_counts = np.bincount(columns, weights=values, minlength=size) ** 0.75
    total = values.sum()
    with np.errstate(divide="ignore"):
        pmi = np.log(values * total) - np.log(word_counts[rows] * total * context_counts[columns] / context_counts.sum())
    keep = pmi > 0
    matrix = sparse.csr_matrix((pmi[keep], (rows[keep], columns[keep])), shape=(size, size))
    dim = min(dim, size)
    if size <= 4000 or dim >= size - 1:
        left, singular, _ = np.linalg.svd(matrix.toarray(), full_matrices=False)
        left, singular = left[:, :dim], singular[:dim]
    else:
        from scipy.sparse.linalg import svds

        left, singular, _ = svds(matrix, k=dim, v0=np.full(size, 1.0 / np.sqrt(size)))
    return (left * np.sqrt(singular)).astype(np.float32), words


def model_word_vectors(
    model: str | Path | PreTrainedModel, words: Sequence[str], tokenizer: Any = None
) -> tuple[np.ndarray, list[str]]:
    """Word vectors from a model's own input embedding matrix E: each word's vector is the mean of
    the rows of its tokens (for a Chinese BERT, its characters). Words with an unknown token
    ([UNK]) are left out. Returns ``(vectors, words kept)``."""
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    matrix = model.get_input_embeddings().weight.detach().float().cpu()
    vectors, kept = [], []
    for word in dict.fromkeys(words):
        ids = tokenizer(word, add_special_tokens=False)["input_ids"]
        if ids and tokenizer.unk_token_id not in ids:
            vectors.append(matrix[ids].mean(dim=0))
            kept.append(word)
    if len(kept) < 2:
        raise ValueError(f"words: need at least two words the tokenizer knows, got {kept}")
    return torch.stack(vectors).numpy(), kept


def word_vectors(
    texts: Sequence[str],
    source: str = "corpus",
    model: str | Path | PreTrainedModel | None = None,
    dim: int = 50,
    window: int = 2,
    min_count: int = 2,
) -> tuple[np.ndarray, list[str]]:
    """The word vectors of embedding look-up, ``(vectors, words)``, over the jieba words of ``texts``
    seen at least ``min_count`` times: ``source="corpus"``: :func:`corpus_word_vectors` (learnt from
    ``texts``); ``source="model"``: :func:`model_word_vectors` of ``model`` (a checkpoint folder or a
    masked LM) for the same words."""
    check_choice("source", source, EMBEDDING_SOURCES)
    vectors, words = corpus_word_vectors(texts, dim=dim, window=window, min_count=min_count)
    if source == "corpus":
        return vectors, words
    if model is None:
        raise ValueError("model: source='model' needs a checkpoint (or a masked LM) whose input embeddings to read")
    return model_word_vectors(model, words)


def embedding_lookup(
    vectors: np.ndarray | torch.Tensor, words: Sequence[str], k: int = 10, threshold: float | None = None
) -> SynonymTable:
    """The synonym table of embedding look-up: ``b`` is listed for ``a`` when it is among the ``k``
    nearest words by cosine similarity and, when ``threshold`` is given, cos(a, b) >= ``threshold``;
    the relation is made symmetric (:meth:`SynonymTable.from_embeddings`).

    The defaults are the paper's (sec. 5, footnote 11: "we only take the top 10 most similar words for
    each retrieval", no threshold). ``threshold`` is the workbench's option for small vocabularies,
    where the top 10 are a large share of all words (notebook 03 sets 0.5 and says why)."""
    check_int("k", k, 1)
    if threshold is not None:
        threshold = check_number("threshold", threshold, -1.0, 1.0)
    return SynonymTable.from_embeddings(vectors, list(words), k=k, threshold=threshold)


def write_lexicon_tsv(table: SynonymTable, path: str | Path, prefix: str = "emb") -> Path:
    """Write ``table`` as a WordNet-style TSV (``<prefix>NNNNNN<TAB>x<TAB>member<TAB>member...``), the
    format ``objective.lexicon`` reads for a ``.tsv`` path (:meth:`SynonymTable.from_path`), so that
    pre-training can use it. Groups and words are written sorted, a group listed twice once (embedding
    look-up lists a pair from both sides); words must hold no white space and no underscore (WordNet's
    multi-word separator)."""
    path = Path(path)
    if path.suffix != ".tsv":
        raise ValueError(f"path: must end in .tsv (the suffix from_path reads as WordNet TSV), got {str(path)!r}")
    groups = sorted({tuple(sorted(group)) for group in table.groups})
    bad = sorted({word for group in groups for word in group if _NOT_IN_A_LEXICON_FILE.search(word)})
    if bad:
        raise ValueError(f"table: words with white space or underscores cannot be written to a lexicon file, got {bad[:5]}")
    lines = ["# synset_id\tpos\tmembers (tab separated): synonym groups written by workbench.studies.true_negatives"]
    lines += [f"{prefix}{number:06d}\tx\t" + "\t".join(group) for number, group in enumerate(groups)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _pairs(table: SynonymTable) -> set[tuple[str, str]]:
    return {(a, b) for group in table.groups for a in group for b in group if a < b}


def lexicon_coverage(
    tables: Mapping[str, SynonymTable], texts: Sequence[str], tokenizer: Any = None, reference: str | None = None
) -> pd.DataFrame:
    """How much of a corpus each synonym source can correct: one row per ``name -> table``.

    Columns: source, words (with at least one synonym), pairs (unordered synonym pairs),
    corpus_word_types (share of the distinct jieba words of ``texts`` that have a synonym),
    corpus_word_tokens (the same share over word occurrences), corpus_pairs (pairs whose two words
    both occur in ``texts``), vocabulary_tokens (share of the tokenizer's non-special vocabulary
    with a synonym, the measure of the paper's footnote 5: "62.51% tokens in the model vocabulary
    that have synonyms found in WordNet") and, with ``reference`` (a name of ``tables``),
    in_reference: the share of the source's corpus pairs that the reference also calls synonyms.
    ``tokenizer``: a tokenizer, a checkpoint folder holding one, or None (the shipped vocabulary).
    """
    if not tables:
        raise ValueError("tables: must name at least one synonym table, got none")
    if reference is not None and reference not in tables:
        raise ValueError(f"reference: must be one of {list(tables)}, got {reference!r}")
    tokenizer = load_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, (str, Path)) else tokenizer
    occurrences = Counter(word for document in _corpus_words(texts) for word in document)
    special = set(tokenizer.all_special_tokens)
    vocabulary = [
        token_text([token]) for token in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))) if token not in special
    ]
    rows = []
    for name, table in tables.items():
        pairs = _pairs(table)
        corpus_pairs = {(a, b) for a, b in pairs if a in occurrences and b in occurrences}
        covered = [word for word in occurrences if word in table]
        row = {
            "source": name,
            "words": len(set().union(*table.groups)),
            "pairs": len(pairs),
            "corpus_word_types": len(covered) / max(len(occurrences), 1),
            "corpus_word_tokens": sum(occurrences[word] for word in covered) / max(sum(occurrences.values()), 1),
            "corpus_pairs": len(corpus_pairs),
            "vocabulary_tokens": sum(1 for token in vocabulary if token in table) / max(len(vocabulary), 1),
        }
        if reference is not None:
            row["in_reference"] = (
                sum(tables[reference].are_synonyms(a, b) for a, b in corpus_pairs) / len(corpus_pairs) if corpus_pairs else np.nan
            )
        rows.append(row)
    return pd.DataFrame(rows)


def neighbours(tables: Mapping[str, SynonymTable], words: Sequence[str]) -> pd.DataFrame:
    """The synonyms each source lists for each of ``words`` (sorted, space-separated; empty when none):
    one row per word, one column per source."""
    return pd.DataFrame(
        [{"word": word, **{name: " ".join(sorted(table.synonyms(word))) for name, table in tables.items()}} for word in words]
    )


# --------------------------------------------------------------------------
# Downstream fine-tuning
# --------------------------------------------------------------------------


def downstream_grid(
    base_config: Config | Mapping[str, Any],
    encoders: Mapping[str, str | Path | None],
    output_root: str | Path,
    seeds: Sequence[int] = (0,),
) -> pd.DataFrame:
    """Fine-tune (:func:`~workbench.train.finetuning`) each encoder with each training seed.

    ``encoders`` maps a name to a pre-trained checkpoint folder, or to None for a
    randomly initialised tiny BERT (``base_config``'s ``model.tiny``: the
    no-pre-training baseline); ``base_config`` is a finetune config whose ``output_dir``,
    ``model.model_name_or_path`` and ``training.seed`` are replaced per run (a checkpoint brings its
    own tokenizer, so ``model.vocab_file`` is cleared for it). The data split is the same for every run
    (``data.seed``); the seed changes the head's initialisation, the batch order
    and dropout. Model selection is on validation macro-F1; reported numbers are
    on the test split. Returns one row per run: encoder, seed, macro_f1,
    accuracy, best_validation_macro_f1.
    """
    if not encoders:
        raise ValueError("encoders: must name at least one encoder, got none")
    seeds = check_seeds("seeds", seeds)
    base = load_config(base_config, task="finetune")
    rows = []
    for name, checkpoint in encoders.items():
        for seed in seeds:
            output_dir = Path(output_root) / f"{name}-seed{seed}"
            model = (
                {"model_name_or_path": None}
                if checkpoint is None
                else {"model_name_or_path": str(checkpoint), "vocab_file": None}
            )
            config = base.replace(output_dir=str(output_dir), training={"seed": int(seed)}, model=model)
            result = finetune(config)
            rows.append(
                {
                    "encoder": name,
                    "seed": int(seed),
                    "macro_f1": result.metrics["macro_f1"],
                    "accuracy": result.metrics["accuracy"],
                    "best_validation_macro_f1": result.metrics["best_validation_macro_f1"],
                }
            )
    return pd.DataFrame(rows)


def downstream_summary(downstream: pd.DataFrame) -> pd.DataFrame:
    """Per encoder: mean, std (ddof = 1), n and a "mean ± std" text column of test macro-F1 and accuracy."""
    return formatted(summarize(downstream, "encoder", DOWNSTREAM_METRICS), DOWNSTREAM_METRICS)


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------

RUN_COLUMNS = (
    "masking",
    "objective",
    "synonyms",
    "train_loss",
    "eval_loss",
    "perplexity",
    "time",
    "train_prediction_rate",
    "train_iteration_rate",
    "eval_prediction_rate",
    "eval_iteration_rate",
)


def results_table(runs: pd.DataFrame, corrections: pd.DataFrame, summary: pd.DataFrame, level: str = "word") -> pd.DataFrame:
    """One row per encoder of ``summary`` (:func:`downstream_summary`): its pre-training (masking,
    objective, train_loss, train_prediction_rate and, where ``runs`` has them, synonyms, the final
    held-out eval_loss and perplexity, time and the other HC rates), the correction rates of
    :func:`correction_table` on the held-out texts and the downstream macro-F1 / accuracy (mean, std,
    "mean ± std"). With a ``level`` column in ``corrections`` the rates of each level come as
    ``heldout_<rate>_<level>`` and ``heldout_prediction_rate`` / ``heldout_iteration_rate`` are those at
    ``level``. Encoders without pre-training have empty pre-training columns."""
    pretraining = runs.assign(encoder=run_names(runs))
    pretraining = pretraining[["encoder", *(column for column in RUN_COLUMNS if column in pretraining.columns)]]
    corrections = corrections.assign(encoder=run_names(corrections))
    if "level" in corrections.columns:
        check_choice("level", level, sorted(set(corrections["level"])))
        wide = corrections.pivot(index="encoder", columns="level", values=list(RATE_KEYS))
        heldout = pd.DataFrame({f"heldout_{rate}_{lvl}": wide[(rate, lvl)] for rate, lvl in wide.columns})
        for rate in RATE_KEYS:
            heldout[f"heldout_{rate}"] = wide[(rate, level)]
        heldout = heldout.reset_index()
    else:
        heldout = corrections[["encoder", *RATE_KEYS]].rename(columns={rate: f"heldout_{rate}" for rate in RATE_KEYS})
    downstream = summary[["encoder", "macro_f1_mean", "macro_f1_std", "macro_f1", "accuracy_mean", "accuracy_std", "n"]]
    table = downstream.merge(pretraining, on="encoder", how="left").merge(heldout, on="encoder", how="left")
    first = [
        "encoder",
        "masking",
        "objective",
        "train_loss",
        "train_prediction_rate",
        "heldout_prediction_rate",
        "heldout_iteration_rate",
        "macro_f1",
        "macro_f1_mean",
        "macro_f1_std",
        "accuracy_mean",
        "accuracy_std",
        "n",
    ]
    return table[first + [column for column in table.columns if column not in first]]


def best_encoder(results: pd.DataFrame) -> str:
    """The encoder of :func:`results_table` with the best mean test macro-F1."""
    return str(results.set_index("encoder")["macro_f1_mean"].idxmax())


COMPARISON_COLUMNS = (
    "encoder",
    "variant",
    "train_loss",
    "eval_loss",
    "perplexity",
    "time",
    "train_prediction_rate",
    "train_iteration_rate",
    "eval_prediction_rate",
    "eval_iteration_rate",
    "heldout_prediction_rate",
    "macro_f1",
    "macro_f1_mean",
    "macro_f1_std",
    "delta_macro_f1",
    "n",
)


def _comparison(results: pd.DataFrame, variants: Mapping[str, str], baseline: str) -> pd.DataFrame:
    """Rows of ``results`` for ``baseline`` and each ``label -> encoder`` of ``variants`` (those present),
    with ``delta_macro_f1`` = mean macro-F1 minus the baseline's (the paper's Δ column)."""
    by_encoder = results.set_index("encoder")
    if baseline not in by_encoder.index:
        raise ValueError(f"baseline: must be an encoder of the table {list(results['encoder'])}, got {baseline!r}")
    rows = [("baseline", baseline)] + [(label, encoder) for label, encoder in variants.items() if encoder in by_encoder.index]
    table = by_encoder.loc[[encoder for _, encoder in rows]].reset_index()
    table.insert(1, "variant", [label for label, _ in rows])
    table["delta_macro_f1"] = table["macro_f1_mean"] - float(by_encoder.loc[baseline, "macro_f1_mean"])
    return table[[column for column in COMPARISON_COLUMNS if column in table.columns]]


def synonym_source_table(results: pd.DataFrame, masking: str = "wwm", objective: str = "hc_word") -> pd.DataFrame:
    """The paper's Table 6, second block (HC with WordNet against Word2Vec embedding look-up), here:
    ``<masking>-plain`` as the baseline, then every ``<masking>-<objective>`` run of :func:`results_table`
    by synonym source (the lexicon first). Columns :data:`COMPARISON_COLUMNS` present in ``results``:
    the training-time and held-out HC rates (``train_*``, ``eval_*``: with the run's own table;
    ``heldout_*``: with the notebook's lexicon), eval loss, perplexity, time and downstream macro-F1
    with its difference to the baseline."""
    rows = results[(results["masking"] == masking) & (results["objective"] == objective)]
    if rows.empty:
        raise ValueError(f"masking/objective: no {masking}-{objective} run in the table {list(results['encoder'])}")
    sources = rows["synonyms"] if "synonyms" in rows.columns else pd.Series(DEFAULT_SOURCE, index=rows.index)
    order = sorted(zip(sources, rows["encoder"]), key=lambda pair: (pair[0] != DEFAULT_SOURCE, pair[0]))
    return _comparison(results, {f"HC ({source})": encoder for source, encoder in order}, f"{masking}-plain")


def sr_level_table(results: pd.DataFrame, masking: str = "wwm") -> pd.DataFrame:
    """The paper's Table 6, third block (word- against sentence-level SR): ``<masking>-plain`` as the
    baseline, ``<masking>-sr`` (eq. 3, one cosine per masked token: the paper's "word-level" SR) and
    ``<masking>-sr_sentence`` (KL between the prediction-filled and the original sentence). Columns as
    :func:`synonym_source_table`; ``time`` shows the sentence level's extra encoder passes."""
    return _comparison(
        results, {"SR word (eq. 3)": f"{masking}-sr", "SR sentence (KL)": f"{masking}-sr_sentence"}, f"{masking}-plain"
    )


def headline_metrics(results: pd.DataFrame, baseline: str = "no_pretraining") -> dict[str, Any]:
    """metrics.json ``metrics`` from :func:`results_table`: ``macro_f1_best`` (the best encoder's test
    macro-F1) and ``macro_f1_<baseline>`` as ``{"mean", "std", "n"}`` over fine-tuning seeds, the mean
    held-out prediction-level correction rate over pre-trained encoders (``heldout_prediction_rate``,
    and per level when the table has them), the mean training-time rate over ``hc`` runs and over
    ``hc_word`` runs (None without any) and the lowest held-out perplexity (when recorded)."""
    if baseline not in set(results["encoder"]):
        raise ValueError(f"baseline: must be an encoder of the table {list(results['encoder'])}, got {baseline!r}")
    by_encoder = results.set_index("encoder")

    def mean_train_rate(objective: str) -> float | None:
        rates = results.loc[results["objective"] == objective, "train_prediction_rate"]
        return float(rates.mean()) if len(rates) else None

    metrics: dict[str, Any] = {
        "macro_f1_best": row_statistics(by_encoder.loc[best_encoder(results)], "macro_f1"),
        f"macro_f1_{baseline}": row_statistics(by_encoder.loc[baseline], "macro_f1"),
        "heldout_prediction_rate_mean": float(results["heldout_prediction_rate"].mean()),
        "train_prediction_rate_hc_mean": mean_train_rate("hc"),
    }
    for level in HC_LEVELS:
        column = f"heldout_prediction_rate_{level}"
        if column in results.columns:
            metrics[f"{column}_mean"] = float(results[column].mean())
    if (results["objective"] == "hc_word").any():
        metrics["train_prediction_rate_hc_word_mean"] = mean_train_rate("hc_word")
    if "perplexity" in results.columns and results["perplexity"].notna().any():
        metrics["perplexity_min"] = float(results["perplexity"].min())
    return metrics
