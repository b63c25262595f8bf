"""Prompt text at rest: the shared store's values sealed with AES-256-GCM (store/cipher.py):
sealed values, key rotation, keys from the environment, ``keygen``. Against a real redis-server:
tests/integration/fleet/store/test_store_cipher.py.
"""
from __future__ import annotations

import base64

import pytest

from litellm_prefix.fleet.store.cipher import (
    KEY_ENV,
    OLD_KEYS_ENV,
    Cipher,
    CipherError,
    KeyConfigError,
    new_key,
    open_plain,
    parse_key,
)

pytestmark = pytest.mark.anyio
K1, K2 = new_key(), new_key()


def test_sealed_values_open_only_with_a_configured_key_and_under_their_own_name():
    one = Cipher(parse_key(K1, "k1"))
    sealed = one.seal("You are pi. Current date and time: 2026-12-04", "litellm-prefix:t:abc")
    # what is sealed never shows: not as text (spaces are not in base64) nor as the raw bytes
    assert sealed.startswith("lpx1:") and "You are pi." not in sealed
    raw = base64.b64decode(sealed.rsplit(":", 1)[1])
    assert b"You are pi" not in raw and b"2026-12-04" not in raw
    assert one.open(sealed, "litellm-prefix:t:abc") == "You are pi. Current date and time: 2026-12-04"
    assert one.seal("x", "k") != one.seal("x", "k")  # a fresh nonce every time
    with pytest.raises(CipherError):
        one.open(sealed, "litellm-prefix:t:other")  # copied under another key name
    with pytest.raises(CipherError):
        Cipher(parse_key(K2, "k2")).open(sealed, "litellm-prefix:t:abc")  # another key
    with pytest.raises(CipherError):
        one.open(sealed[:-6], "litellm-prefix:t:abc")  # cut
    assert one.open("written before encryption", "k") == "written before encryption"
    with pytest.raises(CipherError):
        open_plain(sealed)  # a gateway without keys never reads sealed bytes as a journal
    lone = one.seal("\ud800 lone surrogate", "k")  # JSON allows one, so a prompt may carry it
    assert one.open(lone, "k") == "\ud800 lone surrogate"


def test_rotation_old_keys_open_the_new_key_writes():
    old = Cipher(parse_key(K1, "k1"))
    rotated = Cipher(parse_key(K2, "k2"), (parse_key(K1, "k1"),))
    assert rotated.open(old.seal("journal", "j"), "j") == "journal"
    written = rotated.seal("journal", "j")
    with pytest.raises(CipherError):
        old.open(written, "j")
    assert Cipher(parse_key(K1, "k1"), (parse_key(K2, "k2"),)).open(written, "j") == "journal"


def test_keys_come_from_the_environment_and_bad_ones_are_named():
    assert Cipher.from_env({}) is None
    assert isinstance(Cipher.from_env({KEY_ENV: K1, OLD_KEYS_ENV: f"{K2}, "}), Cipher)
    with pytest.raises(KeyConfigError, match=KEY_ENV):
        Cipher.from_env({KEY_ENV: "too-short"})
    with pytest.raises(KeyConfigError, match=rf"{OLD_KEYS_ENV}\[1\]"):
        Cipher.from_env({KEY_ENV: K1, OLD_KEYS_ENV: f"{K2},nope"})
    with pytest.raises(KeyConfigError, match="without"):
        Cipher.from_env({OLD_KEYS_ENV: K2})


def test_keygen_prints_a_key_the_gateway_accepts(capsys):
    from litellm_prefix.offline.cli import main

    assert main(["keygen"]) == 0
    key = capsys.readouterr().out.strip()
    assert isinstance(Cipher.from_env({KEY_ENV: key}), Cipher)
