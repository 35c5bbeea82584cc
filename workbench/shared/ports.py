"""The default port of each far-host service (serve's, the servers `servers up` starts, iperf3's).

Its own module, free of the target file's models, so the command line can offer these defaults without loading
them; workbench.shared.target re-exports it beside the Target they end up in.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_PORTS: Mapping[str, int] = {
    "tcp": 5301,  # workbench's raw-TCP probe
    "http": 8181,
    "ftp": 2121,
    "ssh": 2222,
    "smb": 4445,
    "rsync": 8730,
    "iperf3": 5201,
    "afp": 5548,  # netatalk's afpd (AFP's own port, 548, is left to a system AFP server)
}
