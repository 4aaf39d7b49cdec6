"""Build the dlk package: libdlk.so from the repository's C sources (its
Makefile, one build) and the CPython binding linked against it.

The library is built from the checkout this file sits in (or the one
DLK_SOURCE_DIR names), or taken from its build/ when make finds that
current; DLK_LIBDIR=DIR uses a libdlk.so already built in DIR instead
(`make shared` leaves one in build/; `make dist` one with dlk.h in
dist/lib).  The package also carries the dlk binary built beside the
library (the `dlk` command runs it).  Building needs what `make deps`
installs: a C compiler, make, pkg-config and the -dev packages."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def source_dir():
    d = Path(os.environ.get("DLK_SOURCE_DIR") or HERE.parent)
    if not (d / "include" / "dlk.h").is_file() or not (d / "Makefile").is_file():
        raise SystemExit(f"dlk: no dlk sources at '{d}' (set DLK_SOURCE_DIR "
                         "to the repository's root)")
    return d


def include_dir():
    """dlk.h: beside a prebuilt library (a `make dist` tree), else the
    sources'."""
    libdir = os.environ.get("DLK_LIBDIR")
    if libdir and (Path(libdir) / "dlk.h").is_file():
        return Path(libdir)
    return source_dir() / "include"


def store_env_source():
    """store_env.c, the dlk command's reader of AWS_*, DLK_S3_* and
    ~/.aws (the library reads none of them): beside the package in a
    `make dist` tree, else the sources'."""
    beside = HERE / "dlk" / "store_env.c"
    if beside.is_file():
        return beside
    return source_dir() / "env" / "store_env.c"


def version():
    m = re.search(r'#define DLK_VERSION_STRING "([^"]+)"',
                  (include_dir() / "dlk.h").read_text())
    return m.group(1)


def bundled_deps(lib, libdir):
    """The libraries that lib needs and that libdir carries beside it: a
    `make dist` tree bundles those a GPU machine may lack (TurboJPEG,
    libpng), and the package must carry them too, since the copy of lib
    in the package looks for them beside itself, not in libdir."""
    try:
        out = subprocess.run(["readelf", "-d", str(lib)], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    names = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    return [Path(libdir) / n for n in names if (Path(libdir) / n).is_file()]


def make_targets(build):
    """The files of a build that the package takes: the library under its
    full version and the dlk binary."""
    return [f"{build}/libdlk.so.{version()}", f"{build}/dlk"]


def make_env():
    """The environment make runs in: without a calling make's command-line
    variables (MAKEFLAGS carries `make SAN=1 test`'s SAN to every make
    below it): the package holds a plain build, never a sanitized one,
    which Python could not load without the sanitizer's runtime."""
    return {k: v for k, v in os.environ.items()
            if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "SAN", "BUILD")}


def current_build(src):
    """The sources' build/ when make finds its library and binary up to
    date (`make` ran after the last change): taken as it is, not built
    again."""
    if not all((src / t).is_file() for t in make_targets("build")):
        return None
    r = subprocess.run(["make", "-C", str(src), "-q", "BUILD=build"]
                       + make_targets("build"), env=make_env(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return src / "build" if r.returncode == 0 else None


class BuildDlk(build_ext):
    def run(self):
        ver = version()
        soname = "libdlk.so." + ver.split(".")[0]
        libdir = os.environ.get("DLK_LIBDIR")
        deps = []
        if libdir:
            lib = Path(libdir) / soname
            if not lib.exists():
                raise SystemExit(f"dlk: DLK_LIBDIR: no '{lib}'")
            deps = bundled_deps(lib, libdir)
        else:
            src = source_dir()
            out = current_build(src)
            if out:
                print(f"dlk: {out} is current: the package takes its "
                      f"{soname} and dlk, nothing is built", file=sys.stderr)
            else:
                out = Path(self.build_temp).resolve() / "libdlk"
                jobs = os.environ.get("DLK_MAKE_JOBS") or str(os.cpu_count() or 1)
                subprocess.check_call(["make", "-C", str(src), "-j" + jobs,
                                       "BUILD=" + str(out)] + make_targets(out),
                                      env=make_env())
            lib = out / soname
        # the dlk binary built beside the library, where there is one (a
        # dist tree keeps its own in dist/bin)
        exe = lib.parent / "dlk"
        # the package carries the library (and what a dist tree bundles
        # with it); the binding finds them through its rpath ($ORIGIN), so
        # no system install is needed
        pkg = Path(self.build_lib) / "dlk"
        pkg.mkdir(parents=True, exist_ok=True)
        files = [(lib, soname)] + [(d, d.name) for d in deps]
        if exe.is_file():
            (pkg / "bin").mkdir(exist_ok=True)
            files.append((exe, "bin/dlk"))
        for f, name in files:
            for dest in [pkg / name] + ([HERE / "dlk" / name] if self.inplace else []):
                dest.parent.mkdir(exist_ok=True)
                shutil.copy(f.resolve(), dest)
        env_src = store_env_source()
        for ext in self.extensions:
            ext.sources.append(str(env_src))
            ext.include_dirs.append(str(env_src.parent))
            ext.include_dirs.append(str(include_dir()))
            ext.library_dirs.append(str(lib.parent))
            ext.libraries.append(":" + soname)
        super().run()


# The binding uses the stable ABI of CPython 3.11 (the buffer protocol
# joined it there): one build, `_core.abi3.so` in a wheel tagged
# cp311-abi3, serves every CPython from 3.11 on.  A call outside that
# API is an undeclared function there, which the compiler rejects.
LIMITED_API = "0x030B0000"
ABI3_TAG = "cp311"

setup(
    version=version(),
    ext_modules=[Extension(
        "dlk._core", ["dlk/_core.c"],
        py_limited_api=True,
        define_macros=[("Py_LIMITED_API", LIMITED_API)],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra",
                            "-Werror=implicit-function-declaration",
                            "-Wno-missing-field-initializers",
                            "-Wno-cast-function-type"],
        # DT_RPATH, not DT_RUNPATH: the loader searches it for libdlk's
        # own dependencies too (the bundled ones beside it), where a
        # RUNPATH serves only the binding's direct ones
        extra_link_args=["-Wl,--disable-new-dtags,-rpath,$ORIGIN"],
    )],
    cmdclass={"build_ext": BuildDlk},
    options={"bdist_wheel": {"py_limited_api": ABI3_TAG}},
)
