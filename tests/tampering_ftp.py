"""The stock FTP server (plain pyftpdlib, workbench/server/stock/pyftpd.py) with one fault, for verification tests.

- `CorruptingStockFtp`: once an upload beneath an `incoming/` directory of at least BIG_BYTES is complete
  and closed, one byte of the stored file is flipped (pyftpdlib's on_file_received hook). pyftpdlib serves
  every session from one thread, so the flip is done before the server reads any later command: the
  read-back that verifies the upload always sees it.
- `DropBoxStockFtp`: the user may store, list, delete and make directories, but never retrieve a file (no
  'r' permission): a drop box, where an upload cannot be read back to verify it.

Both run the stock server's own script with a few lines changed; a change that no longer applies to the
script fails loudly instead of starting the unchanged server.
"""

from __future__ import annotations

from tests.tampering_serve import BIG_BYTES
from workbench.server.stock.pyftpd import SCRIPT, StockFtp

_SERVE_LINE = "server = FTPServer("
_FLIP_ON_RECEIVED = f'''\
import os as _os


class _Corrupting(Handler):
    def on_file_received(self, file):
        size = _os.path.getsize(file)
        if "/incoming/" in file and size >= {BIG_BYTES}:
            with open(file, "r+b") as fh:
                fh.seek(size // 2)
                byte = fh.read(1)
                fh.seek(size // 2)
                fh.write(bytes([byte[0] ^ 0x01]))


Handler = _Corrupting
'''
_FULL_PERMS = 'perm="elradfmwMT"'
_NO_RETRIEVE = 'perm="eladfmwMT"'


def _changed(script: str, old: str, new: str) -> str:
    assert script.count(old) == 1, f"the stock FTP script no longer has {old!r} once"
    return script.replace(old, new)


class CorruptingStockFtp(StockFtp):
    def prepare(self) -> None:
        super().prepare()
        self.script_path.write_text(_changed(SCRIPT, _SERVE_LINE, _FLIP_ON_RECEIVED + _SERVE_LINE))


class DropBoxStockFtp(StockFtp):
    def prepare(self) -> None:
        super().prepare()
        self.script_path.write_text(_changed(SCRIPT, _FULL_PERMS, _NO_RETRIEVE))
