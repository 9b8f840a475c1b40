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


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    chromium, make_page, work = sys.argv[1:]
    if not chromium or not os.path.exists(chromium):
        print("SKIPPED: chromium not found (" + chromium + "); install-deps.sh installs it")
        return SKIP
    os.makedirs(work, exist_ok=True)
    page = os.path.join(work, "page.html")
    shot = os.path.join(work, "page.png")
    profile = os.path.join(work, "chromium-profile")
    for path in (page, shot):
        if os.path.exists(path):
            os.remove(path)
    shutil.rmtree(profile, ignore_errors=True)
    subprocess.run([make_page, page], check=True, timeout=120)
    url = "file://" + os.path.abspath(page) + "#head-0-1:5,3"  # the larger view of head 0-1, pointer at (5, 3)
    with open(page + ".expected") as expected_file:
        expected_weight = float(expected_file.read())

    dom_run = run_chromium(chromium, profile, url, ["--dump-dom", "--window-size=1400,1000"])
    if dom_run.returncode != 0:
        fail("chromium --dump-dom exited %d:\n%s" % (dom_run.returncode, dom_run.stderr[-3000:]))
    messages = console_messages(dom_run.stderr)
    if messages:
        fail("console messages:\n" + "\n".join(messages))
    dom = dom_run.stdout

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
        "the statistics table": '<table id="stats">' in dom,
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
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        with open(os.path.join(work, "dom.html"), "w", encoding="utf-8") as out:
            out.write(dom)
        fail("missing in the DOM after the scripts ran: " + ", ".join(failed) + " (DOM in " + work + "/dom.html)")

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
