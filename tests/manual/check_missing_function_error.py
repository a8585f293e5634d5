"""By hand, not collected by pytest (it compiles a C++ extension: about 1.5 minutes on 2 cores):
what a Python caller sees when a C++ kernel, registered through the dispatcher, looks up a
FlagGems function the installed flag_gems lacks, the way torch_fl's ``GetFunc``
(``csrc/aten/backends/flagos/python_op_caller.cc``, 1adbc97) does: pybind11's import and
``attr``, the retry on ``flag_gems.ops``. Run with flag_gems 5.0.2 (which has no ``log1p``)::

    GEMS_VENDOR=nvidia FLAGGEMS_DB_URL=sqlite:////tmp/fd.db PYTHONPATH=$PWD \
        python3 tests/manual/check_missing_function_error.py

Seen on 2026-12-01 (torch 2.13.0+cpu, Python 3.11)::

    AttributeError | AttributeError: module 'flag_gems.ops' has no attribute 'log1p' | flag_gems.ops.log1p

(the exception type, the survey's case detail, and what ``model.missing_from_detail``
reads from it). The kernel sits on the CPU key here, PrivateUse1 in torch_fl; the way the
exception crosses the dispatcher into Python is the same.
"""
import tempfile

import torch
from torch.utils.cpp_extension import load_inline
src = r'''
#include <torch/extension.h>
#include <torch/library.h>
#include <pybind11/pybind11.h>
namespace py = pybind11;
at::Tensor bound_log1p(const at::Tensor& self) {
  py::gil_scoped_acquire gil;
  py::module_ ops = py::module_::import("flag_gems.ops");
  py::object func;
  try {
    py::module_ mod = py::module_::import("flag_gems.ops.log1p");
    func = mod.attr("log1p");
  } catch (const py::error_already_set&) {
    PyErr_Clear();
    func = ops.attr("log1p");
  }
  return self;
}
TORCH_LIBRARY(fdcheck, m) { m.def("log1p(Tensor self) -> Tensor"); }
TORCH_LIBRARY_IMPL(fdcheck, CPU, m) { m.impl("log1p", bound_log1p); }
'''
load_inline("fdcheck", cpp_sources=[src], functions=[], verbose=False, is_python_module=False,
            build_directory=tempfile.mkdtemp(prefix="fdcheck-"))
try:
    torch.ops.fdcheck.log1p.default(torch.ones(2))
except Exception as exc:
    from flagos_doctor.survey.child.engine import describe
    from flagos_doctor.results import model
    print(type(exc).__name__, "|", describe(exc), "|", model.missing_from_detail(describe(exc)))
