"""Small Chinese datasets the workbench generates itself, seeded (``random.Random(seed)``), from the word
lists below (every character in the shipped vocabulary): relevance pairs with QBQTC's ordinal labels,
review sentiment with a positive minority, and a raw corpus for MLM. The ``*_splits`` functions draw
train, validation and test in that order from one generator, redrawing (same label) an example that
an earlier split holds, so no example is in two splits.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import partial

from datasets import Dataset, DatasetDict

from workbench.checks import check_int, check_number
from workbench.data.features import RELEVANCE_LABEL_NAMES, build_dataset, check_seed

QBQTC_LABEL_PROPORTIONS: tuple[float, float, float] = (0.245, 0.630, 0.126)
"""Label shares of QBQTC (n0=48,997, n1=125,429, n2=25,574 over train+dev)."""
SENTIMENT_LABEL_NAMES: tuple[str, ...] = ("negative", "positive")
_MAX_REDRAWS = 1000


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _intents(questions: str, phrases: str) -> tuple[tuple[str, str], ...]:
    return tuple(zip(questions.split(), phrases.split()))


# ----------------------------------------------------------------------------- relevance pairs

# Every topic's entities end in the topic word (手机, 汽车, ...) and share no character with another
# topic's, so "same topic" is visible as shared characters.
_TOPIC_ENTITIES: dict[str, tuple[str, ...]] = {
    "phone": _words("华为手机 小米手机 苹果手机 三星手机"),
    "car": _words("大众汽车 丰田汽车 本田汽车 奔驰汽车"),
    "travel": _words("海南旅游 云南旅游 西藏旅游 桂林旅游"),
    "house": _words("深圳买房 杭州买房 广州买房 成都买房"),
    "exam": _words("英语考试 日语考试 教师考试 会计考试"),
    "disease": _words("糖尿病 心脏病 胃病 皮肤病"),
}
# topic -> intents (query question, title phrase answering it). No character of a topic's queries
# occurs in another topic's titles (tested), so a title from another topic shares nothing with the query.
_TOPIC_INTENTS: dict[str, tuple[tuple[str, str], ...]] = {
    "phone": _intents("多少钱 续航能力 屏幕维修 拍照效果", "各型号售卖行情 电池续航评测 维修方法步骤 拍照样张展示"),
    "car": _intents("落地价 油耗 保养费用 口碑如何", "经销商行情汇总 真实油耗实测 保养费用明细 车主口碑评价"),
    "travel": _intents("攻略 门票 几月去合适 住宿", "自由行行程安排 景点门票汇总 出行季节推荐 酒店民宿推荐"),
    "house": _intents("首付比例 贷款利率 学区划分 交哪些税", "首付政策解读 利率调整通知 学区划片学校 税收缴纳明细"),
    "exam": _intents("报名时间 复习资料 及格线 考试科目", "报名时间安排 真题资料下载 历年及格标准 科目题型介绍"),
    "disease": _intents("吃什么药 可以根治吗 有什么症状 要注意什么", "常见药物清单 治疗方法 早期症状 饮食注意事项"),
}
_TITLE_SUFFIXES: tuple[str, ...] = ("", "", "_百度知道", "_新浪网", "-网易新闻", "_知乎", "_搜狐", "-家庭网")
_TITLE_PREFIXES: tuple[str, ...] = ("", "", "", "2023年", "最新", "详细")
_RELATED_CHANGES: tuple[str, ...] = ("intent", "entity", "both")


def _relevance_title(rng: random.Random, topic: str, entity: int, intent: int) -> str:
    question, phrase = _TOPIC_INTENTS[topic][intent]
    return (
        f"{rng.choice(_TITLE_PREFIXES)}{_TOPIC_ENTITIES[topic][entity]}{question}{phrase}{rng.choice(_TITLE_SUFFIXES)}"
    )


def _relevance_pair(rng: random.Random, content_label: int) -> tuple[str, str]:
    """(query ``entity question``, title ``[prefix] entity question answer-phrase [site]``) for
    ``content_label`` 2: the query's entity and intent; 1: same topic, another intent and/or entity;
    0: another topic."""
    topics = list(_TOPIC_ENTITIES)
    topic = rng.choice(topics)
    n_entities = len(_TOPIC_ENTITIES[topic])
    n_intents = len(_TOPIC_INTENTS[topic])
    entity = rng.randrange(n_entities)
    intent = rng.randrange(n_intents)
    query = _TOPIC_ENTITIES[topic][entity] + _TOPIC_INTENTS[topic][intent][0]
    if content_label == 2:
        return query, _relevance_title(rng, topic, entity, intent)
    if content_label == 1:
        change = rng.choice(_RELATED_CHANGES)
        title_entity = entity if change == "intent" else rng.choice([i for i in range(n_entities) if i != entity])
        title_intent = intent if change == "entity" else rng.choice([i for i in range(n_intents) if i != intent])
        return query, _relevance_title(rng, topic, title_entity, title_intent)
    other = rng.choice([t for t in topics if t != topic])
    return query, _relevance_title(
        rng, other, rng.randrange(len(_TOPIC_ENTITIES[other])), rng.randrange(len(_TOPIC_INTENTS[other]))
    )


def _noisy_content_label(rng: random.Random, label: int, near_noise: float, far_noise: float) -> int:
    """``label``, or with probability ``near_noise`` an adjacent label, ``far_noise`` one two steps away."""
    draw = rng.random()
    if draw < far_noise:
        return 2 - label if label != 1 else label
    if draw < far_noise + near_noise:
        return rng.choice([c for c in (label - 1, label + 1) if 0 <= c <= 2])
    return label


def _relevance_label(rng: random.Random, near_noise: float, far_noise: float) -> tuple[int, int]:
    """(label in QBQTC's proportions, content label after noise)."""
    label = rng.choices(range(3), weights=QBQTC_LABEL_PROPORTIONS)[0]
    return label, _noisy_content_label(rng, label, near_noise, far_noise)


def _relevance_labels(near_noise: float, far_noise: float) -> Callable:
    check_number("near_noise", near_noise, 0, 1, high_inclusive=False)
    check_number("far_noise", far_noise, 0, 1, high_inclusive=False)
    if near_noise + far_noise >= 1.0:
        raise ValueError(f"near_noise + far_noise: must be < 1, got {near_noise + far_noise!r}")
    return partial(_relevance_label, near_noise=near_noise, far_noise=far_noise)


def _examples(
    rng: random.Random, n: int, draw_label: Callable, draw_texts: Callable, exclude=frozenset(), size_name="n"
) -> list:
    """``n`` rows ``(*texts, label)``: ``draw_label(rng) -> (label, content label)``, then
    ``draw_texts(rng, content label)``; texts in ``exclude`` are redrawn (same label)."""
    rows = []
    for _ in range(n):
        label, content = draw_label(rng)
        texts = next(
            (texts for texts in (draw_texts(rng, content) for _ in range(_MAX_REDRAWS)) if texts not in exclude), None
        )
        if texts is None:
            raise ValueError(
                f"{size_name}: too large, no new example of content label {content} in {_MAX_REDRAWS} draws"
            )
        rows.append((*texts, label))
    return rows


def _dataset(rows: list[tuple], label_names: Sequence[str]) -> Dataset:
    """Rows ``(text, label)`` or ``(text, text_pair, label)`` as a Dataset."""
    names = ("text", "text_pair")[: len(rows[0]) - 1]
    return build_dataset({name: list(column) for name, column in zip((*names, "label"), zip(*rows))}, label_names)


def _disjoint_splits(
    rng: random.Random, sizes: tuple[int, ...], draw_label: Callable, draw_texts: Callable, names
) -> DatasetDict:
    """Train, validation and test (``n_train``, ``n_validation``, ``n_test`` rows) drawn in that order;
    an example of an earlier split is redrawn."""
    splits = dict(zip(("train", "validation", "test"), sizes))
    for split, size in splits.items():
        check_int(f"n_{split}", size, 1)
    seen: set[tuple] = set()
    for split, size in splits.items():
        rows = _examples(rng, size, draw_label, draw_texts, frozenset(seen), f"n_{split}")
        seen.update(row[:-1] for row in rows)
        splits[split] = _dataset(rows, names)
    return DatasetDict(splits)


def sample_relevance_pairs(n: int = 2800, seed: int = 0, near_noise: float = 0.08, far_noise: float = 0.01) -> Dataset:
    """``n`` query (``text``) / title (``text_pair``) pairs, ordinal labels 0/1/2 in QBQTC's proportions; the
    content is an adjacent label's with probability ``near_noise``, one two steps away with ``far_noise``."""
    check_int("n", n, 1)
    rows = _examples(random.Random(check_seed(seed)), n, _relevance_labels(near_noise, far_noise), _relevance_pair)
    return _dataset(rows, RELEVANCE_LABEL_NAMES)


def sample_relevance_splits(
    seed: int = 0,
    n_train: int = 8000,
    n_validation: int = 400,
    n_test: int = 400,
    near_noise: float = 0.08,
    far_noise: float = 0.01,
) -> DatasetDict:
    """Disjoint train/validation/test splits of relevance pairs (as :func:`sample_relevance_pairs`);
    pairs may repeat within a split."""
    draw_label = _relevance_labels(near_noise, far_noise)
    sizes = (n_train, n_validation, n_test)
    return _disjoint_splits(random.Random(check_seed(seed)), sizes, draw_label, _relevance_pair, RELEVANCE_LABEL_NAMES)


# ----------------------------------------------------------------------------- sentence sentiment

_REVIEW_SUBJECTS = _words(
    "这家酒店 房间 服务员 早餐 这本书 手机屏幕 快递 这台电脑 价格 餐厅的菜 前台 这部电影 键盘 电池 包装 环境"
)
_POSITIVE_PHRASES = _words("非常好 很满意 真不错 值得推荐 很喜欢 超出预期 特别干净 十分热情 物美价廉")
_NEGATIVE_PHRASES = _words("太差了 很失望 非常糟糕 不推荐 很后悔 特别脏 态度恶劣 质量不好 太贵了")
_NEUTRAL_CLAUSES: tuple[str, ...] = (
    "",
    "",
    *_words("我们住了两天 上周买的 朋友介绍的 第一次来 出差的时候 周末和家人一起"),
)
_ENDINGS: tuple[str, ...] = ("。", "！", "，下次再说。", "，就这样吧。", "。")


def _sentence_label(rng: random.Random, positive_share: float, noise: float) -> tuple[int, int]:
    """(label, polarity of the sentiment phrase: the other one with probability ``noise``)."""
    label = int(rng.random() < positive_share)
    return label, (1 - label if rng.random() < noise else label)


def _sentence(rng: random.Random, polarity: int) -> tuple[str]:
    phrase = rng.choice(_POSITIVE_PHRASES if polarity else _NEGATIVE_PHRASES)
    clause = rng.choice(_NEUTRAL_CLAUSES)
    lead = f"{clause}，" if clause else ""
    return (f"{lead}{rng.choice(_REVIEW_SUBJECTS)}{phrase}{rng.choice(_ENDINGS)}",)


def _sentence_labels(positive_share: float, noise: float) -> Callable:
    check_number("positive_share", positive_share, 0, 1, low_inclusive=False, high_inclusive=False)
    check_number("noise", noise, 0, 1, high_inclusive=False)
    return partial(_sentence_label, positive_share=positive_share, noise=noise)


def sample_sentences(n: int = 2800, seed: int = 0, positive_share: float = 0.18, noise: float = 0.05) -> Dataset:
    """``n`` short Chinese review sentences, label 1 positive (share ``positive_share``) or 0 negative;
    with probability ``noise`` the sentiment phrase comes from the other polarity (label noise)."""
    check_int("n", n, 1)
    rows = _examples(random.Random(check_seed(seed)), n, _sentence_labels(positive_share, noise), _sentence)
    return _dataset(rows, SENTIMENT_LABEL_NAMES)


def sample_sentence_splits(
    seed: int = 0,
    n_train: int = 2000,
    n_validation: int = 400,
    n_test: int = 400,
    positive_share: float = 0.18,
    noise: float = 0.05,
) -> DatasetDict:
    """Disjoint train/validation/test splits of review sentences (as :func:`sample_sentences`)."""
    draw_label = _sentence_labels(positive_share, noise)
    sizes = (n_train, n_validation, n_test)
    return _disjoint_splits(random.Random(check_seed(seed)), sizes, draw_label, _sentence, SENTIMENT_LABEL_NAMES)


# ----------------------------------------------------------------------------- raw corpus for MLM

SYNONYM_GROUPS = tuple(map(_words, ("美丽 漂亮", "开心 高兴 快乐", "重要 关键", "发展 进步", "迅速 快速", "帮助 协助")))
"""Synonym groups the corpus draws from, so synonym-based hard correction has hits."""

_PEOPLE = _words("张伟 李明 王芳 刘洋 陈静 赵强 周杰 孙丽")
_PLACES = _words("北京 上海 广州 杭州 深圳 成都 武汉 南京 西安 重庆")
_ORGANISATIONS = _words("清华大学 北京大学 中国科学院 人民银行 联合国 国家统计局 中国移动 新华社")
_VERBS = _words("访问 参观 考察 参加 研究 建设 学习 介绍")
_NOUNS = _words("经济 科技 教育 文化 农业 交通 城市 工作")
_EVENTS = _words("会议 论坛 展览 活动 比赛")


def _synonym(rng: random.Random, group: int) -> str:
    return rng.choice(SYNONYM_GROUPS[group])


_CORPUS_TEMPLATES = (
    lambda r: f"{r.choice(_PEOPLE)}昨天在{r.choice(_PLACES)}{r.choice(_VERBS)}了{r.choice(_ORGANISATIONS)}。",
    lambda r: f"{r.choice(_PLACES)}的风景非常{_synonym(r, 0)}，游客们都很{_synonym(r, 1)}。",
    lambda r: f"{r.choice(_ORGANISATIONS)}认为{r.choice(_NOUNS)}的{_synonym(r, 3)}十分{_synonym(r, 2)}。",
    lambda r: f"{r.choice(_PEOPLE)}和{r.choice(_PEOPLE)}一起去{r.choice(_PLACES)}参加{r.choice(_EVENTS)}。",
    lambda r: f"今天{r.choice(_PEOPLE)}过得很{_synonym(r, 1)}，因为{r.choice(_ORGANISATIONS)}{_synonym(r, 5)}了他。",
    lambda r: f"{r.choice(_PLACES)}的{r.choice(_NOUNS)}{_synonym(r, 4)}{_synonym(r, 3)}，这对全国很{_synonym(r, 2)}。",
    lambda r: f"{r.choice(_ORGANISATIONS)}在{r.choice(_PLACES)}举办了一场{_synonym(r, 0)}的{r.choice(_EVENTS)}。",
    lambda r: (
        f"记者从{r.choice(_ORGANISATIONS)}了解到，{r.choice(_PLACES)}正在{r.choice(_VERBS)}新的{r.choice(_NOUNS)}项目。"
    ),
    lambda r: f"{r.choice(_PEOPLE)}说，{r.choice(_NOUNS)}是{r.choice(_PLACES)}{_synonym(r, 3)}的{_synonym(r, 2)}力量。",
    lambda r: f"孩子们在{r.choice(_PLACES)}的公园里玩得非常{_synonym(r, 1)}。",
)


def sample_corpus(n_sentences: int = 2000, seed: int = 0) -> list[str]:
    """``n_sentences`` raw Chinese sentences for MLM pre-training (seeded): people (jieba POS ``nr``),
    places (``ns``), organisations (``nt``), verbs (``v``) and words from ``SYNONYM_GROUPS``."""
    check_int("n_sentences", n_sentences, 1)
    rng = random.Random(check_seed(seed))
    return [rng.choice(_CORPUS_TEMPLATES)(rng) for _ in range(n_sentences)]
