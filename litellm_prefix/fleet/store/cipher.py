"""Prompt text at rest: every value the shared store writes, sealed with AES-256-GCM.

The shared store (Redis) holds, per session, a journal (the head's section and tool hashes,
the volatile values pinned at their first sight, the notes sent, the learned lines' hashes)
and, under their content hashes, the texts that the rules need back in full (see the
README's "What the shared store holds"). Both can carry system-prompt text. With a key
configured, each value is written as ``lpx1:<key id>:<base64(nonce | ciphertext | tag)>``,
its Redis key name bound to it as associated data (a value copied to another key does not
open). Key names are hashes already.

Keys come from the environment only, never from a settings file:

- ``LITELLM_PREFIX_STORE_KEY``: the key that writes (32 bytes, base64 or urlsafe base64;
  ``litellm-prefix keygen`` prints a new one);
- ``LITELLM_PREFIX_STORE_OLD_KEYS``: comma-separated keys that still decrypt (rotation:
  give every gateway the new key as an old key first, then make it the writing key
  everywhere, then drop the old one once the session TTL has passed).

A value that no configured key opens (a wrong key, a key rotated out too early, or a
sealed value read by a gateway without keys) raises ``CipherError``: the resilient store
treats it as a store failure, logs it once with what to check, and the request runs on
local state. A plain value read by a gateway with keys (written before encryption was
turned on) is accepted, and written sealed on the session's next save.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping

PREFIX = "lpx1:"
KEY_ENV = "LITELLM_PREFIX_STORE_KEY"
OLD_KEYS_ENV = "LITELLM_PREFIX_STORE_OLD_KEYS"
_NONCE = 12


class CipherError(Exception):
    """A stored value could not be opened with the configured keys."""


class KeyConfigError(ValueError):
    """A key in the environment is not 32 bytes of base64."""


def _key_id(key: bytes) -> str:
    return hashlib.sha256(b"litellm-prefix key id\x00" + key).hexdigest()[:8]


def parse_key(text: str, where: str) -> bytes:
    text = text.strip()
    for decode in (base64.urlsafe_b64decode, base64.b64decode):
        try:
            key = decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            continue
        if len(key) == 32:
            return key
    raise KeyConfigError(f"{where}: not a 32-byte key in base64 (make one with `litellm-prefix keygen`)")


def new_key() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


class Cipher:
    def __init__(self, current: bytes, old: tuple[bytes, ...] = ()) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._writer_id = _key_id(current)
        self._writer = AESGCM(current)
        self._readers = {_key_id(k): AESGCM(k) for k in (*old, current)}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Cipher | None:
        """The cipher the environment configures, or None (no key: values are stored plain)."""
        env = os.environ if environ is None else environ
        current = env.get(KEY_ENV, "").strip()
        old_text = env.get(OLD_KEYS_ENV, "").strip()
        if not current:
            if old_text:
                raise KeyConfigError(f"{OLD_KEYS_ENV} is set without {KEY_ENV}: old keys only decrypt, set the "
                                     "key that writes too")
            return None
        old = tuple(parse_key(k, f"{OLD_KEYS_ENV}[{i}]") for i, k in enumerate(old_text.split(",")) if k.strip())
        return cls(parse_key(current, KEY_ENV), old)

    def seal(self, text: str, bound_to: str) -> str:
        nonce = os.urandom(_NONCE)
        sealed = self._writer.encrypt(nonce, text.encode("utf-8", "surrogatepass"), bound_to.encode())
        return f"{PREFIX}{self._writer_id}:{base64.b64encode(nonce + sealed).decode()}"

    def open(self, value: str, bound_to: str) -> str:
        if not value.startswith(PREFIX):
            return value  # written before encryption was turned on
        key_id, _, body = value[len(PREFIX):].partition(":")
        reader = self._readers.get(key_id)
        if reader is None:
            raise CipherError(f"sealed with key {key_id}, which is neither {KEY_ENV} nor in {OLD_KEYS_ENV}")
        try:
            raw = base64.b64decode(body)
            return reader.decrypt(raw[:_NONCE], raw[_NONCE:], bound_to.encode()).decode("utf-8", "surrogatepass")
        except Exception as exc:  # InvalidTag, a cut value
            raise CipherError(f"a value sealed with key {key_id} does not open ({type(exc).__name__})") from None


def open_plain(value: str) -> str:
    """What a gateway without keys reads: plain values as they are; a sealed one is a failure."""
    if value.startswith(PREFIX):
        raise CipherError(f"the shared store holds encrypted values and {KEY_ENV} is not set")
    return value
