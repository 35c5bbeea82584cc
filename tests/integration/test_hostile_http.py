"""`workbench run http://…` against a real WebDAV server whose answers are hostile (tests/hostile_http.py: the stock
WsgiDAV behind a front that answers the requests a case names with raw bytes), then `workbench report --markdown
--csv --html --json` on the stored run.

Each answer is tried on each request it can answer: the login's PROPFIND, the scratch directory's MKCOL, the test
files' PUT, the timed uploads (PUT) and downloads (GET), the PROPFIND that checks a directory before its removal,
and the clean-up's DELETEs. The answers carry control sequences, markup, formulas, line breaks or a megabyte in the
status line, a header (Location, Content-Type, WWW-Authenticate, one of a megabyte, a thousand of them) or the body
(an error page, a multistatus with hostile names, 100 000 levels of XML, 50 MB). Whatever the server says,
workbench prints one line per error, exits with its documented code, never says "internal error" nor shows a
traceback, sends no control code to the terminal, shows markup as typed, and reads no more of a huge answer than it
needs. Both HTTP clients run: aiohttp and curl (with its own WebDAV calls).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from tests.forked_workbench import ForkedWorkbench
from tests.hostile_http import Counts, HostileCase, HostileDavFront
from tests.integration.test_hostile_servers import CLEAR, OSC52, _assert_shown_safely, _report_everything
from tests.stock_urls import StockSite, run_workbench
from workbench.shared.errors import ExitCode

ESCAPES = f"{OSC52}{CLEAR}\x1bc\x9b31m refused \u202eRLO"
MARKUP = "[/] not empty [link=http://x]click[/link] [bold]B :warning:"
FORMULA = '=HYPERLINK("http://x","y") | $x^2$ $\\undefinedcmd$ <script>alert(1)</script>'
WORDS = f"{ESCAPES} {MARKUP} {FORMULA}"
HUGE_BYTES = 50 << 20  # the huge answer's body; the client must hang up long before its end
DEEP_LEVELS = 100_000


def _answer(status_line: str, *headers: str, body: bytes = b"") -> Callable[[], Iterable[bytes]]:
    head = "".join(f"{h}\r\n" for h in (status_line, *headers, f"Content-Length: {len(body)}"))
    raw = head.encode() + b"\r\n" + body
    return lambda: (raw,)


def _multistatus(*responses: str) -> bytes:
    return ('<?xml version="1.0" encoding="utf-8"?><D:multistatus xmlns:D="DAV:">' + "".join(responses)).encode() + (
        b"</D:multistatus>"
    )


def _response(href: str, name: str, collection: bool = True) -> str:
    kind = "<D:collection/>" if collection else ""
    return (
        f"<D:response><D:href>{href}</D:href><D:propstat><D:prop><D:displayname>{name}</D:displayname>"
        f"<D:resourcetype>{kind}</D:resourcetype></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>"
        "</D:response>"
    )


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("\x1b", "&#x1b;").replace("\x9b", "")


def _hostile_multistatus() -> bytes:
    """A multistatus whose first answer is a plain collection (as the client asks about), then hostile names."""
    odd = [WORDS, "../../etc/passwd", "=cmd|x", "$x^2$ <b>", "line\r\nbreak"]
    return _multistatus(
        _response("/", "ok"),
        *(_response("/" + _xml_text(n).replace(" ", "%20"), _xml_text(n), collection=False) for n in odd),
    )


def _deep_xml() -> bytes:
    return _multistatus(_response("/", "<D:x>" * DEEP_LEVELS + "deep" + "</D:x>" * DEEP_LEVELS))


def _huge() -> Iterator[bytes]:
    yield f"HTTP/1.1 207 Multi-Status\r\nContent-Type: application/xml\r\nContent-Length: {HUGE_BYTES}\r\n\r\n".encode()
    block = _response("/" + "n" * 200, "huge").encode() * ((1 << 20) // 400)
    opening = _multistatus()[: -len(b"</D:multistatus>")]
    left = HUGE_BYTES - len(opening)
    yield opening
    while left > 0:
        yield block[:left]
        left -= len(block[:left])


# name: the answer's bytes (made afresh for each request it answers)
ANSWERS: dict[str, Callable[[], Iterable[bytes]]] = {
    "reason-escapes": _answer(f"HTTP/1.1 500 {ESCAPES}"),
    "reason-markup": _answer(f"HTTP/1.1 403 {MARKUP}"),
    "reason-formula": _answer(f"HTTP/1.1 404 {FORMULA}"),
    "reason-lines": _answer(f"HTTP/1.1 409 first [/] line\r\n {CLEAR}middle\r\nlast line"),
    "reason-megabyte": _answer("HTTP/1.1 500 " + "x" * (1 << 20)),
    "error-page": _answer(
        f"HTTP/1.1 500 {WORDS}",
        f"Content-Type: text/html; {WORDS}",
        body=f"<html><script>alert(1)</script>{WORDS}\n{CLEAR}</html>".encode(),
    ),
    "location": _answer("HTTP/1.1 302 Found", f"Location: http://127.0.0.1:9/../../{WORDS}"),
    "content-type": _answer("HTTP/1.1 507 Insufficient Storage", f"Content-Type: {WORDS}"),
    "auth": _answer("HTTP/1.1 401 Unauthorized", f"WWW-Authenticate: {WORDS}", f"WWW-Authenticate: Basic {MARKUP}"),
    "header-megabyte": _answer("HTTP/1.1 500 Error", "X-Hostile: " + "x" * (1 << 20)),
    "many-headers": _answer("HTTP/1.1 200 OK", *(f"X-Hostile-{i}: {FORMULA}" for i in range(1000))),
    "huge-body": _huge,
}
# Answers only a PROPFIND reads into: a multistatus with hostile names and hrefs, and 100 000 levels of XML.
PROPFIND_ANSWERS: dict[str, Callable[[], Iterable[bytes]]] = {
    "multistatus": _answer("HTTP/1.1 207 Multi-Status", "Content-Type: application/xml", body=_hostile_multistatus()),
    "deep-xml": _answer("HTTP/1.1 207 Multi-Status", "Content-Type: application/xml", body=_deep_xml()),
}
SCRATCH = r"^/workbench-[^/]+/$"
# What each request answered so means for the run (name: the method, the paths it is answered for, the exit codes
# the documentation allows).
REQUESTS: dict[str, tuple[str, str, set[int]]] = {
    "PROPFIND-login": ("PROPFIND", r"^/$", {ExitCode.ERROR, ExitCode.AUTH, ExitCode.NOT_FOUND, ExitCode.DISK}),
    "MKCOL": ("MKCOL", SCRATCH, {ExitCode.ERROR, ExitCode.AUTH, ExitCode.NOT_FOUND, ExitCode.DISK}),
    "PUT-files": ("PUT", "/files/", {ExitCode.ERROR, ExitCode.AUTH, ExitCode.NOT_FOUND, ExitCode.DISK}),
    "PUT": ("PUT", "/incoming/", {ExitCode.ROWS_FAILED}),  # the timed uploads fail: their rows
    "GET": ("GET", "/files/", {ExitCode.ROWS_FAILED}),  # the downloads fail: their rows
    "PROPFIND-check": ("PROPFIND", "/incoming/", {ExitCode.OK, ExitCode.ROWS_FAILED}),  # clean-up left: a note
    "DELETE": ("DELETE", "/incoming/", {ExitCode.OK, ExitCode.ROWS_FAILED}),
    "DELETE-scratch": ("DELETE", SCRATCH, {ExitCode.OK}),  # the scratch directory stays: a note says so
}
CASES = [(request, answer) for request in REQUESTS for answer in ANSWERS] + [
    (request, answer) for request in ("PROPFIND-login", "PROPFIND-check") for answer in PROPFIND_ANSWERS
]
RUN = ("--protocols", "http/aiohttp,http/curl", "--sizes", "64K", "--small", "2x4K", "--repeat", "1", "--warmup", "0")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StockSite, HostileDavFront]]:
    site = StockSite(tmp_path_factory.mktemp("hostile-http"))
    front: HostileDavFront | None = None
    try:
        front = HostileDavFront(site.start("webdav").ctx.ports["http"])
        front.start()
        yield site, front
    finally:
        if front is not None:
            front.stop()
        site.stop()


@pytest.fixture(scope="module")
def forked(hostile: tuple[StockSite, HostileDavFront]) -> Iterator[ForkedWorkbench]:
    """The matrix's runs, each a process forked from one that has imported workbench and both HTTP clients
    (tests/forked_workbench.py); the pass-through run is `python -m workbench` itself."""
    runner = ForkedWorkbench(hostile[0].env(), ("workbench.protocols.http", "workbench.protocols.curl"))
    try:
        yield runner
    finally:
        runner.close()


def _run(
    site: StockSite, front: HostileDavFront, case: HostileCase, db: Path, forked: ForkedWorkbench | None = None
) -> tuple[subprocess.CompletedProcess, Counts]:
    """`workbench run` through the front answering as `case` says (forked from `forked`, else `python -m
    workbench`), and what the front counted meanwhile."""
    front.set_case(case)
    args = ("run", front.url(site.credentials.user), *RUN, "--db", str(db))
    try:
        proc = forked.run(*args, timeout=240) if forked else run_workbench(site, *args, timeout=240)
        return proc, front.counts
    finally:
        front.set_case()


@pytest.mark.parametrize(("request_name", "answer"), CASES)
def test_a_hostile_answer_is_one_safe_line_and_the_documented_exit(
    hostile: tuple[StockSite, HostileDavFront], forked: ForkedWorkbench, tmp_path: Path, request_name: str, answer: str
) -> None:
    site, front = hostile
    db = tmp_path / "runs.sqlite"
    method, path, codes = REQUESTS[request_name]
    case = HostileCase(method, path, {**ANSWERS, **PROPFIND_ANSWERS}[answer])
    proc, counts = _run(site, front, case, db, forked)
    assert counts.answered >= 1, counts.requests  # the run did meet the hostile answer
    shown = proc.stdout + proc.stderr
    _assert_shown_safely(shown)
    assert "HTTP 400" not in shown  # no answer here is a 400: an answer that is not HTTP is not called one
    assert proc.returncode in codes, (proc.returncode, proc.stderr[-2000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) <= 1 and len(proc.stderr.splitlines()) <= 2, proc.stderr[-2000:]  # one line per error
    assert all(len(line) < 4000 for line in shown.splitlines())  # a megabyte is cut, not printed
    if answer == "huge-body":  # aiohttp hung up: it did not read (nor hold) 50 MB to learn a status
        read_by_aiohttp = [sent for agent, sent in counts.sent if "aiohttp" in agent]
        assert read_by_aiohttp and max(read_by_aiohttp) < HUGE_BYTES // 2, counts.sent
    if proc.returncode in (ExitCode.OK, ExitCode.ROWS_FAILED):
        _report_everything(site, tmp_path, db)


def test_the_front_passes_a_run_through_unchanged(hostile: tuple[StockSite, HostileDavFront], tmp_path: Path) -> None:
    """Without a case the front is the stock server: a run succeeds, so what fails above is the hostile answer."""
    site, front = hostile
    proc, counts = _run(site, front, HostileCase(), tmp_path / "runs.sqlite")
    assert proc.returncode == ExitCode.OK, proc.stderr[-2000:]
    assert counts.answered == 0
    assert {r.split(" ")[0] for r in counts.requests} >= {"PROPFIND", "MKCOL", "PUT", "GET", "DELETE"}
    assert re.search(r"\bok\b", proc.stdout)
