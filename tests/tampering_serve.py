"""`workbench serve` with one fault of the test's choosing in its HTTP side, to prove verification catches it.

Run as `python -m tests.tampering_serve MODE serve ARGS...`: the real server (its FTP, probe, iperf3 and
control API untouched) with one HTTP handler wrapped before the app is made:

- corrupt-uploads: a PUT beneath incoming/ of a file of at least BIG_BYTES is stored, then one byte of the
  stored file is flipped before the answer leaves (the client hears 200 for a file that is now wrong);
- corrupt-downloads: a GET beneath files/ of such a file sends its bytes with one flipped (the stored file
  stays right);
- no-hashes: the hash of anything beneath incoming/ is refused (503): uploads cannot be verified.

Small files are left alone, so a run's small-file rows show the fault is confined to the rows it hits.
`TamperingServe` is the supervised process for tests (a ServeProcess whose command runs this module).
"""

from __future__ import annotations

import sys
from pathlib import Path

from aiohttp import web

from workbench.server.daemons.base import ServerContext
from workbench.server.daemons.serve_process import ServeProcess
from workbench.shared.paths import FILES_DIR, INCOMING_DIR

BIG_BYTES = 64 * 1024
MODES = ("corrupt-uploads", "corrupt-downloads", "no-hashes")


def flip_middle_byte(path: Path) -> None:
    """Flip one bit of the byte in the middle of the file, in place (size and times stay as they were)."""
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2)
        byte = fh.read(1)
        fh.seek(size // 2)
        fh.write(bytes([byte[0] ^ 0x01]))


def _big(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size >= BIG_BYTES
    except OSError:
        return False


def install(mode: str, root: Path) -> None:
    """Wrap serve's HTTP handler for `mode` (before make_app looks the handlers up)."""
    from workbench.server import http_app

    if mode == "corrupt-uploads":
        stored = http_app.put_file

        async def put_file(request: web.Request) -> web.Response:
            response = await stored(request)
            rel = request.match_info["path"]
            if rel.startswith(f"{INCOMING_DIR}/") and _big(root / rel):
                flip_middle_byte(root / rel)
            return response

        http_app.put_file = put_file  # type: ignore[assignment]
    elif mode == "corrupt-downloads":
        sent = http_app.get_file

        async def get_file(request: web.Request) -> web.StreamResponse:
            rel = request.match_info["path"]
            if rel.startswith(f"{FILES_DIR}/") and _big(root / rel):
                data = bytearray((root / rel).read_bytes())
                data[len(data) // 2] ^= 0x01
                return web.Response(body=bytes(data), content_type="application/octet-stream")
            return await sent(request)

        http_app.get_file = get_file  # type: ignore[assignment]
    elif mode == "no-hashes":
        hashed = http_app.ctl_hash

        async def ctl_hash(request: web.Request) -> web.Response:
            if request.query.get("path", "").startswith(f"{INCOMING_DIR}/"):
                raise web.HTTPServiceUnavailable(text="hashing uploads is switched off on this server")
            return await hashed(request)

        http_app.ctl_hash = ctl_hash  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")


class TamperingServe(ServeProcess):
    """`workbench serve` as ServeProcess runs it, through this module with `mode` installed."""

    def __init__(self, ctx: ServerContext, mode: str) -> None:
        super().__init__(ctx)
        assert mode in MODES, mode
        self.mode = mode

    def command(self) -> list[str]:
        argv = super().command()
        assert argv[1:3] == ["-m", "workbench"], argv
        return [argv[0], "-m", "tests.tampering_serve", self.mode, *argv[3:]]


def main(argv: list[str]) -> None:
    mode, rest = argv[1], argv[2:]
    install(mode, Path(rest[rest.index("--root") + 1]))
    from workbench.cli.app import main as workbench_main

    sys.argv = ["workbench", *rest]
    workbench_main()


if __name__ == "__main__":
    main(sys.argv)
