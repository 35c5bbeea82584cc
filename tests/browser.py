"""Render an HTML file in headless Chromium (Debian's `chromium`) and report what a person would see.

`render_page` starts a private Chromium (own temporary profile and HOME, DevTools on a free loopback port),
drives it over the Chrome DevTools Protocol with aiohttp's websocket client, opens the file:// URL and
returns a `PageReport`: every request the page made besides its own file (a `data:` URI is part of the page,
not a request), every error (console error, uncaught exception, failed load, an <img> that did not decode),
the rendered size of every inline <svg> and <img>, the title, and a full-page PNG screenshot.

Nothing leaves the machine: Chromium is pointed at a dead proxy on loopback (127.0.0.1:9, nothing listens
there) for every URL, loopback included, and its host resolver answers "not found" for every name, so a
page that reaches for the network gets a local failure, which the report records. Chromium's own
background traffic (updates, sync, metrics, field trials) is switched off as well, and would hit the same
dead proxy. Chromium is always killed and its profile removed, on errors and timeouts too.

Usage from a test::

    if reason := chromium_unavailable():
        pytest.skip(reason)  # WORKBENCH_TESTS_STRICT=1 turns this into a failure (tests/conftest.py)
    report = render_page(html, tmp_path / "page.png")
    assert not report.problems(), report.problems()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import aiohttp

# Nothing listens on the discard port: every proxied connection is refused at once, on this machine.
DEAD_PROXY = "127.0.0.1:9"
CHROMIUM_NAMES = ("chromium", "chromium-browser")
# A screenshot taller than this is cut (Chromium's own limit on a capture is 16384 px).
MAX_SCREENSHOT_HEIGHT = 16384
VIEWPORT_HEIGHT = 800
# Features that would talk to Google in the background (translation, hints, the network-time query, casting).
# Chromium 156 still tries a few hosts at start-up (an on-device-model manifest at update.googleapis.com, a
# connection to accounts.google.com): those meet the dead proxy like everything else.
DISABLED_FEATURES = (
    "Translate",
    "OptimizationHints",
    "NetworkTimeServiceQuerying",
    "MediaRouter",
    "DialMediaRouteProvider",
    "AutofillServerCommunication",
)

Event = dict[str, Any]


class BrowserError(RuntimeError):
    """Chromium could not be started or driven, or did not finish in time."""


@dataclass(frozen=True)
class PageReport:
    """What one render of a page showed."""

    requests: list[str]  # every URL the page asked for except its own file URL and data: URIs, in order
    errors: list[str]  # console errors, uncaught exceptions, failed loads, undecoded <img>s
    images: list[tuple[str, float, float]]  # ("svg" | "img", rendered width, rendered height) in document order
    screenshot: Path  # a full-page PNG
    title: str

    def zero_size_images(self) -> list[tuple[str, float, float]]:
        """The <svg>s and <img>s that take no room on the page (width or height 0)."""
        return [image for image in self.images if image[1] <= 0 or image[2] <= 0]

    def problems(self) -> list[str]:
        """Everything a self-contained, fully drawn page must not have, one line each (empty: all good)."""
        lines = [f"request beyond the file: {url}" for url in self.requests]
        lines += [f"error: {error}" for error in self.errors]
        lines += [f"<{tag}> drawn at {w:g}x{h:g} px" for tag, w, h in self.zero_size_images()]
        return lines


@cache
def chromium_binary() -> str | None:
    """The path of Debian's chromium launcher (or another distribution's name for it), or None."""
    for name in CHROMIUM_NAMES:
        if path := shutil.which(name):
            return path
    return None


@cache
def chromium_unavailable() -> str | None:
    """Why no headless Chromium can run here, or None (the same pattern as tests/helpers.lab_unavailable)."""
    binary = chromium_binary()
    if binary is None:
        return "chromium is not installed (setup.sh installs Debian's chromium: apt-get install chromium)"
    try:
        proc = subprocess.run(
            [binary, "--headless=new", "--no-sandbox", "--version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} --version failed: {exc}"
    if proc.returncode != 0 or "chrom" not in proc.stdout.lower():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        return f"{binary} --version exited {proc.returncode}: {tail[0]}"
    return None


def chromium_args(user_data_dir: Path, width: int, proxy: str = DEAD_PROXY) -> list[str]:
    """The command line: headless, no sandbox (root), DevTools on a free port, and no way out to the network."""
    binary = chromium_binary()
    if binary is None:
        raise BrowserError(chromium_unavailable() or "chromium is not installed")
    return [
        binary,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--remote-debugging-port=0",
        "--remote-debugging-address=127.0.0.1",
        f"--user-data-dir={user_data_dir}",
        f"--window-size={width},{VIEWPORT_HEIGHT}",
        # Chromium's own traffic: first-run, updates, sync, metrics, field trials, safe browsing, extensions
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        "--disable-component-extensions-with-background-pages",
        "--disable-client-side-phishing-detection",
        "--disable-domain-reliability",
        "--disable-field-trial-config",
        "--disable-breakpad",
        "--disable-crash-reporter",
        "--metrics-recording-only",
        "--disable-features=" + ",".join(DISABLED_FEATURES),
        "--password-store=basic",
        "--use-mock-keychain",
        # anything that still tries the network goes to a proxy on loopback (loopback itself included: <-loopback>)
        # and no host name resolves, so nothing is sent beyond this machine and the attempt fails at once
        f"--proxy-server={proxy}",
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        # a steady picture: no shared-memory limits of a container, no scrollbars, sRGB colours
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--force-color-profile=srgb",
        "--mute-audio",
        "about:blank",
    ]


def render_page(
    html_path: Path,
    screenshot_path: Path,
    width: int = 1280,
    timeout_s: float = 60,
    *,
    proxy: str = DEAD_PROXY,
) -> PageReport:
    """Open html_path in headless Chromium, save a full-page PNG to screenshot_path and report what happened.

    `proxy` (host:port on loopback) is where Chromium sends every request that is not a file or data URI;
    the default refuses them all. A test may pass its own loopback listener to see what would have gone out.
    Raises BrowserError when Chromium cannot be started or the render takes longer than timeout_s; Chromium
    is stopped and its temporary profile removed in every case. Not for use inside a running event loop
    (see render_page_async).
    """
    return asyncio.run(render_page_async(html_path, screenshot_path, width, timeout_s, proxy=proxy))


async def render_page_async(
    html_path: Path,
    screenshot_path: Path,
    width: int = 1280,
    timeout_s: float = 60,
    *,
    proxy: str = DEAD_PROXY,
) -> PageReport:
    """render_page for callers that already run an event loop."""
    html_path = Path(html_path).resolve()
    if not html_path.is_file():
        raise BrowserError(f"no such page: {html_path}")
    workdir = Path(tempfile.mkdtemp(prefix="workbench-chromium-"))
    profile = workdir / "profile"
    stderr_path = workdir / "chromium.stderr"
    env = {
        **os.environ,
        # Chromium keeps nothing in root's own home (NSS database, caches, crash reports)
        "HOME": str(workdir),
        "XDG_CONFIG_HOME": str(workdir / "config"),
        "XDG_CACHE_HOME": str(workdir / "cache"),
    }
    proc: subprocess.Popen[bytes] | None = None
    try:
        with stderr_path.open("wb") as stderr:
            proc = subprocess.Popen(
                chromium_args(profile, width, proxy),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                start_new_session=True,  # one process group: the browser and every helper it forks
            )
        try:
            async with asyncio.timeout(timeout_s):
                ws_url = await _devtools_url(proc, profile, stderr_path)
                return await _drive(ws_url, html_path, screenshot_path, width)
        except TimeoutError:
            raise BrowserError(
                f"chromium did not render {html_path.name} within {timeout_s:g} s{_stderr_tail(stderr_path)}"
            ) from None
    finally:
        if proc is not None:
            _stop(proc, workdir)
        shutil.rmtree(workdir, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes], workdir: Path) -> None:
    """End Chromium and every helper it started; bounded in time (a few seconds at most).

    The browser leads its own process group (zygotes, renderers, GPU and network services); the crash
    handler leaves that group, so it is found by the private folder on its command line, by pid.
    """
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # a helper of the group may outlive the browser by a moment
    for pid in _pids_mentioning(workdir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _pids_mentioning(workdir: Path) -> list[int]:
    """The processes whose command line names workdir (only this render's Chromium processes do)."""
    needle = str(workdir).encode()
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError, ValueError):
            if needle in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
    return [pid for pid in pids if pid != os.getpid()]


def _stderr_tail(stderr_path: Path, lines: int = 5) -> str:
    try:
        text = stderr_path.read_text(errors="replace")
    except OSError:
        return ""
    # the launcher's and D-Bus's complaints (no session bus in a container) say nothing about the page
    said = [line.strip() for line in text.splitlines() if line.strip() and "dbus" not in line.lower()]
    said = [line for line in said if not line.startswith("/usr/bin/chromium:")]
    return ("; chromium said: " + " | ".join(said[-lines:])) if said else ""


async def _devtools_url(proc: subprocess.Popen[bytes], profile: Path, stderr_path: Path) -> str:
    """The browser's DevTools websocket URL, from DevToolsActivePort (port, then path) in the profile."""
    active_port = profile / "DevToolsActivePort"
    while True:
        if proc.poll() is not None:
            raise BrowserError(
                f"chromium exited with {proc.returncode} before DevTools was up{_stderr_tail(stderr_path)}"
            )
        with contextlib.suppress(OSError):
            lines = active_port.read_text().split()
            if len(lines) >= 2:
                return f"ws://127.0.0.1:{int(lines[0])}{lines[1]}"
        await asyncio.sleep(0.05)


class _Cdp:
    """A minimal Chrome DevTools Protocol client: numbered commands, and every event kept in arrival order."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[Event] = []
        self._changed = asyncio.Event()
        self._closed: BaseException | None = None
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for msg in self._ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                data = json.loads(msg.data)
                if "id" in data:
                    future = self._pending.pop(data["id"], None)
                    if future is None or future.done():
                        continue
                    if "error" in data:
                        future.set_exception(BrowserError(f"DevTools refused: {data['error']}"))
                    else:
                        future.set_result(data.get("result", {}))
                else:
                    self.events.append(data)
                    self._changed.set()
            self._closed = BrowserError("the DevTools connection closed (chromium exited?)")
        except Exception as exc:  # the connection broke: fail whoever waits, below
            self._closed = BrowserError(f"the DevTools connection broke: {exc!r}")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._closed)
        self._pending.clear()
        self._changed.set()

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        if self._closed is not None:
            raise self._closed
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = future
        await self._ws.send_str(json.dumps(message))
        return await future

    async def wait_for(self, done: Callable[[list[Event]], bool]) -> None:
        """Until done(all events so far) holds."""
        while not done(self.events):
            if self._closed is not None:
                raise self._closed
            self._changed.clear()
            await self._changed.wait()

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


def _loaded(url: str, session: str) -> Callable[[list[Event]], bool]:
    """Whether the main frame navigated to url and fired its load event after that."""

    def done(events: list[Event]) -> bool:
        navigated = False
        for event in events:
            if event.get("sessionId") != session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Page.frameNavigated":
                frame = params.get("frame", {})
                navigated = navigated or (not frame.get("parentId") and frame.get("url") == url)
            elif method == "Page.loadEventFired" and navigated:
                return True
        return False

    return done


# Two animation frames after load: layout and paint have happened once the promise settles (with a cap).
_SETTLE_JS = """new Promise(resolve => {
  setTimeout(resolve, 1000);
  requestAnimationFrame(() => requestAnimationFrame(resolve));
})"""

_IMAGES_JS = """Array.from(document.querySelectorAll('svg, img')).map(e => {
  const r = e.getBoundingClientRect();
  const tag = e.tagName.toLowerCase();
  return {
    tag: tag, width: r.width, height: r.height,
    naturalWidth: tag === 'img' ? e.naturalWidth : null,
    src: tag === 'img' ? (e.currentSrc || e.getAttribute('src') || '') : '',
  };
})"""


async def _evaluate(cdp: _Cdp, session: str, expression: str, await_promise: bool = False) -> Any:
    result = await cdp.send(
        "Runtime.evaluate",
        {"expression": expression, "returnByValue": True, "awaitPromise": await_promise},
        session,
    )
    if "exceptionDetails" in result:
        raise BrowserError(f"evaluating the page failed: {result['exceptionDetails'].get('text')}")
    return result.get("result", {}).get("value")


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _remote_object_text(arg: dict[str, Any]) -> str:
    if "value" in arg:
        return str(arg["value"])
    return str(arg.get("description") or arg.get("unserializableValue") or arg.get("type", ""))


def _collect(events: list[Event], session: str, page_url: str) -> tuple[list[str], list[str]]:
    """(requests beyond the page, errors) from the page session's events."""
    requests: list[str] = []
    errors: list[str] = []
    urls: dict[str, str] = {}
    for event in events:
        if event.get("sessionId") != session:
            continue
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            urls[params.get("requestId", "")] = url
            if url != page_url and not url.startswith("data:"):
                requests.append(url)
        elif method == "Network.loadingFailed":
            url = urls.get(params.get("requestId", ""), "?")
            reason = params.get("errorText", "") + (" (blocked)" if params.get("blockedReason") else "")
            errors.append(f"failed to load {_short(url)}: {reason}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "exception")
            errors.append(f"uncaught exception: {_short(text, 300)}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(_remote_object_text(arg) for arg in params.get("args", []))
            errors.append(f"console.{params.get('type')}: {_short(text, 300)}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            where = f" ({_short(entry['url'])})" if entry.get("url") else ""
            errors.append(f"log {entry.get('source', '')}: {_short(entry.get('text', ''), 300)}{where}")
    return requests, errors


async def _drive(ws_url: str, html_path: Path, screenshot_path: Path, width: int) -> PageReport:
    page_url = html_path.as_uri()
    async with (
        aiohttp.ClientSession() as http,
        # max_msg_size=0: a full-page screenshot arrives as one large base64 message
        http.ws_connect(ws_url, max_msg_size=0, autoping=True) as ws,
    ):
        cdp = _Cdp(ws)
        try:
            target = await cdp.send("Target.createTarget", {"url": "about:blank"})
            attached = await cdp.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
            session: str = attached["sessionId"]
            for domain in ("Network", "Page", "Runtime", "Log"):
                await cdp.send(f"{domain}.enable", {}, session)
            metrics = {"width": width, "height": VIEWPORT_HEIGHT, "deviceScaleFactor": 1, "mobile": False}
            await cdp.send("Emulation.setDeviceMetricsOverride", metrics, session)

            navigation = await cdp.send("Page.navigate", {"url": page_url}, session)
            if navigation.get("errorText"):
                raise BrowserError(f"chromium could not open {page_url}: {navigation['errorText']}")
            await cdp.wait_for(_loaded(page_url, session))
            await _evaluate(cdp, session, _SETTLE_JS, await_promise=True)

            title = await _evaluate(cdp, session, "document.title") or ""
            found = await _evaluate(cdp, session, _IMAGES_JS) or []

            layout = await cdp.send("Page.getLayoutMetrics", {}, session)
            content = layout.get("cssContentSize") or layout.get("contentSize") or {}
            height = min(max(math.ceil(content.get("height", VIEWPORT_HEIGHT)), 1), MAX_SCREENSHOT_HEIGHT)
            await cdp.send("Emulation.setDeviceMetricsOverride", {**metrics, "height": height}, session)
            shot = await cdp.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
            screenshot_path.parent.mkdir(parents=True, exist_ok=True)
            screenshot_path.write_bytes(base64.b64decode(shot["data"]))

            requests, errors = _collect(cdp.events, session, page_url)
        finally:
            await cdp.close()

    images: list[tuple[str, float, float]] = []
    for item in found:
        images.append((str(item["tag"]), float(item["width"]), float(item["height"])))
        if item["tag"] == "img" and not item.get("naturalWidth"):
            errors.append(f"<img> not decoded (naturalWidth 0): {_short(item.get('src', ''))}")
    return PageReport(requests=requests, errors=errors, images=images, screenshot=screenshot_path, title=str(title))
