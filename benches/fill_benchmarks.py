#!/usr/bin/env python3
"""Write BENCHMARKS.md from its template, benches/BENCHMARKS.template.md,
its {{name}} placeholders filled from the figures of run_all.sh.

    python3 benches/fill_benchmarks.py /tmp/floodgate-bench/figures.txt [TEMPLATE [OUT]]

The template keeps the placeholders, so that the next run fills them again;
change the text there, not in BENCHMARKS.md.

The figures file holds `name=value` lines (what benches/run_all.sh prints at
its end). Each `{{name}}` becomes its value; whole numbers of 5 digits or
more get a space every three digits (12 345). A block between the lines
`<!-- only if met.NAME = **no** -->` (or `<!-- only if none missed -->`: no
target's `met.` figure is `**no**`) and
`<!-- end -->` is kept, without those two lines, when the condition holds,
and dropped otherwise. Placeholders with no figure are left in place and
listed, and the script then exits with status 1, so that a half-filled file
is noticed.
"""

import re
import sys
from pathlib import Path

PLACEHOLDER = re.compile(r"\{\{([a-z0-9_.]+)\}\}")
BLOCK = re.compile(r"^<!-- only if (.+?) -->\n(.*?)^<!-- end -->\n", re.S | re.M)


def shown(value: str) -> str:
    if re.fullmatch(r"-?\d{5,}", value):
        sign, digits = ("-", value[1:]) if value.startswith("-") else ("", value)
        groups = []
        while digits:
            groups.insert(0, digits[-3:])
            digits = digits[:-3]
        return sign + " ".join(groups)
    return value


def main() -> int:
    if len(sys.argv) not in (2, 3, 4):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    figures = {}
    for line in Path(sys.argv[1]).read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and value.strip():
            figures[name.strip()] = value.strip()
    here = Path(__file__).parent
    template = Path(sys.argv[2]) if len(sys.argv) >= 3 else here / "BENCHMARKS.template.md"
    doc = Path(sys.argv[3]) if len(sys.argv) == 4 else here.parent / "BENCHMARKS.md"
    text = template.read_text()

    def block(m: re.Match) -> str:
        cond = m.group(1)
        if cond == "none missed":
            keep = all(v != "**no**" for k, v in figures.items() if k.startswith("met."))
        else:
            name, _, want = cond.partition(" = ")
            keep = figures.get(name) == want
        return m.group(2) if keep else ""

    text = BLOCK.sub(block, text)
    missing = sorted({m for m in PLACEHOLDER.findall(text) if m not in figures})
    text = PLACEHOLDER.sub(lambda m: shown(figures[m.group(1)]) if m.group(1) in figures else m.group(0), text)
    doc.write_text(text)
    if missing:
        print(f"{doc}: no figure for: {', '.join(missing)}", file=sys.stderr)
        return 1
    print(f"{doc}: every placeholder filled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
