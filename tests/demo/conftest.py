from __future__ import annotations

import pytest

from care.demo.build import DemoBundle, build_demo


@pytest.fixture(scope="session")
def bundle() -> DemoBundle:
    """The default demo, generated in memory once (with its cell labels)."""
    return build_demo()
