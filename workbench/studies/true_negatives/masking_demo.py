"""Notebook 03, section 1: which tokens random, WWM and KDM masking choose, and transformers' WWM pitfall."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from transformers import DataCollatorForLanguageModeling

from workbench.checks import check_choice, check_int
from workbench.config import MaskingSpec
from workbench.losses import IGNORE_INDEX
from workbench.masking import JiebaSegmenter, build_collator, encode_words
from workbench.vocab import load_tokenizer

STRATEGIES = ("random", "wwm", "kdm")
TRANSFORMERS_WWM = "transformers_wwm"
"""transformers' ``DataCollatorForLanguageModeling(whole_word_mask=True)``, for the pitfall illustration."""
ILLUSTRATION_STRATEGIES = (*STRATEGIES, TRANSFORMERS_WWM)
BLANK = "＿"


def check_strategies(strategies: Sequence[str], allowed: Sequence[str] = ILLUSTRATION_STRATEGIES) -> None:
    if not strategies:
        raise ValueError(f"strategies: must be a non-empty list from {', '.join(allowed)}, got []")
    for strategy in strategies:
        check_choice("strategies", strategy, allowed)


def mask_draws(
    texts: Sequence[str],
    strategy: str,
    masking: MaskingSpec | Mapping[str, Any] | None = None,
    tokenizer: Any = None,
    draws: int = 100,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``(chosen, maskable)``: chosen (draws, n_texts, width) is True where ``strategy``'s collator kept
    the label in each of ``draws`` batches of ``texts``; maskable (n_texts, width) marks non-special tokens."""
    check_strategies([strategy])
    check_int("draws", draws, 1)
    if not texts:
        raise ValueError("texts: must hold at least one text, got none")
    masking = MaskingSpec.from_mapping(masking)
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer()
    if strategy == TRANSFORMERS_WWM:
        encoded = tokenizer(list(texts), padding=True, return_offsets_mapping=True, return_special_tokens_mask=True)
        features = [{key: encoded[key][row] for key in encoded} for row in range(len(texts))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # whole-word masking warns that it needs a fast tokenizer's offsets
            collator = DataCollatorForLanguageModeling(
                tokenizer, whole_word_mask=True, mlm_probability=masking.mlm_probability, seed=seed
            )
            chosen = np.stack([collator(features)["labels"].numpy() != IGNORE_INDEX for _ in range(draws)])
        return chosen, np.array(encoded["attention_mask"], bool) & ~np.array(encoded["special_tokens_mask"], bool)
    features = encode_words(tokenizer, texts, JiebaSegmenter())
    words = [feature["words"] for feature in features]
    collator = build_collator(masking.replace(strategy=strategy), tokenizer, seed, return_word_ids=True, segmented_texts=words)
    batches = [collator(features) for _ in range(draws)]
    return np.stack([(batch["labels"] != IGNORE_INDEX).numpy() for batch in batches]), batches[0]["word_ids"].numpy() >= 0


def _one_text(text: str, strategies: Sequence[str], masking: Any, draws: int, seed: int):
    """Per strategy, the draws' choices over the non-special tokens of ``text`` (draws, tokens), and those tokens."""
    check_strategies(strategies)
    tokenizer = load_tokenizer()
    feature = encode_words(tokenizer, [text], JiebaSegmenter())[0]
    keep = [index for index, word in enumerate(feature["word_ids"]) if word >= 0]
    tokens = pd.DataFrame(
        {
            "token": tokenizer.convert_ids_to_tokens([feature["input_ids"][index] for index in keep]),
            "word": [feature["words"][feature["word_ids"][index]] for index in keep],
            "pos": [feature["word_pos"][index] for index in keep],
        }
    )
    chosen = {}
    for strategy in strategies:
        draw, maskable = mask_draws([text], strategy, masking, tokenizer, draws, seed)
        chosen[strategy] = draw[:, 0, maskable[0]]
    return chosen, tokens


def masking_illustration(
    text: str, strategies: Sequence[str] = ILLUSTRATION_STRATEGIES, draws: int = 200, masking: Any = None, seed: int = 0
) -> pd.DataFrame:
    """Per token of ``text``: its jieba word and POS tag, and per strategy the share of ``draws`` that masked it."""
    chosen, table = _one_text(text, strategies, masking, draws, seed)
    return table.assign(**{strategy: draw.mean(axis=0) for strategy, draw in chosen.items()})


def single_draw_masks(
    text: str, strategies: Sequence[str] = ILLUSTRATION_STRATEGIES, masking: Any = None, seed: int = 0
) -> pd.DataFrame:
    """One mask per strategy: ``text`` with every chosen token shown as ＿ (columns strategy, masked)."""
    chosen, table = _one_text(text, strategies, masking, 1, seed)
    blanked = {
        strategy: "".join(BLANK if hit else token for token, hit in zip(table["token"], draw[0]))
        for strategy, draw in chosen.items()
    }
    return pd.DataFrame({"strategy": list(blanked), "masked": list(blanked.values())})


def masked_share_summary(
    texts: Sequence[str],
    strategies: Sequence[str] = ILLUSTRATION_STRATEGIES,
    draws: int = 100,
    masking: Any = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Per strategy, over (text, draw) pairs: the mean share of a sentence's tokens chosen and the share of pairs
    with nothing / everything chosen. Ours hit round(p n) per sentence; transformers' WWM sees an unspaced Chinese
    sentence as one word, so it masks all of it or nothing."""
    check_strategies(strategies)
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
