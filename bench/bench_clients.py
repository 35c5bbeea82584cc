"""Each Python client against its native reference on loopback, both directions, on one file.

Usage: python bench/bench_clients.py [--size 256M] [--rounds 3] [--pairs sftp,smb,http,ftp]
Goals: paramiko >= 0.8 x OpenSSH sftp; every other Python client >= 0.9 x its reference where the
protocol allows (pysmb speaks SMB 2.0.2 with one 64 KiB request in flight: it cannot).
"""

from __future__ import annotations

import argparse

from _common import compare, loopback_servers

from workbench.shared.sizes import parse_size

PAIRS = {
    "sftp": [("sftp/paramiko", "sftp/openssh")],
    "smb": [("smb/pysmb", "smb/smbclient"), ("smb/smbprotocol", "smb/smbclient")],
    "http": [("http/aiohttp", "http/curl")],
    "ftp": [("ftp/ftplib", "ftp/curl")],
    "mount": [("sftp/sshfs", "sftp/openssh")],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="256M")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", default="sftp,smb,http,ftp")
    args = parser.parse_args()
    size = parse_size(args.size)
    with loopback_servers(size) as (target, root):
        print(f"loopback, {args.size} random file; ratio = python client / native reference")
        for group in args.pairs.split(","):
            for py, native in PAIRS[group]:
                for line in compare(py, native, target, root, size, args.rounds):
                    print(line, flush=True)


if __name__ == "__main__":
    main()
