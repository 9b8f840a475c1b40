#!/usr/bin/env python3
"""The `compare --html` page in a real browser (headless Chromium): writes the test page (make_compare_page), loads it
sorted through its address (?sort=js_keep:asc, what a click on the heading does), and checks that
  - the browser logs no console message, the scripts ran to the end (body data-ready="1"), the error box stayed empty,
  - each image head has three panels (A, B, |B - A|), the difference with its own legend whose maximum is the head's
    largest |B - A| that make_compare_page recorded, and the weights' legend from 0 to 1,
  - token strings on both axes, the byte-level token as \\xe2\\x80 (never a replacement character),
  - the header names both models and L,
  - the table is sorted by js_keep ascending (the page ranks it descending): the js_keep column ascends and equals
    the recorded values reversed, the rank column descends.
Usage: check_compare_page.py CHROMIUM MAKE_COMPARE_PAGE WORK_DIR. Exits 77 (skipped) when CHROMIUM does not exist."""
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_html_page import fail_unless_all, load_dom, write_page  # noqa: E402


def main():
    chromium, work, page, profile = write_page(__doc__, "compare.html")
    with open(page + ".expected") as expected_file:
        expected = json.load(expected_file)
    url = "file://" + os.path.abspath(page) + "?sort=js_keep:asc"
    dom = load_dom(chromium, profile, url)

    checks = {
        "the script ran to the end": 'data-ready="1"' in dom,
        "the error box is hidden": re.search(r'<div id="script-errors" hidden="[^"]*"></div>', dom) is not None,
        "the header names both models and L": re.search(r'<summary id="run-what">Run: A: a\.gguf; B: b\.gguf; L = 20',
                                                        dom) is not None,
        "the weights' legend from 0 to 1": re.search(r'<div class="legend" id="legend-weights" data-max="1">', dom)
        is not None,
        "no replacement character": "\ufffd" not in dom,
    }
    for head, largest in expected["largest"].items():
        section = re.search(r'<section id="head-%s">(.*?)</section>' % head, dom, re.S)
        text = section.group(1) if section else ""
        legend = re.search(r'<div class="legend" id="legend-difference-%s" data-max="([^"]+)">.*?'
                           r'<span style="left:100%%">([^<]+)</span>' % head, text, re.S)
        checks.update({
            head + ": three panels": len(re.findall(r'<img class="big', text)) == 3,
            head + ": the difference panel": '<img class="big difference"' in text,
            head + ": the difference's legend ends at its largest |B - A|": legend is not None
            and abs(float(legend.group(1)) - largest) <= 5e-4 * largest
            and abs(float(legend.group(2)) - largest) <= 5e-4 * largest,
            head + ": tokens on the query axis": re.search(r'<div class="yaxis".*?<span[^>]*>5 "Well"</span>', text,
                                                           re.S) is not None,
            head + ": the byte-level token on the key axis": re.search(
                r'<div class="xaxis".*?<span[^>]*>3 " \\xe2\\x80"</span>', text, re.S) is not None,
            head + ": the lone continuation byte": re.search(r'<span[^>]*>4 "\\x9c"</span>', text) is not None,
        })
    names = re.findall(r'<th data-type="number" data-name="([^"]*)"', dom)
    body = re.search(r'<table id="stats".*?<tbody>(.*?)</tbody>', dom, re.S)
    js_keep, ranks = [], []
    if body and "js_keep" in names:
        for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S):
            cells = re.findall(r"<td(?: data-value=\"([^\"]*)\")?>([^<]*)</td>", row)
            ranks.append(int(cells[0][1]))
            js_keep.append(float(cells[names.index("js_keep")][0]))
    recorded = expected["js_keep"][::-1]
    checks.update({
        "the js_keep heading is marked as sorted ascending":
        re.search(r'<th data-type="number" data-name="js_keep"[^>]*data-sort="asc"', dom) is not None,
        "6 rows, js_keep ascending": len(js_keep) == 6 and js_keep == sorted(js_keep)
        and all(abs(a - b) <= 1e-8 for a, b in zip(js_keep, recorded)),
        "the ranks descend": ranks == [6, 5, 4, 3, 2, 1],
    })
    fail_unless_all(checks, dom, work)
    print("OK: page %d bytes, %d checks" % (os.path.getsize(page), len(checks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
