"""The README's "Your own data": params/examples/own_data.yaml on a small news CSV the user names."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from workbench.config import load_config
from workbench.train.__main__ import main

EXAMPLE = Path(__file__).resolve().parents[1] / "params" / "examples" / "own_data.yaml"
TOPICS = {  # topic -> (nouns, verbs) of its headlines
    "体育": ("足球队 篮球赛 运动员 冠军 教练 比赛 联赛 球迷 进球 奥运会", "赢得 输掉 参加 打进 举办"),
    "财经": ("股市 银行 利率 投资者 公司 经济 基金 房价 贷款 央行", "上涨 下跌 调整 公布 发布"),
    "科技": ("手机 芯片 电脑 软件 网络 机器人 数据 卫星 电池 平台", "推出 研发 升级 发布 测试"),
}
PLACES = "北京 上海 广州 深圳 杭州 成都 武汉 南京".split()


def news_csv(path: Path, n: int = 300, shares: tuple[float, ...] = (0.6, 0.27, 0.13), seed: int = 0) -> Path:
    """``n`` Chinese news headlines in 3 imbalanced topics, columns ``text,label``."""
    rng = random.Random(seed)
    rows = []
    for (topic, (nouns, verbs)), share in zip(TOPICS.items(), shares):
        nouns, verbs = nouns.split(), verbs.split()
        for _ in range(round(n * share)):
            place, subject, verb, target, other = (rng.choice(words) for words in (PLACES, nouns, verbs, nouns, nouns))
            rows.append((f"{place}{subject}{verb}{target}，{other}受到关注", topic))
    rng.shuffle(rows)
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("text", "label"), *rows])
    return path


def test_the_example_config_needs_only_the_path():
    config = load_config(EXAMPLE, ["data.path=news_zh.csv"])
    assert (config.task, config.data.source, config.data.text, config.data.label) == (
        "finetune",
        "table",
        "text",
        "label",
    )
    assert not config.data.is_ordinal


@pytest.mark.slow
def test_own_data_example_learns_more_than_the_majority_class(tmp_path, capsys):
    path = news_csv(tmp_path / "news_zh.csv")
    output = tmp_path / "run"
    assert (
        main(
            [
                str(EXAMPLE),
                f"data.path={path}",
                f"output_dir={output}",
                "training.quiet=true",
                "training.num_train_epochs=12",
            ]
        )
        == 0
    )
    metrics = json.loads((output / "metrics.json").read_text(encoding="utf-8"))
    support = [scores["support"] for scores in metrics["per_class"].values()]
    majority_share = max(support) / sum(support)
    majority_macro_f1 = 2 * majority_share / (1 + majority_share) / len(support)  # always the majority: F1 of one class
    assert metrics["macro_f1"] > majority_macro_f1 + 0.3
    assert min(scores["recall"] for scores in metrics["per_class"].values()) > 0  # every topic found, the smallest too
    assert "far_error_rate" not in metrics and set(metrics["shared_with_train"]) == {"validation", "test"}
    provenance = metrics["data_provenance"]["splits"]  # which file each split came from, cut how (issue 32)
    assert {entry["file"] for entry in provenance.values()} == {str(path)}
    assert provenance["test"]["examples"] == sum(support) and provenance["test"]["cut"]["method"] == "stratified_split"
