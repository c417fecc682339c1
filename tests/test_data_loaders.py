from __future__ import annotations

import csv
import json
import re

import pytest

from workbench.data import (
    RELEVANCE_LABEL_NAMES,
    TNEWS_LABELS,
    label_names,
    load_chnsenticorp,
    load_lcqmc,
    load_qbqtc,
    load_table,
    load_tnews,
)


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _jsonl(path, records):
    return _write(path, [json.dumps(r, ensure_ascii=False) for r in records])


def test_qbqtc(tmp_path):
    path = _jsonl(
        tmp_path / "dev.json",
        [
            {"id": 0, "query": "小孩咳嗽", "title": "小孩咳嗽吃什么药", "label": "2"},
            {"id": 1, "query": "英雄", "title": "天气", "label": "0"},
        ],
    )
    ds = load_qbqtc(path)
    assert ds.column_names == ["text", "text_pair", "label"]
    assert ds.to_dict() == {"text": ["小孩咳嗽", "英雄"], "text_pair": ["小孩咳嗽吃什么药", "天气"], "label": [2, 0]}
    assert label_names(ds) == list(RELEVANCE_LABEL_NAMES)


def test_qbqtc_unknown_label_names_file_and_line(tmp_path):
    path = _jsonl(
        tmp_path / "dev.json",
        [
            {"query": "a", "title": "b", "label": "1"},
            {"query": "a", "title": "b", "label": "3"},
        ],
    )
    with pytest.raises(ValueError, match=r"dev\.json:2: .*'3'"):
        load_qbqtc(path)


def test_qbqtc_missing_column_and_bad_json(tmp_path):
    path = _jsonl(tmp_path / "dev.json", [{"query": "a", "label": "1"}])
    with pytest.raises(ValueError, match=r"dev\.json:1: .*'title'"):
        load_qbqtc(path)
    bad = _write(tmp_path / "bad.json", ['{"query": "a", "title": "b", "label": "1"}', "{oops"])
    with pytest.raises(ValueError, match=r"bad\.json:2:"):
        load_qbqtc(bad)


def test_missing_file(tmp_path):
    for loader in (load_qbqtc, load_tnews, load_chnsenticorp, load_lcqmc, load_table):
        with pytest.raises(ValueError, match=r"^path:"):
            loader(tmp_path / "absent.txt")


def test_tnews_maps_ids_to_contiguous_indices(tmp_path):
    path = _jsonl(
        tmp_path / "train.json",
        [
            {"label": "100", "label_desc": "news_story", "sentence": "故事", "keywords": ""},
            {"label": "106", "label_desc": "news_house", "sentence": "房子", "keywords": ""},
            {"label": "116", "label_desc": "news_game", "sentence": "游戏", "keywords": "a,b"},
        ],
    )
    ds = load_tnews(path)
    assert len(label_names(ds)) == 15
    assert ds["label"] == [0, 5, 14]  # 105 unused, so 106 is index 5; 111 unused, so 116 is index 14
    assert label_names(ds)[5] == "news_house"
    labels = _jsonl(
        tmp_path / "labels.json",
        [
            {"label": "106", "label_desc": "news_house"},
            {"label": "100", "label_desc": "news_story"},
            {"label": "116", "label_desc": "news_game"},
        ],
    )
    small = load_tnews(path, labels_path=labels)
    assert label_names(small) == ["news_story", "news_house", "news_game"]
    assert small["label"] == [0, 1, 2]
    assert len(TNEWS_LABELS) == 15


def test_tnews_unknown_label(tmp_path):
    path = _jsonl(tmp_path / "train.json", [{"label": "105", "label_desc": "x", "sentence": "s"}])
    with pytest.raises(ValueError, match=r"train\.json:1: .*'105'"):
        load_tnews(path)
    with pytest.raises(ValueError, match=r"^labels_path:"):
        load_tnews(path, labels_path=tmp_path / "none.json")


def test_chnsenticorp_without_and_with_header(tmp_path):
    plain = _write(tmp_path / "train.txt", ['房间"太小"了\t0', "很好\t1"])
    ds = load_chnsenticorp(plain)
    assert ds.to_dict() == {"text": ['房间"太小"了', "很好"], "label": [0, 1]}
    assert label_names(ds) == ["negative", "positive"]
    header = _write(tmp_path / "dev.tsv", ["label\ttext_a", "1\t很好", "0\t太差"])
    assert load_chnsenticorp(header).to_dict() == {"text": ["很好", "太差"], "label": [1, 0]}


def test_chnsenticorp_bad_lines(tmp_path):
    with pytest.raises(ValueError, match=r"train\.txt:2:"):
        load_chnsenticorp(_write(tmp_path / "train.txt", ["好\t1", "没有标签"]))
    with pytest.raises(ValueError, match=r"x\.txt:1: .*'2'"):
        load_chnsenticorp(_write(tmp_path / "x.txt", ["好\t2"]))


def test_lcqmc(tmp_path):
    ds = load_lcqmc(_write(tmp_path / "dev.txt", ["怎么开证明\t证明怎么开\t1", "谁知道\t是什么歌\t0"]))
    assert ds.to_dict() == {"text": ["怎么开证明", "谁知道"], "text_pair": ["证明怎么开", "是什么歌"], "label": [1, 0]}
    header = load_lcqmc(_write(tmp_path / "h.txt", ["text_a\ttext_b\tlabel", "甲\t乙\t1"]))
    assert header.to_dict() == {"text": ["甲"], "text_pair": ["乙"], "label": [1]}


def test_table_csv_with_names_and_indices(tmp_path):
    path = _write(tmp_path / "data.csv", ["review,title,polarity", '"好,很好",标题,pos', "差,标题二,0"])
    with pytest.raises(ValueError, match=re.escape(f"{path}:3: label '0' is a number") + ".*label_values"):
        load_table(path, text="review", text_pair="title", label="polarity", label_names=["neg", "pos"])
    columns = {"text": "review", "text_pair": "title", "label": "polarity"}
    ds = load_table(path, **columns, label_names=["neg", "pos"], label_values=[0, 1])  # indices from 0
    assert ds.to_dict() == {"text": ["好,很好", "差"], "text_pair": ["标题", "标题二"], "label": [1, 0]}
    assert label_names(ds) == ["neg", "pos"]


def test_table_jsonl_and_tsv_infer_labels(tmp_path):
    jsonl = _jsonl(tmp_path / "d.jsonl", [{"s": "甲", "y": 10}, {"s": "乙", "y": 2}, {"s": "丙", "y": 10}])
    ds = load_table(jsonl, text="s", label="y")
    assert label_names(ds) == ["2", "10"]  # numeric order, not string order
    assert ds["label"] == [1, 0, 1]
    tsv = _write(tmp_path / "d.tsv", ["text\tlabel", "甲\tsports", "乙\tart"])
    ds = load_table(tsv)
    assert label_names(ds) == ["art", "sports"]
    assert ds["label"] == [1, 0]


def test_table_errors(tmp_path):
    path = _write(tmp_path / "d.csv", ["text,label", "甲,a", "乙,c"])
    with pytest.raises(ValueError, match=r"d\.csv:3: .*'c'"):
        load_table(path, label_names=["a", "b"])
    with pytest.raises(ValueError, match=r"d\.csv:2: .*'sentence'"):
        load_table(path, text="sentence")
    with pytest.raises(ValueError, match=r"^format:"):
        load_table(_write(tmp_path / "d.xyz", ["x"]))
    with pytest.raises(ValueError, match=r"^format:"):
        load_table(path, format="parquet")
    with pytest.raises(ValueError, match=r"^label_names:"):
        load_table(path, label_names=["a", "a"])


# --- robustness (issue 8) -------------------------------------------------------------------


def _loaders_and_suffixes():
    return [
        (load_qbqtc, "dev.json"),
        (load_tnews, "train.json"),
        (load_chnsenticorp, "train.txt"),
        (load_lcqmc, "dev.txt"),
        (load_table, "d.tsv"),
        (load_table, "d.jsonl"),
    ]


@pytest.mark.parametrize("loader, name", _loaders_and_suffixes())
def test_empty_file_has_no_records(tmp_path, loader, name):
    for content in ("", "\n\n  \n"):
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: "):  # the file, no line
            loader(path)


def test_header_without_rows_has_no_records(tmp_path):
    for path in (_write(tmp_path / "d.csv", ["text,label"]), _write(tmp_path / "dev.tsv", ["label\ttext_a"])):
        with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: "):  # the file, no line
            load_table(path)
    with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path / 'dev.tsv'))}: "):
        load_chnsenticorp(tmp_path / "dev.tsv")
    labels = tmp_path / "labels.json"
    labels.write_text("", encoding="utf-8")
    data = _jsonl(tmp_path / "train.json", [{"label": "100", "label_desc": "news_story", "sentence": "s"}])
    with pytest.raises(ValueError, match=f"^{re.escape(str(labels))}: "):
        load_tnews(data, labels_path=labels)


def test_gbk_file_names_file_line_and_the_iconv_fix(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes("好\t1\n差\t0\n".encode() + "很好的酒店\t1\n".encode("gbk"))
    with pytest.raises(ValueError, match=re.escape(f"{path}:3:")) as caught:
        load_chnsenticorp(path)
    assert "iconv -f GBK -t UTF-8" in str(caught.value)  # the fix, runnable as printed
    jsonl = tmp_path / "dev.json"
    jsonl.write_bytes(
        json.dumps({"query": "小孩", "title": "咳嗽", "label": "1"}, ensure_ascii=False).encode("gbk") + b"\n"
    )
    with pytest.raises(ValueError, match=re.escape(f"{jsonl}:1:") + ".*iconv -f GBK"):
        load_qbqtc(jsonl)
    latin = tmp_path / "d.tsv"  # 0xff is neither UTF-8 nor GBK
    latin.write_bytes(b"text\tlabel\n\xff\xff\ta\n")
    with pytest.raises(ValueError, match=re.escape(f"{latin}:2:")):
        load_table(latin)


def test_utf8_bom_before_a_header_is_dropped(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_bytes("\ufefflabel\ttext_a\n1\t很好\n0\t太差\n".encode("utf-8"))
    assert load_chnsenticorp(path).to_dict() == {"text": ["很好", "太差"], "label": [1, 0]}
    table = tmp_path / "d.csv"
    table.write_bytes("\ufefftext,label\n甲,a\n".encode("utf-8"))
    assert load_table(table).to_dict() == {"text": ["甲"], "label": [0]}
    jsonl = tmp_path / "dev.json"
    jsonl.write_bytes(("\ufeff" + json.dumps({"query": "q", "title": "t", "label": "2"})).encode("utf-8"))
    assert load_qbqtc(jsonl)["label"] == [2]


def test_fields_longer_than_the_csv_default_limit_load(tmp_path):
    long_text = "长" * (csv.field_size_limit() + 10)
    limit_before = csv.field_size_limit()
    path = _write(tmp_path / "train.txt", ["好\t1", f"{long_text}\t0"])
    assert load_chnsenticorp(path)["text"] == ["好", long_text]
    table = _write(tmp_path / "d.csv", ["text,label", f'"{long_text}",a'])
    assert load_table(table)["text"] == [long_text]
    assert csv.field_size_limit() == limit_before  # the module-wide limit is restored


def test_csv_errors_name_file_and_line(tmp_path, monkeypatch):
    import workbench.data.loaders as loaders

    # a limit below the file size stands in for a field beyond any sensible limit (over 2 GiB)
    monkeypatch.setattr(loaders, "_CSV_FIELD_LIMIT_CAP", 8)
    path = _write(tmp_path / "train.txt", ["好\t1", "很长很长很长很长很长\t0"])
    original = csv.field_size_limit(8)
    try:
        with pytest.raises(ValueError, match=re.escape(f"{path}:2:")):
            load_chnsenticorp(path)
        assert csv.field_size_limit() == 8
    finally:
        csv.field_size_limit(original)


# --- labels as values, texts as strings, broken files (issue 19, items 2 and 13) --------------

# One labelled record per source, written by ``_source_file(source, tmp_path, rows)``: rows are
# (text, label) with the label as the file holds it (a JSON value, or the cell text).
SOURCES = {
    "qbqtc": lambda rows, path: _jsonl(path / "q.json", [{"query": t, "title": "标题", "label": y} for t, y in rows]),
    "tnews": lambda rows, path: _jsonl(path / "t.json", [{"sentence": t, "label": y} for t, y in rows]),
    "chnsenticorp": lambda rows, path: _write(path / "c.txt", [f"{t}\t{y}" for t, y in rows]),
    "lcqmc": lambda rows, path: _write(path / "l.txt", [f"{t}\t问题\t{y}" for t, y in rows]),
    "table_csv": lambda rows, path: _write(path / "d.csv", ["text,label", *(f"{t},{y}" for t, y in rows)]),
    "table_tsv": lambda rows, path: _write(path / "d.tsv", ["text\tlabel", *(f"{t}\t{y}" for t, y in rows)]),
    "table_jsonl": lambda rows, path: _jsonl(path / "d.jsonl", [{"text": t, "label": y} for t, y in rows]),
}
LOADERS = {
    "qbqtc": load_qbqtc,
    "tnews": load_tnews,
    "chnsenticorp": load_chnsenticorp,
    "lcqmc": load_lcqmc,
    "table_csv": load_table,
    "table_tsv": load_table,
    "table_jsonl": load_table,
}
JSON_SOURCES = ("qbqtc", "tnews", "table_jsonl")


@pytest.mark.parametrize("source", list(SOURCES))
def test_label_values_are_compared_as_values(tmp_path, source):
    """1, 1.0, "1" and "1.0" are one class in every source (JSON numbers and strings, CSV cells)."""
    one, zero = ("101", "100") if source == "tnews" else ("1", "0")
    values = (
        [int(one), float(one), one, f" {one}.0 "]
        if source in JSON_SOURCES
        else [one, f"{one}.0", f"{one}.00", f" {one}"]
    )
    rows = [(f"句子{i}", value) for i, value in enumerate(values)] + [("句子9", zero)]
    ds = LOADERS[source](SOURCES[source](rows, tmp_path))
    assert len(set(ds["label"][:4])) == 1 and ds["label"][4] != ds["label"][0]


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("empty", ["", "  ", "nan", None, "None", "NA", "null", "#N/A"])
def test_an_empty_or_missing_label_names_file_and_line(tmp_path, source, empty):
    """An empty cell, null, NaN or a missing-value marker (pandas' NA, None, null) is an error naming file:line,
    not a class '' or 'None'."""
    if empty is None and source not in JSON_SOURCES:
        empty = "NaN"
    path = SOURCES[source]([("好", "100" if source == "tnews" else "0"), ("坏", empty)], tmp_path)
    line = 3 if source.startswith("table_") and source != "table_jsonl" else 2
    with pytest.raises(ValueError, match=re.escape(f"{path}:{line}:")):
        LOADERS[source](path)


@pytest.mark.parametrize("source", JSON_SOURCES)
@pytest.mark.parametrize("text", [{"a": 1}, ["甲", "乙"], None, 12])
def test_a_text_that_is_not_a_string_names_the_line(tmp_path, source, text):
    path = SOURCES[source](
        [("好", "100" if source == "tnews" else "0"), (text, "100" if source == "tnews" else "0")], tmp_path
    )
    with pytest.raises(ValueError, match=re.escape(f"{path}:2:")):
        LOADERS[source](path)


def test_a_missing_value_marker_is_a_class_only_when_label_names_lists_it(tmp_path):
    path = _write(tmp_path / "d.csv", ["text,label", "甲,NA", "乙,EU"])
    assert load_table(path, label_names=["EU", "NA"])["label"] == [1, 0]  # North America, named


def test_numeric_label_names_take_no_index(tmp_path):
    # label_names [2, 1]: a label 0 was read as the index of class "2"
    path = _write(tmp_path / "d.tsv", ["text\tlabel", "甲\t2", "乙\t0"])
    with pytest.raises(ValueError, match=re.escape(f"{path}:3: label '0' is a number and none of label_names")):
        load_table(path, label_names=[2, 1])
    assert load_table(path, label_names=["neg", "pos", "x"], label_values=[0, 1, 2])["label"] == [2, 0]  # indices


@pytest.mark.parametrize("source", JSON_SOURCES)
def test_a_json_key_given_twice_names_file_and_line(tmp_path, source):
    # json.loads keeps the last of {"label": 1, "label": 0} silently
    text_key = {"qbqtc": "query", "tnews": "sentence", "table_jsonl": "text"}[source]
    label = '"100"' if source == "tnews" else '"0"'
    path = tmp_path / "d.jsonl"
    record = f'"{text_key}": "好", "title": "t", "label_desc": "x", "label": {label}'
    path.write_text(f'{{{record}}}\n{{{record}, "label": {label}}}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{path}:2:") + ".*'label'"):
        LOADERS[source](path)


@pytest.mark.parametrize("suffix", ["csv", "tsv"])
def test_a_repeated_header_line_names_file_and_line(tmp_path, suffix):
    # two files joined with cat: the second header was a row of class "label"
    sep = "," if suffix == "csv" else "\t"
    path = _write(tmp_path / f"d.{suffix}", [f"text{sep}label", f"甲{sep}a", f"text{sep}label", f"乙{sep}b"])
    with pytest.raises(ValueError, match=re.escape(f"{path}:3:")):
        load_table(path)


def test_a_tnews_labels_file_giving_a_label_twice_is_refused(tmp_path):
    labels = _jsonl(
        tmp_path / "labels.json", [{"label": "100", "label_desc": "a"}, {"label": "100", "label_desc": "b"}]
    )
    data = _jsonl(tmp_path / "t.json", [{"sentence": "好", "label": "100", "label_desc": "a"}])
    with pytest.raises(ValueError, match=r"^labels_path: .*labels\.json"):
        load_tnews(data, labels_path=labels)


@pytest.mark.parametrize("label", [{"a": 1}, [1], True])
def test_a_label_that_is_not_a_string_or_number_names_the_line(tmp_path, label):
    path = _jsonl(tmp_path / "d.jsonl", [{"text": "好", "label": 0}, {"text": "坏", "label": label}])
    with pytest.raises(ValueError, match=re.escape(f"{path}:2:")):
        load_table(path)


@pytest.mark.parametrize("source", JSON_SOURCES)
def test_a_lone_surrogate_in_jsonl_names_file_and_line(tmp_path, source):
    label = '"100"' if source == "tnews" else '"0"'
    text_key = {"qbqtc": "query", "tnews": "sentence", "table_jsonl": "text"}[source]
    path = tmp_path / "s.jsonl"
    first = f'{{"{text_key}": "好", "title": "t", "label": {label}}}\n'
    second = f'{{"{text_key}": "坏\\ud800", "title": "t", "label": {label}}}\n'  # a lone surrogate, escaped in JSON
    path.write_text(first + second, encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{path}:2:")):
        LOADERS[source](path)


def test_gzipped_tables_load_and_broken_gzip_names_the_file(tmp_path):
    import gzip

    path = tmp_path / "d.csv.gz"
    path.write_bytes(gzip.compress("text,label\n甲,a\n乙,b\n".encode()))
    assert load_table(path).to_dict() == {"text": ["甲", "乙"], "label": [0, 1]}
    not_gzip = tmp_path / "plain.tsv.gz"
    not_gzip.write_text("text\tlabel\n甲\ta\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{not_gzip}:1:")):
        load_table(not_gzip)
