"""serve's TCP watches are bounded against a hostile authenticated client: per address, in all, in time,
and a client may stop only its own watch (the HTTP routes around them: tests/integration)."""

from __future__ import annotations

import pytest

from workbench.server import remote_watches
from workbench.server.remote_watches import Watches, WatchRefused
from workbench.shared import inetdiag

pytestmark = pytest.mark.skipif(inetdiag.available() is not None, reason="inet_diag is Linux's")


def test_one_address_keeps_at_most_its_share_and_cannot_stop_anothers() -> None:
    watches = Watches("127.0.0.1")
    try:
        first = watches.start("127.0.0.5", "127.0.0.1", "sender")
        second = watches.start("127.0.0.5", "127.0.0.1", "sender")
        third = watches.start("127.0.0.5", "127.0.0.1", "sender")  # ends this address's oldest
        with pytest.raises(KeyError):
            watches.stop("127.0.0.5", first)
        with pytest.raises(KeyError):
            watches.stop("127.0.0.6", second)  # another address's id
        assert watches.stop("127.0.0.5", second) is not None and watches.stop("127.0.0.5", third) is not None
        with pytest.raises(WatchRefused):
            watches.start("127.0.0.5", "127.0.0.1", "everything")
    finally:
        watches.close()


def test_all_watches_taken_by_others_refuses_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_watches, "MAX_WATCHES", 3)
    watches = Watches("127.0.0.1")
    try:
        for n in range(3):
            watches.start(f"127.0.1.{n}", "127.0.0.1", "sender")
        with pytest.raises(WatchRefused, match="3 watches"):
            watches.start("127.0.2.1", "127.0.0.1", "sender")
        assert watches.sampling_cpu_s() >= 0.0
    finally:
        watches.close()


def test_a_tunnelled_client_gets_no_watch_of_this_hosts_loopback() -> None:
    watches = Watches("10.0.0.1")  # serve listens on a real address; the client arrived over loopback
    try:
        with pytest.raises(WatchRefused, match="tunnel"):
            watches.start("127.0.0.1", "127.0.0.1", "sender")
    finally:
        watches.close()
