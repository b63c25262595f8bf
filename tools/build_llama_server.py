"""Opt-in: build llama.cpp's ``llama-server`` from the ``llama-cpp-python`` sdist, once per machine.

Nothing in ``make run``, ``make test`` or ``make bench`` needs this: they use llama.cpp's
server from the ``xllamacpp`` wheel. It is for machines without such a wheel;
harness/llama_server.py runs the binary built here when the wheel is missing.

The PyPI sdist of llama-cpp-python carries the whole llama.cpp tree
(``vendor/llama.cpp``). Only the ``llama-server`` target is built, with the web UI,
OpenSSL, curl, tests and examples off (with the UI on, the build tries to download),
static libraries. The binary is cached outside the clone, keyed by version (where and which
version: ``harness/llama_build.py``, which the harness reads too). Takes about 14 minutes on
2 cores; cmake's progress is shown as it goes. Only that one sdist is fetched as source
(``--no-binary llama-cpp-python``); its build requirements come as wheels.

    python -m tools.build_llama_server          # prints the binary's path when done
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from harness.llama_build import VERSION, binary_path


def _run(cmd: list[str], **kwargs) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def build(jobs: int) -> Path:
    target = binary_path()
    if target.is_file() and os.access(target, os.X_OK):
        return target
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed to build llama-server (apt-get install cmake g++)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="llama-build-", dir=target.parent) as tmp:
        work = Path(tmp)
        print(f"[1/3] fetching the llama-cpp-python {VERSION} sdist", flush=True)
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", "llama-cpp-python",
              f"llama-cpp-python=={VERSION}", "-d", str(work)])
        sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
        print("[2/3] unpacking vendor/llama.cpp", flush=True)
        prefix = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
            tar.extractall(work, members=members, filter="data")
        source = work / prefix
        build_dir = work / "build"
        print(f"[3/3] building llama-server with {jobs} jobs (several minutes; cmake shows [percent])", flush=True)
        _run(["cmake", "-S", str(source), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
              "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF",
              "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
              "-DGGML_NATIVE=ON"], stdout=subprocess.DEVNULL)
        _run(["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", str(jobs)])
        built = next(build_dir.rglob("llama-server"))
        shutil.copy2(built, target.with_suffix(".tmp"))
        os.replace(target.with_suffix(".tmp"), target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--path", action="store_true", help="print where the binary is (or would be) and exit")
    args = parser.parse_args()
    if args.path:
        print(binary_path())
        return
    print(build(args.jobs))


if __name__ == "__main__":
    main()
