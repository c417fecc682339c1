"""Study: MLM pre-training on true negatives (notebook 03).

Zhang, Zhao, Utiyama, Sumita, "Language Model Pre-training on True Negatives"
(AAAI 2023): hard correction (HC) drops masked words predicted as a synonym of
the gold word; soft regularization (SR, eq. 3) adds 1 - cos(e_gold, e_pred).
Masking strategies: random tokens, whole words (WWM) and knowledge-based
dynamic masking (KDM, from the PCL/QBQTC solution).

The functions here run the notebook's experiments and return tables (the figures are
in ``workbench.viz``):

* masking: :func:`mask_draws`, :func:`masking_illustration`, :func:`single_draw_masks`,
  :func:`masked_share_summary` (including the transformers ``whole_word_mask``
  all-or-nothing pitfall on unspaced Chinese);
* pre-training: :func:`pretraining_grid` (masking x objective), :func:`loss_history`;
* correction statistics in the shape of the paper's Table 2 on held-out text:
  :func:`heldout_texts`, :func:`correction_statistics`, :func:`correction_table`,
  :func:`corrected_examples`, and :func:`worked_example` (the paper's Figure 3);
* downstream: :func:`downstream_grid` and :func:`downstream_summary` (mean ± std over seeds);
* results: :func:`results_table` and :func:`headline_metrics` (metrics.json).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from transformers import DataCollatorForLanguageModeling, PreTrainedModel

from workbench.checks import check_int, check_seeds
from workbench.config import Config, DataConfig, MaskingSpec, load_config
from workbench.data import load_texts
from workbench.lexicon import SynonymTable
from workbench.losses import IGNORE_INDEX
from workbench.losses.mlm import CorrectionStats, hard_correction, token_text
from workbench.masking import JiebaSegmenter, build_collator, encode_words
from workbench.models import build_masked_lm
from workbench.stats import formatted, row_statistics, summarize
from workbench.train import finetune, pretrain_mlm
from workbench.vocab import load_tokenizer

STRATEGIES = ("random", "wwm", "kdm")
OBJECTIVES = ("plain", "hc", "sr")
TRANSFORMERS_WWM = "transformers_wwm"
"""transformers' ``DataCollatorForLanguageModeling(whole_word_mask=True)``, for the pitfall illustration."""
ILLUSTRATION_STRATEGIES = (*STRATEGIES, TRANSFORMERS_WWM)
BLANK = "＿"
DOWNSTREAM_METRICS = ("macro_f1", "accuracy")


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
        collator = DataCollatorForLanguageModeling(
            tokenizer, whole_word_mask=True, mlm_probability=mlm_probability, seed=seed
        )
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
    collator = build_collator(masking.replace(strategy=strategy), tokenizer, seed, return_word_ids=True,
                              segmented_texts=[feature["words"] for feature in features])
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
    text: str, strategies: Sequence[str] = ILLUSTRATION_STRATEGIES, masking: MaskingSpec | Mapping[str, Any] | None = None,
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
# Pre-training grid
# --------------------------------------------------------------------------


def pretraining_grid(
    base_config: Config | Mapping[str, Any],
    output_root: str | Path,
    strategies: Sequence[str] = STRATEGIES,
    objectives: Sequence[str] = OBJECTIVES,
    seed: int = 0,
) -> pd.DataFrame:
    """Run :func:`~workbench.train.pretrain_mlm` for every (masking strategy, objective).

    ``base_config`` is a pretrain_mlm config (docs/training.md; its ``output_dir`` is
    replaced); each run gets ``masking.strategy``, ``objective.name``,
    ``training.seed = seed`` and the folder ``output_root/<strategy>-<objective>``.
    Returns one row per run: masking, objective, seed, train_loss, time,
    the training-time HC rates (``train_prediction_rate``, ``train_iteration_rate``;
    NaN for plain and SR, which correct nothing) and output_dir.
    """
    _check_strategies(strategies, STRATEGIES)
    if not objectives or any(objective not in OBJECTIVES for objective in objectives):
        raise ValueError(f"objectives: must be a non-empty list from {', '.join(OBJECTIVES)}, got {list(objectives)!r}")
    base = load_config(base_config, task="pretrain_mlm")
    rows = []
    for strategy in strategies:
        for objective in objectives:
            output_dir = Path(output_root) / f"{strategy}-{objective}"
            config = base.replace(output_dir=str(output_dir), masking={"strategy": strategy},
                                  objective={"name": objective}, training={"seed": seed})
            result = pretrain_mlm(config)
            correction = result.metrics.get("correction", {})
            rows.append(
                {
                    "masking": strategy,
                    "objective": objective,
                    "seed": seed,
                    "train_loss": result.metrics["train_loss"],
                    "time": result.metrics["time"],
                    "train_prediction_rate": correction.get("prediction_rate", np.nan),
                    "train_iteration_rate": correction.get("iteration_rate", np.nan),
                    "output_dir": str(output_dir),
                }
            )
    return pd.DataFrame(rows)


def loss_history(runs: pd.DataFrame) -> pd.DataFrame:
    """The logged training loss of every run of :func:`pretraining_grid` (from its metrics.json):
    columns masking, objective, step, loss."""
    rows = []
    for run in runs.itertuples():
        history = json.loads((Path(run.output_dir) / "metrics.json").read_text(encoding="utf-8"))["history"]
        rows += [
            {"masking": run.masking, "objective": run.objective, "step": entry["step"], "loss": entry["loss"]}
            for entry in history
            if "loss" in entry
        ]
    return pd.DataFrame(rows, columns=["masking", "objective", "step", "loss"])


# --------------------------------------------------------------------------
# Correction statistics on held-out text (Table 2) and examples (Figure 3)
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


def _model_and_tokenizer(model: str | Path | PreTrainedModel, tokenizer: Any) -> tuple[Any, Any]:
    if isinstance(model, (str, Path)):
        return build_masked_lm(model_name_or_path=model), tokenizer if tokenizer is not None else load_tokenizer(model)
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
    collator = build_collator(masking, tokenizer, seed, return_word_ids=True,
                              segmented_texts=[feature["words"] for feature in features])
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
) -> dict[str, float]:
    """Hard-correction counts of a masked LM on ``texts`` (no training), as the paper's Table 2.

    Masks ``texts`` with ``masking`` (seeded; default WWM), predicts, and runs
    :func:`~workbench.losses.mlm.hard_correction` with word spans. Returns
    :meth:`CorrectionStats.as_dict` (prediction_rate = corrected / wrong,
    iteration_rate = sequences with a correction / sequences) plus
    ``accuracy`` = (masked - wrong) / masked and ``synonym_accuracy`` =
    (masked - wrong + corrected) / masked, the accuracy when a synonym counts as right.
    """
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    stats = CorrectionStats()
    for batch, logits, _, _ in _masked_batches(model, tokenizer, texts, MaskingSpec.from_mapping(masking), seed, batch_size, max_length):
        _, counts = hard_correction(logits, batch["labels"], batch["input_ids"], table, tokenizer, word_ids=batch["word_ids"])
        stats.update(counts)
    result = stats.as_dict()
    masked = max(stats.masked, 1)
    result["accuracy"] = (stats.masked - stats.wrong) / masked
    result["synonym_accuracy"] = (stats.masked - stats.wrong + stats.corrected) / masked
    return result


def correction_table(
    runs: pd.DataFrame, texts: Sequence[str], table: SynonymTable, masking: MaskingSpec | Mapping[str, Any] | None = None,
    seed: int = 0, **options: Any,
) -> pd.DataFrame:
    """:func:`correction_statistics` of every pre-trained model in ``runs`` (:func:`pretraining_grid`)
    on the same held-out ``texts`` with the same masks (``masking``, ``seed``): one row per run with
    masking, objective, prediction_rate, iteration_rate, accuracy, synonym_accuracy, wrong, corrected.
    ``options`` go to :func:`correction_statistics`."""
    rows = []
    for run in runs.itertuples():
        stats = correction_statistics(run.output_dir, texts, table, masking, seed=seed, **options)
        rows.append({"masking": run.masking, "objective": run.objective, **stats})
    columns = ["masking", "objective", "prediction_rate", "iteration_rate", "accuracy", "synonym_accuracy", "wrong", "corrected"]
    return pd.DataFrame(rows)[columns]


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
) -> pd.DataFrame:
    """Up to ``limit`` masked words that hard correction removes on ``texts``: columns text,
    masked_input (chosen tokens shown as ＿), gold, predicted, gold_synonyms. Empty when the
    model predicts no synonym (e.g. untrained). Same masks as :func:`correction_statistics`."""
    check_int("limit", limit, 1)
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    rows: list[dict[str, str]] = []
    batches = _masked_batches(model, tokenizer, texts, MaskingSpec.from_mapping(masking), seed, batch_size, max_length)
    for batch, logits, chunk_texts, chunk in batches:
        labels, word_ids = batch["labels"], batch["word_ids"]
        _, counts = hard_correction(logits, labels, batch["input_ids"], table, tokenizer, word_ids=word_ids)
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
) -> dict[str, Any]:
    """The paper's Figure 3 on one sentence: mask every token of the jieba word ``word`` in ``text``
    (its first occurrence) with [MASK], predict, and apply hard correction.

    Returns text, masked_input, gold, predicted (argmax per token, joined), synonyms (of the
    gold word in ``table``), corrected (HC drops the word), loss_plain (mean cross-entropy over
    the word's tokens), loss_hc (HC's loss: 0 when corrected) and candidates, a DataFrame of the
    ``top_k`` predictions per masked position (position, rank, token, probability).
    """
    check_int("top_k", top_k, 1)
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
        logits = model(
            input_ids=masked_ids,
            attention_mask=torch.tensor([feature["attention_mask"]]),
            token_type_ids=torch.tensor([feature["token_type_ids"]]),
        ).logits
    loss_plain, _ = hard_correction(logits, labels, masked_ids, SynonymTable([]), tokenizer, word_ids=word_ids)
    loss_hc, counts = hard_correction(logits, labels, masked_ids, table, tokenizer, word_ids=word_ids)
    probabilities = logits[span].softmax(dim=-1)
    top = probabilities.topk(top_k, dim=-1)
    candidates = pd.DataFrame(
        [
            {"position": position, "rank": rank + 1, "token": tokenizer.convert_ids_to_tokens(int(token)), "probability": float(p)}
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
        "corrected": counts.sequences_with_correction == 1,
        "loss_plain": float(loss_plain),
        "loss_hc": float(loss_hc),
        "candidates": candidates,
    }


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
    ``model.model_name_or_path`` and ``training.seed`` are replaced per run. The data split is the same for every run
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
            config = base.replace(output_dir=str(output_dir), training={"seed": int(seed)},
                                  model={"model_name_or_path": None if checkpoint is None else str(checkpoint)})
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


def run_names(runs: pd.DataFrame) -> pd.Series:
    """The encoder name of each pre-training run: ``<masking>-<objective>``."""
    return runs["masking"] + "-" + runs["objective"]


def results_table(runs: pd.DataFrame, corrections: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """One row per encoder of ``summary`` (:func:`downstream_summary`):
    its pre-training (masking, objective, train_loss, train_prediction_rate), held-out correction
    rates (:func:`correction_table`) and downstream macro-F1 / accuracy (mean, std, "mean ± std").
    Encoders without pre-training have empty pre-training columns."""
    pretraining = runs.assign(encoder=run_names(runs))[["encoder", "masking", "objective", "train_loss", "train_prediction_rate"]]
    heldout = corrections.assign(encoder=run_names(corrections))[["encoder", "prediction_rate", "iteration_rate"]]
    heldout = heldout.rename(columns={"prediction_rate": "heldout_prediction_rate", "iteration_rate": "heldout_iteration_rate"})
    downstream = summary[["encoder", "macro_f1_mean", "macro_f1_std", "macro_f1", "accuracy_mean", "accuracy_std", "n"]]
    return downstream.merge(pretraining, on="encoder", how="left").merge(heldout, on="encoder", how="left")[
        ["encoder", "masking", "objective", "train_loss", "train_prediction_rate", "heldout_prediction_rate",
         "heldout_iteration_rate", "macro_f1", "macro_f1_mean", "macro_f1_std", "accuracy_mean", "accuracy_std", "n"]
    ]


def best_encoder(results: pd.DataFrame) -> str:
    """The encoder of :func:`results_table` with the best mean test macro-F1."""
    return str(results.set_index("encoder")["macro_f1_mean"].idxmax())


def headline_metrics(results: pd.DataFrame, baseline: str = "no_pretraining") -> dict[str, Any]:
    """metrics.json ``metrics`` from :func:`results_table`: ``macro_f1_best`` (the best encoder's test
    macro-F1) and ``macro_f1_<baseline>`` as ``{"mean", "std", "n"}`` over fine-tuning seeds, the mean
    held-out prediction-level correction rate over pre-trained encoders and the mean training-time
    rate over HC runs (None without any)."""
    if baseline not in set(results["encoder"]):
        raise ValueError(f"baseline: must be an encoder of the table {list(results['encoder'])}, got {baseline!r}")
    by_encoder = results.set_index("encoder")
    hc_rates = results.loc[results["objective"] == "hc", "train_prediction_rate"]
    return {
        "macro_f1_best": row_statistics(by_encoder.loc[best_encoder(results)], "macro_f1"),
        f"macro_f1_{baseline}": row_statistics(by_encoder.loc[baseline], "macro_f1"),
        "heldout_prediction_rate_mean": float(results["heldout_prediction_rate"].mean()),
        "train_prediction_rate_hc_mean": float(hc_rates.mean()) if len(hc_rates) else None,
    }
