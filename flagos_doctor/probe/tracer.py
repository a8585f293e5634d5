"""The child-side tracer: every write of every watched probe, with its writer and phase.

Standard library only: it is installed before the stack's first import (torch_fl writes
environment variables before it imports torch, and those writes must be attributed too).

How writes and reads are seen, without changing what the stack sees:

* a module that owns a watched probe gets its ``__class__`` swapped for a subclass of its
  own class whose ``__setattr__``/``__delattr__`` record the write, then do it (identities,
  ``isinstance(m, ModuleType)`` and the module dict are untouched). Once a probe of that
  module has been replaced, a second subclass also records reads of it by any code (torch's
  own too: a failure's cause is often torch or Triton asking the redirected probe);
* ``os.environ`` gets its class swapped the same way; Triton's ``DriverConfig`` instance too
  (reads of ``.active`` that create the driver, writes of ``_active``/``_default``);
* ``builtins.__import__`` is wrapped so that an owner is wrapped as soon as it is imported;
* everything else (class attributes such as ``torch.Tensor.cuda``, writes that bypass the
  hooks through ``vars(module)``, ``os.putenv``, the PrivateUse1 name) is diffed at every
  recorded event and every phase boundary; such writes carry ``writer_known: false`` unless
  the bytecode of the stack function under way shows the store (``inferred: true``);
* on Python 3.12+, dict watchers (``PyDict_AddWatcher`` through ctypes) on the watched
  modules' and classes' dicts attribute those writes too.

Attribution walks past setattr helpers (a function given both the name and the value it
writes), ``unittest.mock``, ``os``/``collections.abc`` and Triton's driver methods to the
frame that asked for the write. The *phase* is the import or exercise step under way,
refined to the outermost function of the step's package on the stack.
"""

from __future__ import annotations

import builtins
import functools
import os
import re
import sys
import sysconfig
import types

_MISSING = object()
_TRACER_FILE = os.path.abspath(__file__).rstrip("c")
_OWN_DIR = os.path.dirname(_TRACER_FILE) + os.sep  # the tracer and the child: never a writer or reader
_HELPER_SUFFIXES = (
    "/unittest/mock.py",
    "/_collections_abc.py",
    "/contextlib.py",
    "/functools.py",
    "/_pytest/monkeypatch.py",
    "/triton/runtime/driver.py",
    "/torch/utils/_config_module.py",  # ConfigModule.patch's __enter__/__exit__ write for the caller
)
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_SITE = tuple(os.path.abspath(p) + os.sep for p in sys.path if "-packages" in p)
_CHEAP_CALLS = {"is_available", "device_count", "get_device_name", "get_device_capability", "is_initialized"}
# Asked again at a read, mid-run: questions that never initialise a device runtime (torch's
# get_device_name/get_device_capability would start CUDA, which a stack may test for later).
_READ_ANSWERS = {"is_available", "device_count", "is_initialized"}
_PU1_WRITERS = {"rename_privateuse1_backend", "_rename_privateuse1_backend", "_setup_privateuseone_for_python_backend"}

_TRACER: "Tracer | None" = None
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _qualname(code) -> str:
    return getattr(code, "co_qualname", code.co_name)


def _is_stdlib(path: str) -> bool:
    return path.startswith(_STDLIB) and not path.startswith(_SITE)


def safe_repr(value, limit: int = 160) -> str:
    """A short repr that never raises and never names a memory address."""
    try:
        if isinstance(value, types.ModuleType):
            return f"<module {value.__name__}>"
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
            module = getattr(value, "__module__", None) or "?"
            kind = "class" if isinstance(value, type) else "function"
            return f"<{kind} {module}.{getattr(value, '__qualname__', getattr(value, '__name__', '?'))}>"
        if isinstance(value, types.MethodType):
            return f"<bound method {getattr(value, '__qualname__', '?')}>"
        text = repr(value)
    except Exception as exc:  # a repr that raises must not break the stack
        text = f"<{type(value).__name__}: repr raised {type(exc).__name__}>"
    text = _ADDRESS.sub("", " ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _answer(fn) -> dict:
    """``{"ok", "repr"}`` of a cheap question's answer (``is_available()``), never raising."""
    try:
        return {"ok": True, "repr": safe_repr(fn())}
    except Exception as exc:
        return {"ok": False, "repr": f"{type(exc).__name__}: {exc}"[:300]}


def same_value(a, b) -> bool:
    """Whether two looks at a probe saw the same thing.

    Identity, except where the language makes a new object at each look: a bound method
    (``os.environ.get``) is the same when its function and its object are; a builtin bound
    method when its object and name are; small immutable values when they are equal.
    """
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, types.MethodType):
        return a.__func__ is b.__func__ and a.__self__ is b.__self__
    if isinstance(a, types.BuiltinMethodType):
        return a.__self__ is b.__self__ and a.__name__ == b.__name__
    if isinstance(a, (str, bytes, int, float, bool)):
        return a == b
    return False


class Tracer:
    """Records writes and reads of watched probes and sends them through ``emit``."""

    def __init__(self, emit, probes: list[str], env_patterns: list[str]):
        from flagos_doctor.probe import watch

        self._emit = emit
        self._pid = os.getpid()
        self._watch = watch
        self.env_patterns = list(env_patterns)
        self.busy = False
        self.seq = 0
        self.step = "start"
        self.step_dirs: tuple = ()
        self.stack_dirs: list[str] = []
        self.steps: list[str] = []
        self.probes: dict[str, dict] = {}
        self.owners: dict[int, dict] = {}  # id(owner) -> {"obj", "name", "attrs": {attr: probe}, "reads": set}
        self.saved: dict[str, dict] = {}  # saved-original attribute name -> {"saves", "seq", "read"}
        self.read_keys: dict[tuple, int] = {}
        self._reads_seen: dict[tuple, tuple | None] = {}  # (probe, code, line, saw, step) -> read_keys key
        self.read_callers_of: dict[tuple, tuple] = {}  # read_keys key -> (caller path, line, reader's name)
        self.torch_dir = None
        self._roots: dict[str, str] = {}
        self.sys_paths = sorted({os.path.abspath(p) for p in sys.path if p}, key=len, reverse=True)
        self.env_last = {k: v for k, v in os.environ.items() if watch.env_matches(k, self.env_patterns)}
        self.env_original = dict(self.env_last)
        self.libc_environ = None
        #: Variables whose last value came from libc's environment alone (os.putenv, C setenv).
        self.env_via_libc: set[str] = set()
        self.driver_created = False
        self.driver_seq = None
        self.modules_seen = 0
        self.waiting = None
        self.provisional = None
        self.dict_watch = None
        self.class_hook = None  # True once classwrites is installed, else why it is not
        self.torch_module = None
        self._library_writers = False  # a context manager's generator may be any library's
        self.autoload: dict[str, str] = {}  # torch.backends entry point name -> its value
        self._hooked_write = False
        self._plain_classes_compared = False  # 3.10/3.11 without classwrites' trampoline
        for name in probes:
            self.add_probe(name)
        self.add_probe(watch.PRIVATEUSE1_NAME, kind="state")

    # -- set-up ------------------------------------------------------------------------
    def add_probe(self, name: str, kind: str = "attr") -> None:
        if name in self.probes:
            return
        owner_path, _, attr = name.rpartition(".")
        self.probes[name] = {
            "name": name, "kind": kind, "owner_path": owner_path, "attr": attr, "owner": None,
            "last": _MISSING, "original": _MISSING, "history": [], "last_seq": None, "resolved": False,
            "hooked": False, "writes": 0,
        }

    def install(self) -> None:
        global _TRACER
        _TRACER = self
        original_import = builtins.__import__
        tracer = self

        def __import__(name, globals=None, locals=None, fromlist=(), level=0):
            module = original_import(name, globals, locals, fromlist, level)
            # Cheap enough for the many imports inside functions: only new modules matter.
            if not tracer.busy and (
                len(sys.modules) != tracer.modules_seen
                or (tracer.waiting is not None and not _initializing(tracer.waiting))
            ):
                tracer.resolve()
            return module

        __import__.__wrapped__ = original_import
        builtins.__import__ = __import__
        sys.meta_path.insert(0, _CreationWatch())
        os.environ.__class__ = _traced_environ_class(type(os.environ))
        self._install_libc_environ()
        if sys.version_info >= (3, 12):
            self._install_dict_watchers()
        self.resolve()

    @property
    def pending(self) -> bool:
        return any(not p["resolved"] for p in self.probes.values() if p["kind"] == "attr")

    def short(self, path: str | None) -> str | None:
        """``/site-packages/torch_fl/__init__.py`` -> ``torch_fl/__init__.py``.

        The root is the folder above the outermost package (``__init__.py``) holding the
        file; a file outside any package is shown relative to its ``sys.path`` entry.
        """
        if not path or path.startswith("<"):
            # ``<frozen importlib._bootstrap>`` -> ``importlib._bootstrap``; a pseudo-file of
            # the program's own (``<string>`` of ``python -c``, ``<stdin>``) stays whole.
            if path and path.startswith("<frozen ") and path.endswith(">"):
                return path[len("<frozen "):-1]
            return path
        folder = os.path.dirname(path)
        root = self._roots.get(folder)
        if root is None:
            root = folder
            while os.path.exists(os.path.join(root, "__init__.py")) and os.path.dirname(root) != root:
                root = os.path.dirname(root)
            if root == folder:
                root = next((b for b in self.sys_paths if path.startswith(b + os.sep)), folder)
            self._roots[folder] = root
        return os.path.relpath(path, root) if path.startswith(root + os.sep) else path

    def _lookup(self, dotted: str):
        """The object a dotted name reaches by attribute access, or _MISSING (no hooks run).

        A module still running its body does not count yet (its attributes are not all
        there); ``self.waiting`` then names it, so the import hook looks again when it is done.
        """
        module = sys.modules.get(dotted)
        if isinstance(module, types.ModuleType) and not _initializing(module):
            parent_name, _, name = dotted.rpartition(".")
            parent = sys.modules.get(parent_name)
            shadow = _static_get(parent, name) if parent is not None else _MISSING
            if shadow is _MISSING or shadow is module or isinstance(shadow, types.ModuleType):
                if parent is not None and _initializing(parent):
                    # The parent may still rebind the name (``from .driver import driver``).
                    self.provisional = parent
                return module
        parts = dotted.split(".")
        obj = sys.modules.get(parts[0], _MISSING)
        for i, part in enumerate(parts[1:], start=1):
            if obj is _MISSING:
                return _MISSING
            nxt = _static_get(obj, part)
            if nxt is _MISSING:
                nxt = sys.modules.get(".".join(parts[: i + 1]), _MISSING)
            if nxt is _MISSING and _initializing(obj):
                # A module still running its body (its loader may import while it runs):
                # look again as soon as it is done, before its importer writes anything.
                self.waiting = obj
                return _MISSING
            obj = nxt
        if obj is not _MISSING and _initializing(obj):
            self.waiting = obj
            return _MISSING
        return obj

    def resolve(self) -> None:
        """Wrap every owner that has become importable; call at imports and boundaries."""
        if self.busy:
            return
        self.busy = True
        self.modules_seen = len(sys.modules)
        self.waiting = None  # a module still running its body, that an owner waits for
        try:
            torch = sys.modules.get("torch")
            if torch is not None and self.torch_dir is None and getattr(torch, "__file__", None):
                self.torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
            for probe in list(self.probes.values()):
                if probe["kind"] != "attr":
                    continue
                if probe["resolved"]:
                    self._settle(probe)
                    continue
                self.provisional = None
                owner = self._lookup(probe["owner_path"])
                if owner is _MISSING:
                    continue
                probe["provisional"] = self.provisional
                if self.provisional is not None:
                    self.waiting = self.provisional
                probe["resolved"] = True
                probe["owner"] = owner
                value = _static_get(owner, probe["attr"])
                probe["original"] = probe["last"] = value
                if value is not _MISSING:
                    probe["history"].append(value)
                self._hook_owner(owner, probe)
            self._check_device_module(torch)
        finally:
            self.busy = False

    def _settle(self, probe) -> None:
        """Once the parent of a provisional owner is done, move the probe if the name was rebound."""
        parent = probe.get("provisional")
        if parent is None:
            return
        if _initializing(parent):
            self.waiting = parent
            return
        probe["provisional"] = None
        owner = self._lookup(probe["owner_path"])
        if owner is _MISSING or owner is probe["owner"]:
            return
        entry = self.owners.get(id(probe["owner"]))
        if entry is not None:
            entry["attrs"].pop(probe["attr"], None)
        probe["owner"] = owner
        value = _static_get(owner, probe["attr"])
        probe["original"] = probe["last"] = value
        probe["history"] = [value] if value is not _MISSING else []
        self._hook_owner(owner, probe)

    def _hook_owner(self, owner, probe) -> None:
        entry = self._owner_entry(owner, probe["owner_path"])
        entry["attrs"][probe["attr"]] = probe
        probe["hooked"] = entry["classes"] is not None

    def _owner_entry(self, owner, name: str) -> dict:
        """The owner's record, created (and its writes hooked) the first time."""
        entry = self.owners.get(id(owner))
        if entry is None:
            entry = {"obj": owner, "name": name, "attrs": {}, "reads": set(), "classes": None, "class_hook": False}
            self.owners[id(owner)] = entry
            try:
                self._swap_class(owner, entry)
            except Exception as exc:
                # Installing a watch is the probe's problem, never the stack's: compare instead.
                entry["classes"] = None
                self.notice(f"{name}: cannot watch its writes ({type(exc).__name__}: {exc}); "
                            "its probes are compared at each event and step boundary, writers unknown")
            if not entry["class_hook"]:
                self._watch_dict(owner)
        return entry

    def _swap_class(self, owner, entry) -> None:
        """Route the owner's writes through our hooks, where its class allows it."""
        if isinstance(owner, types.ModuleType):
            base = type(owner)
            classes = _traced_module_classes(base)
            if base.__setattr__ is not types.ModuleType.__setattr__ and base not in _OUR_CLASSES:
                # torch's config modules (ConfigModule) reject unknown attributes, even
                # __class__, in their own __setattr__: swap the class past it. Their values
                # are read all through compilation: writes only, never the read hook.
                object.__setattr__(owner, "__class__", classes[0])
                entry["classes"] = classes
                entry["writes_only"] = True
                return
            owner.__class__ = classes[0]
            entry["classes"] = classes
        elif isinstance(owner, type):
            entry["class_hook"] = self._watch_class(owner, entry["name"])
        elif type(owner).__name__ == "DriverConfig":
            owner.__class__ = _traced_driver_class(type(owner))
            entry["classes"] = (type(owner), type(owner))

    def _watch_class(self, klass, name) -> bool:
        from flagos_doctor.probe import classwrites

        if self.class_hook is None:
            reason = classwrites.install(self.on_class_write)
            self.class_hook = reason or True
            if reason:
                self.notice(f"class attributes cannot be hooked ({reason}): they are compared at each event "
                            "and step boundary, and their writers inferred from the bytecode")
        if self.class_hook is not True:
            return False
        if classwrites.watch_class(klass):
            return True
        if type(klass) is type and sys.version_info < (3, 12) and not self._plain_classes_compared:
            self._plain_classes_compared = True
            classwrites.watch_generator_context_managers(self.after_enter, self.after_exit)
            self.notice(f"classes of metaclass type ({name}): writes by attribute syntax cannot be hooked here "
                        f"({classwrites.type_slot_problem()}); they are compared at each event and step boundary "
                        "and after each @contextmanager's enter and exit, their writers inferred from the bytecode")
        if type(klass) is not type:
            self.notice(f"{name}: its metaclass {type(klass).__qualname__} has its own C setattr; its probes "
                        "are compared at each event and step boundary")
        return False

    def after_enter(self, generator) -> None:
        """A ``@contextmanager`` entered: its patches are made; its frame waits at ``yield``."""
        frame = getattr(generator, "gi_frame", None)
        if frame is not None and not self.busy:
            self._library_writers = True
            try:
                self.check(frame)
            finally:
                self._library_writers = False

    def after_exit(self, code, resumed_at) -> None:
        """A ``@contextmanager`` exited: its undo ran after ``resumed_at`` in ``code``."""
        if self.busy or resumed_at is None:
            return
        self._library_writers = True
        try:
            self.check(_Finished(code, resumed_at))
        finally:
            self._library_writers = False

    def notice(self, text: str) -> None:
        self.emit({"record": "notice", "text": text})

    def on_class_write(self, klass, name, value, frame, deleted) -> None:
        """Called by :mod:`.classwrites` after a class attribute was written or deleted."""
        if self.busy:
            return
        entry = self.owners.get(id(klass))
        if entry is None:
            return
        probe = entry["attrs"].get(name)
        if probe is not None:
            # Writes the hooks missed (a class of metaclass ``type`` on 3.10/3.11) come first,
            # found while the frame that made them is still running.
            previous = probe["last"]
            probe["last"] = _MISSING if deleted else value
            self.check(frame)
            probe["last"] = previous
        self.busy = True
        try:
            previous = probe["last"] if probe is not None else _MISSING
            self.module_setattr(klass, name, _MISSING if deleted else value, previous, frame, deleted=deleted)
        except Exception:
            pass
        finally:
            self.busy = False

    def _check_device_module(self, torch) -> None:
        """Watch ``torch.<name>`` once the PrivateUse1 backend has a name."""
        if torch is None:
            return
        try:
            name = torch._C._get_privateuse1_backend_name()
        except Exception:
            return
        state = self.probes[self._watch.PRIVATEUSE1_NAME]
        if state["original"] is _MISSING:
            state["original"] = state["last"] = name
            state["history"].append(name)
            state["resolved"] = True
        if name != "privateuseone" and f"torch.{name}" not in self.probes:
            self.add_probe(f"torch.{name}")
            probe = self.probes[f"torch.{name}"]
            probe["resolved"] = True
            probe["owner"] = torch
            probe["original"] = _MISSING
            probe["last"] = _MISSING
            self._hook_owner(torch, probe)

    # -- from the moment a module object exists --------------------------------------------
    @staticmethod
    def watched_early(name: str) -> bool:
        """``torch``, whose body ends by autoloading the ``torch.backends`` plugins, is
        watched from the moment its module object exists."""
        return name == "torch"

    def module_created(self, module) -> None:
        """Called before a watched module's body runs: hook it now, resolve its probes later."""
        if self.busy:
            return
        self.busy = True
        try:
            name = module.__name__
            if name == "torch":
                self.torch_module = module
                origin = getattr(module.__spec__, "origin", None)
                if origin and self.torch_dir is None:
                    self.torch_dir = os.path.dirname(os.path.abspath(origin)) + os.sep
                self._find_autoload_plugins()
            entry = self._owner_entry(module, name)
            for probe in self.probes.values():
                if probe["kind"] == "attr" and probe["owner_path"] == name and not probe["resolved"]:
                    probe["owner"] = module
                    entry["attrs"][probe["attr"]] = probe
                    probe["hooked"] = entry["classes"] is not None
        except Exception:
            pass
        finally:
            self.busy = False

    def _find_autoload_plugins(self) -> None:
        """The ``torch.backends`` entry points torch is about to autoload: their code is stack code."""
        if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "1":
            return
        try:
            import importlib.metadata
            import importlib.util

            for point in importlib.metadata.entry_points(group="torch.backends"):
                self.autoload[point.name] = point.value
                top = point.value.split(":")[0].split(".")[0].strip()
                spec = importlib.util.find_spec(top)
                if spec is None:
                    continue
                dirs = [os.path.abspath(p) + os.sep for p in (spec.submodule_search_locations or [])]
                if not dirs and spec.origin:
                    dirs = [os.path.abspath(spec.origin)]
                for folder in dirs:
                    if folder not in self.stack_dirs:
                        self.stack_dirs.append(folder)
        except Exception:
            pass

    def torch_own_write(self, frame) -> bool:
        """A write torch's own import makes (``torch.cuda.FloatTensor`` and its kin): every
        frame from the writer up to torch's ``__init__`` body is torch's, importlib's or ours.
        Not the stack's doing: it is part of what torch is. An autoloaded plugin's write has
        the plugin's frames in between, so it is the plugin's."""
        torch = self.torch_module
        if torch is None or self.torch_dir is None or not _initializing(torch):
            return False
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(self.torch_dir):
                if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "torch":
                    return True
            elif not (path.startswith("<frozen") or path.startswith(_OWN_DIR)):
                return False
            frame = frame.f_back
        return False

    def _autoload_phase(self, frame) -> str | None:
        """``autoload of X (pkg:fn) during import torch`` when torch's autoload is on the stack."""
        while frame is not None:
            code = frame.f_code
            if code.co_name == "_import_device_backends" and self.torch_dir and code.co_filename.startswith(self.torch_dir):
                point = frame.f_locals.get("backend_extension")
                name = getattr(point, "name", None) or "?"
                value = getattr(point, "value", None)
                return f"autoload of {name}" + (f" ({value})" if value else "") + " during import torch"
            frame = frame.f_back
        return None

    def _adopt_original(self, probe, value) -> None:
        """torch's own import set this value: it is the original, not a write."""
        probe["original"] = probe["last"] = value
        if value is not _MISSING and not any(same_value(v, value) for v in probe["history"]):
            probe["history"].append(value)

    # -- records -----------------------------------------------------------------------
    def emit(self, record: dict) -> None:
        if os.getpid() == self._pid:  # never from a forked compile worker
            self._emit(record)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def frame_info(self, frame, line: int | None = None) -> dict:
        code = frame.f_code
        return {
            "function": _qualname(code),
            "file": self.short(code.co_filename),
            "line": line if line is not None else frame.f_lineno,
            "path": code.co_filename,
        }

    def describe(self, value) -> dict | None:
        """``{"repr", "defined_at"}`` of a value; None for an absent one."""
        if value is _MISSING:
            return None
        return {"repr": safe_repr(value), "defined_at": self.defined_at(value)}

    def defined_at(self, value) -> str | None:
        if isinstance(value, (str, bytes, int, float, bool, type(None), tuple, list, dict)):
            return None
        try:
            target = value
            for _ in range(3):
                target = getattr(target, "__func__", target)
                if isinstance(target, types.FunctionType):
                    code = target.__code__
                    return f"{self.short(code.co_filename)}:{code.co_firstlineno}"
                inner = getattr(target, "func", None) or getattr(target, "__wrapped__", None)
                if inner is None or inner is target:
                    break
                target = inner
            if isinstance(value, types.ModuleType):
                return self.short(getattr(value, "__file__", None)) or f"module {value.__name__}"
            if isinstance(value, type):
                for attr in vars(value).values():
                    attr = getattr(attr, "__func__", attr)
                    if isinstance(attr, types.FunctionType):
                        return f"{self.short(attr.__code__.co_filename)} (class {value.__qualname__})"
            module = getattr(value, "__module__", None) or getattr(type(value), "__module__", None)
            return f"module {module}" if module else None
        except Exception:
            return None

    def _is_library_file(self, path: str) -> bool:
        """Code that is neither torch's, the standard library's nor ours."""
        return not (path.startswith("<") or path.startswith(_OWN_DIR) or _is_stdlib(path)
                    or (self.torch_dir is not None and path.startswith(self.torch_dir)))

    def code_kind(self, path: str) -> str:
        """Whose code a file is: ``stack``, ``torch``, ``stdlib`` or ``library`` (Triton, ...)."""
        if self._is_stack_file(path):
            return "stack"
        if self.torch_dir is not None and path.startswith(self.torch_dir):
            return "torch"
        return "stdlib" if _is_stdlib(path) else "library"

    def _is_stack_file(self, path: str) -> bool:
        return any(path.startswith(d) for d in self.stack_dirs)

    def _skippable(self, frame) -> bool:
        path = frame.f_code.co_filename
        return path.startswith(_OWN_DIR) or path.startswith("<frozen") or path.endswith(_HELPER_SUFFIXES) or (
            path.endswith("/os.py") and _is_stdlib(path)
        )

    def attribute(self, frame, name=None, value=_MISSING):
        """Walk from ``frame`` past helpers to the writer; return (frame, via)."""
        via = []
        while frame is not None:
            if self._skippable(frame) or (name is not None and _is_setattr_helper(frame, name, value)):
                if not frame.f_code.co_filename.startswith(_OWN_DIR):
                    via.append(f"{self.short(frame.f_code.co_filename)}:{_qualname(frame.f_code)}")
                frame = frame.f_back
                continue
            break
        return frame, via

    def phase_of(self, frame) -> str:
        """The step under way, refined to the outermost function of its package on the stack.

        An exercise step is not refined: a write made lazily on the first device call belongs
        to the step that made the call (the writer's function is in ``where`` already).
        """
        if self.step.startswith("exercise"):
            return self.step
        autoload = self._autoload_phase(frame)
        if autoload is not None:
            return autoload
        outermost = None
        while frame is not None:
            code = frame.f_code
            if code.co_name != "<module>" and any(code.co_filename.startswith(d) for d in self.step_dirs):
                outermost = code
            frame = frame.f_back
        if outermost is None:
            return self.step
        return f"{self.short(outermost.co_filename)}:{_qualname(outermost)}"

    def callers(self, frame, limit: int = 4) -> list[dict]:
        out = []
        frame = frame.f_back if frame is not None else None
        while frame is not None and len(out) < limit:
            if not self._skippable(frame):
                out.append(self.frame_info(frame))
            frame = frame.f_back
        return out

    # -- writes ------------------------------------------------------------------------
    def on_write(self, probe: dict, value, previous, frame, kind: str = "write", name=None, saves=None) -> None:
        writer, via = self.attribute(frame, name if name is not None else probe["attr"], value)
        record = {
            "record": "event", "seq": self.next_seq(), "kind": kind, "probe": probe["name"], "step": self.step,
            "phase": self.phase_of(writer) if writer is not None else self.step,
            "where": self.frame_info(writer) if writer is not None else _UNKNOWN,
            "writer_known": writer is not None, "via": via,
            "value": self.describe(value), "previous": self.describe(previous),
            "callers": self.callers(writer) if writer is not None else [],
        }
        if saves is not None:
            record["saves"] = saves
        self._remember(probe, value, record["seq"])
        self.emit(record)
        if kind == "write" and writer is not None:
            self._restored_from_saved(probe, value, writer)

    def _restored_from_saved(self, probe, value, writer) -> None:
        """A probe set back to the value a saved original holds was read back from it, even
        where the read cannot be hooked (a class attribute: ``torch.Tensor.__old_new__``)."""
        for dotted, keep in self.saved.items():
            if keep["read"] or keep["saves"] != probe["name"]:
                continue
            holder = self.probes.get(dotted)
            if holder is None or not same_value(holder["last"], value):
                continue
            keep["read"] = True
            self.read_keys[(dotted, writer.f_code.co_filename, writer.f_lineno, holder["last_seq"])] = 1
            self.emit({
                "record": "event", "seq": self.next_seq(), "kind": "read", "probe": dotted, "step": self.step,
                "phase": self.phase_of(writer), "where": self.frame_info(writer), "writer_known": True,
                "saw": holder["last_seq"], "value": self.describe(value), "callers": self.read_callers(writer),
                "restores": probe["name"],
            })

    def _remember(self, probe, value, seq) -> None:
        probe["last"] = value
        probe["last_seq"] = seq
        probe["writes"] += 1
        if value is not _MISSING and not any(same_value(v, value) for v in probe["history"]):
            probe["history"].append(value)
        if probe["kind"] == "attr" and probe["original"] is not _MISSING and not same_value(value, probe["original"]):
            entry = self.owners.get(id(probe["owner"]))
            if entry is not None and probe["hooked"]:
                entry["reads"].add(probe["attr"])
                self._read_mode(entry)

    def _read_mode(self, entry) -> None:
        classes = entry["classes"]
        if classes and isinstance(entry["obj"], types.ModuleType) and type(entry["obj"]) is classes[0] \
                and not entry.get("writes_only"):
            entry["obj"].__class__ = _reads_class(entry["obj"], classes)

    def module_setattr(self, owner, name, value, previous, frame, deleted=False) -> bool:
        """Record a write on a hooked owner; True when it was a watched probe (or a saved original)."""
        entry = self.owners.get(id(owner))
        if entry is None:
            return False
        probe = entry["attrs"].get(name)
        if probe is None and isinstance(owner, types.ModuleType) and owner is sys.modules.get("torch"):
            self._check_device_module(owner)  # torch.<name> appears right after the rename
            probe = entry["attrs"].get(name)
        if probe is None and not deleted:
            saves = self._saved_original_of(value)
            if saves is None:
                return False
            self._new_saved_original(entry, name, value, saves, frame)
            return True
        if probe is None:
            return False
        self.probe_write(probe, owner, value, previous, frame, deleted)
        return True

    def probe_write(self, probe, owner, value, previous, frame, deleted=False) -> None:
        """A write to a watched probe, however it was seen (a hooked owner's ``__setattr__``
        or a 3.12+ dict watcher): torch's own import sets originals; the rest are writes."""
        if self.torch_own_write(frame):
            if probe["resolved"]:
                self._adopt_original(probe, _MISSING if deleted else value)
            return
        if not probe["resolved"]:
            # Written while its owner still runs its body (an autoloaded plugin writing torch.*):
            # the value before the write is the original.
            probe.update(resolved=True, owner=owner, original=previous, last=previous,
                         history=[previous] if previous is not _MISSING else [])
        self.on_write(probe, _MISSING if deleted else value, previous, frame, kind="delete" if deleted else "write")

    def _saved_original_of(self, value):
        """The probe whose original (or a value since replaced) ``value`` is; else None.

        A replacement the stack also put on a probe is not a saved original: one stub
        assigned to several probes is the same patch, applied more than once.
        """
        if value is _MISSING or isinstance(value, (str, int, float, bool, type(None))):
            return None
        for probe in self.probes.values():
            if probe["kind"] != "attr":
                continue
            if same_value(value, probe["original"]) or (
                not same_value(value, probe["last"]) and any(same_value(v, value) for v in probe["history"])
            ):
                return probe
        return None

    def _new_saved_original(self, entry, name, value, saves, frame) -> None:
        dotted = f"{entry['name']}.{name}"
        self.add_probe(dotted, kind="saved")
        probe = self.probes[dotted]
        probe.update(owner=entry["obj"], resolved=True, original=_MISSING, hooked=entry["classes"] is not None)
        entry["attrs"][name] = probe
        self.on_write(probe, value, _MISSING, frame, saves=saves["name"])
        self.saved[dotted] = {"saves": saves["name"], "seq": self.seq, "read": False}
        self.emit({"record": "saved", "probe": dotted, "saves": saves["name"], "seq": self.seq})
        if probe["hooked"]:
            entry["reads"].add(name)
            self._read_mode(entry)

    # -- reads -------------------------------------------------------------------------
    def on_read(self, owner, name, value, frame) -> None:
        """A read of a redirected probe (or of a saved original), by any code, torch's own too:
        one event per reading line, probe state and step (a failure's cause is looked for
        among the reads of its own step)."""
        entry = self.owners.get(id(owner))
        probe = entry["attrs"].get(name) if entry else None
        if probe is None:
            return
        while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
            frame = frame.f_back
        if frame is None or frame.f_code.co_filename.startswith(_OWN_DIR):
            return  # our own look at the probe
        # The cheap test first: a line that read this probe in this state and step is known.
        seen = (probe["name"], frame.f_code, frame.f_lineno, probe["last_seq"], self.step)
        if seen in self._reads_seen:
            key = self._reads_seen[seen]
            if key is not None:
                self.read_keys[key] += 1
            return
        reader, _ = self.attribute(frame)
        if reader is None:
            self._reads_seen[seen] = None
            return
        path = reader.f_code.co_filename
        saved = self.saved.get(probe["name"])
        key = (probe["name"], path, reader.f_lineno, probe["last_seq"])
        self._reads_seen[seen] = key
        self.read_keys[key] = self.read_keys.get(key, 0) + 1
        caller = reader.f_back
        while caller is not None and (caller.f_code.co_filename.startswith("<frozen")
                                      or caller.f_code.co_filename.startswith(_OWN_DIR)):
            caller = caller.f_back
        if caller is not None and key not in self.read_callers_of:
            # Where the reader was called from: a reader that returns the answer hands the
            # decision to that line (``if _native_cuda_available(): return``).
            self.read_callers_of[key] = (caller.f_code.co_filename, caller.f_lineno, reader.f_code.co_name)
        if saved is not None and not saved["read"]:
            saved["read"] = True
        record = {
            "record": "event", "seq": self.next_seq(), "kind": "read", "probe": probe["name"], "step": self.step,
            "phase": self.phase_of(reader), "where": self.frame_info(reader), "writer_known": True,
            "saw": probe["last_seq"], "value": self.describe(value), "callers": self.read_callers(reader),
            "by": self.code_kind(path),
        }
        if probe["attr"] in _READ_ANSWERS and callable(value) and callable(probe["original"]) \
                and not same_value(value, probe["original"]):
            # What the reader is about to be told, and what the original would tell it.
            record["answer"] = _answer(value)
            record["original_answer"] = _answer(probe["original"])
        self.emit(record)

    def read_callers(self, frame, limit: int = 6) -> list[dict]:
        """The reader's callers, innermost first, helpers included (Triton's ``_create_driver``
        calls each backend's ``is_active()``: the cause engine needs that frame)."""
        out = []
        frame = frame.f_back if frame is not None else None
        while frame is not None and len(out) < limit:
            path = frame.f_code.co_filename
            if not (path.startswith(_OWN_DIR) or path.startswith("<frozen")):
                out.append(self.frame_info(frame))
            frame = frame.f_back
        return out

    def driver_read(self, driver, name, frame) -> None:
        """The first read of Triton's ``driver.active``/``.default``: which backends answer."""
        self.driver_created = True
        answers = {}
        try:
            from triton.backends import backends  # the stack already imported triton

            for backend_name, backend in backends.items():
                try:
                    answers[backend_name] = bool(backend.driver.is_active())
                except Exception as exc:
                    answers[backend_name] = f"raised {type(exc).__name__}: {exc}"
        except Exception as exc:
            answers["?"] = f"cannot list backends: {type(exc).__name__}"
        self.add_probe(self._watch.TRITON_ACTIVE, kind="state")
        probe = self.probes[self._watch.TRITON_ACTIVE]
        reader, via = self.attribute(frame)
        self.driver_seq = self.next_seq()
        self.emit({
            "record": "event", "seq": self.driver_seq, "kind": "read", "probe": probe["name"], "step": self.step,
            "phase": self.phase_of(reader) if reader else self.step,
            "where": self.frame_info(reader) if reader else _UNKNOWN, "writer_known": reader is not None,
            "via": via, "creates_driver": True, "is_active": answers,
            "active_backends": [k for k, v in answers.items() if v is True],
            "callers": self.callers(reader) if reader else [],
        })

    # -- diffs -------------------------------------------------------------------------
    def check(self, frame=None, boundary: bool = False) -> None:
        """Diff every probe against what the hooks last saw; report the writes they missed."""
        if self.busy:
            return
        self.busy = True
        try:
            for probe in list(self.probes.values()):
                if probe["kind"] in ("attr", "saved") and probe["resolved"]:
                    current = _static_get(probe["owner"], probe["attr"])
                elif probe["name"] == self._watch.PRIVATEUSE1_NAME and probe["resolved"]:
                    try:
                        current = sys.modules["torch"]._C._get_privateuse1_backend_name()
                    except Exception:
                        continue
                else:
                    continue
                if probe["kind"] == "state" and current == probe["last"]:
                    continue
                if not same_value(current, probe["last"]):
                    self._unseen_write(probe, current, frame)
            self._check_env(frame, libc=boundary)
        finally:
            self.busy = False
        self.resolve()

    def _unseen_write(self, probe, value, frame) -> None:
        if frame is not None and self.torch_own_write(frame):
            self._adopt_original(probe, value)
            return
        previous = probe["last"]
        writer, line = self._infer_writer(probe, frame)
        record = {
            "record": "event", "seq": self.next_seq(), "kind": "write" if value is not _MISSING else "delete",
            "probe": probe["name"], "step": self.step,
            "phase": self.phase_of(writer) if writer is not None else self.step,
            "where": self.frame_info(writer, line) if writer is not None else _UNKNOWN,
            "writer_known": writer is not None, "inferred": writer is not None, "via": [],
            "value": self.describe(value), "previous": self.describe(previous),
            "callers": self.callers(writer) if writer is not None else [],
        }
        if frame is not None and writer is None:
            noticed, _ = self.attribute(frame)
            if noticed is not None:
                record["noticed_at"] = self.frame_info(noticed)
        self._remember(probe, value, record["seq"])
        self.emit(record)

    def _infer_writer(self, probe, frame):
        """The stack frame whose bytecode shows the store, and the store's line; else (None, None)."""
        names = _PU1_WRITERS if probe["kind"] == "state" else {probe["attr"]}
        opnames = ("STORE_ATTR",) if probe["kind"] != "state" else ("LOAD_ATTR", "LOAD_GLOBAL", "LOAD_METHOD")
        while frame is not None:
            path = frame.f_code.co_filename
            if self._is_stack_file(path) or (self._library_writers and self._is_library_file(path)):
                owner = probe["owner_path"].rpartition(".")[2] if probe["kind"] != "state" else None
                line = _store_line(frame, names, opnames, owner, getattr(frame, "resumed_at", -1))
                if line is not None:
                    return frame, line
            frame = frame.f_back
        return None, None

    def _check_env(self, frame, libc: bool) -> None:
        current = {}
        data = dict.items(os.environ._data) if hasattr(os.environ, "_data") else ()
        for key, value in data:
            try:
                key, value = os.fsdecode(key), os.fsdecode(value)
            except Exception:
                continue
            if self._watch.env_matches(key, self.env_patterns):
                current[key] = value
        if libc and self.libc_environ is not None:
            self.env_via_libc = set()
            for key, value in self._libc_env().items():
                if key not in current or current[key] != value:
                    current[key] = value  # set with os.putenv or C setenv: libc has the truth
                    self.env_via_libc.add(key)
        else:
            # Between two looks at libc, what only libc held stands: os.environ not holding it
            # is no delete (a putenv variable was once said deleted, then written again).
            for key in self.env_via_libc & self.env_last.keys():
                current[key] = self.env_last[key]
        for key in sorted(set(current) | set(self.env_last)):
            before, after = self.env_last.get(key), current.get(key)
            if before != after:
                self._env_event(key, before, after, None, known=False, noticed=frame)

    def _env_event(self, key, before, after, frame, known=True, noticed=None) -> None:
        writer, via = self.attribute(frame, key, after) if frame is not None else (None, [])
        record = {
            "record": "event", "seq": self.next_seq(), "kind": "delete" if after is None else "write",
            "probe": f"${key}", "step": self.step,
            "phase": self.phase_of(writer) if writer is not None else self.step,
            "where": self.frame_info(writer) if writer is not None else _UNKNOWN,
            "writer_known": writer is not None, "via": via,
            "value": None if after is None else {"repr": repr(after), "defined_at": None},
            "previous": None if before is None else {"repr": repr(before), "defined_at": None},
            "callers": self.callers(writer) if writer is not None else [],
        }
        if noticed is not None:
            where, _ = self.attribute(noticed)
            if where is not None:
                record["noticed_at"] = self.frame_info(where)
        if after is None:
            self.env_last.pop(key, None)
        else:
            self.env_last[key] = after
        self.emit(record)

    def env_write(self, key, after, frame) -> None:
        if self.busy or not isinstance(key, str) or not self._watch.env_matches(key, self.env_patterns):
            return
        before = self.env_last.get(key)
        if before == after and after is not None:
            return
        self.busy = True
        try:
            self._env_event(key, before, after, frame)
        finally:
            self.busy = False

    def _install_libc_environ(self) -> None:
        try:
            import ctypes

            self.libc_environ = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
        except Exception:
            self.libc_environ = None

    def _libc_env(self) -> dict:
        out = {}
        try:
            environ = self.libc_environ
            i = 0
            while environ[i] is not None and i < 100000:
                key, _, value = os.fsdecode(environ[i]).partition("=")
                if self._watch.env_matches(key, self.env_patterns):
                    out[key] = value
                i += 1
        except Exception:
            pass
        return out

    # -- phases ------------------------------------------------------------------------
    def begin_step(self, name: str, dirs: list[str]) -> None:
        self.check(boundary=True)
        self.step = name
        self.steps.append(name)
        self.step_dirs = tuple(d for d in dirs)
        for d in dirs:
            if d not in self.stack_dirs:
                self.stack_dirs.append(d)
        self.emit({"record": "phase", "name": name, "seq": self.seq})

    def end_step(self) -> None:
        self.check(boundary=True)

    # -- 3.12+: dict watchers ----------------------------------------------------------
    def _install_dict_watchers(self) -> None:
        try:
            import ctypes

            callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p)
            tracer = self

            def on_dict_event(event, mapping, key_ptr, value_ptr):
                # Events 0-2 are added, modified, deleted; it runs before the dict changes.
                if event > 2 or tracer.busy or tracer._hooked_write or not key_ptr:
                    return 0
                try:
                    key = ctypes.cast(key_ptr, ctypes.py_object).value
                    owner = tracer.dict_owners.get(id(mapping))
                    entry = tracer.owners.get(id(owner)) if owner is not None else None
                    probe = entry["attrs"].get(key) if entry and isinstance(key, str) else None
                    if probe is None:
                        return 0
                    value = ctypes.cast(value_ptr, ctypes.py_object).value if value_ptr else _MISSING
                    # The watcher runs before the dict changes: what it holds now is the previous value.
                    previous = mapping.get(key, _MISSING) if not probe["resolved"] else probe["last"]
                    tracer.busy = True
                    try:
                        # The same rules as a hooked write: torch's own import writes are originals
                        # (on 3.12 they were counted as the stack's: torch.cuda.FloatTensor, torch.empty).
                        tracer.probe_write(probe, owner, value, previous, sys._getframe(1), deleted=not value_ptr)
                    finally:
                        tracer.busy = False
                except Exception:
                    pass
                return 0

            self._dict_callback = callback_type(on_dict_event)
            add = ctypes.pythonapi.PyDict_AddWatcher
            add.restype = ctypes.c_int
            add.argtypes = [callback_type]
            self.dict_watch = add(self._dict_callback)
            self.dict_owners = {}
        except Exception:
            self.dict_watch = None

    def _watch_dict(self, owner) -> None:
        if self.dict_watch is None or self.dict_watch < 0:
            return
        try:
            import ctypes
            import gc

            mapping = owner.__dict__ if not isinstance(owner, type) else gc.get_referents(owner.__dict__)[0]
            watch = ctypes.pythonapi.PyDict_Watch
            watch.argtypes = [ctypes.c_int, ctypes.py_object]
            watch.restype = ctypes.c_int
            if watch(self.dict_watch, mapping) == 0:
                self.dict_owners[id(mapping)] = owner
        except Exception:
            pass


_UNKNOWN = {"function": None, "file": None, "line": None, "path": None}


def _module_class(module):
    """The module's own class, under the subclasses the tracer swaps in."""
    for klass in type(module).__mro__:
        if klass not in _OUR_CLASSES:
            return klass
    return types.ModuleType


class _CreationWatch:
    """A meta path entry that finds nothing itself: for a module watched early, it finds
    the spec the other finders find and has the tracer see the module object before its
    body runs. The loader is the module's own (``__loader__``/``__spec__`` unchanged); only
    its ``exec_module`` gets a wrapper for that one call."""

    def find_spec(self, name, path=None, target=None):
        tracer = _TRACER
        if tracer is None or tracer.busy or not tracer.watched_early(name):
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module") or "exec_module" in getattr(loader, "__dict__", {"exec_module": 1}):
            return spec
        exec_module = loader.exec_module

        def exec_module_watched(module):
            try:
                del loader.exec_module
            except AttributeError:
                pass
            if _TRACER is not None:
                _TRACER.module_created(module)
            return exec_module(module)

        try:
            loader.exec_module = exec_module_watched
        except Exception:
            pass
        return spec


def _static_get(owner, attr):
    """``owner.attr`` without running our hooks (and without module ``__getattr__`` side effects).

    For a module of its own class, what that class makes of the name comes first, as in
    Python's lookup: a property (a data descriptor) wins over the module dict. A class that
    keeps its values outside the dict (its own ``__setattr__`` and ``__getattr__``: torch's
    config modules) is asked through its ``__getattr__`` for names the dict lacks. A lazy
    module's ``__getattr__`` (a class ``__getattr__`` alone, transformers' ``_LazyModule``, or
    PEP 562's module-level one) imports on demand, and is never called.
    """
    try:
        if isinstance(owner, types.ModuleType):
            data = object.__getattribute__(owner, "__dict__")
            klass = _module_class(owner)
            if klass is types.ModuleType:
                return data.get(attr, _MISSING)
            for base in klass.__mro__:
                if base is types.ModuleType:
                    break
                found = base.__dict__.get(attr, _MISSING)
                if found is not _MISSING:
                    if hasattr(type(found), "__set__") or hasattr(type(found), "__delete__"):
                        return type(found).__get__(found, owner, klass)
                    break
            if attr in data:
                return data[attr]
            getattr_ = next((b.__dict__["__getattr__"] for b in klass.__mro__
                             if b is not types.ModuleType and "__getattr__" in b.__dict__), None)
            if getattr_ is not None and klass.__setattr__ is not types.ModuleType.__setattr__:
                try:
                    return getattr_(owner, attr)
                except AttributeError:
                    return _MISSING
            return _MISSING
        if isinstance(owner, type):
            for klass in owner.__mro__:
                if attr in klass.__dict__:
                    return klass.__dict__[attr]
            return _MISSING
        data = object.__getattribute__(owner, "__dict__")
        if attr in data:
            return data[attr]
        return getattr(owner, attr, _MISSING)
    except Exception:
        return _MISSING


def _initializing(obj) -> bool:
    """A module still running its body: its attributes are not there yet."""
    if not isinstance(obj, types.ModuleType):
        return False
    spec = object.__getattribute__(obj, "__dict__").get("__spec__")
    return bool(getattr(spec, "_initializing", False))


def _is_setattr_helper(frame, name, value) -> bool:
    """A function handed both the name and the value it writes is a helper, not the writer."""
    code = frame.f_code
    if code.co_name == "<module>":
        return False
    nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    if not nargs:
        return False
    try:
        local = frame.f_locals
    except Exception:
        return False
    args = [local.get(a, _MISSING) for a in code.co_varnames[:nargs]]
    has_name = any(isinstance(a, str) and a == name for a in args)
    has_value = value is not _MISSING and any(a is value for a in args)
    return has_name and has_value


_LOADS = ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_FAST", "LOAD_DEREF", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW")
_NEUTRAL = ("CACHE", "EXTENDED_ARG", "NOP", "PRECALL")


class _Finished:
    """Stands for the frame of a generator that has run to its end after ``resumed_at``:
    the stores that ran are after that offset (``_store_line`` looks at those only)."""

    f_back = None

    def __init__(self, code, resumed_at):
        self.f_code = code
        self.resumed_at = resumed_at
        self.f_lasti = 1 << 30
        self.f_lineno = code.co_firstlineno
        self.f_globals = {}


def _store_line(frame, names, opnames, owner=None, start=-1):
    """The line of the store that ran last before the frame's current instruction.

    A store is an instruction in ``opnames`` on one of ``names``. Given ``owner`` (the last
    part of the probe's owner, ``Module`` for ``torch.nn.Module.cuda``), a store whose object
    expression ends in that name (``torch.nn.Module.cuda = ...``) is preferred to one on
    another object with the same attribute (``torch.Tensor.cuda = ...``). Only stores after
    offset ``start`` count (a generator resumed there and ran to its end).
    """
    import dis

    line = None
    found = None
    owned = None
    chain: list = []  # the object expression loaded just before the current instruction
    try:
        for instr in dis.get_instructions(frame.f_code):
            number = getattr(instr, "line_number", None) if sys.version_info >= (3, 13) else instr.starts_line
            if number is not None:
                line = number
            if instr.offset > frame.f_lasti:
                break
            if instr.opname in opnames and instr.argval in names and instr.offset > start:
                found = line
                if owner is not None and chain and chain[-1] == owner:
                    owned = line
            if instr.opname in _LOADS:
                chain = [instr.argval]
            elif instr.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                chain.append(instr.argval)
            elif instr.opname not in _NEUTRAL:
                chain = []
    except Exception:
        return None
    return owned if owned is not None else found


# -- the classes swapped in ------------------------------------------------------------
_MODULE_CLASSES: dict = {}
_OUR_CLASSES: set = set()


def _traced_module_classes(base):
    """(writes-only, writes-and-reads, writes-and-reads with the module's ``__getattr__``)
    subclasses of a module class; cached per base."""
    if base in _MODULE_CLASSES:
        return _MODULE_CLASSES[base]
    __setattr__, __delattr__ = _write_hooks(base)
    readers: list = []
    writes = type(base.__name__, (base,), {"__setattr__": __setattr__, "__delattr__": __delattr__, "__module__": base.__module__})
    reads = type(base.__name__, (writes,), {"__getattribute__": _read_hook(base, readers), "__module__": base.__module__})
    reads_own = type(base.__name__, (reads,), {"__getattr__": _ModuleGetattr(), "__module__": base.__module__})
    readers += [reads, reads_own]
    _MODULE_CLASSES[base] = (writes, reads, reads_own)
    _OUR_CLASSES.update((writes, reads, reads_own))
    return _MODULE_CLASSES[base]


def _write_hooks(base):
    """The ``__setattr__`` and ``__delattr__`` of the writes-only class over ``base``: each
    writes through ``base``'s own, then tells the tracer (never while it is busy)."""
    # ``base``'s own, looked up once: through the instance they would find the hooks again
    base_setattr = base.__setattr__
    base_delattr = base.__delattr__

    def __setattr__(self, name, value):
        __tracebackhide__ = True  # pytest leaves our hook out of a failed test's traceback
        tracer = _TRACER
        if name == "__getattr__":
            base_setattr(self, name, value)
            return _follow_own_getattr(self, base)
        if tracer is None or tracer.busy:
            return base_setattr(self, name, value)
        entry = tracer.owners.get(id(self))
        if entry is not None and (name in entry["attrs"] or entry["name"] == "torch"):
            tracer.check(sys._getframe(1))  # writes the hooks missed come before this one
        previous = _static_get(self, name)
        _write_through_hook(tracer, base_setattr, self, name, value)
        tracer.busy = True
        try:
            watched = tracer.module_setattr(self, name, value, previous, sys._getframe(1))
        except Exception:
            watched = False
        finally:
            tracer.busy = False
        if watched:
            tracer.check(sys._getframe(1))

    def __delattr__(self, name):
        tracer = _TRACER
        if name == "__getattr__":
            base_delattr(self, name)
            return _follow_own_getattr(self, base)
        if tracer is None or tracer.busy:
            return base_delattr(self, name)
        previous = _static_get(self, name)
        base_delattr(self, name)
        tracer.busy = True
        try:
            tracer.module_setattr(self, name, _MISSING, previous, sys._getframe(1), deleted=True)
        except Exception:
            pass
        finally:
            tracer.busy = False
    return __setattr__, __delattr__


def _read_hook(base, readers):
    """The ``__getattribute__`` of the reads classes over ``base`` (``readers``: the one without
    and the one with a class ``__getattr__``): reads through ``base``'s own, then tells the
    tracer of a watched name read (never while it is busy).

    A module's own (PEP 562) ``__getattr__`` is called by Python itself, as the class
    ``__getattr__`` of ``readers[1]``, with no frame of ours between (a warning it issues with
    stacklevel=2, as torch's does for has_cuda, names the program's line). Which of the two
    classes the module has follows its dict at every read: the program may add or remove its
    ``__getattr__`` at any time, through ``vars(module)`` too."""
    base_getattribute = base.__getattribute__

    def __getattribute__(self, name):
        __tracebackhide__ = True  # pytest leaves our hook out of a failed test's traceback
        data = base_getattribute(self, "__dict__")
        own = "__getattr__" in data
        klass = type(self)
        late = klass is readers[0] and own  # Python looked for a class __getattr__ and found none
        if late or (klass is readers[1] and not own):
            object.__setattr__(self, "__class__", readers[1] if own else readers[0])
        if own and name not in data and not any(name in k.__dict__ for k in type(self).__mro__):
            if late:
                return data["__getattr__"](name)
            raise AttributeError(name)  # Python now calls the module's __getattr__ (above)
        value = base_getattribute(self, name)
        tracer = _TRACER
        if tracer is None or tracer.busy:
            return value
        entry = tracer.owners.get(id(self))
        if entry is not None and name in entry["reads"]:
            tracer.busy = True
            try:
                tracer.on_read(self, name, value, sys._getframe(1))
            except Exception:
                pass
            finally:
                tracer.busy = False
        return value
    return __getattribute__


class _ModuleGetattr:
    """The class ``__getattr__`` of a reads class over a module with its own: the function in
    the module's dict when Python asks (it binds, then calls it itself). If the program removed
    it since, the module's own lookup, which raises the AttributeError Python would."""

    def __get__(self, module, klass=None):
        if module is None:
            return self
        getattr_ = object.__getattribute__(module, "__dict__").get("__getattr__")
        if getattr_ is not None:
            return getattr_
        return functools.partial(types.ModuleType.__getattribute__, module)


def _follow_own_getattr(module, base) -> None:
    """After the program set or deleted ``module.__getattr__``: the reads class that calls it
    from the next read on (one written through ``vars(module)`` is followed at that read)."""
    classes = _MODULE_CLASSES.get(base)
    if classes and type(module) in classes[1:]:
        object.__setattr__(module, "__class__", _reads_class(module, classes))


def _reads_class(module, classes):
    """The reads class for ``module`` now: with a class ``__getattr__`` if it has its own."""
    return classes[2] if "__getattr__" in object.__getattribute__(module, "__dict__") else classes[1]


def _traced_environ_class(base):
    """``os.environ``'s class with writes and deletes recorded (setdefault, update, pop go through these)."""

    class _Environ(base):
        def __setitem__(self, key, value):
            base.__setitem__(self, key, value)
            tracer = _TRACER
            if tracer is not None:
                tracer.env_write(key, value, sys._getframe(1))

        def __delitem__(self, key):
            base.__delitem__(self, key)
            tracer = _TRACER
            if tracer is not None:
                tracer.env_write(key, None, sys._getframe(1))

    _Environ.__name__ = base.__name__
    _Environ.__qualname__ = base.__qualname__
    _Environ.__module__ = base.__module__
    return _Environ


def _write_through_hook(tracer, base_setattr, owner, name, value) -> None:
    """Make a write a hook will record; the 3.12+ dict watcher must not record it again."""
    tracer._hooked_write = True
    try:
        base_setattr(owner, name, value)
    finally:
        tracer._hooked_write = False


def _traced_driver_class(base):
    """Triton's ``DriverConfig`` with the driver's creation and ``_active``/``_default`` writes recorded."""
    base_setattr = base.__setattr__
    base_getattribute = base.__getattribute__

    def __getattribute__(self, name):
        __tracebackhide__ = True  # pytest leaves our hook out of a failed test's traceback
        tracer = _TRACER
        if (
            name in ("active", "default")
            and tracer is not None
            and not tracer.busy
            and not tracer.driver_created
            and base_getattribute(self, "_default") is None
        ):
            tracer.busy = True
            try:
                tracer.driver_read(self, name, sys._getframe(1))
            except Exception:
                pass
            finally:
                tracer.busy = False
            try:
                return base_getattribute(self, name)
            except Exception as exc:  # no driver: say so, then let the stack see the error
                tracer.emit({"record": "driver", "seq": tracer.driver_seq, "raised": f"{type(exc).__name__}: {exc}"[:500]})
                raise
        return base_getattribute(self, name)

    def __setattr__(self, name, value):
        __tracebackhide__ = True  # pytest leaves our hook out of a failed test's traceback
        tracer = _TRACER
        previous = _static_get(self, name)
        if tracer is None or tracer.busy:
            return base_setattr(self, name, value)
        _write_through_hook(tracer, base_setattr, self, name, value)
        tracer.busy = True
        try:
            tracer.module_setattr(self, name, value, previous, sys._getframe(1))
        except Exception:
            pass
        finally:
            tracer.busy = False

    return type(base.__name__, (base,), {
        "__getattribute__": __getattribute__, "__setattr__": __setattr__,
        "__module__": base.__module__, "__qualname__": base.__qualname__,
    })
