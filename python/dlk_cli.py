"""The `dlk` command of the package: the dlk binary it carries (built
with the library it holds, in dlk/bin/), run with the command's
arguments.  A module of its own beside the package, so that the command
starts without importing dlk (numpy and the library)."""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dlk", "bin", "dlk")
    if not os.access(exe, os.X_OK):
        sys.exit("dlk: this package carries no dlk binary (it was installed "
                 "over a DLK_LIBDIR without one: the command is that "
                 "build's, e.g. dist/bin/dlk)")
    os.execv(exe, ["dlk"] + sys.argv[1:])
