"""A PEP 517 build backend for the toy package, standard library only: the wheel is
the toy/ folder and its metadata. The version is include/toy.h's when the source tree is
there."""

import base64
import hashlib
import os
import re
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "toy"


def _version():
    header = os.path.join(HERE, "..", "include", "toy.h")
    if os.path.exists(header):
        m = re.search(r'#define TOY_VERSION_STRING "([0-9.]+)"', open(header).read())
        if m:
            return m.group(1)
    return "0"


def _metadata(version):
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
            "Summary: Run, serve and train llama-family GGUF models with libtoy (ctypes bindings)\n"
            "Requires-Python: >=3.8\n")


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    dist = f"{NAME}-{version}.dist-info"
    wheel = f"{NAME}-{version}-py3-none-any.whl"
    files = []
    for root, _, names in os.walk(os.path.join(HERE, NAME)):
        for n in sorted(names):
            if n.endswith(".py"):
                full = os.path.join(root, n)
                files.append((os.path.relpath(full, HERE), open(full, "rb").read()))
    files.append((f"{dist}/METADATA", _metadata(version).encode()))
    files.append((f"{dist}/WHEEL", b"Wheel-Version: 1.0\nGenerator: toy_build\nRoot-Is-Purelib: true\n"
                                    b"Tag: py3-none-any\n"))
    files.append((f"{dist}/top_level.txt", f"{NAME}\n".encode()))
    record = [_record_line(p, d) for p, d in files] + [f"{dist}/RECORD,,"]
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(path, data)
        z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return wheel


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist = f"{NAME}-{_version()}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist), exist_ok=True)
    with open(os.path.join(metadata_directory, dist, "METADATA"), "w") as f:
        f.write(_metadata(_version()))
    return dist
