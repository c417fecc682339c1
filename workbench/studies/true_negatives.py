"""Study: MLM pre-training on true negatives (notebook 03).

Zhang, Zhao, Utiyama, Sumita, "Language Model Pre-training on True Negatives"
(AAAI 2023): hard correction (HC) drops masked words predicted as a synonym of
the gold word; soft regularization (SR, eq. 3) adds 1 - cos(e_gold, e_pred).
Masking strategies: random tokens, whole words (WWM) and knowledge-based
dynamic masking (KDM, from the PCL/QBQTC solution).

The functions here run the notebook's experiments and return tables:

* masking: :func:`mask_draws`, :func:`masking_illustration`,
  :func:`single_draw_masks`, :func:`masked_share_summary` (including the
  transformers ``whole_word_mask`` all-or-nothing pitfall on unspaced Chinese);
* pre-training: :func:`pretraining_grid` (masking x objective), :func:`loss_history`;
* correction statistics in the shape of the paper's Table 2 on held-out text:
  :func:`heldout_texts`, :func:`correction_statistics`, :func:`correction_table`,
  :func:`corrected_examples`, and :func:`worked_example` (the paper's Figure 3);
* downstream: :func:`downstream_grid` and :func:`summarize` (mean +- std over seeds);
* results: :func:`results_table` and :func:`headline_metrics` (metrics.json);
* figures: :func:`masking_figure`, :func:`pretraining_loss_figure`,
  :func:`correction_figure`, :func:`downstream_figure`.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import torch
from transformers import DataCollatorForLanguageModeling, PreTrainedModel

from workbench.lexicon import SynonymTable
from workbench.losses.mlm import IGNORE_INDEX, CorrectionStats, token_text, hard_correction
from workbench.masking import JiebaSegmenter, encode_words
from workbench.models import build_masked_lm, tokenizer_for
from workbench.train import finetune, load_config, pretrain_mlm
from workbench.train.inputs import load_texts
from workbench.train.pretrain import masking_collator
from workbench.vocab import load_tokenizer

STRATEGIES = ("random", "wwm", "kdm")
OBJECTIVES = ("plain", "hc", "sr")
TRANSFORMERS_WWM = "transformers_wwm"
"""transformers' ``DataCollatorForLanguageModeling(whole_word_mask=True)``, for the pitfall illustration."""
ILLUSTRATION_STRATEGIES = (*STRATEGIES, TRANSFORMERS_WWM)
BLANK = "＿"


# --------------------------------------------------------------------------
# Masking illustration
# --------------------------------------------------------------------------


def _check_strategies(strategies: Sequence[str], allowed: Sequence[str]) -> None:
    unknown = [strategy for strategy in strategies if strategy not in allowed]
    if unknown or not strategies:
        raise ValueError(f"strategies: must be a non-empty list from {', '.join(allowed)}, got {list(strategies)!r}")


def _check_positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: must be an int >= 1, got {value!r}")


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
    tokenizer: Any = None,
    draws: int = 100,
    mlm_probability: float = 0.15,
    seed: int = 0,
    max_ngram: int = 3,
) -> tuple[np.ndarray, np.ndarray]:
    """Which tokens ``strategy`` chooses for prediction in ``draws`` successive batches of ``texts``.

    ``strategy`` is ``random``, ``wwm``, ``kdm`` (the workbench collators, as
    :func:`~workbench.train.pretrain.pretrain_mlm` builds them; KDM's IDF from
    ``texts``) or ``transformers_wwm``. Returns ``(chosen, maskable)``: chosen is
    a bool array (draws, n_texts, width), True where the label is kept (the
    80/10/10 replacement does not matter here); maskable (n_texts, width) marks
    the non-special tokens.
    """
    _check_strategies([strategy], ILLUSTRATION_STRATEGIES)
    _check_positive("draws", draws)
    if not texts:
        raise ValueError("texts: must hold at least one text")
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer()
    if strategy == TRANSFORMERS_WWM:
        return _transformers_draws(tokenizer, texts, draws, mlm_probability, seed)
    features = encode_words(tokenizer, texts, JiebaSegmenter())
    masking = {"strategy": strategy, "mlm_probability": mlm_probability, "max_ngram": max_ngram}
    collator = masking_collator(masking, tokenizer, features, seed, word_ids=True)
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
    mlm_probability: float = 0.15,
    seed: int = 0,
    max_ngram: int = 3,
) -> pd.DataFrame:
    """Per token of ``text``: its jieba word and POS tag, and for each strategy the share of
    ``draws`` masks that chose it (shipped tokenizer; the sentence masked alone)."""
    _check_strategies(strategies, ILLUSTRATION_STRATEGIES)
    tokenizer = load_tokenizer()
    table = _token_words(text, tokenizer)
    for strategy in strategies:
        chosen, maskable = mask_draws([text], strategy, tokenizer, draws, mlm_probability, seed, max_ngram)
        table[strategy] = chosen[:, 0, maskable[0]].mean(axis=0)
    return table


def single_draw_masks(
    text: str, strategies: Sequence[str] = ILLUSTRATION_STRATEGIES, mlm_probability: float = 0.15, seed: int = 0,
    max_ngram: int = 3,
) -> pd.DataFrame:
    """One mask per strategy: ``text`` with every chosen token shown as ＿ (columns strategy, masked)."""
    _check_strategies(strategies, ILLUSTRATION_STRATEGIES)
    tokenizer = load_tokenizer()
    tokens = _token_words(text, tokenizer)["token"].tolist()
    rows = []
    for strategy in strategies:
        chosen, maskable = mask_draws([text], strategy, tokenizer, 1, mlm_probability, seed, max_ngram)
        picked = chosen[0, 0, maskable[0]]
        rows.append({"strategy": strategy, "masked": "".join(BLANK if hit else token for token, hit in zip(tokens, picked))})
    return pd.DataFrame(rows)


def masked_share_summary(
    texts: Sequence[str],
    strategies: Sequence[str] = ILLUSTRATION_STRATEGIES,
    draws: int = 100,
    mlm_probability: float = 0.15,
    seed: int = 0,
    max_ngram: int = 3,
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
        chosen, maskable = mask_draws(texts, strategy, tokenizer, draws, mlm_probability, seed, max_ngram)
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


def masking_figure(table: pd.DataFrame) -> go.Figure:
    """Heatmap of :func:`masking_illustration`: strategies x tokens, colour = share of draws masked."""
    strategies = [column for column in table.columns if column in ILLUSTRATION_STRATEGIES]
    labels = [f"{token}<br>{pos}" for token, pos in zip(table["token"], table["pos"])]
    fig = go.Figure(
        go.Heatmap(
            z=table[strategies].to_numpy().T,
            x=list(range(len(table))),
            y=strategies,
            zmin=0,
            zmax=1,
            colorscale="Blues",
            colorbar={"title": "share masked"},
            customdata=np.array([table["word"].tolist()] * len(strategies)),
            hovertemplate="word %{customdata}: %{z:.2f}<extra>%{y}</extra>",
        )
    )
    fig.update_xaxes(tickvals=list(range(len(table))), ticktext=labels)
    fig.update_layout(title="Share of draws in which each token is masked", height=320)
    return fig


# --------------------------------------------------------------------------
# Pre-training grid
# --------------------------------------------------------------------------


def _merged(base: Mapping[str, Any], **sections: Mapping[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(dict(base))
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    return config


def pretraining_grid(
    base_config: Mapping[str, Any],
    output_root: str | Path,
    strategies: Sequence[str] = STRATEGIES,
    objectives: Sequence[str] = OBJECTIVES,
    seed: int = 0,
) -> pd.DataFrame:
    """Run :func:`~workbench.train.pretrain_mlm` for every (masking strategy, objective).

    ``base_config`` is a pretrain_mlm config (docs/training.md) without
    ``output_dir``; each run gets ``masking.strategy``, ``objective.name``,
    ``training.seed = seed`` and the folder ``output_root/<strategy>-<objective>``.
    Returns one row per run: masking, objective, seed, train_loss, time,
    the training-time HC rates (``train_prediction_rate``, ``train_iteration_rate``;
    NaN for plain and SR, which correct nothing) and output_dir.
    """
    _check_strategies(strategies, STRATEGIES)
    if not objectives or any(objective not in OBJECTIVES for objective in objectives):
        raise ValueError(f"objectives: must be a non-empty list from {', '.join(OBJECTIVES)}, got {list(objectives)!r}")
    rows = []
    for strategy in strategies:
        for objective in objectives:
            output_dir = Path(output_root) / f"{strategy}-{objective}"
            config = _merged(
                base_config, masking={"strategy": strategy}, objective={"name": objective}, training={"seed": seed}
            )
            result = pretrain_mlm({**config, "output_dir": str(output_dir)})
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


def pretraining_loss_figure(history: pd.DataFrame) -> go.Figure:
    """Training loss against step, one panel per masking strategy, one line per objective.

    The HC curve averages over the kept positions only and the SR curve adds the
    regulariser, so the three are different quantities: compare shapes, not levels."""
    fig = px.line(history, x="step", y="loss", color="objective", facet_col="masking", markers=True)
    fig.update_layout(title="MLM pre-training loss", height=360)
    return fig


# --------------------------------------------------------------------------
# Correction statistics on held-out text (Table 2) and examples (Figure 3)
# --------------------------------------------------------------------------


def heldout_texts(data: Mapping[str, Any], n_texts: int) -> list[str]:
    """``n_texts`` texts of ``data`` that pre-training did not see.

    ``data`` is a config ``data`` section with ``max_train_samples`` = m set:
    pre-training reads the first m texts (``load_texts``); these are the next
    ``n_texts``. Raises ValueError when m is unset or the source has too few texts.
    """
    _check_positive("n_texts", n_texts)
    resolved = load_config({"task": "pretrain_mlm", "data": dict(data)})["data"]
    limit = resolved["max_train_samples"]
    if limit is None:
        raise ValueError("data.max_train_samples: must be set so that the texts after it are held out")
    texts, _ = load_texts({**resolved, "max_train_samples": None})
    if len(texts) < limit + n_texts:
        raise ValueError(
            f"n_texts: the source has {len(texts)} texts, fewer than max_train_samples + n_texts = {limit + n_texts}"
        )
    return texts[limit : limit + n_texts]


def _model_and_tokenizer(model: str | Path | PreTrainedModel, tokenizer: Any) -> tuple[Any, Any]:
    if isinstance(model, (str, Path)):
        return build_masked_lm(model_name_or_path=model), tokenizer if tokenizer is not None else tokenizer_for(model)
    if tokenizer is None:
        raise ValueError("tokenizer: required when model is a module rather than a checkpoint path")
    return model, tokenizer


def _masked_batches(
    model: Any, tokenizer: Any, texts: Sequence[str], strategy: str, mlm_probability: float, seed: int,
    batch_size: int, max_length: int, max_ngram: int,
) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor, list[str], list[dict]]]:
    """(batch, logits, texts, features) per chunk of ``texts`` masked by ``strategy``'s collator, model in
    eval mode on the GPU when there is one (logits come back as float32 on the CPU)."""
    _check_strategies([strategy], STRATEGIES)
    _check_positive("batch_size", batch_size)
    if not texts:
        raise ValueError("texts: must hold at least one text")
    features = encode_words(tokenizer, texts, JiebaSegmenter(), max_length=max_length)
    masking = {"strategy": strategy, "mlm_probability": mlm_probability, "max_ngram": max_ngram}
    collator = masking_collator(masking, tokenizer, features, seed, word_ids=True)
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
    strategy: str = "wwm",
    tokenizer: Any = None,
    mlm_probability: float = 0.15,
    seed: int = 0,
    batch_size: int = 64,
    max_length: int = 128,
    max_ngram: int = 3,
) -> dict[str, float]:
    """Hard-correction counts of a masked LM on ``texts`` (no training), as the paper's Table 2.

    Masks ``texts`` with ``strategy`` (seeded), predicts, and runs
    :func:`~workbench.losses.mlm.hard_correction` with word spans. Returns
    :meth:`CorrectionStats.as_dict` (prediction_rate = corrected / wrong,
    iteration_rate = sequences with a correction / sequences) plus
    ``accuracy`` = (masked - wrong) / masked and ``synonym_accuracy`` =
    (masked - wrong + corrected) / masked, the accuracy when a synonym counts as right.
    """
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    stats = CorrectionStats()
    for batch, logits, _, _ in _masked_batches(model, tokenizer, texts, strategy, mlm_probability, seed, batch_size, max_length, max_ngram):
        _, counts = hard_correction(logits, batch["labels"], batch["input_ids"], table, tokenizer, word_ids=batch["word_ids"])
        stats.update(counts)
    result = stats.as_dict()
    masked = max(stats.masked, 1)
    result["accuracy"] = (stats.masked - stats.wrong) / masked
    result["synonym_accuracy"] = (stats.masked - stats.wrong + stats.corrected) / masked
    return result


def correction_table(
    runs: pd.DataFrame, texts: Sequence[str], table: SynonymTable, strategy: str = "wwm", seed: int = 0,
    **options: Any,
) -> pd.DataFrame:
    """:func:`correction_statistics` of every pre-trained model in ``runs`` (:func:`pretraining_grid`)
    on the same held-out ``texts`` with the same masks (``strategy``, ``seed``): one row per run with
    masking, objective, prediction_rate, iteration_rate, accuracy, synonym_accuracy, wrong, corrected.
    ``options`` go to :func:`correction_statistics`."""
    rows = []
    for run in runs.itertuples():
        stats = correction_statistics(run.output_dir, texts, table, strategy=strategy, seed=seed, **options)
        rows.append({"masking": run.masking, "objective": run.objective, **stats})
    columns = ["masking", "objective", "prediction_rate", "iteration_rate", "accuracy", "synonym_accuracy", "wrong", "corrected"]
    return pd.DataFrame(rows)[columns]


def correction_figure(corrections: pd.DataFrame) -> go.Figure:
    """Grouped bars of the held-out prediction-level correction rate per masking and objective."""
    fig = px.bar(corrections, x="masking", y="prediction_rate", color="objective", barmode="group",
                 hover_data=["iteration_rate", "accuracy", "synonym_accuracy"])
    fig.update_layout(title="Share of wrong predictions that are synonyms of the gold word (held out)",
                      yaxis_title="prediction-level correction rate", height=360)
    return fig


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
    strategy: str = "wwm",
    tokenizer: Any = None,
    limit: int = 10,
    mlm_probability: float = 0.15,
    seed: int = 0,
    batch_size: int = 64,
    max_length: int = 128,
    max_ngram: int = 3,
) -> pd.DataFrame:
    """Up to ``limit`` masked words that hard correction removes on ``texts``: columns text,
    masked_input (chosen tokens shown as ＿), gold, predicted, gold_synonyms. Empty when the
    model predicts no synonym (e.g. untrained). Same masks as :func:`correction_statistics`."""
    _check_positive("limit", limit)
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    rows: list[dict[str, str]] = []
    for batch, logits, chunk_texts, chunk in _masked_batches(model, tokenizer, texts, strategy, mlm_probability, seed, batch_size, max_length, max_ngram):
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
    _check_positive("top_k", top_k)
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
    base_config: Mapping[str, Any],
    encoders: Mapping[str, str | Path | None],
    output_root: str | Path,
    seeds: Sequence[int] = (0,),
) -> pd.DataFrame:
    """Fine-tune (:func:`~workbench.train.finetune`) each encoder with each training seed.

    ``encoders`` maps a name to a pre-trained checkpoint folder, or to None for a
    randomly initialised tiny BERT (``base_config``'s ``model.tiny``: the
    no-pre-training baseline). The data split is the same for every run
    (``data.seed``); the seed changes the head's initialisation, the batch order
    and dropout. Model selection is on validation macro-F1; reported numbers are
    on the test split. Returns one row per run: encoder, seed, macro_f1,
    accuracy, best_validation_macro_f1.
    """
    if not encoders:
        raise ValueError("encoders: must name at least one encoder")
    if not seeds:
        raise ValueError("seeds: must hold at least one seed")
    rows = []
    for name, checkpoint in encoders.items():
        for seed in seeds:
            model = {} if checkpoint is None else {"model_name_or_path": str(checkpoint)}
            config = _merged(base_config, model=model, training={"seed": int(seed)})
            output_dir = Path(output_root) / f"{name}-seed{seed}"
            result = finetune({**config, "output_dir": str(output_dir)})
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


def summarize(table: pd.DataFrame, by: str | Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Mean, sample standard deviation (ddof=1; NaN for one run) and count of each metric per group,
    plus a ``<metric>`` column formatted "mean ± std" (or "mean" for one run)."""
    by = [by] if isinstance(by, str) else list(by)
    missing = [name for name in [*by, *metrics] if name not in table.columns]
    if missing:
        raise ValueError(f"by/metrics: columns {missing} are not in the table ({list(table.columns)})")
    grouped = table.groupby(by, sort=False)[list(metrics)]
    summary = grouped.agg(["mean", "std", "count"])
    summary.columns = [f"{metric}_{stat}" for metric, stat in summary.columns]
    for metric in metrics:
        mean, std = summary[f"{metric}_mean"], summary[f"{metric}_std"]
        summary[metric] = [f"{m:.3f}" if np.isnan(s) else f"{m:.3f} ± {s:.3f}" for m, s in zip(mean, std)]
    return summary.reset_index()


def downstream_figure(summary: pd.DataFrame, metric: str = "macro_f1") -> go.Figure:
    """Bars of ``metric`` mean per encoder with ± std error bars (a :func:`summarize` table)."""
    fig = px.bar(summary, x="encoder", y=f"{metric}_mean", error_y=summary[f"{metric}_std"].fillna(0.0))
    fig.update_layout(title=f"Downstream test {metric} (mean ± std over seeds)", yaxis_title=metric, height=380)
    return fig


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------


def run_names(runs: pd.DataFrame) -> pd.Series:
    """The encoder name of each pre-training run: ``<masking>-<objective>``."""
    return runs["masking"] + "-" + runs["objective"]


def results_table(runs: pd.DataFrame, corrections: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """One row per encoder of ``summary`` (:func:`summarize` of :func:`downstream_grid` by encoder):
    its pre-training (masking, objective, train_loss, train_prediction_rate), held-out correction
    rates (:func:`correction_table`) and downstream macro-F1 / accuracy (mean, std, "mean ± std").
    Encoders without pre-training have empty pre-training columns."""
    pretraining = runs.assign(encoder=run_names(runs))[["encoder", "masking", "objective", "train_loss", "train_prediction_rate"]]
    heldout = corrections.assign(encoder=run_names(corrections))[["encoder", "prediction_rate", "iteration_rate"]]
    heldout = heldout.rename(columns={"prediction_rate": "heldout_prediction_rate", "iteration_rate": "heldout_iteration_rate"})
    downstream = summary[["encoder", "macro_f1_mean", "macro_f1_std", "macro_f1", "accuracy_mean", "accuracy_std"]]
    return downstream.merge(pretraining, on="encoder", how="left").merge(heldout, on="encoder", how="left")[
        ["encoder", "masking", "objective", "train_loss", "train_prediction_rate", "heldout_prediction_rate",
         "heldout_iteration_rate", "macro_f1", "macro_f1_mean", "macro_f1_std", "accuracy_mean", "accuracy_std"]
    ]


def headline_metrics(results: pd.DataFrame, baseline: str = "no_pretraining") -> dict[str, Any]:
    """metrics.json content from :func:`results_table`: top-level numbers ``macro_f1_best`` (the best
    mean test macro-F1) and its ``best_encoder``, ``macro_f1_<baseline>``, ``heldout_prediction_rate_mean``
    (over pre-trained encoders) and ``train_prediction_rate_hc_mean`` (over HC runs; NaN without
    any), plus ``encoders``: every row as a record."""
    if baseline not in set(results["encoder"]):
        raise ValueError(f"baseline: {baseline!r} is not an encoder of the table ({list(results['encoder'])})")
    by_encoder = results.set_index("encoder")
    best = by_encoder["macro_f1_mean"].idxmax()
    return {
        "macro_f1_best": float(by_encoder.loc[best, "macro_f1_mean"]),
        "best_encoder": best,
        f"macro_f1_{baseline}": float(by_encoder.loc[baseline, "macro_f1_mean"]),
        "heldout_prediction_rate_mean": float(results["heldout_prediction_rate"].mean()),
        "train_prediction_rate_hc_mean": float(results.loc[results["objective"] == "hc", "train_prediction_rate"].mean()),
        "encoders": results.to_dict(orient="records"),
    }
