"""Small Chinese datasets the workbench generates itself (no download needed).

Three generators, all pure and seeded (``random.Random(seed)``, seed an integer >= 0), built from the
word lists below with template slot fillers; every character is in the shipped
vocabulary (``workbench/resources/vocab.txt``):

* ``sample_relevance_pairs`` -- query/title pairs with QBQTC's three ordinal
  relevance labels in QBQTC's proportions (24.5% / 63% / 12.6%).
* ``sample_sentences`` -- binary review sentiment, positive the minority class.
* ``sample_corpus`` -- raw sentences for MLM pre-training, with person, place
  and organisation names, verbs and words from common synonym groups.

The sizes suit a tiny BERT (2 layers, hidden 64) trained on 2 CPU cores.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from datasets import Dataset, DatasetDict

from workbench.data.features import RELEVANCE_LABEL_NAMES, build_dataset, check_seed

# --------------------------------------------------------------------------
# Relevance pairs
# --------------------------------------------------------------------------

QBQTC_LABEL_PROPORTIONS: tuple[float, float, float] = (0.245, 0.630, 0.126)
"""Label shares of QBQTC (n0=48,997, n1=125,429, n2=25,574 over train+dev)."""

# topic -> entities. Every topic's entities end in the same topic word (手机, 汽车, ...)
# and no entity shares a character with another topic's, so "same topic" is
# visible as shared characters.
_TOPIC_ENTITIES: dict[str, tuple[str, ...]] = {
    "phone": ("华为手机", "小米手机", "苹果手机", "三星手机"),
    "car": ("大众汽车", "丰田汽车", "本田汽车", "奔驰汽车"),
    "travel": ("海南旅游", "云南旅游", "西藏旅游", "桂林旅游"),
    "house": ("深圳买房", "杭州买房", "广州买房", "成都买房"),
    "exam": ("英语考试", "日语考试", "教师考试", "会计考试"),
    "disease": ("糖尿病", "心脏病", "胃病", "皮肤病"),
}

# topic -> intents: (query question, title phrase answering it). No character of a
# topic's queries occurs in another topic's titles (tested), so a title from
# another topic shares nothing with the query.
_TOPIC_INTENTS: dict[str, tuple[tuple[str, str], ...]] = {
    "phone": (
        ("多少钱", "各型号售卖行情"),
        ("续航能力", "电池续航评测"),
        ("屏幕维修", "维修方法步骤"),
        ("拍照效果", "拍照样张展示"),
    ),
    "car": (("落地价", "经销商行情汇总"), ("油耗", "真实油耗实测"), ("保养费用", "保养费用明细"), ("口碑如何", "车主口碑评价")),
    "travel": (("攻略", "自由行行程安排"), ("门票", "景点门票汇总"), ("几月去合适", "出行季节推荐"), ("住宿", "酒店民宿推荐")),
    "house": (
        ("首付比例", "首付政策解读"),
        ("贷款利率", "利率调整通知"),
        ("学区划分", "学区划片学校"),
        ("交哪些税", "税收缴纳明细"),
    ),
    "exam": (
        ("报名时间", "报名时间安排"),
        ("复习资料", "真题资料下载"),
        ("及格线", "历年及格标准"),
        ("考试科目", "科目题型介绍"),
    ),
    "disease": (
        ("吃什么药", "常见药物清单"),
        ("可以根治吗", "治疗方法"),
        ("有什么症状", "早期症状"),
        ("要注意什么", "饮食注意事项"),
    ),
}

_TITLE_SUFFIXES: tuple[str, ...] = ("", "", "_百度知道", "_新浪网", "-网易新闻", "_知乎", "_搜狐", "-家庭网")
_TITLE_PREFIXES: tuple[str, ...] = ("", "", "", "2023年", "最新", "详细")
_RELATED_CHANGES: tuple[str, ...] = ("intent", "entity", "both")
_MAX_REDRAWS = 1000
_PAIR_COLUMNS = ("text", "text_pair")


def _validate_count(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")


def _validate_probability(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name}: must be in [0, 1), got {value!r}")


def _validate_noise(near_noise: float, far_noise: float) -> None:
    _validate_probability("near_noise", near_noise)
    _validate_probability("far_noise", far_noise)
    if near_noise + far_noise >= 1.0:
        raise ValueError(f"near_noise + far_noise: must be < 1, got {near_noise + far_noise!r}")


def _relevance_title(rng: random.Random, topic: str, entity: int, intent: int) -> str:
    question, phrase = _TOPIC_INTENTS[topic][intent]
    return f"{rng.choice(_TITLE_PREFIXES)}{_TOPIC_ENTITIES[topic][entity]}{question}{phrase}{rng.choice(_TITLE_SUFFIXES)}"


def _other_index(rng: random.Random, size: int, index: int) -> int:
    return rng.choice([i for i in range(size) if i != index])


def _relevance_pair(rng: random.Random, content_label: int) -> tuple[str, str]:
    """A (query, title) pair whose content matches ``content_label``.

    Queries read ``entity question``, titles ``[prefix] entity question
    answer-phrase [site]``. 2: the title's entity and intent are the query's (it
    contains the whole query); 1: same topic, with the query's entity and another
    intent, another entity with the query's intent, or both changed (the title
    still shares the topic word); 0: a title from another topic (no shared word).
    """
    topics = list(_TOPIC_ENTITIES)
    topic = rng.choice(topics)
    n_entities, n_intents = len(_TOPIC_ENTITIES[topic]), len(_TOPIC_INTENTS[topic])
    entity, intent = rng.randrange(n_entities), rng.randrange(n_intents)
    query = _TOPIC_ENTITIES[topic][entity] + _TOPIC_INTENTS[topic][intent][0]
    if content_label == 2:
        title = _relevance_title(rng, topic, entity, intent)
    elif content_label == 1:
        change = rng.choice(_RELATED_CHANGES)
        title_entity = entity if change == "intent" else _other_index(rng, n_entities, entity)
        title_intent = intent if change == "entity" else _other_index(rng, n_intents, intent)
        title = _relevance_title(rng, topic, title_entity, title_intent)
    else:
        other = rng.choice([t for t in topics if t != topic])
        title = _relevance_title(
            rng, other, rng.randrange(len(_TOPIC_ENTITIES[other])), rng.randrange(len(_TOPIC_INTENTS[other]))
        )
    return query, title


def _noisy_content_label(rng: random.Random, label: int, near_noise: float, far_noise: float) -> int:
    """``label``, or with probability ``near_noise`` an adjacent label, ``far_noise`` one two steps away."""
    draw = rng.random()
    if draw < far_noise:
        return 2 - label if label != 1 else label
    if draw < far_noise + near_noise:
        return rng.choice([c for c in (label - 1, label + 1) if 0 <= c <= 2])
    return label


def _draw_columns(
    n: int,
    draw_label: Callable[[], tuple[int, int]],
    draw_texts: Callable[[int], tuple[str, ...]],
    text_columns: tuple[str, ...],
    exclude: frozenset[tuple[str, ...]] = frozenset(),
    size_name: str = "n",
) -> dict[str, list]:
    """``n`` labelled examples: ``draw_label() -> (label, content label)``, then
    ``draw_texts(content label)`` gives the texts; texts in ``exclude`` are redrawn
    (same labels), so a split can be kept disjoint from earlier ones."""
    columns: dict[str, list] = {name: [] for name in (*text_columns, "label")}
    for _ in range(n):
        label, content = draw_label()
        for _ in range(_MAX_REDRAWS):
            texts = draw_texts(content)
            if texts not in exclude:
                break
        else:
            raise ValueError(
                f"{size_name}: too large, no new example of content label {content} "
                f"in {_MAX_REDRAWS} draws; use a smaller {size_name}"
            )
        for name, text in zip(text_columns, texts):
            columns[name].append(text)
        columns["label"].append(label)
    return columns


def _disjoint_splits(
    sizes: dict[str, tuple[str, int]],
    columns_for: Callable[[int, frozenset, str], dict[str, list]],
    text_columns: tuple[str, ...],
    label_names: Sequence[str],
) -> DatasetDict:
    """Draw the splits in order (one generator inside ``columns_for``); an example whose
    texts occur in an earlier split is redrawn, so no example is in two splits."""
    for size_name, size in sizes.values():
        _validate_count(size_name, size)
    splits: dict[str, Dataset] = {}
    seen: set[tuple[str, ...]] = set()
    for split, (size_name, size) in sizes.items():
        columns = columns_for(size, frozenset(seen), size_name)
        seen.update(zip(*(columns[name] for name in text_columns)))
        splits[split] = build_dataset(columns, label_names)
    return DatasetDict(splits)


def _relevance_columns(
    rng: random.Random,
    n: int,
    near_noise: float,
    far_noise: float,
    exclude: frozenset[tuple[str, ...]] = frozenset(),
    size_name: str = "n",
) -> dict[str, list]:
    """``n`` labelled pairs drawn with ``rng``; a pair in ``exclude`` is redrawn (same label)."""

    def draw_label() -> tuple[int, int]:
        label = rng.choices(range(3), weights=QBQTC_LABEL_PROPORTIONS)[0]
        return label, _noisy_content_label(rng, label, near_noise, far_noise)

    return _draw_columns(n, draw_label, lambda content: _relevance_pair(rng, content), _PAIR_COLUMNS, exclude, size_name)


def sample_relevance_pairs(n: int = 2800, seed: int = 0, near_noise: float = 0.08, far_noise: float = 0.01) -> Dataset:
    """``n`` Chinese query-title pairs with ordinal relevance labels 0/1/2.

    Labels are drawn in QBQTC's proportions; the pair's content then follows the
    label (see ``_relevance_pair``), except that with probability ``near_noise``
    the content belongs to an adjacent label (0<->1, 1<->2: the confusions real
    annotators make) and with probability ``far_noise`` to a label two steps away.
    A pair may repeat. Columns ``text`` (query), ``text_pair`` (title), ``label`` (ClassLabel).
    """
    _validate_count("n", n)
    _validate_noise(near_noise, far_noise)
    columns = _relevance_columns(random.Random(check_seed(seed)), n, near_noise, far_noise)
    return build_dataset(columns, RELEVANCE_LABEL_NAMES)


def sample_relevance_splits(
    seed: int = 0,
    n_train: int = 8000,
    n_validation: int = 400,
    n_test: int = 400,
    near_noise: float = 0.08,
    far_noise: float = 0.01,
) -> DatasetDict:
    """Disjoint train/validation/test splits of relevance pairs (as ``sample_relevance_pairs``).

    One ``random.Random(seed)`` draws train, then validation, then test; a
    validation or test pair equal (same ``text`` and ``text_pair``) to a pair of
    an earlier split is redrawn with the same label, so no pair is in two splits
    and the label proportions are unchanged. Pairs may repeat within a split.
    """
    _validate_noise(near_noise, far_noise)
    rng = random.Random(check_seed(seed))
    return _disjoint_splits(
        _split_sizes(n_train, n_validation, n_test),
        lambda n, exclude, size_name: _relevance_columns(rng, n, near_noise, far_noise, exclude, size_name),
        _PAIR_COLUMNS,
        RELEVANCE_LABEL_NAMES,
    )


def _split_sizes(n_train: int, n_validation: int, n_test: int) -> dict[str, tuple[str, int]]:
    return {"train": ("n_train", n_train), "validation": ("n_validation", n_validation), "test": ("n_test", n_test)}


# --------------------------------------------------------------------------
# Sentence sentiment
# --------------------------------------------------------------------------

SENTIMENT_LABEL_NAMES: tuple[str, ...] = ("negative", "positive")

_REVIEW_SUBJECTS: tuple[str, ...] = (
    "这家酒店",
    "房间",
    "服务员",
    "早餐",
    "这本书",
    "手机屏幕",
    "快递",
    "这台电脑",
    "价格",
    "餐厅的菜",
    "前台",
    "这部电影",
    "键盘",
    "电池",
    "包装",
    "环境",
)
_POSITIVE_PHRASES: tuple[str, ...] = (
    "非常好",
    "很满意",
    "真不错",
    "值得推荐",
    "很喜欢",
    "超出预期",
    "特别干净",
    "十分热情",
    "物美价廉",
)
_NEGATIVE_PHRASES: tuple[str, ...] = (
    "太差了",
    "很失望",
    "非常糟糕",
    "不推荐",
    "很后悔",
    "特别脏",
    "态度恶劣",
    "质量不好",
    "太贵了",
)
_NEUTRAL_CLAUSES: tuple[str, ...] = (
    "",
    "",
    "我们住了两天",
    "上周买的",
    "朋友介绍的",
    "第一次来",
    "出差的时候",
    "周末和家人一起",
)
_ENDINGS: tuple[str, ...] = ("。", "！", "，下次再说。", "，就这样吧。", "。")


def sample_sentences(n: int = 2800, seed: int = 0, positive_share: float = 0.18, noise: float = 0.05) -> Dataset:
    """``n`` short Chinese review sentences, label 1 positive (share ``positive_share``) or 0 negative.

    The signal is the sentiment phrase attached to the subject; with probability
    ``noise`` the phrase comes from the other polarity (label noise).
    """
    _validate_count("n", n)
    _validate_sentence_args(positive_share, noise)
    return build_dataset(_sentence_columns(random.Random(check_seed(seed)), n, positive_share, noise), SENTIMENT_LABEL_NAMES)


def _validate_sentence_args(positive_share: float, noise: float) -> None:
    if not 0.0 < positive_share < 1.0:
        raise ValueError(f"positive_share: must be in (0, 1), got {positive_share!r}")
    _validate_probability("noise", noise)


def _sentence_columns(
    rng: random.Random,
    n: int,
    positive_share: float,
    noise: float,
    exclude: frozenset[tuple[str, ...]] = frozenset(),
    size_name: str = "n",
) -> dict[str, list]:
    """``n`` labelled review sentences drawn with ``rng``; a sentence in ``exclude`` is redrawn."""

    def draw_label() -> tuple[int, int]:
        label = int(rng.random() < positive_share)
        return label, (1 - label if rng.random() < noise else label)

    def draw_text(polarity: int) -> tuple[str]:
        phrase = rng.choice(_POSITIVE_PHRASES if polarity else _NEGATIVE_PHRASES)
        clause = rng.choice(_NEUTRAL_CLAUSES)
        lead = f"{clause}，" if clause else ""
        return (f"{lead}{rng.choice(_REVIEW_SUBJECTS)}{phrase}{rng.choice(_ENDINGS)}",)

    return _draw_columns(n, draw_label, draw_text, ("text",), exclude, size_name)


def sample_sentence_splits(
    seed: int = 0,
    n_train: int = 2000,
    n_validation: int = 400,
    n_test: int = 400,
    positive_share: float = 0.18,
    noise: float = 0.05,
) -> DatasetDict:
    """Disjoint train/validation/test splits of review sentences (as ``sample_sentences``).

    One ``random.Random(seed)`` draws train, then validation, then test; a
    sentence already in an earlier split is redrawn with the same label, so the
    held-out splits share no sentence with training.
    """
    _validate_sentence_args(positive_share, noise)
    rng = random.Random(check_seed(seed))
    return _disjoint_splits(
        _split_sizes(n_train, n_validation, n_test),
        lambda n, exclude, size_name: _sentence_columns(rng, n, positive_share, noise, exclude, size_name),
        ("text",),
        SENTIMENT_LABEL_NAMES,
    )


# --------------------------------------------------------------------------
# Raw corpus for MLM
# --------------------------------------------------------------------------

SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("美丽", "漂亮"),
    ("开心", "高兴", "快乐"),
    ("重要", "关键"),
    ("发展", "进步"),
    ("迅速", "快速"),
    ("帮助", "协助"),
)
"""Synonym groups the corpus draws from, so synonym-based hard correction has hits."""

_PEOPLE: tuple[str, ...] = ("张伟", "李明", "王芳", "刘洋", "陈静", "赵强", "周杰", "孙丽")
_PLACES: tuple[str, ...] = ("北京", "上海", "广州", "杭州", "深圳", "成都", "武汉", "南京", "西安", "重庆")
_ORGANISATIONS: tuple[str, ...] = (
    "清华大学",
    "北京大学",
    "中国科学院",
    "人民银行",
    "联合国",
    "国家统计局",
    "中国移动",
    "新华社",
)
_VERBS: tuple[str, ...] = ("访问", "参观", "考察", "参加", "研究", "建设", "学习", "介绍")
_NOUNS: tuple[str, ...] = ("经济", "科技", "教育", "文化", "农业", "交通", "城市", "工作")
_EVENTS: tuple[str, ...] = ("会议", "论坛", "展览", "活动", "比赛")


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
    lambda r: f"记者从{r.choice(_ORGANISATIONS)}了解到，{r.choice(_PLACES)}正在{r.choice(_VERBS)}新的{r.choice(_NOUNS)}项目。",
    lambda r: f"{r.choice(_PEOPLE)}说，{r.choice(_NOUNS)}是{r.choice(_PLACES)}{_synonym(r, 3)}的{_synonym(r, 2)}力量。",
    lambda r: f"孩子们在{r.choice(_PLACES)}的公园里玩得非常{_synonym(r, 1)}。",
)


def sample_corpus(n_sentences: int = 2000, seed: int = 0) -> list[str]:
    """``n_sentences`` raw Chinese sentences for MLM pre-training (seeded).

    Sentences name people (jieba POS ``nr``), places (``ns``) and organisations
    (``nt``), carry verbs (``v``) and use words from ``SYNONYM_GROUPS``.
    """
    _validate_count("n_sentences", n_sentences)
    rng = random.Random(check_seed(seed))
    return [rng.choice(_CORPUS_TEMPLATES)(rng) for _ in range(n_sentences)]
