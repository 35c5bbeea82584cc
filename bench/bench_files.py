"""Test-file generation speed: the random generator alone, and `files make` into the page cache.

Usage: python bench/bench_files.py [--size 1G] [--dir /tmp]. Goal: random data at >= 1 GB/s into the
page cache. The first write of a fresh file also pays for the kernel handing out new pages (memory
returned to the hypervisor costs ~1.7 s of kernel CPU per GiB to touch again), so both a first
and a repeated pass are reported.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.fixtures import generate
from workbench.fixtures.profiles import chunks
from workbench.shared.sizes import parse_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="1G")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    size = parse_size(args.size)

    start = time.perf_counter()
    for _ in chunks("random", size, 1, "bench"):
        pass
    gen = size / (time.perf_counter() - start)
    print(f"generator only (AES-CTR keystream, no write): {gen / 1e9:.2f} GB/s")

    work = Path(tempfile.mkdtemp(prefix="workbench-bench-files-", dir=args.dir))
    try:
        for attempt, seed in enumerate((1, 2, 3)):
            report = generate.make(work, sizes=[size], seed=seed)  # a new seed rewrites the file
            label = "first pass (fresh pages)" if attempt == 0 else f"pass {attempt + 1}"
            print(f"files make {args.size} into the page cache, {label}: {report.write_bytes_per_s / 1e9:.2f} GB/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
