"""The official binding's low-level module, for programs that import from
it: the names of ``tritonserver._c.triton_bindings`` that have an
equivalent here (see that module). A re-export only, like the package's
``__init__.py`` (left out of pyflakes for the same reason)."""

from .triton_bindings import *
from .triton_bindings import __all__ as __all__
