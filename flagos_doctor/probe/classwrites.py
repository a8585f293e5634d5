"""Every write to a class attribute, with its writer, on Python 3.10 to 3.13.

A class attribute (``torch.Tensor.cuda``, ``torch.nn.Module.register_parameter``) cannot be
watched the way a module attribute is: a class's ``__class__`` (its metaclass) cannot be
swapped. Writing one goes through the metaclass's C slot ``tp_setattro`` (``type_setattro``),
for attribute syntax, ``setattr()``, ``unittest.mock`` and ``type.__setattr__`` alike. So:

* ``type.__setattr__``/``type.__delattr__`` in ``type``'s own dict become two small Python
  functions that call the saved C ``type_setattro`` (through ctypes, without releasing the
  GIL, so its exceptions propagate unchanged) and then tell the tracer. A metaclass written
  in Python with its own ``__setattr__`` reaches them through ``super().__setattr__``;
* the ``tp_setattro`` slot of a watched class's metaclass that inherited ``type_setattro``
  (``torch._C._TensorMeta``, ``abc.ABCMeta``) is pointed at CPython's ``slot_tp_setattro``,
  the dispatcher a Python class with its own ``__setattr__`` gets, which looks
  ``__setattr__`` up on the metaclass and so finds those functions.

``type``'s own slot is never changed: C metaclasses (pybind11's) call
``PyType_Type.tp_setattro`` directly, and a dispatcher there would send them back to their
own ``__setattr__`` forever. A class whose metaclass is ``type`` itself (``torch.nn.Module``)
is therefore seen by Python 3.12's dict watchers; on 3.10/3.11 its writes through
``setattr()``/``delattr()`` (helpers, ``unittest.mock``) are seen by thin wrappers of those
two builtins, and attribute syntax by the tracer's comparisons, its writer inferred from
the bytecode. ``contextlib.contextmanager``'s ``__enter__`` and ``__exit__`` are two more
moments to compare at (the patch-then-undo helpers, ``accelerate.init_empty_weights``, are
such generators); a patch undone by attribute syntax inside a context manager of another
kind, with no recorded event in between, is still not seen on 3.10/3.11.

The hook fires for the instruction that actually ran (its frame and line), so a patch made
and undone inside a context manager is seen twice. Writes to classes nobody watches pay one
dict lookup.

:func:`install` returns None when it worked, or the reason it did not (an unexpected type
layout, a debug build): the tracer then compares class probes at each event and each step
boundary instead, and says so in a notice. Nothing here may change what the stack sees: the
write itself, its result and its exceptions are those of ``type_setattro``.
"""

from __future__ import annotations

import sys

#: ``tp_setattro``'s offset in ``PyTypeObject`` for a non-debug build (3.10 to 3.13):
#: the variable-size object header (3 words), then 16 pointer-sized fields before it.
_SETATTRO_OFFSET = 19 * 8

_state: dict = {}


def _slot(klass):
    import ctypes

    return ctypes.c_void_p.from_address(id(klass) + _SETATTRO_OFFSET)


def install(on_write) -> str | None:
    """Route every class-attribute write through ``on_write(klass, name, value, frame)``.

    ``value`` is ``None`` with ``deleted=True`` for a delete. Called after the write
    succeeded, with the writer's frame. Returns None, or why the hook is not installed.
    """
    if _state:
        _state["on_write"] = on_write
        return None
    try:
        import ctypes
        import gc
        import types

        if sys.maxsize != 2**63 - 1 or hasattr(sys, "gettotalrefcount"):
            return "not a 64-bit release build of CPython"
        generic = ctypes.cast(ctypes.pythonapi.PyObject_GenericSetAttr, ctypes.c_void_p).value
        if _slot(types.ModuleType).value != generic:
            return "PyTypeObject's layout is not the one expected"

        class _Dispatching:
            def __setattr__(self, name, value):
                object.__setattr__(self, name, value)

        dispatch = _slot(_Dispatching).value
        original = _slot(type).value
        if not original or original in (dispatch, generic):
            return "type's tp_setattro is not type_setattro"
        setattro = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.py_object, ctypes.c_void_p)(original)
        type_dict = gc.get_referents(type.__dict__)[0]
        if not isinstance(type_dict, dict):
            return "cannot reach type's dict"
    except Exception as exc:  # the probe's own problem, never the stack's
        return f"{type(exc).__name__}: {exc}"

    def __setattr__(klass, name, value):
        setattro(klass, name, id(value))  # raises what type_setattro raises
        callback = _state["on_write"]
        if callback is not None:
            callback(klass, name, value, sys._getframe(1), False)

    def __delattr__(klass, name):
        setattro(klass, name, None)
        callback = _state["on_write"]
        if callback is not None:
            callback(klass, name, None, sys._getframe(1), True)

    if sys.version_info < (3, 12):
        _wrap_builtins()
    __setattr__.__qualname__ = "type.__setattr__"
    __delattr__.__qualname__ = "type.__delattr__"
    _state.update(on_write=on_write, dispatch=dispatch, original=original, setattro=setattro,
                  saved=(type_dict["__setattr__"], type_dict["__delattr__"]))
    type_dict["__setattr__"] = __setattr__
    type_dict["__delattr__"] = __delattr__
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(type))
    return None


def _wrap_builtins() -> None:
    """``setattr``/``delattr`` that report writes to classes of metaclass ``type`` (3.10/3.11)."""
    import builtins

    real_setattr, real_delattr = builtins.setattr, builtins.delattr

    def setattr(obj, name, value, /):
        real_setattr(obj, name, value)
        if type(obj) is type and _state.get("on_write") is not None:
            _state["on_write"](obj, name, value, sys._getframe(1), False)

    def delattr(obj, name, /):
        real_delattr(obj, name)
        if type(obj) is type and _state.get("on_write") is not None:
            _state["on_write"](obj, name, None, sys._getframe(1), True)

    for wrapper, real in ((setattr, real_setattr), (delattr, real_delattr)):
        wrapper.__module__, wrapper.__qualname__, wrapper.__doc__ = "builtins", real.__name__, real.__doc__
        wrapper.__wrapped__ = real
    builtins.setattr, builtins.delattr = setattr, delattr


def watch_generator_context_managers(on_enter, on_exit) -> bool:
    """Call ``on_enter(gen)`` after a ``@contextmanager``'s ``__enter__`` and
    ``on_exit(code, resumed_at)`` after its ``__exit__`` (3.10/3.11); False if not possible."""
    import contextlib

    klass = getattr(contextlib, "_GeneratorContextManager", None)
    if klass is None or "__enter__" not in vars(klass) or _state.get("contextmanager"):
        return bool(_state.get("contextmanager"))
    real_enter, real_exit = vars(klass)["__enter__"], vars(klass)["__exit__"]

    def __enter__(self):
        result = real_enter(self)
        try:
            on_enter(self.gen)
        except Exception:
            pass
        return result

    def __exit__(self, typ, value, traceback):
        frame = getattr(self.gen, "gi_frame", None)
        resumed_at = frame.f_lasti if frame is not None else None
        try:
            return real_exit(self, typ, value, traceback)
        finally:
            try:
                on_exit(self.gen.gi_code, resumed_at)
            except Exception:
                pass

    for wrapper, real in ((__enter__, real_enter), (__exit__, real_exit)):
        wrapper.__module__, wrapper.__qualname__, wrapper.__doc__ = real.__module__, real.__qualname__, real.__doc__
        wrapper.__wrapped__ = real
    klass.__enter__, klass.__exit__ = __enter__, __exit__
    _state["contextmanager"] = True
    return True


def watch_class(klass) -> bool:
    """Make writes to ``klass``'s attributes reach the hook; False when they cannot."""
    if not _state:
        return False
    metaclass = type(klass)
    if metaclass is type:
        return False
    try:
        slot = _slot(metaclass)
        if slot.value == _state["original"]:
            slot.value = _state["dispatch"]
        elif slot.value != _state["dispatch"]:
            return False  # a C metaclass with its own setattro: compared at events instead
        return True
    except Exception:
        return False
