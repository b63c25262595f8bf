"""What test files share besides fixtures: the repository's paths (a test file's own depth in
tests/ is no part of them) and the size of property tests and of generated inputs (the Hypothesis
profile: ``quick`` in a plain run, ``full`` in make test; tests/conftest.py). Imported as
``tests.support`` (the repository root is on sys.path: pytest's ``pythonpath``)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
FIXTURES = ROOT / "tests" / "fixtures"  # recorded requests and expected bytes (tests/fixtures/)


def full_size() -> bool:
    """Whether this is make test's full run (the Hypothesis profile ``full``): a test that runs a
    model over generated data takes its full-size input there, a smaller one in ``quick``."""
    from hypothesis import settings

    return settings.default.max_examples >= 100


def examples(n: int) -> int:
    """A property test's ``max_examples``: ``n`` in make test's full run (``--hypothesis-profile=full``),
    a twentieth of it (at least 5) in the default profile, ``quick`` (tests/conftest.py), so that
    ``pytest tests/unit`` stays an inner loop of seconds. The scale is the loaded profile's own
    ``max_examples`` over Hypothesis' default of 100."""
    from hypothesis import settings

    return max(min(n, 5), n * settings.default.max_examples // 100)
