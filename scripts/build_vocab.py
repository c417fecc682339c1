"""Rebuild the small Chinese vocabulary shipped in workbench/resources/vocab.txt.

Run once by a developer (not at run time, not in tests):

    python scripts/build_vocab.py $WORKBENCH_DATA/corpus/xwlb_news.txt.gz \
        $WORKBENCH_DATA/corpus/wiki_web_sample.txt.gz --size 4500

It keeps the most frequent CJK characters of the given corpora, plus ASCII
letters, digits and punctuation (with WordPiece '##' continuations), in the
token layout of the standard Chinese BERT vocabulary (one token per line,
special tokens first). Any character not in the file maps to [UNK].
"""

from __future__ import annotations

import argparse
import collections
import gzip
import string
from pathlib import Path

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CJK_PUNCT = list("，。！？、；：“”‘’（）《》【】…—·「」『』〈〉％～")


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def build(corpora: list[Path], size: int) -> list[str]:
    counts: collections.Counter[str] = collections.Counter()
    for path in corpora:
        with _open(path) as handle:
            for line in handle:
                counts.update(ch for ch in line if "\u4e00" <= ch <= "\u9fff")
    ascii_tokens = list(string.digits + string.ascii_lowercase + string.punctuation)
    continuations = ["##" + ch for ch in string.digits + string.ascii_lowercase]
    head = SPECIAL + ascii_tokens + continuations + CJK_PUNCT
    chars = [ch for ch, _ in counts.most_common(max(0, size - len(head)))]
    return head + chars


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--size", type=int, default=4500)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "workbench/resources/vocab.txt")
    args = parser.parse_args()
    tokens = build(args.corpora, args.size)
    args.out.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    print(f"wrote {len(tokens)} tokens to {args.out}")


if __name__ == "__main__":
    main()
