"""What shapes a client's speed, as one typed value: the row's metadata in the JSON and the ceilings' inputs.

Every field is optional: None means the client did not say (and the JSON leaves the key out). Field
names are the JSON keys of schema 1, so a document written before this type existed reads back as is.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, get_type_hints


@dataclass(frozen=True)
class ClientDetails:
    """A client's settings and negotiated parameters for one row (see Client.details / row_details)."""

    # --- the ceilings' inputs (workbench.core.ceiling) ---
    request_bytes: int | None = None  # one read/write request of a request-bound protocol (SFTP, SMB)
    requests_in_flight: int | None = None  # how many such requests the client keeps outstanding
    ssh_window_bytes: int | None = None  # SSH channel window: at most this much unacknowledged per round trip
    readahead_bytes: int | None = None  # a mount's kernel readahead window, which paces its sequential reads
    files_in_flight: int | None = None  # small files of a set copied at once; None: not said (one at a time)
    streams_sets: bool = False  # the client streams a whole set with no round trip per file (rsync)
    # Round trips each file of a set costs besides its data requests (an open and a close, a data
    # connection): the per-file ceiling's input. None: not said (the ceiling then counts one).
    round_trips_per_file: int | None = None
    # --- what the client negotiated or was set to ---
    timed_includes_setup: bool | None = None  # connect/login is inside every timed copy (one process per copy)
    cipher: str | None = None  # SSH cipher in use
    dialect: str | None = None  # SMB dialect negotiated, e.g. "3.1.1"
    read_bytes: int | None = None  # SMB: the request size of reads
    write_bytes: int | None = None  # SMB: the request size of writes
    multi_credit: bool | None = None  # SMB: the server grants multi-credit (large) requests
    zero_copy: bool | None = None  # smbprotocol: the fast path that reads into the file's buffer is in use
    signing: bool | None = None  # SMB: every message is signed
    encryption: bool | None = None  # SMB: the session is encrypted
    # SMB, what the session negotiated (None: the client cannot say). Names of algorithms and ciphers are
    # spelt as in cryptocost.SIGNING_ALGORITHMS / ENCRYPTION_CIPHERS so that readers can compare them.
    signing_required: bool | None = None  # signing is required (by either side), not merely enabled
    signing_algorithm: str | None = None  # "HMAC-SHA256", "AES-128-CMAC" or "AES-128-GMAC"
    encryption_required: bool | None = None  # encryption is required (by either side)
    encryption_cipher: str | None = None  # "AES-128-CCM", "AES-128-GCM", "AES-256-CCM" or "AES-256-GCM"
    credits: int | None = None  # SMB requests the client actually kept in flight
    multichannel: bool | None = None  # the session uses more than one connection
    # Where the negotiated figures came from: "session", "smbclient output", "/proc/fs/cifs/DebugData", "smbutil"
    negotiated_from: str | None = None
    block_bytes: int | None = None  # application read/write size (HTTP, FTP)
    read_bufsize: int | None = None  # aiohttp's read buffer in bytes
    server_sendfile: bool | None = None  # the server sends files with sendfile(2)
    mode: str | None = None  # FTP transfer mode, e.g. "passive, binary"
    process: str | None = None  # how a command-line client is started, e.g. one curl process per copy
    whole_file: bool | None = None  # rsync -W: no delta algorithm
    compress: bool | None = None  # rsync -z
    mount: str | None = None  # the mount client's name, when the copies go through a mounted file system
    block_size: int | None = None  # a mount's application read/write size in bytes (its schema-1 key)
    page_cache: str | None = None  # how the local (mount) or the server's page cache takes part in the copy
    # How the run checked an upload when the far host has no hash API (a stock server given by URL): "read
    # back" (the file read back outside the timed window) or "rsync checksums"; None: the far host hashed it.
    verified_by: str | None = None
    # A reference tool that times itself (afp/afp_speedtest): what its figures cover, in its own terms.
    measures: str | None = None
    # Keys of a document this version does not know (written by another version): kept so that writing the
    # document again loses nothing; never read.
    unknown: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The schema-1 `details` keys this client reported (the row's explanation adds its own)."""
        doc: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "streams_sets":
                if value:
                    doc["files_in_flight"] = None  # schema 1 says "streams the set" as a null files_in_flight
            elif f.name == "unknown":
                doc.update(value)
            elif value is not None:
                doc[f.name] = value
        return doc

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ClientDetails:
        """Read a `details` object; a value of the wrong type, or an unknown key, is kept aside in `unknown`."""
        known: dict[str, Any] = {}
        unknown: dict[str, Any] = {}
        for key, value in (data or {}).items():
            kind = _KINDS.get(key)
            if key == "files_in_flight" and value is None:
                known["streams_sets"] = True
            elif kind is not None and key != "streams_sets" and (value is None or _is(value, kind)):
                known[key] = value
            else:
                unknown[key] = value
        return cls(**known, unknown=unknown)


def _is(value: object, kind: type) -> bool:
    # bool is an int in Python: a count or size must not be a bool, nor a flag an int
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _value_kind(hint: object) -> type | None:
    """`int | None` -> int; the one non-None type of an optional field."""
    if isinstance(hint, types.UnionType):
        kinds = [k for k in hint.__args__ if k is not type(None)]
        return kinds[0] if len(kinds) == 1 else None
    return hint if isinstance(hint, type) else None


_HINTS = get_type_hints(ClientDetails)
_KINDS: dict[str, type] = {
    f.name: kind for f in fields(ClientDetails) if f.name != "unknown" and (kind := _value_kind(_HINTS[f.name]))
}
