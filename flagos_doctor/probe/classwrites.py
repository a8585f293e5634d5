"""Every write to a class attribute, with its writer, on Python 3.10 to 3.13.

A class attribute (``torch.Tensor.cuda``, ``torch.nn.Module.register_parameter``) cannot be
watched the way a module attribute is: a class's ``__class__`` (its metaclass) cannot be
swapped. Writing one goes through the metaclass's C slot ``tp_setattro`` (``type_setattro``),
for attribute syntax, ``setattr()``, ``unittest.mock`` and ``type.__setattr__`` alike.

**Python 3.10/3.11 on x86-64 Linux: a trampoline.** ``type``'s own slot (the one every class
of metaclass ``type`` uses, ``torch.nn.Module``'s, and the one pybind11's metaclass calls
directly) is pointed at 29 instructions (97 bytes) of machine code in a page of our own: they
call the saved ``type_setattro`` and return its result untouched; only after a write that
succeeded, with no exception pending, they first call a ctypes callback with the class, the
name and the value (NULL for a delete). The callback returns at once for a class nobody
watches. A ctypes callback cannot be the slot itself: it cannot hand an exception back to C
(a failed ``del C.missing`` would raise ``SystemError`` instead of ``AttributeError``). ``type``'s
``__setattr__``/``__delattr__`` slot wrappers are pointed at the trampoline too, so
``super().__setattr__`` in a Python metaclass, a ``type.__setattr__`` held from before and
CPython's check that a wrapper is applied to the right type all agree with the slot; a
watched class's metaclass that inherited ``type_setattro`` before (``torch._C._TensorMeta``,
``abc.ABCMeta``) gets the trampoline in its slot. ``type``'s dict and the ``setattr``/
``delattr`` builtins stay CPython's own. Each word is checked against the value it must hold
before anything is written (``tp_setattro`` of ``types.ModuleType`` is
``PyObject_GenericSetAttr``; a wrapper's ``d_type``, ``d_name`` and ``d_wrapped``), and the
trampoline is called on a class of our own (a write, a delete, a failing delete) before it
is installed.

**Elsewhere** (Python 3.12+, or where no trampoline can be built):

* ``type.__setattr__``/``type.__delattr__`` in ``type``'s own dict become two small Python
  functions that call the saved C ``type_setattro`` (through ctypes, without releasing the
  GIL, so its exceptions propagate unchanged) and then tell the tracer. A metaclass written
  in Python with its own ``__setattr__`` reaches them through ``super().__setattr__``;
* the slot of a watched class's metaclass that inherited ``type_setattro`` is pointed at
  CPython's ``slot_tp_setattro``, the dispatcher a Python class with its own ``__setattr__``
  gets, which looks ``__setattr__`` up on the metaclass and so finds those functions.

``type``'s own slot is never given that dispatcher: pybind11's metaclass calls
``PyType_Type.tp_setattro`` directly, and the dispatcher would send it back to its own
``__setattr__`` forever. So classes of metaclass ``type`` are seen by the tracer's dict
watchers on 3.12+; without the trampoline on 3.10/3.11, their writes through ``setattr()``/
``delattr()`` (helpers, ``unittest.mock``) by thin wrappers of those two builtins, and
attribute syntax by the tracer's comparisons (also after each ``@contextmanager``'s
``__enter__`` and ``__exit__``), its writer inferred from the bytecode.

The hook fires for the instruction that actually ran (its frame and line), so a patch made
and undone inside a context manager is seen twice. Writes to classes nobody watches pay one
dict lookup, or with the trampoline one ctypes call and one dict lookup (0.3 to 0.5 µs).

:func:`install` returns None when it worked, or the reason it did not (an unexpected type
layout, a debug build): the tracer then compares class probes at each event and each step
boundary instead, and says so in a notice. Nothing here may change what the stack sees: the
write itself, its result and its exceptions are those of ``type_setattro``. :func:`uninstall`
puts every slot, wrapper, dict entry and builtin back (the trampoline's page stays mapped
with its callback cleared: a thread inside ``type_setattro`` returns through it); it also
runs at exit. ``FLAGOS_DOCTOR_PROBE_TRAMPOLINE=0`` turns the trampoline off.
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
    found = _type_setattro()
    if isinstance(found, str):
        return found
    dispatch, original, setattro, type_dict = found
    import atexit

    atexit.register(uninstall)  # a child that does not end with os._exit tears down unhooked
    _state.update(on_write=on_write, dispatch=dispatch, original=original, setattro=setattro)
    if sys.version_info < (3, 12):
        problem = _install_trampoline(original, type_dict)
        if problem is None:
            return None
        _state["trampoline_problem"] = problem
    _install_type_methods(setattro, type_dict)
    return None


def _type_setattro():
    """(dispatch, original, setattro, type_dict): the ``tp_setattro`` of a class with a Python
    ``__setattr__``, type's own ``tp_setattro`` (and it callable), and type's dict; or why
    they cannot be had (checked first: a layout we do not know must not be written to)."""
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
    return dispatch, original, setattro, type_dict


def _install_type_methods(setattro, type_dict) -> None:
    """Put a Python ``__setattr__``/``__delattr__`` in type's dict that write through
    ``setattro`` (type's own) and then report the write (where no trampoline could be had)."""
    import ctypes

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
    _state["saved"] = (type_dict["__setattr__"], type_dict["__delattr__"])
    type_dict["__setattr__"] = __setattr__
    type_dict["__delattr__"] = __delattr__
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(type))


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
    _state["builtins"] = (real_setattr, real_delattr)


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
    _state["contextmanager"] = (klass, real_enter, real_exit)
    return True


def watch_class(klass) -> bool:
    """Make writes to ``klass``'s attributes reach the hook; False when they cannot."""
    if not _state:
        return False
    metaclass = type(klass)
    trampoline = _state.get("trampoline")
    try:
        if trampoline is not None:
            if metaclass is not type:
                slot = _slot(metaclass)
                if slot.value == _state["original"]:
                    slot.value = trampoline
                    _state["repointed"].append(metaclass)
                elif slot.value not in (trampoline, _state["dispatch"]):
                    return False  # a C metaclass with its own setattro: compared at events instead
            _watched[id(klass)] = klass
            return True
        if metaclass is type:
            return False
        slot = _slot(metaclass)
        if slot.value == _state["original"]:
            slot.value = _state["dispatch"]
            _state.setdefault("repointed", []).append(metaclass)
        elif slot.value != _state["dispatch"]:
            return False  # a C metaclass with its own setattro: compared at events instead
        return True
    except Exception:
        return False


def type_slot_problem() -> str | None:
    """Why writes to classes of metaclass ``type`` are not hooked on 3.10/3.11; None if they are."""
    return _state.get("trampoline_problem")


def uninstall() -> None:
    """Put back every slot, wrapper, dict entry and builtin :func:`install` changed."""
    if not _state:
        return
    import ctypes

    try:
        original = _state["original"]
        trampoline = _state.get("trampoline")
        if trampoline is not None:
            ctypes.c_void_p.from_address(_state["hook_word"]).value = 0
            _slot(type).value = original
            for wrapper in _state["wrappers"]:
                _wrapped(wrapper).value = original
            # Metaclasses made since inherited the trampoline from type: give them type's own.
            for metaclass in _metaclasses():
                if _slot(metaclass).value == trampoline:
                    _slot(metaclass).value = original
        for metaclass in _state.get("repointed", ()):
            if _slot(metaclass).value in (_state["dispatch"], trampoline):
                _slot(metaclass).value = original
        if "saved" in _state:
            import gc

            type_dict = gc.get_referents(type.__dict__)[0]
            type_dict["__setattr__"], type_dict["__delattr__"] = _state["saved"]
            ctypes.pythonapi.PyType_Modified(ctypes.py_object(type))
        if "builtins" in _state:
            import builtins

            builtins.setattr, builtins.delattr = _state["builtins"]
        if isinstance(_state.get("contextmanager"), tuple):
            klass, real_enter, real_exit = _state["contextmanager"]
            klass.__enter__, klass.__exit__ = real_enter, real_exit
    finally:
        _watched.clear()
        _state.clear()


def _metaclasses():
    """Every subclass of ``type`` that exists now, at any depth."""
    found, todo = {}, [type]
    while todo:
        klass = todo.pop()
        if id(klass) not in found:
            found[id(klass)] = klass
            todo.extend(type.__subclasses__(klass))
    return list(found.values())[1:]


# -- the trampoline in type's own slot (3.10/3.11, x86-64 Linux) ----------------------------
#: The classes whose writes the trampoline's callback reports, by id (their address).
_watched: dict = {}

#: ``d_wrapped`` in a ``PyWrapperDescrObject``: the object header (2 words), then ``d_type``,
#: ``d_name``, ``d_qualname`` and ``d_base`` (checked: ``d_type`` and ``d_name`` first).
_WRAPPED_OFFSET = 6 * 8


def _wrapped(wrapper):
    import ctypes

    return ctypes.c_void_p.from_address(id(wrapper) + _WRAPPED_OFFSET)


def _x86_64_trampoline(original: int, hook_word: int, error_occurred: int) -> bytes:
    """Machine code for ``int f(self, name, value)`` (System V AMD64 calling convention).

    Calls ``original(self, name, value)`` and returns what it returned. Only when that is 0,
    the word at ``hook_word`` is not 0 and ``error_occurred()`` (``PyErr_Occurred``) answers
    NULL, it first calls the function that word points to with the same three arguments.
    """
    import struct

    program = [
        b"\x53", b"\x41\x54", b"\x41\x55",        # push rbx; push r12; push r13 (stack 16-aligned)
        b"\x48\x89\xfb", b"\x49\x89\xf4", b"\x49\x89\xd5",  # rbx, r12, r13 = self, name, value
        b"\x48\xb8", original, b"\xff\xd0",       # call original
        b"\x85\xc0", ("jne", "done"),              # it failed: return its -1, its exception as it is
        b"\x48\xb8", hook_word, b"\x48\x8b\x00",  # rax = the hook
        b"\x48\x85\xc0", ("je", "done"),            # no hook: return 0 (eax is 0)
        b"\x48\xb8", error_occurred, b"\xff\xd0",  # an exception pending from before the call:
        b"\x48\x85\xc0", ("jne", "succeeded"),      # leave it alone, report nothing
        b"\x48\xb8", hook_word, b"\x48\x8b\x00",
        b"\x48\x89\xdf", b"\x4c\x89\xe6", b"\x4c\x89\xea",  # rdi, rsi, rdx = self, name, value
        b"\xff\xd0",                                 # call the hook
        "succeeded", b"\x31\xc0",                    # return 0
        "done", b"\x41\x5d", b"\x41\x5c", b"\x5b", b"\xc3",  # pop r13; pop r12; pop rbx; ret
    ]
    size = {bytes: len, int: lambda _: 8, tuple: lambda _: 2, str: lambda _: 0}
    labels, offset = {}, 0
    for item in program:
        if isinstance(item, str):
            labels[item] = offset
        offset += size[type(item)](item)
    code, offset = b"", 0
    for item in program:
        offset += size[type(item)](item)
        if isinstance(item, bytes):
            code += item
        elif isinstance(item, int):
            code += struct.pack("<Q", item)
        elif isinstance(item, tuple):
            code += {"jne": b"\x75", "je": b"\x74"}[item[0]] + struct.pack("<b", labels[item[1]] - offset)
    return code


def _on_slot_write(klass_address, name_address, value_address) -> None:
    """Called by the trampoline after a write succeeded, holding the GIL; never raises."""
    klass = _watched.get(klass_address)
    if klass is None:
        return
    try:
        from ctypes import cast, py_object

        callback = _state.get("on_write")
        if callback is not None:
            deleted = value_address is None
            value = None if deleted else cast(value_address, py_object).value
            callback(klass, cast(name_address, py_object).value, value, sys._getframe(1), deleted)
    except KeyboardInterrupt:
        import _thread

        _thread.interrupt_main()  # a ctypes callback cannot raise it: deliver it again
    except BaseException:
        pass


def _install_trampoline(original: int, type_dict: dict) -> str | None:
    """Point ``type``'s ``tp_setattro`` and its two slot wrappers at a trampoline; None or why not."""
    import os
    import platform

    if os.environ.get("FLAGOS_DOCTOR_PROBE_TRAMPOLINE", "1") == "0":
        return "FLAGOS_DOCTOR_PROBE_TRAMPOLINE=0"
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"no trampoline for {sys.platform} on {platform.machine()}"
    try:
        import ctypes
        import mmap
        import types

        wrappers = (type_dict["__setattr__"], type_dict["__delattr__"])
        for wrapper in wrappers:
            words = ctypes.cast(id(wrapper), ctypes.POINTER(ctypes.c_void_p))
            if (type(wrapper) is not types.WrapperDescriptorType or words[2] != id(type)
                    or words[3] != id(wrapper.__name__) or _wrapped(wrapper).value != original):
                return f"type.{wrapper.__name__} is not the slot wrapper of type_setattro"
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        page = mmap.PAGESIZE
        # Never unmapped: a thread may be inside type_setattro, to return through it.
        memory = libc.mmap(None, 2 * page, mmap.PROT_READ | mmap.PROT_WRITE,
                           mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if memory in (None, 2**64 - 1):
            return f"cannot map a page: errno {ctypes.get_errno()}"
        hook_word = memory + page
        error_occurred = ctypes.cast(ctypes.pythonapi.PyErr_Occurred, ctypes.c_void_p).value
        code = _x86_64_trampoline(original, hook_word, error_occurred)
        ctypes.memmove(memory, code, len(code))
        if libc.mprotect(memory, page, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
            return f"cannot make a page executable: errno {ctypes.get_errno()}"
        hook = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(_on_slot_write)
        ctypes.c_void_p.from_address(hook_word).value = ctypes.cast(hook, ctypes.c_void_p).value
        _state.update(trampoline=memory, hook_word=hook_word, hook=hook, wrappers=wrappers, repointed=[])
        problem = _trial(memory)
    except Exception as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        if "hook_word" in _state:
            ctypes.c_void_p.from_address(_state["hook_word"]).value = 0
        for key in ("trampoline", "hook_word", "hook", "wrappers", "repointed"):
            _state.pop(key, None)
        return problem
    for wrapper in wrappers:
        _wrapped(wrapper).value = memory
    _slot(type).value = memory
    return None


def _trial(trampoline: int) -> str | None:
    """Call the trampoline on a class of our own: a write, a delete and a failing delete."""
    import ctypes

    class Trial:
        pass

    call = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.py_object, ctypes.c_void_p)(trampoline)
    seen = []
    on_write = _state["on_write"]
    _state["on_write"] = lambda klass, name, value, frame, deleted: seen.append((klass, name, value, deleted))
    _watched[id(Trial)] = Trial
    value = object()
    try:
        call(Trial, "probe", id(value))
        call(Trial, "probe", None)
        try:
            call(Trial, "probe", None)
            return "the trampoline lost an exception"
        except AttributeError:
            pass
    finally:
        _state["on_write"] = on_write
        _watched.pop(id(Trial), None)
    if seen != [(Trial, "probe", value, False), (Trial, "probe", None, True)] or "probe" in vars(Trial):
        return "the trampoline did not behave"
    return None
