"""The extension module attnscope._attnscope for `pip install --no-build-isolation .` (metadata in pyproject.toml).

Compiles python/src/*.cpp, one translation unit per module as the CMake build does, against the header-only library
in include/ with Eigen 3.4 (pkg-config eigen3, else /usr/include/eigen3), zlib and PCRE2 (libpcre2-8). Flags follow
the CMake build without -march=native, so the wheel runs on any x86-64; ATTNSCOPE_NATIVE=1 in the environment adds
-march=native. The nine translation units compile in parallel, NPY_NUM_BUILD_JOBS at a time (default 2).
"""
import os
import shutil
import subprocess
from glob import glob

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))


def pkg_config(flag, package, fallback):
    if shutil.which("pkg-config"):
        result = subprocess.run(["pkg-config", flag, package], capture_output=True, text=True)
        if result.returncode == 0:
            return [item[2:] for item in result.stdout.split()]
    return fallback


eigen = pkg_config("--cflags-only-I", "eigen3", ["/usr/include/eigen3"])
pcre2_include = pkg_config("--cflags-only-I", "libpcre2-8", [])
pcre2_libraries = pkg_config("--libs-only-l", "libpcre2-8", ["pcre2-8"])
compile_args = ["-O2", "-Wall", "-Wextra", "-Wshadow", "-Wno-maybe-uninitialized"]
if os.environ.get("ATTNSCOPE_NATIVE") == "1":
    compile_args.append("-march=native")

ParallelCompile("NPY_NUM_BUILD_JOBS", default=2).install()
# Every header the extension includes is a dependency: setuptools rebuilds the extension when a source or one of
# these is newer than the built module (otherwise a header change would leave a stale module in build-python/).
headers = sorted(
    os.path.relpath(path, ROOT)
    for pattern in ("include/**/*.hpp", "python/src/*.hpp")
    for path in glob(os.path.join(ROOT, pattern), recursive=True)
)
extension = Pybind11Extension(
    "attnscope._attnscope",
    sorted(os.path.relpath(path, ROOT) for path in glob(os.path.join(ROOT, "python", "src", "*.cpp"))),
    depends=headers,
    include_dirs=[os.path.join(ROOT, "include")] + eigen + pcre2_include,
    libraries=["z"] + pcre2_libraries,
    extra_compile_args=compile_args,
    cxx_std=17,
)
# build-python/, not build/ (the CMake build folder of docs/ and scripts/)
setup(ext_modules=[extension], cmdclass={"build_ext": build_ext}, options={"build": {"build_base": "build-python"}})
