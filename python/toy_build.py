"""A PEP 517 build backend for the toy package, standard library only: the wheel is the
toy/ folder, libtoy's shared library built by CMake from the source tree one level up, and
their metadata. The wheel holds machine code, so it is tagged for this platform
(py3-none-linux_x86_64 and the like: the bindings use ctypes, any Python 3 loads it).

The library links the system's libpcre2-8 and libjansson (not bundled: the wheel is for
machines like the one that built it). MPI is left out of the build (MPI training is
the `toy` command's), so the wheel's library does not need libmpi.

TOY_BUILD_DIR: an existing CMake build folder of this tree to reuse (brought up to date
with `cmake --build DIR --target toy_shared`) instead of configuring a new one; the wheel
then holds that build's library, whatever its options."""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, ".."))
NAME = "toy"


def _version_numbers():
    header = os.path.join(SOURCE, "include", "toy.h")
    if os.path.exists(header):
        text = open(header).read()
        full = re.search(r'#define TOY_VERSION_STRING "([0-9.]+)"', text)
        major = re.search(r"#define TOY_VERSION_MAJOR ([0-9]+)", text)
        if full and major:
            return full.group(1), major.group(1)
    return "0", None


def _version():
    return _version_numbers()[0]


def _metadata(version):
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
            "Summary: Run, serve and train llama-family GGUF models with libtoy (ctypes bindings)\n"
            "Requires-Python: >=3.8\n")


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _tag():
    # sysconfig names the platform "linux-x86_64"; wheel tags spell it "linux_x86_64"
    platform = re.sub(r"[^a-zA-Z0-9_]", "_", sysconfig.get_platform())
    return f"py3-none-{platform}"


def _run(cmd):
    try:
        subprocess.run(cmd, check=True)
    except FileNotFoundError:
        raise RuntimeError(f"{cmd[0]} not found: building libtoy for the wheel needs CMake "
                           "(apt-get install cmake) and a C compiler") from None
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"building libtoy for the wheel failed: {' '.join(cmd)} exited with "
                           f"{e.returncode} (its output is above)") from None


def _build_library(scratch, major):
    """Builds libtoy.so.MAJOR and returns its path: in TOY_BUILD_DIR when set, else in a
    new Release build folder under scratch."""
    build = os.environ.get("TOY_BUILD_DIR")
    if build:
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            raise RuntimeError(f"TOY_BUILD_DIR={build}: not a CMake build folder (no CMakeCache.txt)")
    else:
        if not os.path.exists(os.path.join(SOURCE, "CMakeLists.txt")):
            raise RuntimeError(f"{SOURCE}: no CMakeLists.txt; the wheel is built from python/ inside "
                               "toy's source tree, which holds libtoy's C sources")
        build = os.path.join(scratch, "build")
        _run(["cmake", "-S", SOURCE, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
              # the user's compiler may warn where the project's CI compiler does not
              "-DTOY_WERROR=OFF",
              "-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON"])
    cmd = ["cmake", "--build", build, "--target", "toy_shared"]
    if not os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL"):
        cmd += ["--parallel", str(os.cpu_count() or 1)]
    _run(cmd)
    lib = os.path.join(build, f"libtoy.so.{major}")
    if not os.path.exists(lib):
        raise RuntimeError(f"{lib}: not found after building the toy_shared target")
    return os.path.realpath(lib)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version, major = _version_numbers()
    if major is None:
        raise RuntimeError(f"{os.path.join(SOURCE, 'include', 'toy.h')}: no TOY_VERSION_MAJOR; the wheel "
                           "is built from python/ inside toy's source tree")
    dist = f"{NAME}-{version}.dist-info"
    tag = _tag()
    wheel = f"{NAME}-{version}-{tag}.whl"
    files = []
    for root, _, names in os.walk(os.path.join(HERE, NAME)):
        for n in sorted(names):
            if n.endswith(".py"):
                full = os.path.join(root, n)
                files.append((os.path.relpath(full, HERE), open(full, "rb").read()))
    scratch = tempfile.mkdtemp(prefix="toy-wheel-")
    try:
        # one file under the soname (a wheel holds no symlinks); toy/_lib.py loads it first
        lib = _build_library(scratch, major)
        files.append((f"{NAME}/libtoy.so.{major}", open(lib, "rb").read()))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    files.append((f"{dist}/METADATA", _metadata(version).encode()))
    files.append((f"{dist}/WHEEL", ("Wheel-Version: 1.0\nGenerator: toy_build\nRoot-Is-Purelib: false\n"
                                    f"Tag: {tag}\n").encode()))
    files.append((f"{dist}/top_level.txt", f"{NAME}\n".encode()))
    record = [_record_line(p, d) for p, d in files] + [f"{dist}/RECORD,,"]
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if path.endswith(f".so.{major}") else 0o644) << 16
            z.writestr(info, data)
        z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("toy's Python package has no sdist: python/ alone lacks libtoy's C sources. "
                       "Build a wheel from the source tree instead (pip wheel ./python), or "
                       "install it (pip install ./python)")


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist = f"{NAME}-{_version()}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist), exist_ok=True)
    with open(os.path.join(metadata_directory, dist, "METADATA"), "w") as f:
        f.write(_metadata(_version()))
    return dist
