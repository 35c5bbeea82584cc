"""Real protocol servers whose replies are hostile, for tests of how workbench shows a server's words.

`HostileStockFtp` is the stock FTP server (plain pyftpdlib, workbench/server/stock/pyftpd.py) with one change: before
each command it reads `hostile.json` beside its settings, and when that names the command (and its argument holds the
`match` given), it answers with the
reply given there instead of doing it (a reply may hold control sequences, markup, formulas, several lines or a
megabyte). With `odd_names`, each directory it makes gets files whose names carry the same words, so that what
lists them and removes them meets them. The test sets the reply per case by rewriting the file: one server serves
every case.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.server.stock.pyftpd import SCRIPT, StockFtp

_SERVE_LINE = "server = FTPServer("
_HOSTILE_HANDLER = '''\
import os as _os


class _Hostile(Handler):
    """Answers the commands named in hostile.json with the reply given there."""

    def _case(self):
        try:
            with open(_os.path.join(_os.path.dirname(sys.argv[1]), "hostile.json")) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return {}

    def pre_process_command(self, line, cmd, arg):
        case = self._case()
        if cmd in case.get("commands", ()) and case.get("match", "") in (arg or ""):
            self.respond(case["reply"])
            return
        return super().pre_process_command(line, cmd, arg)

    def ftp_MKD(self, path):
        made = super().ftp_MKD(path)
        for name in self._case().get("odd_names", ()):
            try:
                with open(_os.path.join(self.fs.ftp2fs(path), name), "wb") as fh:
                    fh.write(b"x")
            except OSError:
                pass
        return made


Handler = _Hostile
'''


class HostileStockFtp(StockFtp):
    """The stock FTP server answering the commands named in `case_path` with a hostile reply."""

    name = "hostile-ftp"

    @property
    def case_path(self) -> Path:
        return self.dir / "hostile.json"

    def set_case(
        self, commands: tuple[str, ...] = (), reply: str = "", match: str = "", odd_names: tuple[str, ...] = ()
    ) -> None:
        """From the next command on: answer `commands` whose argument holds `match` with `reply`; make `odd_names`
        in each new directory."""
        case = {"commands": list(commands), "reply": reply, "match": match, "odd_names": list(odd_names)}
        self.case_path.write_text(json.dumps(case))

    def prepare(self) -> None:
        super().prepare()
        assert SCRIPT.count(_SERVE_LINE) == 1, "the stock FTP script changed: this server would not be hostile"
        self.script_path.write_text(SCRIPT.replace(_SERVE_LINE, _HOSTILE_HANDLER + _SERVE_LINE))
        self.set_case()
