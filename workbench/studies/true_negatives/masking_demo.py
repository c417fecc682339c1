"""Notebook 03, section 1: which tokens random, WWM and KDM masking choose, and transformers' WWM pitfall."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from transformers import DataCollatorForLanguageModeling

from workbench.checks import check_choice, check_int, check_names
from workbench.config import MaskingSpec
from workbench.losses import IGNORE_INDEX
from workbench.masking import JiebaSegmenter, build_collator, encode_words
from workbench.vocab import load_tokenizer

STRATEGIES = ("random", "wwm", "kdm")
TRANSFORMERS_WWM = "transformers_wwm"
"""transformers' ``DataCollatorForLanguageModeling(whole_word_mask=True)``, for the pitfall illustration."""
ILLUSTRATION_STRATEGIES = (*STRATEGIES, TRANSFORMERS_WWM)
BLANK = "＿"


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
    check_choice("strategies", strategy, ILLUSTRATION_STRATEGIES)
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
    collator = build_collator(
        masking.replace(strategy=strategy), tokenizer, seed, return_word_ids=True, segmented_texts=words
    )
    batches = [collator(features) for _ in range(draws)]
    return np.stack([(batch["labels"] != IGNORE_INDEX).numpy() for batch in batches]), batches[0][
        "word_ids"
    ].numpy() >= 0


def masking_illustration(
    text: str, strategies: Sequence[str] = ILLUSTRATION_STRATEGIES, draws: int = 200, masking: Any = None, seed: int = 0
) -> pd.DataFrame:
    """Per token of ``text``: its jieba word and POS tag, and per strategy the share of ``draws`` that masked it."""
    check_names("strategies", strategies, ILLUSTRATION_STRATEGIES)
    tokenizer = load_tokenizer()
    feature = encode_words(tokenizer, [text], JiebaSegmenter())[0]
    keep = [index for index, word in enumerate(feature["word_ids"]) if word >= 0]
    table = pd.DataFrame(
        {
            "token": tokenizer.convert_ids_to_tokens([feature["input_ids"][index] for index in keep]),
            "word": [feature["words"][feature["word_ids"][index]] for index in keep],
            "pos": [feature["word_pos"][index] for index in keep],
        }
    )
    for strategy in strategies:
        chosen, maskable = mask_draws([text], strategy, masking, tokenizer, draws, seed)
        table[strategy] = chosen[:, 0, maskable[0]].mean(axis=0)
    return table


def single_draw_masks(
    text: str, strategies: Sequence[str] = ILLUSTRATION_STRATEGIES, masking: Any = None, seed: int = 0
) -> pd.DataFrame:
    """One mask per strategy: ``text`` with every chosen token shown as ＿ (columns strategy, masked)."""
    table = masking_illustration(text, strategies, 1, masking, seed)
    masked = ["".join(np.where(table[strategy] > 0, BLANK, table["token"])) for strategy in strategies]
    return pd.DataFrame({"strategy": list(strategies), "masked": masked})


def masked_share_summary(
    texts: Sequence[str],
    strategies: Sequence[str] = ILLUSTRATION_STRATEGIES,
    draws: int = 100,
    masking: Any = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Per strategy, over (text, draw) pairs: the mean share of tokens chosen and the share of pairs with nothing /
    everything chosen (transformers' WWM sees an unspaced Chinese sentence as one word: all or nothing)."""
    check_names("strategies", strategies, ILLUSTRATION_STRATEGIES)
    tokenizer = load_tokenizer()
    rows = []
    for strategy in strategies:
        chosen, maskable = mask_draws(texts, strategy, masking, tokenizer, draws, seed)
        share = (chosen & maskable).sum(axis=2) / maskable.sum(axis=1)
        rows.append((strategy, share.mean(), (share == 0).mean(), (share == 1).mean()))
    return pd.DataFrame(rows, columns=["strategy", "mean_masked_share", "share_nothing_masked", "share_fully_masked"])
