"""Build the dlk package: libdlk.so from the repository's C sources (its
Makefile, one build) and the CPython binding linked against it.

The library is built from the checkout this file sits in (or the one
DLK_SOURCE_DIR names); DLK_LIBDIR=DIR uses a libdlk.so already built in
DIR instead (`make shared` leaves one in build/; `make dist` one with
dlk.h in dist/lib).  Needs what `make deps` installs: a C compiler, make,
pkg-config and the -dev packages."""
import os
import re
import shutil
import subprocess
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
    return source_dir() / "cmd" / "store_env.c"


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
            out = Path(self.build_temp).resolve() / "libdlk"
            jobs = os.environ.get("DLK_MAKE_JOBS") or str(os.cpu_count() or 1)
            subprocess.check_call(["make", "-C", str(src), "-j" + jobs,
                                   "BUILD=" + str(out), "shared"])
            lib = out / soname
        # the package carries the library (and what a dist tree bundles
        # with it); the binding finds them through its rpath ($ORIGIN), so
        # no system install is needed
        pkg = Path(self.build_lib) / "dlk"
        pkg.mkdir(parents=True, exist_ok=True)
        for f, name in [(lib, soname)] + [(d, d.name) for d in deps]:
            shutil.copyfile(f.resolve(), pkg / name)
            if self.inplace:
                shutil.copyfile(f.resolve(), HERE / "dlk" / name)
        env_src = store_env_source()
        for ext in self.extensions:
            ext.sources.append(str(env_src))
            ext.include_dirs.append(str(env_src.parent))
            ext.include_dirs.append(str(include_dir()))
            ext.library_dirs.append(str(lib.parent))
            ext.libraries.append(":" + soname)
        super().run()


setup(
    version=version(),
    ext_modules=[Extension(
        "dlk._core", ["dlk/_core.c"],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra",
                            "-Wno-missing-field-initializers",
                            "-Wno-cast-function-type"],
        # DT_RPATH, not DT_RUNPATH: the loader searches it for libdlk's
        # own dependencies too (the bundled ones beside it), where a
        # RUNPATH serves only the binding's direct ones
        extra_link_args=["-Wl,--disable-new-dtags,-rpath,$ORIGIN"],
    )],
    cmdclass={"build_ext": BuildDlk},
)
