"""caches.Identity and PerObject: keys that stand for an object by identity, never by a bare id()."""
from __future__ import annotations

import gc
import weakref

from litellm_prefix.caches import Identity, PerObject
from litellm_prefix.settings import Settings


def test_an_identity_key_is_equal_only_for_the_same_object():
    a, b = "x" * 1000, "".join(["x" * 500, "x" * 500])  # equal strings, two objects
    assert a == b and a is not b
    assert Identity(a) == Identity(a) and hash(Identity(a)) == hash(Identity(a))
    assert Identity(a) != Identity(b)
    assert {Identity(a): 1}.get(Identity(b)) is None
    assert Identity([1]) != Identity([1])  # unhashable objects are keys by identity too


def test_a_remembered_value_keeps_its_object_alive_so_its_identity_is_never_another_objects():
    # A bare id() key outlives its object, and the next object at that address would hit it;
    # PerObject's key holds the object, so the entry cannot answer for another one.
    remembered = PerObject(4)
    settings = Settings(stable_path="/srv/a")
    alive = weakref.ref(settings)
    assert remembered.get(settings, "copy", lambda: "for /srv/a") == "for /srv/a"
    del settings
    gc.collect()
    assert alive() is not None
    other = Settings(stable_path="/srv/b")
    assert remembered.get(other, "copy", lambda: "for /srv/b") == "for /srv/b"


def test_per_object_forgets_the_oldest_past_its_bound_and_then_lets_its_object_go():
    remembered = PerObject(2)
    first = Settings(stable_path="/srv/first")
    alive = weakref.ref(first)
    calls = []
    for value in ("a", "b"):
        remembered.get(first, value, lambda value=value: calls.append(value) or value)
    assert remembered.get(first, "a", lambda: "again") == "a" and calls == ["a", "b"]
    remembered.get(Settings(stable_path="/srv/x"), "c", lambda: "c")  # pushes out (first, "a")
    assert remembered.get(first, "a", lambda: "recomputed") == "recomputed"
    remembered.get(Settings(stable_path="/srv/y"), "d", lambda: "d")
    remembered.get(Settings(stable_path="/srv/z"), "e", lambda: "e")
    del first
    gc.collect()
    assert alive() is None  # out of the map: nothing holds it any more
