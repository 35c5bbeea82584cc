"""HTTP and FTP downloads (and uploads) on loopback: workbench's clients against curl on the same file.

Usage: python bench/bench_http_ftp.py [--size 256M] [--rounds 5]. Goal: >= 0.9 of curl.
curl is one process per copy, so its time includes connecting and logging in (a few ms here).
"""

from __future__ import annotations

import argparse

from _common import compare, loopback_servers

from workbench.shared.sizes import parse_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="256M")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    size = parse_size(args.size)
    with loopback_servers(size, only=["serve"]) as (target, root):
        print(f"loopback, {args.size} random file, tmp on both ends, ratio = workbench / curl (goal >= 0.9)")
        for py, native in (("http/aiohttp", "http/curl"), ("ftp/ftplib", "ftp/curl")):
            for line in compare(py, native, target, root, size, args.rounds):
                print(line, flush=True)


if __name__ == "__main__":
    main()
