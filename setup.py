"""The extension module attnscope._attnscope for `pip install --no-build-isolation .` (metadata in pyproject.toml).

Compiles python/src/*.cpp against the header-only library in include/ with Eigen 3.4 (pkg-config eigen3, else
/usr/include/eigen3), zlib and PCRE2 (libpcre2-8), as the CMake build does:
- unity translation units of three sources each, in the order of python/CMakeLists.txt (the CMake build's
  UNITY_BUILD_BATCH_SIZE 3), so that the headers they share are parsed once per batch;
- the compiled part src/extern_templates/*.cpp with ATTNSCOPE_EXTERN_TEMPLATES, as the CMake build links it: the
  costly instantiations (transformer forward, report columns, fit, decompositions, file readers) are compiled once,
  each in its own translation unit, instead of inside the bindings (where one unity batch took 3.5 GB);
- -O2 without debug information (pybind11's -g0);
- OpenMP (-fopenmp) when the compiler has it, so that threads= is honoured (ATTNSCOPE_OPENMP=0 turns it off);
- no -march=native, so the wheel runs on any x86-64; ATTNSCOPE_NATIVE=1 in the environment adds it.
The batches compile in parallel, NPY_NUM_BUILD_JOBS at a time (default 2). `pip install -v` shows each step.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from glob import glob

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = "build-python"  # not build/ (the CMake build folder of docs/ and scripts/)
UNITY_BATCH = 3


def pkg_config(flag, package, fallback):
    if shutil.which("pkg-config"):
        result = subprocess.run(["pkg-config", flag, package], capture_output=True, text=True)
        if result.returncode == 0:
            return [item[2:] for item in result.stdout.split()]
    return fallback


def binding_sources():
    """python/src/*.cpp in the order of python/CMakeLists.txt's pybind11_add_module (others after, sorted)."""
    listed = []
    cmake_lists = os.path.join(ROOT, "python", "CMakeLists.txt")
    if os.path.exists(cmake_lists):  # absent from a source distribution: then sorted by name
        with open(cmake_lists) as cmake:
            found = re.search(r"pybind11_add_module\(([^)]*)\)", cmake.read())
        listed = re.findall(r"src/(\w+\.cpp)", found.group(1)) if found else []
    present = sorted(os.path.basename(path) for path in glob(os.path.join(ROOT, "python", "src", "*.cpp")))
    return [name for name in listed if name in present] + [name for name in present if name not in listed]


def unity_sources():
    """One generated source per batch of UNITY_BATCH binding sources, each #including its sources (rewritten only
    when its text changes, so that an unchanged batch is not recompiled)."""
    folder = os.path.join(ROOT, BUILD, "unity")
    os.makedirs(folder, exist_ok=True)
    names = binding_sources()
    batches = []
    for start in range(0, len(names), UNITY_BATCH):
        text = "".join(f'#include "{os.path.join(ROOT, "python", "src", name)}"\n'
                       for name in names[start:start + UNITY_BATCH])
        path = os.path.join(folder, f"unity_{start // UNITY_BATCH}.cpp")
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as out:
                out.write(text)
        batches.append(os.path.relpath(path, ROOT))
    return batches


def has_openmp():
    """True when the C++ compiler builds and links a program with -fopenmp."""
    if os.environ.get("ATTNSCOPE_OPENMP") == "0":
        return False
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not compiler:
        return False
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "openmp.cpp")
        with open(source, "w") as out:
            out.write("#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n")
        result = subprocess.run([compiler, "-fopenmp", source, "-o", os.path.join(folder, "openmp")],
                                capture_output=True)
    return result.returncode == 0


eigen = pkg_config("--cflags-only-I", "eigen3", ["/usr/include/eigen3"])
pcre2_include = pkg_config("--cflags-only-I", "libpcre2-8", [])
pcre2_libraries = pkg_config("--libs-only-l", "libpcre2-8", ["pcre2-8"])
compile_args = ["-O2", "-g0", "-Wall", "-Wextra", "-Wshadow", "-Wno-maybe-uninitialized"]
link_args = []
if has_openmp():
    compile_args.append("-fopenmp")
    link_args.append("-fopenmp")
else:
    print("attnscope setup.py: the compiler has no OpenMP; threads= above 1 will be refused", file=sys.stderr)
if os.environ.get("ATTNSCOPE_NATIVE") == "1":
    compile_args.append("-march=native")

ParallelCompile("NPY_NUM_BUILD_JOBS", default=2).install()
# Every header and binding source the extension includes is a dependency: setuptools rebuilds the extension when one
# of them is newer than the built module (otherwise a change would leave a stale module in build-python/).
depends = sorted(
    os.path.relpath(path, ROOT)
    for pattern in ("include/**/*.hpp", "python/src/*.hpp", "python/src/*.cpp", "src/extern_templates/*.cpp")
    for path in glob(os.path.join(ROOT, pattern), recursive=True)
)
compiled_part = sorted(os.path.relpath(path, ROOT) for path in glob(os.path.join(ROOT, "src", "extern_templates", "*.cpp")))
extension = Pybind11Extension(
    "attnscope._attnscope",
    unity_sources() + compiled_part,
    depends=depends,
    include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "python", "src")] + eigen + pcre2_include,
    libraries=["z"] + pcre2_libraries,
    define_macros=[("ATTNSCOPE_EXTERN_TEMPLATES", None)],
    extra_compile_args=compile_args,
    extra_link_args=link_args,
    cxx_std=17,
)
setup(ext_modules=[extension], cmdclass={"build_ext": build_ext}, options={"build": {"build_base": BUILD}})
