"""GnuTLS's SMB algorithms called through ctypes, for workbench.shared.cryptocost to time: Samba (smbd, smbclient)
signs and encrypts with GnuTLS, so its figures are closer to what Samba pays than OpenSSL's.

Every foreign function is declared with its C signature before it is called (a wrong argument type would crash
the process, and serve runs this too), and any failure to load the library or to set an algorithm up gives None:
the host then has OpenSSL's figures only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import weakref
from collections.abc import Callable

# GnuTLS's names of the algorithms, by the names ClientDetails and cryptocost use.
CIPHERS = {"AES-128-CCM": b"AES-128-CCM", "AES-128-GCM": b"AES-128-GCM", "AES-256-CCM": b"AES-256-CCM"}
CIPHERS["AES-256-GCM"] = b"AES-256-GCM"
MACS = {"HMAC-SHA256": b"SHA256", "AES-128-CMAC": b"AES-CMAC-128", "AES-128-GMAC": b"AES-GMAC-128"}
TAG_BYTES = 16
_AUTH = bytes(32)  # the SMB 3 transform header's authenticated part


class _Datum(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_uint)]


def _library() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("gnutls")
    try:
        lib = ctypes.CDLL(name or "libgnutls.so.30")
    except OSError:
        return None
    size, ptr, char_p = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    signatures: dict[str, tuple[list[type], type | None]] = {
        "gnutls_check_version": ([char_p], char_p),
        "gnutls_cipher_get_id": ([char_p], ctypes.c_int),
        "gnutls_mac_get_id": ([char_p], ctypes.c_int),
        "gnutls_aead_cipher_init": ([ctypes.POINTER(ptr), ctypes.c_int, ctypes.POINTER(_Datum)], ctypes.c_int),
        "gnutls_aead_cipher_encrypt": (
            [ptr, ptr, size, ptr, size, size, ptr, size, ptr, ctypes.POINTER(size)],
            ctypes.c_int,
        ),
        "gnutls_aead_cipher_deinit": ([ptr], None),
        "gnutls_hmac_fast": ([ctypes.c_int, ptr, size, ptr, size, ptr], ctypes.c_int),
        "gnutls_hmac_init": ([ctypes.POINTER(ptr), ctypes.c_int, ptr, size], ctypes.c_int),
        "gnutls_hmac_set_nonce": ([ptr, ptr, size], None),
        "gnutls_hmac": ([ptr, ptr, size], ctypes.c_int),
        "gnutls_hmac_deinit": ([ptr, ptr], None),
    }
    try:
        for fname, (args, result) in signatures.items():
            function = getattr(lib, fname)
            function.argtypes = args
            function.restype = result
    except AttributeError:  # a GnuTLS without AEAD or MAC calls (older than 3.4)
        return None
    return lib


def operations(message: bytes) -> tuple[str, dict[str, Callable[[], object]]] | None:
    """GnuTLS's version ("GnuTLS 3.7.9") and one call per algorithm signing or encrypting `message` as SMB does;
    None where the library cannot be loaded or lacks one of the algorithms (an older GnuTLS)."""
    lib = _library()
    if lib is None:
        return None
    version = lib.gnutls_check_version(None)
    data = ctypes.create_string_buffer(message, len(message))
    out = ctypes.create_string_buffer(len(message) + TAG_BYTES)
    digest = ctypes.create_string_buffer(64)
    found: dict[str, Callable[[], object]] = {}
    for name, gnutls_name in MACS.items():
        mac_id = lib.gnutls_mac_get_id(gnutls_name)
        if mac_id <= 0:
            return None
        found[name] = _mac(lib, mac_id, name == "AES-128-GMAC", data, len(message), digest)
    for name, gnutls_name in CIPHERS.items():
        cipher_id = lib.gnutls_cipher_get_id(gnutls_name)
        encrypt = _aead(lib, cipher_id, 32 if "256" in name else 16, 11 if "CCM" in name else 12, data, out)
        if cipher_id <= 0 or encrypt is None:
            return None
        found[name] = encrypt
    try:
        # one call each: an algorithm that fails here would fail while timed
        for call in found.values():
            call()
    except OSError:
        return None
    return f"GnuTLS {version.decode() if version else '?'}", found


def _mac(
    lib: ctypes.CDLL,
    mac_id: int,
    nonce: bool,
    data: ctypes.Array[ctypes.c_char],
    nbytes: int,
    digest: ctypes.Array[ctypes.c_char],
) -> Callable[[], object]:
    key = os.urandom(16)
    if not nonce:

        def mac() -> object:
            if lib.gnutls_hmac_fast(mac_id, key, 16, data, nbytes, digest) != 0:
                raise OSError("gnutls_hmac_fast failed")
            return None

        return mac
    iv = bytes(12)  # GMAC: a fresh nonce each message, as SMB 3.1.1 gives each its own

    def gmac() -> object:
        handle = ctypes.c_void_p()
        if lib.gnutls_hmac_init(ctypes.byref(handle), mac_id, key, 16) != 0:
            raise OSError("gnutls_hmac_init failed")
        lib.gnutls_hmac_set_nonce(handle, iv, len(iv))
        failed = lib.gnutls_hmac(handle, data, nbytes) != 0
        lib.gnutls_hmac_deinit(handle, digest)
        if failed:
            raise OSError("gnutls_hmac failed")
        return None

    return gmac


def _aead(
    lib: ctypes.CDLL,
    cipher_id: int,
    key_bytes: int,
    nonce_bytes: int,
    data: ctypes.Array[ctypes.c_char],
    out: ctypes.Array[ctypes.c_char],
) -> Callable[[], object] | None:
    if cipher_id <= 0:
        return None
    key = ctypes.create_string_buffer(os.urandom(key_bytes), key_bytes)
    datum = _Datum(ctypes.cast(key, ctypes.c_void_p), key_bytes)
    handle = ctypes.c_void_p()
    if lib.gnutls_aead_cipher_init(ctypes.byref(handle), cipher_id, ctypes.byref(datum)) != 0:
        return None
    nonce = bytes(nonce_bytes)
    nbytes = ctypes.sizeof(data)  # the message alone: create_string_buffer was given its size
    written = ctypes.c_size_t()

    def encrypt() -> object:
        written.value = len(out)
        if (
            lib.gnutls_aead_cipher_encrypt(
                handle, nonce, nonce_bytes, _AUTH, len(_AUTH), TAG_BYTES, data, nbytes, out, ctypes.byref(written)
            )
            != 0
        ):
            raise OSError("gnutls_aead_cipher_encrypt failed")
        return None

    # the cipher's context lives as long as the call that uses it: freed when the call is dropped (after the
    # measurement, or at once when another algorithm is missing), so a long-lived serve leaks none
    weakref.finalize(encrypt, lib.gnutls_aead_cipher_deinit, handle)
    return encrypt
