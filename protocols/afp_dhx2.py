"""The DHX2 login (Diffie-Hellman exchange 2) of AFP, client side: the password never crosses the wire in clear.

Three messages after FPLoginExt names the user:
1. the server answers (kFPAuthContinue) with a session ID, the generator g (4 bytes), the length L of the
   prime, the prime p and its public value Ma (L bytes each);
2. the client sends ID, its public value Mb = g^Rb mod p (L bytes) and a 16-byte nonce encrypted with
   CAST5-CBC under K = MD5(Ma^Rb mod p, as L bytes) and the client-to-server IV "LWallace"; the server answers
   with ID+1 and, encrypted with the server-to-client IV "CJalbert", the client's nonce + 1 and its own nonce;
3. the client sends ID+1 and, encrypted with "LWallace", the server's nonce + 1 and the password in a field
   of 256 bytes; the server answers 0 (logged in) or kFPUserNotAuth.
Each message starts its CBC chain afresh from its IV. Nonces are 128-bit numbers (big-endian), + 1 modulo 2^128.
The arithmetic and the ciphers are pure functions with the randomness passed in, so fixed vectors test them.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers import Cipher, modes

try:  # cryptography 43 and later keep CAST5 among the "decrepit" algorithms
    from cryptography.hazmat.decrepit.ciphers.algorithms import CAST5
except ImportError:  # older releases: among the others
    from cryptography.hazmat.primitives.ciphers.algorithms import CAST5

C2S_IV = b"LWallace"
S2C_IV = b"CJalbert"
NONCE_BYTES = 16
PASSWORD_BYTES = 256
# A prime shorter than this would make the exchange breakable on a laptop; netatalk sends 1024 bits.
MIN_PRIME_BYTES = 64
MAX_PRIME_BYTES = 1024


@dataclass(frozen=True)
class Challenge:
    """The server's first answer."""

    session_id: int
    g: int
    prime_bytes: int  # L
    p: int
    ma: int


def parse_challenge(data: bytes) -> Challenge:
    if len(data) < 8:
        raise ValueError("DHX2 challenge shorter than its header")
    session_id, g, length = struct.unpack_from(">HIH", data)
    if not MIN_PRIME_BYTES <= length <= MAX_PRIME_BYTES:
        raise ValueError(f"DHX2 prime of {length} bytes")
    if len(data) < 8 + 2 * length:
        raise ValueError("DHX2 challenge shorter than its prime and public value")
    p = int.from_bytes(data[8 : 8 + length], "big")
    ma = int.from_bytes(data[8 + length : 8 + 2 * length], "big")
    if p < 3 or not 1 < g < p - 1 or not 1 < ma < p - 1:
        raise ValueError("DHX2 values out of range")
    return Challenge(session_id, g, length, p, ma)


def cast5_missing() -> str | None:
    """None when this cryptography build can run CAST5-CBC; otherwise why not (an OpenSSL 3 without its legacy
    provider has no CAST5)."""
    try:
        encrypt(bytes(16), bytes(8), bytes(8))
    except Exception as exc:  # UnsupportedAlgorithm, or an OpenSSL error of the build
        return f"this cryptography build cannot run CAST5 ({type(exc).__name__})"
    return None


def _cipher(key: bytes, iv: bytes) -> Cipher[modes.CBC]:
    return Cipher(CAST5(key), modes.CBC(iv))


def encrypt(key: bytes, iv: bytes, data: bytes) -> bytes:
    encryptor = _cipher(key, iv).encryptor()
    return encryptor.update(data) + encryptor.finalize()


def decrypt(key: bytes, iv: bytes, data: bytes) -> bytes:
    decryptor = _cipher(key, iv).decryptor()
    return decryptor.update(data) + decryptor.finalize()


def plus_one(nonce: bytes) -> bytes:
    """A 16-byte nonce read as a big-endian number, plus one, modulo 2^128."""
    return ((int.from_bytes(nonce, "big") + 1) % (1 << (8 * NONCE_BYTES))).to_bytes(NONCE_BYTES, "big")


def session_key(challenge: Challenge, rb: int) -> bytes:
    """K: MD5 of the shared secret Ma^Rb mod p written on L bytes."""
    shared = pow(challenge.ma, rb, challenge.p)
    return hashlib.md5(shared.to_bytes(challenge.prime_bytes, "big")).digest()


def first_reply(challenge: Challenge, rb: int, client_nonce: bytes) -> tuple[bytes, bytes]:
    """(FPLoginCont data of step 2, the key K): ID, Mb on L bytes, the encrypted client nonce."""
    mb = pow(challenge.g, rb, challenge.p)
    key = session_key(challenge, rb)
    data = struct.pack(">H", challenge.session_id) + mb.to_bytes(challenge.prime_bytes, "big")
    return data + encrypt(key, C2S_IV, client_nonce), key


def server_nonce(key: bytes, client_nonce: bytes, answer: bytes) -> tuple[int, bytes]:
    """(the answer's session ID, the server's nonce) from the server's second answer; ValueError unless the
    server proved it holds K (it returned our nonce + 1)."""
    if len(answer) < 2 + 2 * NONCE_BYTES:
        raise ValueError("DHX2 second answer shorter than its nonces")
    (session_id,) = struct.unpack_from(">H", answer)
    clear = decrypt(key, S2C_IV, answer[2 : 2 + 2 * NONCE_BYTES])
    if clear[:NONCE_BYTES] != plus_one(client_nonce):
        raise ValueError("the server did not return the client's nonce + 1: not the key of this exchange")
    return session_id, clear[NONCE_BYTES:]


def password_reply(key: bytes, session_id: int, nonce: bytes, password: str) -> bytes:
    """FPLoginCont data of step 3: ID+1 (as the server sent it), then the server's nonce + 1 and the password
    (NUL-padded to 256 bytes), encrypted."""
    raw = password.encode("utf-8")
    if len(raw) >= PASSWORD_BYTES:
        raise ValueError(f"DHX2 carries a password of at most {PASSWORD_BYTES - 1} bytes")
    clear = plus_one(nonce) + raw.ljust(PASSWORD_BYTES, b"\0")
    return struct.pack(">H", session_id) + encrypt(key, C2S_IV, clear)
