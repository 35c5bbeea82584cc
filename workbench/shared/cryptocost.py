"""What SMB's signing and encryption cost this host's CPU per byte, measured at the start of a run.

Each algorithm SMB 2/3 signs or encrypts with is run over a buffer the size of a large SMB message, and the CPU
seconds of the measuring thread (time.thread_time, not wall time: a busy machine, or a CPU cap, stretches the wall
clock but not the work) are divided by the bytes. The best of a few rounds is kept, so a round that met a cache
flush or a migration to another core does not count; each round is a few milliseconds, the whole measurement at
most MAX_CPU_S.

The figures come from the `cryptography` package, which is OpenSSL, and, where the host has it, from GnuTLS (the
library Samba signs and encrypts with, smbd and smbclient alike) called through ctypes. OpenSSL stands for the cost
in Samba and in a kernel's SMB client (the kernel's crypto API) only approximately: all of them use the CPU's AES
and carry-less multiply instructions where it has them, but their CMAC, CCM and GCM are separate code whose speed
differs by version (measured here: GnuTLS 3.7.9 took 1.7-2.8x OpenSSL's CPU for CMAC and CCM, 2.7x for GCM). smbd
also copies each message into and out of its buffers around the cipher, so even GnuTLS's figure is a floor of what
smbd pays. The ceilings that use these figures say so when a copy beats them (workbench.core.ceiling.crypto_bound).

The far host measures its own when it runs `workbench serve` (GET /ctl/crypto-cost); a stock server cannot, and
its costs are then "not known".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.shared import gnutls_calls

# Every algorithm SMB 2/3 signs or encrypts with, spelt as ClientDetails spells them (signing_algorithm,
# encryption_cipher); each dialect's own are in workbench.protocols.smb_negotiated's table.
SIGNING_ALGORITHMS = ("HMAC-SHA256", "AES-128-CMAC", "AES-128-GMAC")
ENCRYPTION_CIPHERS = ("AES-128-CCM", "AES-128-GCM", "AES-256-CCM", "AES-256-GCM")
ALGORITHMS = SIGNING_ALGORITHMS + ENCRYPTION_CIPHERS

MESSAGE_BYTES = 1 << 18  # 256 KiB: between SMB 2.0.2's 64 KiB and SMB 3's 1-8 MiB requests; the per-call cost is gone
ROUND_CPU_S = 0.002  # one round runs the algorithm until it has spent this much CPU
ROUNDS = 3  # the best of these is kept
MAX_CPU_S = 0.2  # the whole measurement's CPU (both libraries), whatever the rounds ask for
_NONCE_CCM = bytes(11)  # SMB 3's AES-CCM nonce is 11 bytes, AES-GCM's 12
_NONCE_GCM = bytes(12)
_HEADER = bytes(32)  # the SMB 3 transform header's authenticated part, as additional data


@dataclass(frozen=True)
class CryptoCosts:
    """CPU seconds per byte of each algorithm measured on one host."""

    cpu_s_per_byte: Mapping[str, float]
    library: str  # what measured them, e.g. "OpenSSL 3.0.11 (cryptography 41.0.7)"
    message_bytes: int = MESSAGE_BYTES
    measure_cpu_s: float = 0.0  # what measuring them cost
    # The same algorithms through GnuTLS, Samba's library, where the host has it (empty: it has not)
    gnutls_cpu_s_per_byte: Mapping[str, float] = field(default_factory=dict)
    gnutls_library: str | None = None  # e.g. "GnuTLS 3.7.9"

    def for_side(self, algorithm: str, side: str) -> float | None:
        """What `algorithm` costs per byte on the `side` ("client" or "server") of an SMB copy: on the server,
        smbd's library GnuTLS where measured; on the client, the cheaper of the two libraries (smbprotocol and pysmb
        use OpenSSL, smbclient GnuTLS), so that the ceiling made from it holds whichever client ran."""
        openssl, gnutls = self.cpu_s_per_byte.get(algorithm), self.gnutls_cpu_s_per_byte.get(algorithm)
        if side == "server":
            return gnutls if gnutls is not None else openssl
        return min((c for c in (openssl, gnutls) if c is not None), default=None)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "cpu_s_per_byte": dict(self.cpu_s_per_byte),
            "library": self.library,
            "message_bytes": self.message_bytes,
            "measure_cpu_s": round(self.measure_cpu_s, 4),
        }
        if self.gnutls_cpu_s_per_byte:
            doc["gnutls"] = {"cpu_s_per_byte": dict(self.gnutls_cpu_s_per_byte), "library": self.gnutls_library}
        return doc

    @classmethod
    def from_json(cls, doc: object) -> CryptoCosts | None:
        """Read what to_json wrote; None for anything else (a far host's garbage, an older document)."""
        if not isinstance(doc, Mapping):
            return None
        costs = _costs(doc.get("cpu_s_per_byte"))
        if not costs:
            return None
        size = doc.get("message_bytes")
        spent = doc.get("measure_cpu_s")
        gnutls = doc.get("gnutls")
        gnutls = gnutls if isinstance(gnutls, Mapping) else {}
        gnutls_costs = _costs(gnutls.get("cpu_s_per_byte"))
        return cls(
            cpu_s_per_byte=costs,
            library=str(doc.get("library") or "unknown"),
            message_bytes=size if isinstance(size, int) and not isinstance(size, bool) else MESSAGE_BYTES,
            measure_cpu_s=float(spent) if isinstance(spent, int | float) and not isinstance(spent, bool) else 0.0,
            gnutls_cpu_s_per_byte=gnutls_costs,
            gnutls_library=str(gnutls.get("library") or "GnuTLS") if gnutls_costs else None,
        )


def _costs(raw: object) -> dict[str, float]:
    """The known algorithms' positive figures of a `cpu_s_per_byte` object; the rest is dropped, never guessed."""
    if not isinstance(raw, Mapping):
        return {}
    return {
        str(name): float(value)
        for name, value in raw.items()
        if name in ALGORITHMS and isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    }


def _operations(message: bytes) -> dict[str, Callable[[], object]]:
    """One call per algorithm that signs or encrypts `message` as SMB does."""
    from cryptography.hazmat.primitives import cmac, hashes, hmac
    from cryptography.hazmat.primitives.ciphers import algorithms
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM

    key16, key32 = os.urandom(16), os.urandom(32)

    def hmac_sha256() -> bytes:  # SMB 2.0.2 and 2.1
        mac = hmac.HMAC(key16, hashes.SHA256())
        mac.update(message)
        return mac.finalize()

    def aes_cmac() -> bytes:  # SMB 3.0, 3.0.2, and 3.1.1 unless GMAC is negotiated
        mac = cmac.CMAC(algorithms.AES(key16))
        mac.update(message)
        return mac.finalize()

    gcm128, gcm256 = AESGCM(key16), AESGCM(key32)
    ccm128, ccm256 = AESCCM(key16), AESCCM(key32)
    return {
        "HMAC-SHA256": hmac_sha256,
        "AES-128-CMAC": aes_cmac,
        # GMAC is AES-GCM with the whole message as authenticated data and nothing encrypted (SMB 3.1.1).
        "AES-128-GMAC": lambda: gcm128.encrypt(_NONCE_GCM, b"", message),
        "AES-128-CCM": lambda: ccm128.encrypt(_NONCE_CCM, message, _HEADER),
        "AES-128-GCM": lambda: gcm128.encrypt(_NONCE_GCM, message, _HEADER),
        "AES-256-CCM": lambda: ccm256.encrypt(_NONCE_CCM, message, _HEADER),
        "AES-256-GCM": lambda: gcm256.encrypt(_NONCE_GCM, message, _HEADER),
    }


def _library() -> str:
    import cryptography
    from cryptography.hazmat.backends.openssl import backend

    return f"{backend.openssl_version_text()} (cryptography {cryptography.__version__})"


def _per_byte(operation: Callable[[], object], nbytes: int, deadline_cpu_s: float) -> float:
    """The best of ROUNDS rounds, in CPU seconds per byte; fewer rounds when the deadline comes first."""
    best = float("inf")
    for _ in range(ROUNDS):
        calls = 0
        start = time.thread_time()
        spent = 0.0
        while spent < ROUND_CPU_S or calls < 2:
            operation()
            calls += 1
            spent = time.thread_time() - start
        best = min(best, spent / (calls * nbytes))
        if time.thread_time() >= deadline_cpu_s:
            break
    return best


def _measured(operations: Mapping[str, Callable[[], object]], nbytes: int, deadline_cpu_s: float) -> dict[str, float]:
    costs: dict[str, float] = {}
    for name, operation in operations.items():
        if time.thread_time() >= deadline_cpu_s:
            break  # what is left is "not measured", never a guess
        costs[name] = _per_byte(operation, nbytes, deadline_cpu_s)
    return costs


def measure(message_bytes: int = MESSAGE_BYTES) -> CryptoCosts:
    """Measure every algorithm on this host, in this thread (tens of milliseconds of CPU, at most MAX_CPU_S):
    OpenSSL's first, then GnuTLS's where the host has it."""
    started = time.thread_time()
    message = os.urandom(message_bytes)
    costs = _measured(_operations(message), message_bytes, started + MAX_CPU_S / 2)
    gnutls = gnutls_calls.operations(message)
    gnutls_costs = _measured(gnutls[1], message_bytes, started + MAX_CPU_S) if gnutls is not None else {}
    return CryptoCosts(
        costs,
        _library(),
        message_bytes,
        time.thread_time() - started,
        gnutls_costs,
        gnutls[0] if gnutls is not None and gnutls_costs else None,
    )


def run_record(client: CryptoCosts, server: Mapping[str, Any] | None, server_why: str | None = None) -> dict[str, Any]:
    """The run metadata's `crypto` object: each host's costs, the server's null with why when it is not known."""
    record: dict[str, Any] = {"client": client.to_json(), "server": None}
    far = CryptoCosts.from_json(server)
    if far is not None:
        record["server"] = far.to_json()
    else:
        record["server_not_known"] = server_why or "the far host did not measure its own"
    return record


def from_run(meta: Mapping[str, Any], side: str) -> CryptoCosts | None:
    """The costs a run recorded for `side` ("client" or "server"), or None when not known."""
    record = meta.get("crypto")
    return CryptoCosts.from_json(record.get(side)) if isinstance(record, Mapping) else None


def server_cpu_cap_cores(link: Mapping[str, Any] | None) -> float | None:
    """The server host's CPU cap in cores (the lab's --server-cpu, kept as the link's `server_cpu_cap_cores`);
    None: no cap, or not a lab run."""
    value = (link or {}).get("server_cpu_cap_cores")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def ns_per_byte(cpu_s_per_byte: float) -> str:
    """'0.90 ns/B'."""
    ns = cpu_s_per_byte * 1e9
    return f"{ns:.2f} ns/B" if ns < 10 else f"{ns:.0f} ns/B"
