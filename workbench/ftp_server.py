"""The FTP side of `workbench serve`: pyftpdlib, passive mode, sendfile on RETR, one user confined to root."""

from __future__ import annotations

import threading
from pathlib import Path

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import DTPHandler, FTPHandler
from pyftpdlib.servers import FTPServer

from workbench.credentials import Credentials


class _Dtp(DTPHandler):
    # Large socket reads on STOR: the default 64 KiB costs a syscall and a disk write per 64 KiB.
    ac_in_buffer_size = 1 << 20
    ac_out_buffer_size = 1 << 20


class _Handler(FTPHandler):
    banner = "workbench ftp ready"
    use_sendfile = True  # RETR straight from the page cache to the socket
    dtp_handler = _Dtp
    timeout = 60


class FtpServer:
    """pyftpdlib in a background thread; `port` is the real one once started (port 0 allowed)."""

    def __init__(self, root: Path, creds: Credentials, bind: str, port: int) -> None:
        authorizer = DummyAuthorizer()
        # e: cd, l: list, r: retrieve, a: append, d: delete, f: rename, m: mkdir, w: store, M: chmod, T: mtime
        authorizer.add_user(creds.user, creds.password, str(root), perm="elradfmwMT")
        handler = type("Handler", (_Handler,), {"authorizer": authorizer})
        self._server = FTPServer((bind, port), handler)
        self._server.max_cons = 64
        self.port = self._server.address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        self._thread = threading.Thread(
            # handle_exit=False: no start-up banner or logging set-up from pyftpdlib (serve prints its own line).
            target=self._server.serve_forever,
            kwargs={"timeout": 0.5, "blocking": True, "handle_exit": False},
            daemon=True,
        )
        self._thread.start()
        return self.port

    def stop(self) -> None:
        self._server.close_all()
        if self._thread:
            self._thread.join(timeout=5)
