"""The reader on page shapes the corpus lacks: the main text survives, the chrome does not.

The pages in ``shapes/`` were written for these tests, after common templates (a phpBB-style
forum thread, a Q&A page, a Sphinx API reference, a code host's file view, a shop listing, a
data table, a German news article, a Japanese blog). They are not corpus pages: the reader
was measured on news and blogs, and must also hold on pages like these.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fetcher.html.extract import read_document

SHAPES = Path(__file__).parent / "shapes"


def _read(name: str) -> str:
    body = (SHAPES / f"{name}.html").read_bytes()
    return read_document(
        body, content_type="text/html", charset=None, url="https://example.com/"
    ).text


@pytest.mark.parametrize(
    ("name", "kept", "dropped"),
    [
        pytest.param(
            "forum_thread",
            [
                "Is it normal for the system to keep dropping for a while after bleeding",
                "put a bucket under the copper pipe where it leaves the boiler casing",
                "this morning it reads 1.1 bar with the heating off",
                "get the vessel recharged to about 1 bar",
                "Half a turn with the key and the pressure has held",
            ],
            ["Users browsing this forum", "Privacy", "Board index"],
            id="forum-thread-keeps-every-post",
        ),
        pytest.param(
            "qa_thread",
            [
                "How can I undo that commit and keep my changes in the working tree?",
                "```\ngit reset --soft HEAD~1\n```",
                "Only use --hard when you want to throw the changes away for good.",
                "amend it with git commit --amend",
                'choose "Reset current branch to this commit"',
            ],
            ["How do I delete a git branch locally and remotely?", "The Overflow Blog", "Tags"],
            id="question-and-every-answer",
        ),
        pytest.param(
            "api_reference",
            [
                "# ringbuf.RingBuffer",
                "class ringbuf.RingBuffer(capacity, *, overwrite=True)",
                "capacity (int) – Size of the buffer in bytes, a power of two",
                "Raises:  ValueError – if capacity is not a power of two.",
                "read(n=-1)\nRemove and return up to n bytes from the front",
                "```\nfrom ringbuf import RingBuffer\n\n"
                'buf = RingBuffer(16)\nbuf.write(b"hello world")',
                "Operation  Time  Copies\nwrite  O(n)  one",
            ],
            ["Using ring buffers from threads", "Changelog", "Built with", "Copyright"],
            id="api-reference-keeps-signatures-tables-and-code",
        ),
        pytest.param(
            "code_listing",
            [
                "```\n#!/usr/bin/env python3",
                "    for n in range(keep - 1, 0, -1):\n"
                '        older = path.with_name(f"{path.name}.{n}")',
                "    raise SystemExit(main())\n```",
            ],
            ["Pull requests", "Sign up", "Status"],
            id="code-listing-keeps-the-code-and-its-indentation",
        ),
        pytest.param(
            "product_listing",
            [
                "Trail Runner 2 hiking boot, waterproof",
                "EUR 89.95",
                "Two-person dome tent",
                "Freestanding, two doors, 2.1 kg packed.",
                "Insulated bottle 750 ml",
                "EUR 24.90",
            ],
            ["We use cookies", "Imprint", "Subscribe"],
            id="product-listing-keeps-every-product",
        ),
        pytest.param(
            "data_table",
            [
                "Monthly rainfall measured at the station's tipping-bucket gauge",
                "Month  Rain (mm)  Rain days  Wettest day (mm)",
                "Jan  71.2  17  14.6",
                "Dec  76.3  18  13.9\nYear  769.8  168  30.1",
            ],
            ["Graphs", "Contact"],
            id="data-table-beside-its-introduction",
        ),
        pytest.param(
            "news_de",
            [
                "Der Elbpegel in Dresden ist am Samstagnachmittag auf 5,82 Meter gefallen.",
                "## Fähren bleiben außer Betrieb",
                "* Umleitungen: über die Waldschlößchenbrücke und die Albertbrücke",
                "Sonst drohe Schaden an den Fundamenten der Häuser.",
            ],
            ["Meistgelesen", "Mehr zum Thema", "Wir verwenden Cookies", "Impressum", "Kultur"],
            id="german-article",
        ),
        pytest.param(
            "blog_ja",
            [
                "寒くなってくると、パン生地の一次発酵に思ったより時間がかかるようになります。",
                "### 一、仕込み水の温度を上げる",
                "仕込み水を温める  約六十分",
                "三つを組み合わせたところ、一次発酵は一時間半で終わりました。",
            ],
            ["最近の記事", "お問い合わせ", "All Rights Reserved"],
            id="japanese-blog-post",
        ),
    ],
)
def test_main_text_survives_and_chrome_goes(name: str, kept: list[str], dropped: list[str]) -> None:
    text = _read(name)
    for phrase in kept:
        assert phrase in text, f"{name}: lost {phrase!r}"
    for phrase in dropped:
        assert phrase not in text, f"{name}: kept {phrase!r}"
