"""The mechanism of the decorators (tritonserver/pytriton/decorators.py), in
place of the ``wrapt`` package PyTriton uses: a decorator made with
`decorator` calls ``wrapper(wrapped, instance, args, kwargs)``, with
``instance`` the object when it decorates a method. A decorated callable
passes attribute reads and writes through to the callable it wraps (so the
``__triton_context__`` that bind() sets on the outermost layer reaches every
layer), has ``__wrapped__`` (the callable it wraps) and ``_self_wrapper``
(its decorator's wrapper function), and prints, and answers isinstance() and inspect.ismethod(), as the wrapped
callable."""

from __future__ import annotations

import functools
from typing import Any, Callable

_OWN = ("__wrapped__", "_self_wrapper", "_self_instance")


class Decorated:
    """A callable wrapped by one decorator."""

    def __init__(self, wrapped: Any, wrapper: Callable[..., Any], instance: Any = None) -> None:
        object.__setattr__(self, "__wrapped__", wrapped)
        object.__setattr__(self, "_self_wrapper", wrapper)
        object.__setattr__(self, "_self_instance", instance)
        for name in ("__name__", "__qualname__", "__doc__", "__module__"):
            try:
                object.__setattr__(self, name, getattr(wrapped, name))
            except AttributeError:
                pass

    @property  # type: ignore[misc]
    def __class__(self) -> Any:  # as the wrapped callable's, so that inspect.ismethod() sees a bound method
        return self.__wrapped__.__class__

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        wrapped = self.__wrapped__
        getter = getattr(type(wrapped), "__get__", None)
        bound = getter(wrapped, instance, owner) if getter is not None else wrapped
        return Decorated(bound, self._self_wrapper, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_wrapper(self.__wrapped__, self._self_instance, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in _OWN:
            raise AttributeError(name)
        return getattr(self.__wrapped__, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN or name in ("__name__", "__qualname__", "__doc__", "__module__"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.__wrapped__, name, value)

    def __str__(self) -> str:
        return str(self.__wrapped__)

    def __repr__(self) -> str:
        return repr(self.__wrapped__)


def decorator(wrapper: Callable[..., Any]) -> Callable[[Any], Decorated]:
    """Make a decorator of ``wrapper(wrapped, instance, args, kwargs)``."""
    @functools.wraps(wrapper)
    def decorate(wrapped: Any) -> Decorated:
        return Decorated(wrapped, wrapper)
    object.__setattr__(decorate, "_self_wrapper_function", wrapper)
    return decorate
