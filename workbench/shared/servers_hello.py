"""What the far side of `run --via-ssh` (`workbench servers over-ssh`) and a fleet's lab job say about servers
`servers up` started: the protocol of its lines, and the hello that reaches them (ports, paths, login, keys),
read back by workbench.shared.target.target_from_hello. Secret: it goes only down an SSH channel, never to a
file.

The far side is another host: its hello is checked as a typed message (ServersHello) before anything of it is
used, as a fleet member's lines are (workbench.core.fleet_messages): a missing or mistyped field, a host key
holding a line break (it would add lines to the known_hosts file written from it), a port out of range or a
line nested past what the JSON parser allows is one line saying so, never an internal error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from workbench.shared.errors import WorkbenchError

PROTOCOL = "workbench-via-ssh/1"
MAX_HELLO_BYTES = 1024 * 1024  # a hello is a few kilobytes (its ssh key the largest part)

# one line of printable text: a name, a path, a login
_OneLine = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f]*$", max_length=4096)]
# "type base64" as a known_hosts line holds it after the host name: two printable ASCII words, nothing else
_HostKey = Annotated[str, StringConstraints(pattern=r"^[\x21-\x7e]+ [\x21-\x7e]+$", max_length=16384)]
_Port = Annotated[int, Field(ge=1, le=65535)]


class _Strict(BaseModel):
    # unknown fields (the line's protocol and state_dir, a fleet job's host) are ignored, never used
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class HelloLogin(_Strict):
    user: _OneLine
    password: Annotated[str, StringConstraints(max_length=4096)]


class ServersHello(_Strict):
    """The servers a far host started, as its hello says them."""

    ports: Annotated[dict[_OneLine, _Port], Field(max_length=64)]
    remote_root: _OneLine = ""
    share: _OneLine = "workbench"
    credentials: HelloLogin
    ssh_key: Annotated[str, StringConstraints(max_length=65536)] | None = None
    host_keys: Annotated[list[_HostKey], Field(max_length=64)] = []
    state_dir: _OneLine | None = None


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore")
    protocol: object = None


def _why(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def checked_hello(hello: Mapping[str, Any] | ServersHello) -> ServersHello:
    """`hello` as a typed ServersHello; a WorkbenchError (one line) when it does not hold what a hello must."""
    if isinstance(hello, ServersHello):
        return hello
    try:
        return ServersHello.model_validate(dict(hello))
    except ValidationError as exc:
        raise WorkbenchError(f"the far side's description of its servers is malformed ({_why(exc)})") from None


def read_hello(line: bytes) -> ServersHello | None:
    """The hello in one line of the far side's output; None for a line that is none (a login script's chatter,
    a line longer than a hello); a WorkbenchError for a line of this protocol that is no valid hello."""
    if len(line) > MAX_HELLO_BYTES or not line.lstrip().startswith(b"{"):
        return None
    try:
        envelope = _Envelope.model_validate_json(line)  # the parser bounds nesting itself: no Python recursion
    except ValidationError:
        return None
    if envelope.protocol != PROTOCOL:
        return None
    try:
        return ServersHello.model_validate_json(line)
    except ValidationError as exc:
        raise WorkbenchError(f"the far side's description of its servers is malformed ({_why(exc)})") from None


def served_hello(state_dir: Path) -> dict[str, Any]:
    """What reaches servers `servers up` started with this private state: ports, paths, login and the key
    material (read back by target_from_hello)."""
    from workbench.shared.paths import CREDENTIALS_FILE, TARGET_FILE

    creds = json.loads((state_dir / CREDENTIALS_FILE).read_text())
    target = json.loads((state_dir / TARGET_FILE).read_text())
    host_keys = []
    if creds.get("known_hosts"):
        host_keys = [" ".join(ln.split()[1:3]) for ln in Path(creds["known_hosts"]).read_text().splitlines() if ln]
    return {
        "ports": target["ports"],
        "remote_root": target["remote_root"],
        "share": target["share"],
        "credentials": {"user": creds["user"], "password": creds["password"]},
        "ssh_key": Path(creds["ssh_key"]).read_text() if creds.get("ssh_key") else None,
        "host_keys": host_keys,
    }
