"""The headless-browser harness (tests/browser.py) can fail: each page here breaks one of its checks.

The HTML report's own test trusts render_page to catch a request beyond the file, a script error and an
image that is not drawn; these pages show it does, and that nothing the page asks for leaves loopback.
Each render starts a private Chromium (about a second); skipped without chromium, failed under
WORKBENCH_TESTS_STRICT=1 (tests/conftest.py).
"""

from __future__ import annotations

import base64
import socketserver
import struct
import tempfile
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import DEAD_PROXY, BrowserError, PageReport, chromium_unavailable, render_page

pytestmark = [
    pytest.mark.skipif(chromium_unavailable() is not None, reason=chromium_unavailable() or ""),
    pytest.mark.timeout(60),
]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REMOTE_IMG = "http://192.0.2.1/x.png"  # TEST-NET-1: routed nowhere, and the proxy stops it first anyway
REMOTE_CSS = "https://example.invalid/a.css"


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour PNG, made here so the page's data: URI needs no file."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack("!I", len(data)) + tag + data + struct.pack("!I", zlib.crc32(tag + data))

    rows = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    header = struct.pack("!IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG_SIGNATURE), data[:16]
    width, height = struct.unpack("!II", data[16:24])
    return width, height


def page(tmp_path: Path, body: str, head: str = "") -> Path:
    path = tmp_path / "page.html"
    path.write_text(
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>harness</title>{head}</head>\n'
        f"<body>\n{body}\n</body></html>\n",
        encoding="utf-8",
    )
    return path


def render(tmp_path: Path, html: Path, width: int = 1280, timeout_s: float = 30, proxy: str = DEAD_PROXY) -> PageReport:
    return render_page(html, tmp_path / "shots" / "page.png", width, timeout_s, proxy=proxy)


class RecordingProxy(socketserver.ThreadingTCPServer):
    """A proxy on loopback that notes each request line and answers nothing: where Chromium would have gone."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.lines: list[str] = []
        super().__init__(("127.0.0.1", 0), RecordingHandler)

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"{host}:{port}"


class RecordingHandler(socketserver.StreamRequestHandler):
    timeout = 5

    def handle(self) -> None:
        assert isinstance(self.server, RecordingProxy)
        line = self.rfile.readline(8192).decode("latin-1").strip()
        if line:
            self.server.lines.append(line)


@pytest.fixture
def recording_proxy() -> Iterator[RecordingProxy]:
    proxy = RecordingProxy()
    thread = threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=5)


def test_self_contained_page_draws_every_image_and_asks_for_nothing(tmp_path: Path) -> None:
    data_uri = "data:image/png;base64," + base64.b64encode(png(8, 4, (200, 30, 30))).decode()
    html = page(
        tmp_path,
        '<svg width="120" height="60" viewBox="0 0 120 60"><rect width="120" height="60" fill="#2a6"/></svg>\n'
        '<p>throughput</p><svg viewBox="0 0 10 10" style="width: 300px"><circle cx="5" cy="5" r="4"/></svg>\n'
        '<div style="height: 2400px">a tall table</div>\n'  # the image sits far below the first viewport
        f'<img alt="bar" src="{data_uri}" style="width: 64px">',
        head="<style>body { font-family: sans-serif; background: #fff; }</style>",
    )

    report = render(tmp_path, html, width=1000)

    assert report.requests == []
    assert report.errors == []
    assert report.problems() == []
    assert report.title == "harness"
    assert [tag for tag, _, _ in report.images] == ["svg", "svg", "img"]
    assert report.images[0][1:] == (120, 60)
    assert report.images[1][1:] == (300, 300)
    assert report.images[2][1:] == (64, 32)  # the PNG's 2:1 shape: it was decoded
    shot = report.screenshot.read_bytes()
    assert report.screenshot == tmp_path / "shots" / "page.png"
    width, height = png_size(shot)
    assert width == 1000
    assert height >= 60 + 300 + 2400 + 32  # the whole page, not one viewport's worth cut short


def test_a_request_beyond_the_file_is_reported_and_fails_locally(tmp_path: Path) -> None:
    html = page(tmp_path, f'<img alt="remote" src="{REMOTE_IMG}">', head=f'<link rel="stylesheet" href="{REMOTE_CSS}">')

    report = render(tmp_path, html)

    assert sorted(report.requests) == sorted([REMOTE_IMG, REMOTE_CSS])
    # refused by the dead proxy on loopback: neither a name lookup nor a connection went anywhere else
    for url in (REMOTE_IMG, REMOTE_CSS):
        assert any(url in error and "ERR_PROXY_CONNECTION_FAILED" in error for error in report.errors), report.errors
    assert any("not decoded" in error and REMOTE_IMG in error for error in report.errors), report.errors
    assert report.problems()


def test_what_the_page_asks_for_reaches_only_the_loopback_proxy(
    tmp_path: Path, recording_proxy: RecordingProxy
) -> None:
    html = page(tmp_path, f'<img alt="remote" src="{REMOTE_IMG}">', head=f'<link rel="stylesheet" href="{REMOTE_CSS}">')

    report = render(tmp_path, html, proxy=recording_proxy.address)

    assert sorted(report.requests) == sorted([REMOTE_IMG, REMOTE_CSS])
    # both arrived here, on 127.0.0.1, as proxy requests: Chromium did not go to either host itself
    assert f"GET {REMOTE_IMG} HTTP/1.1" in recording_proxy.lines
    assert "CONNECT example.invalid:443 HTTP/1.1" in recording_proxy.lines
    assert all(line.split()[0] in ("GET", "POST", "CONNECT") for line in recording_proxy.lines), recording_proxy.lines


def test_a_script_error_is_reported(tmp_path: Path) -> None:
    html = page(tmp_path, '<svg width="10" height="10"></svg>\n<script>throw new Error("boom")</script>')

    report = render(tmp_path, html)

    assert any("boom" in error for error in report.errors), report.errors
    assert report.requests == []


def test_a_console_error_is_reported(tmp_path: Path) -> None:
    html = page(tmp_path, '<script>console.error("chart data missing")</script>')

    report = render(tmp_path, html)

    assert any("chart data missing" in error for error in report.errors), report.errors


def test_an_svg_of_no_size_is_reported(tmp_path: Path) -> None:
    html = page(
        tmp_path,
        '<svg width="50" height="20"><rect width="50" height="20"/></svg>\n'
        '<svg width="0" height="40"><rect width="50" height="40"/></svg>',
    )

    report = render(tmp_path, html)

    assert report.images == [("svg", 50, 20), ("svg", 0, 40)]
    assert report.zero_size_images() == [("svg", 0, 40)]
    assert report.errors == []
    assert report.problems() == ["<svg> drawn at 0x40 px"]


def test_chromium_is_stopped_and_its_profile_removed_on_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where render_page makes its profile
    # the page's script holds up its load event for 20 s: the render gives up at 2 s, with Chromium fully up
    html = page(tmp_path, "<script>const t0 = Date.now(); while (Date.now() - t0 < 20000) {}</script>")

    with pytest.raises(BrowserError, match="did not render"):
        render(tmp_path, html, timeout_s=2)

    assert list(scratch.iterdir()) == []
    # no process of this render is left: each one had the profile folder under scratch on its command line
    left = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(scratch).encode() in cmdline.read_bytes():
                left.append(cmdline.parent.name)
        except OSError:
            continue
    assert left == []


def test_a_missing_page_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BrowserError, match="no such page"):
        render(tmp_path, tmp_path / "absent.html")
