#!/usr/bin/env python3
"""Fill BENCHMARKS.md's {{name}} placeholders from the figures of run_all.sh.

    python3 benches/fill_benchmarks.py /tmp/floodgate-bench/figures.txt [BENCHMARKS.md]

The figures file holds `name=value` lines (what benches/run_all.sh prints at
its end). Each `{{name}}` in the document becomes its value, as printed.
Placeholders with no figure are
left in place and listed, and the script then exits with status 1, so that a
half-filled file is noticed.
"""

import re
import sys
from pathlib import Path


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    figures = {}
    for line in Path(sys.argv[1]).read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and value.strip():
            figures[name.strip()] = value.strip()
    doc = Path(sys.argv[2] if len(sys.argv) == 3 else Path(__file__).parent.parent / "BENCHMARKS.md")
    text = doc.read_text()
    missing = sorted({m for m in re.findall(r"\{\{([a-z0-9_.]+)\}\}", text) if m not in figures})
    text = re.sub(r"\{\{([a-z0-9_.]+)\}\}", lambda m: figures.get(m.group(1), m.group(0)), text)
    doc.write_text(text)
    if missing:
        print(f"{doc}: no figure for: {', '.join(missing)}", file=sys.stderr)
        return 1
    print(f"{doc}: every placeholder filled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
