"""Typing names that differ across the Python versions this package
supports: one import site for the rest of the package."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    from typing import Unpack
elif TYPE_CHECKING:  # no runtime dependency on typing_extensions for 3.10
    from typing_extensions import Unpack
else:
    # Python 3.10 at run time: the annotations that use it are strings
    # (PEP 563) and are never evaluated by the package.
    Unpack: Any = None

__all__ = ["Unpack"]
