#!/usr/bin/env python3
"""The HTML report page in a real browser (headless Chromium): writes the test page (make_test_page), loads it with the
larger view of one head opened through the URL (#head-L-H, as a click does), and checks that
  - the browser logs no console message (the page logs nothing; any error or warning of the page fails the test),
  - the page's script ran to the end (body data-ready="1") and its error box stayed empty,
  - the expected elements exist after the scripts ran: 12 grid cells with thumbnails and sink bars, the larger view
    with token strings on its axes, the statistics table (12 rows, sortable headings), the glossary, the
    downsampling note of the 700 x 700 heads,
  - the pointer readout of the larger view (set through #head-0-1:5,3, as hovering that entry does) names the query
    token, the key token and the weight that make_test_page recorded, to 3 significant digits,
  - the statistics table with every column fits a 1400-pixel window, and the thumbnails are 96 pixels,
  - the table is sorted by the address (?sort=entropy:desc, the sorting script a click runs): the entropy column
    descends, rows without a value last,
  - the header names the run (model, L = 24) and its options; the byte-level token shows as \xe2\x80 on the axes,
    never as a replacement character,
  - the curves along the sequence: a sparkline in every grid cell, and in the larger view of head 0-1 (L = 24) the
    sink-mass and entropy curves of 24 points, starting at sink mass 1 and entropy 0 (causal row 0 sees key 0
    only); the larger view of a 700 x 700 head has 234 points (runs of 3 rows), a learned-sink head a third curve,
  - a screenshot is written (a PNG of the window size).
Usage: check_html_page.py CHROMIUM MAKE_TEST_PAGE WORK_DIR. Exits 77 (skipped) when CHROMIUM does not exist."""
import base64
import os
import re
import shutil
import struct
import subprocess
import sys

SKIP = 77


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run_chromium(chromium, profile, url, extra):
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio",
               "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
               *extra, url]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        fail("chromium did not finish within 120 s: " + " ".join(command))


def console_messages(stderr):
    # Chromium logs every console message of the page as ...:CONSOLE(line)] "message", source: url (line).
    return [line for line in stderr.splitlines() if "CONSOLE" in line]


def load_dom(chromium, profile, url):
    """The DOM of `url` after its scripts ran (in a 1400 x 1000 window); fails on a browser error or any console
    message."""
    run = run_chromium(chromium, profile, url, ["--dump-dom", "--window-size=1400,1000"])
    if run.returncode != 0:
        fail("chromium --dump-dom on %s exited %d:\n%s" % (url, run.returncode, run.stderr[-3000:]))
    messages = console_messages(run.stderr)
    if messages:
        fail("console messages on %s:\n%s" % (url, "\n".join(messages)))
    return run.stdout


def curve_points(dom, name):
    """The vertices (x, y) of the larger view's curve `name` (an SVG path of M and L commands)."""
    path = re.search(r'<path class="%s"[^>]* d="([^"]*)"' % name, dom)
    if path is None:
        return []
    return [(float(x), float(y)) for x, y in re.findall(r"[ML]([0-9.]+) ([0-9.]+)", path.group(1))]


def curve_checks(dom, points, block, first_sink=1.0):
    """The curves of the larger view: `points` vertices each, with one row per point the first at sink mass
    `first_sink` (1: the plot's top, y = 8; the plot is 120 high) and entropy 0 (its bottom, y = 128), as causal row 0
    sees key 0 only; the note names the run length."""
    sink, entropy = curve_points(dom, "curve-sink"), curve_points(dom, "curve-entropy")
    note = re.search(r'<p class="hint" id="curve-note">(.*?)</p>', dom)
    return {
        "the curves' SVG in the larger view": re.search(r'<section id="detail">.*<svg id="curve"', dom, re.S)
        is not None,
        "%d sink-mass points" % points: len(sink) == points,
        "%d entropy points" % points: len(entropy) == points,
        "the sink curve starts at mass %g" % first_sink: bool(sink)
        and (block > 1 or abs(sink[0][1] - (8.0 + 120.0 * (1 - first_sink))) < 0.06),
        "the entropy curve starts at 0": bool(entropy) and (block > 1 or abs(entropy[0][1] - 128.0) < 0.06),
        "the curve note names the runs": note is not None
        and (("mean of %d consecutive rows" % block in note.group(1)) == (block > 1)),
    }


def sorting_checks(dom):
    """The table after ?sort=entropy:desc: that heading marked, its cells' values descending, empty cells last."""
    names = re.findall(r'<th data-type="number" data-name="([^"]*)"', dom)
    body = re.search(r'<table id="stats".*?<tbody>(.*?)</tbody>', dom, re.S)
    values, heads = [], []
    if "entropy" in names and body:
        column = names.index("entropy")
        for row in re.findall(r"<tr data-index=[^>]*>(.*?)</tr>", body.group(1), re.S):
            cells = re.findall(r"<td( data-value=\"([^\"]*)\")?>", row)
            values.append(float(cells[column][1]) if cells[column][1] else None)
            heads.append(tuple(int(v) for v in re.match(r"<td>(\d+)</td><td>(\d+)</td>", row).groups()))
    numbers = [v for v in values if v is not None]
    return {
        "the entropy heading is marked as sorted descending":
        re.search(r'<th data-type="number" data-name="entropy"[^>]*data-sort="desc"', dom) is not None,
        "12 rows sorted by entropy, descending, no longer by layer and head": len(values) == 12
        and numbers == sorted(numbers, reverse=True) and heads != sorted(heads),
        "rows without an entropy last": values[len(numbers):] == [None] * (len(values) - len(numbers)),
    }


def write_page(usage, name, stale=()):
    """The arguments CHROMIUM MAKE_PAGE WORK_DIR: exits 2 with `usage` when they are not three, 77 (skipped) when
    CHROMIUM does not exist; else writes the page WORK_DIR/name with MAKE_PAGE (after removing it, the `stale` files
    and the browser profile of an earlier run) and returns (chromium, work, page, profile)."""
    if len(sys.argv) != 4:
        print(usage)
        sys.exit(2)
    chromium, make_page, work = sys.argv[1:]
    if not chromium or not os.path.exists(chromium):
        print("SKIPPED: chromium not found (" + chromium + "); install-deps.sh installs it")
        sys.exit(SKIP)
    os.makedirs(work, exist_ok=True)
    page = os.path.join(work, name)
    profile = os.path.join(work, "chromium-profile")
    for path in (page, *stale):
        if os.path.exists(path):
            os.remove(path)
    shutil.rmtree(profile, ignore_errors=True)
    subprocess.run([make_page, page], check=True, timeout=120)
    return chromium, work, page, profile


def fail_unless_all(checks, dom, work):
    """Fails naming every check that did not hold, with the DOM written to WORK_DIR/dom.html."""
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        with open(os.path.join(work, "dom.html"), "w", encoding="utf-8") as out:
            out.write(dom)
        fail("missing in the DOM after the scripts ran: " + ", ".join(failed) + " (DOM in " + work + "/dom.html)")


def main():
    shot_name = "page.png"
    chromium, work, page, profile = write_page(__doc__, "page.html", [os.path.join(sys.argv[-1], shot_name)])
    shot = os.path.join(work, shot_name)
    base = "file://" + os.path.abspath(page)
    url = base + "?sort=entropy:desc#head-0-1:5,3"  # sorted by entropy; the larger view of head 0-1, pointer at (5, 3)
    with open(page + ".expected") as expected_file:
        expected_weight = float(expected_file.read())

    dom = load_dom(chromium, profile, url)

    readout = re.search(r'<div id="readout">query 5 "(,)"  \u2192  key 3 "( a)"  weight ([0-9.e-]+)</div>', dom)
    shown_weight = float(readout.group(3)) if readout else float("nan")
    table_width = re.search(r'data-table-width="(\d+)"', dom)
    thumbs = [base64.b64decode(m) for m in re.findall(r'<img class="thumb"[^>]*src="data:image/png;base64,([^"]+)"', dom)]
    thumb_sides = [struct.unpack(">II", t[16:24]) for t in thumbs]
    checks = {
        "the readout names the query token, the key token and the weight": readout is not None,
        "the readout's weight is the entry's, to 3 significant digits":
        abs(shown_weight - expected_weight) <= 0.005 * expected_weight,
        "the table fits a 1400-pixel window (body margins 2em)": table_width is not None
        and int(table_width.group(1)) <= 1400 - 64,
        "thumbnails of at most 96 pixels: 88 x 88 for the 700 x 700 heads": max(thumb_sides) == (88, 88),
        "the thumbnails are shown at 96 CSS pixels": ".thumb{width:96px;height:96px" in dom,
        "the script ran to the end": 'data-ready="1"' in dom,
        "the error box is hidden": re.search(r'<div id="script-errors" hidden="[^"]*"></div>', dom) is not None,
        "12 grid cells": len(re.findall(r'<button class="cell[ "]', dom)) == 12,
        "12 thumbnails": len(re.findall(r'<img class="thumb"[^>]*src="data:image/png;base64,', dom)) == 12,
        "12 sink bars in the grid": len(re.findall(r'<button class="cell.*?<span class="bar', dom)) == 12,
        "the opened head's cell is selected": re.search(r'<button class="cell selected" data-index="1"', dom)
        is not None,
        "the larger view is shown": re.search(r'<section id="detail">\s*<h2>layer 0 head 1</h2>', dom) is not None,
        "the larger image": re.search(r'<img class="big" id="big"[^>]*src="data:image/png;base64,', dom) is not None,
        "token strings on the query axis": re.search(r'<div class="yaxis".*?&#34;Once&#34;', dom, re.S) is not None
        or re.search(r'<div class="yaxis".*?"Once"', dom, re.S) is not None,
        "token strings on the key axis": re.search(r'<div class="xaxis".*?<span[^>]*>1 "Once"</span>', dom, re.S)
        is not None,
        "escaped token": "&lt;little&gt;" in dom,
        "the statistics table": '<table id="stats" class="sortable">' in dom,
        "12 table rows": len(re.findall(r"<tr data-index=", dom)) == 12,
        "sortable headings": dom.count('<th data-type="number"') >= 8,
        "the glossary": '<dt id="glossary-entropy">' in dom and "Typical:" in dom,
        "the downsampling note": "4 of 12 heads are larger than 256 pixels" in dom,
        "the non-finite note": "1 non-finite entries" in dom,
        "the experts section: 2 layers of 8 load bars": dom.count('<span class="load"') == 16
        and dom.count('<div class="experts-layer"') == 2,
        "the busiest expert's bar is full height": 'title="expert 3: 20 tokens" style="display:inline-block;width:6px;'
        'height:100%' in dom,
        "the learned-sink head's bar has three parts": "learned sink 0.3" in dom and "#8c6bb1" in dom,
    }
    checks.update(sorting_checks(dom))
    checks.update(curve_checks(dom, 24, 1))
    checks.update({
        "the header names the model and L": re.search(r'<summary id="run-what">Run: model synthetic; L = 24;', dom)
        is not None,
        "the header shows the options": '<p id="run-options">Options: map softmax; sink_keys 0</p>' in dom,
        "the summary says L": "12 heads: 8 of L = 24, 4 of L = 700." in dom,
        "the byte-level token as \\x escapes on the key axis":
        re.search(r'<div class="xaxis".*?<span[^>]*>10 " girl\\xe2\\x80"</span>', dom, re.S) is not None,
        "no replacement character": "\ufffd" not in dom,
        "a sparkline in every grid cell": len(re.findall(r'<button class="cell.*?<svg class="spark"', dom)) == 12,
    })
    # the larger views of a downsampled head (700 rows: 234 points of 3 rows) and of the learned-sink head
    # (the learned-sink head's rows are scaled to 1 - 0.3: row 0 has mass 0.7 on key 0, its renormalised row entropy 0)
    for hash_, points, block, learned in (("#head-2-0", 234, 3, False), ("#head-0-2", 24, 1, True)):
        view = load_dom(chromium, profile, base + hash_)
        for name, ok in curve_checks(view, points, block, 0.7 if learned else 1.0).items():
            checks[hash_ + ": " + name] = ok
        checks[hash_ + ": the learned sink's curve " + ("shown" if learned else "absent")] = \
            ('<path class="curve-learned"' in view) == learned
        if not all(checks.values()):
            dom = view
    fail_unless_all(checks, dom, work)

    shot_run = run_chromium(chromium, profile, url, ["--window-size=1200,1600", "--screenshot=" + shot])
    if shot_run.returncode != 0 or not os.path.exists(shot):
        fail("no screenshot (exit %d):\n%s" % (shot_run.returncode, shot_run.stderr[-3000:]))
    messages = console_messages(shot_run.stderr)
    if messages:
        fail("console messages while taking the screenshot:\n" + "\n".join(messages))
    with open(shot, "rb") as image:
        header = image.read(24)
    if header[:8] != b"\x89PNG\r\n\x1a\n" or struct.unpack(">II", header[16:24]) != (1200, 1600):
        fail("the screenshot is not a 1200 x 1600 PNG")
    print("OK: page %d bytes, screenshot %s (%d bytes), %d checks" % (os.path.getsize(page), shot,
                                                                       os.path.getsize(shot), len(checks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
