#!/usr/bin/env python3
"""The SASS loops of our kernels, counted here without a GPU: a kernel's time at batch 1 is often
its instructions, not its bytes (results/2026-11-29-direct-lean), and the device budget is
small. Compiles one kernels/cuda/*.cu to an sm_90a cubin with the release build's flags (build/
must be configured), disassembles it with nvdisasm and prints, for every kernel whose mangled name
matches REGEX, its instruction count and its loops (a backward branch and the instructions it
spans, with the IDP.4A / HMMA / FFMA among them), innermost first: the smallest spans that hold
any of those. A span also counts code it jumps over (a feature's store, a divergent fallback),
so compare a loop with the same loop of another build.

nvdisasm: $NVDISASM, else on PATH, else the pip wheel `nvidia-cuda-nvdisasm` (the CUDA toolkit
here ships neither nvdisasm nor cuobjdump), downloaded once into ~/.cache/roseinfer/nvdisasm.

usage: scripts/sass_loops.py FILE.cu REGEX [--loops N] [--sass OUT.sass]
  e.g. scripts/sass_loops.py kernels/cuda/gemv_quant.cu 'gemv_direct_kernel.*BlockQ4_K.*bfloat16.*Li1ELi512'
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = pathlib.Path.home() / ".cache" / "roseinfer" / "nvdisasm"
INSTRUCTION = re.compile(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
LABEL = re.compile(r"^(\.L_x_\d+):")
BRANCH = re.compile(r"\bBRA\s+`?\(?(\.L_x_\d+)")
COUNTED = ("IDP.4A", "HMMA", "FFMA")


def find_nvdisasm() -> str:
    if os.environ.get("NVDISASM"):
        return os.environ["NVDISASM"]
    on_path = shutil.which("nvdisasm")
    if on_path:
        return on_path
    cached = next(CACHE.glob("**/bin/nvdisasm"), None)
    if cached is None:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(CACHE),
                        "nvidia-cuda-nvdisasm"], check=True)
        wheel = next(CACHE.glob("nvidia_cuda_nvdisasm-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(CACHE / "unpacked")
        cached = next(CACHE.glob("**/bin/nvdisasm"))
    cached.chmod(0o755)
    return str(cached)


def compile_cubin(source: pathlib.Path, cubin: pathlib.Path) -> None:
    build = ROOT / "build"
    rsp = build / "CMakeFiles" / "roseinfer_core.dir" / "includes_CUDA.rsp"
    if not rsp.exists():
        sys.exit(f"{rsp}: missing; configure the release build first (make build)")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run([nvcc, "--options-file", str(rsp), f"-I{ROOT}", "-O3", "-DNDEBUG",
                    "--generate-code=arch=compute_90a,code=[sm_90a]", "--expt-relaxed-constexpr",
                    "-std=c++17", "-cubin", str(source), "-o", str(cubin)], check=True, cwd=build)


def functions(sass: list[str]):
    """(name, lines) of every function in nvdisasm's output."""
    starts = [i for i, line in enumerate(sass) if line.startswith(".text.")]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(sass)
        yield sass[start].rstrip(":").removeprefix(".text."), sass[start:end]


def loops(lines: list[str]):
    """(instructions, counted opcodes, label) of each backward branch's span."""
    labels = {}
    instructions = []  # (line index, text)
    for i, line in enumerate(lines):
        label = LABEL.match(line)
        if label:
            labels[label.group(1)] = i
        instruction = INSTRUCTION.match(line)
        if instruction:
            instructions.append((i, instruction.group(1)))
    found = []
    for i, text in instructions:
        branch = BRANCH.search(text)
        if branch and labels.get(branch.group(1), i) < i:
            span = [t for j, t in instructions if labels[branch.group(1)] < j <= i]
            counts = {op: sum(op in t for t in span) for op in COUNTED}
            found.append((len(span), counts, branch.group(1)))
    with_work = [loop for loop in found if any(loop[1].values())]
    return len(instructions), sorted(with_work, key=lambda loop: loop[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=pathlib.Path)
    parser.add_argument("regex")
    parser.add_argument("--loops", type=int, default=6, help="loops printed per kernel")
    parser.add_argument("--sass", type=pathlib.Path, help="also keep the disassembly here")
    args = parser.parse_args()
    pattern = re.compile(args.regex)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = pathlib.Path(tmp) / "kernels.cubin"
        compile_cubin(args.source.resolve(), cubin)
        sass = subprocess.run([find_nvdisasm(), "-c", str(cubin)], check=True, capture_output=True,
                              text=True).stdout
    if args.sass:
        args.sass.write_text(sass)
    matched = 0
    for name, lines in functions(sass.split("\n")):
        if not pattern.search(name):
            continue
        matched += 1
        total, found = loops(lines)
        print(f"{name}\n  {total} instructions")
        for size, counts, label in found[:args.loops]:
            extra = ", ".join(f"{op} {n}" for op, n in counts.items() if n)
            print(f"  loop at {label}: {size} instructions" + (f" ({extra})" if extra else ""))
    if matched == 0:
        sys.exit(f"no kernel of {args.source} matches {args.regex!r}")


if __name__ == "__main__":
    main()
