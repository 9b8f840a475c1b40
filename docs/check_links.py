#!/usr/bin/env python3
"""Check every relative link of README.md and docs/**/*.md: the target must exist inside the repository and an
#anchor must name a heading (GitHub slug) or an explicit <a id="..."> of the target page.
Usage: python3 docs/check_links.py   (from anywhere; exit code 1 when a link is broken)."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
ANCHOR = re.compile(r"<a id=\"([^\"]+)\"")
FENCE = re.compile(r"^(```|~~~)")


def slug(heading: str) -> str:
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # GitHub keeps letters, digits, '_', '-' and spaces
    return text.replace(" ", "-")


def anchors(path: pathlib.Path) -> set:
    found, seen, fenced = set(), {}, False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        found.update(ANCHOR.findall(line))
        if line.startswith("#"):
            base = slug(line.lstrip("#"))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: pathlib.Path):
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                yield number, target


def main() -> int:
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    broken = checked = 0
    for page in pages:
        for number, target in links(page):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            checked += 1
            file_part, _, anchor = target.partition("#")
            resolved = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(ROOT)}:{number}: {target}"
            if ROOT not in resolved.parents and resolved != ROOT:
                print(f"{where}: points outside the repository")
                broken += 1
            elif not resolved.exists():
                print(f"{where}: no such file")
                broken += 1
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                print(f"{where}: no anchor #{anchor}")
                broken += 1
    print(f"{checked} relative links checked, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
