"""Notebook 07's Triton kernel compiled on a GPU: checked against PyTorch, then timed at N = 1k-16k.

Not part of `make test` (CI has no GPU). Run it where a CUDA GPU and Triton are installed:

    python tests/gpu_bench_07.py [--out FOLDER]

It takes the kernel and its wrapper from the solution notebook's answer cell (the code a learner writes), checks it
on the GPU (float32 and float16, causal and not, lengths that are not multiples of the block, d = 16/24/64/128,
scores far from zero), then times it against `F.scaled_dot_product_attention` with each of PyTorch's backends
(FlashAttention-2, memory-efficient, cuDNN where available, and the unfused math path while it fits), and against
the `flash_attn` package when it is installed. Times are medians of `triton.testing.do_bench`. The table it prints
is the one stored in notebook 07, section 10.
"""

from __future__ import annotations

import argparse
import json
import linecache
import math
import os
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile, never interpret

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "solutions" / "07_flash_attention" / "07_flash_attention.ipynb"
SIZES = (1024, 2048, 4096, 8192, 16384)
B, H, D = 4, 16, 64


def learner_kernel():
    """`flash_attention_triton` as the solution notebook's answer cell defines it."""
    import triton
    import triton.language as tl

    cells = json.loads(NOTEBOOK.read_text())["cells"]
    source = next("".join(c["source"]) for c in cells
                  if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "flash_attention_triton")
    filename = "<07_flash_attention: flash_attention_triton>"
    # triton.jit reads the kernel's source through inspect, as IPython's cells are read: from linecache.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"math": math, "torch": torch, "triton": triton, "tl": tl}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["flash_attention_triton"]


def check(fn) -> list[str]:
    """Failures of `fn` against torch's attention on the GPU (empty when it is right)."""
    failures = []
    cases = [((1, 1, 16, 16), (1, 1, 16, 16), False), ((2, 2, 21, 16), (2, 2, 35, 16), False),
             ((1, 2, 40, 16), (1, 2, 40, 16), True), ((3, 37, 24), (3, 53, 24), False),
             ((2, 4, 300, 64), (2, 4, 300, 64), True), ((1, 2, 129, 128), (1, 2, 257, 128), False)]
    # tl.dot rounds float32 inputs like TF32 on a GPU (10 mantissa bits): about 1e-3 per dot product at d = 64.
    for dtype, atol in ((torch.float32, 5e-3), (torch.float16, 2e-2)):
        for q_shape, k_shape, causal in cases:
            q = torch.randn(q_shape, device="cuda", dtype=dtype)
            k, v = (torch.randn(k_shape, device="cuda", dtype=dtype) for _ in range(2))
            got = fn(q, k, v, causal).float()
            want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal).float()
            err = (got - want).abs().max().item()
            if not err <= atol:
                failures.append(f"{dtype} q {q_shape} k {k_shape} causal={causal}: max |diff| {err:.1e} > {atol}")
    qx = torch.randint(-3, 4, (1, 1, 24, 16), device="cuda").float()
    kx = torch.randint(-3, 4, (1, 1, 40, 16), device="cuda").float()
    vx = torch.randn(1, 1, 40, 16, device="cuda")
    kx[..., 0] = 100.0
    qx[..., 0] = torch.tensor([-400.0, 400.0, 0.0], device="cuda").repeat(8)
    err = (fn(qx, kx, vx, False) - F.scaled_dot_product_attention(qx.double(), kx.double(), vx.double())).abs().max()
    if not err <= 2e-3:
        failures.append(f"scores near -1e4/+1e4: max |diff| {err:.1e}")
    return failures


def backends():
    """(name, callable) for each way torch can compute attention here, plus flash_attn when installed."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def with_backend(backend):
        def run(q, k, v):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return run

    found = [("torch default", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
             ("torch FA-2", with_backend(SDPBackend.FLASH_ATTENTION)),
             ("torch mem-eff", with_backend(SDPBackend.EFFICIENT_ATTENTION))]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        found.append(("torch cuDNN", with_backend(SDPBackend.CUDNN_ATTENTION)))
    found.append(("torch math", with_backend(SDPBackend.MATH)))
    try:
        from flash_attn import flash_attn_func  # (B, L, h, d) layout

        found.append(("flash_attn " + __import__("flash_attn").__version__,
                      lambda q, k, v: flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                      causal=True).transpose(1, 2)))
    except ImportError:
        print("flash_attn (FlashAttention-2's own package) is not installed here: torch's FA-2 backend stands for it")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the table (markdown) and the figures (JSON) here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to compile or time")
        return 2
    import triton
    from triton.testing import do_bench

    name = torch.cuda.get_device_name()
    print(f"{name}; torch {torch.__version__}, triton {triton.__version__}, CUDA {torch.version.cuda}")
    yours = learner_kernel()
    failures = check(yours)
    print("checks on the GPU: " + ("all passed" if not failures else "FAILED\n  " + "\n  ".join(failures)))
    others = backends()
    rows = []
    for n in SIZES:
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16) for _ in range(3))
        flops = 4 * B * H * n * n * D / 2  # two matmuls of 2*n*n*d FLOPs each, half of them under the causal mask
        row = {"N": n, "yours": do_bench(lambda: yours(q, k, v, True))}
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True).float()
        row["max |diff|"] = (yours(q, k, v, True).float() - ref).abs().max().item()
        for label, fn in others:
            if label == "torch math" and n > 8192:
                row[label] = None  # its (B, h, N, N) matrices: 32 GiB each at N = 16k
                continue
            try:
                row[label] = do_bench(lambda fn=fn: fn(q, k, v))
            except RuntimeError as exc:  # a backend that does not support this GPU or shape
                row[label] = None
                print(f"{label} at N = {n}: {str(exc).splitlines()[0][:120]}")
        row["yours TFLOP/s"] = flops / row["yours"] / 1e9
        row["FA-2 TFLOP/s"] = flops / row["torch FA-2"] / 1e9 if row.get("torch FA-2") else None
        rows.append(row)
        torch.cuda.empty_cache()
    labels = ["yours"] + [label for label, _ in others]
    head = f"| N | {' | '.join(l + ' (ms)' for l in labels)} | yours TFLOP/s | FA-2 TFLOP/s | max abs diff |"
    lines = [f"{name}, torch {torch.__version__}, triton {triton.__version__}; causal, fp16, "
             f"(B, h, N, d) = ({B}, {H}, N, {D}); median ms of triton.testing.do_bench", "", head,
             "|" + "---|" * (len(labels) + 4)]
    fmt = lambda x, spec: "–" if x is None else format(x, spec)
    for r in rows:
        lines.append(f"| {r['N']} | " + " | ".join(fmt(r[l], ".3f") for l in labels)
                     + f" | {fmt(r['yours TFLOP/s'], '.0f')} | {fmt(r['FA-2 TFLOP/s'], '.0f')} | {r['max |diff|']:.1e} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_bench_07.md").write_text(table + "\n")
        (args.out / "gpu_bench_07.json").write_text(json.dumps({"device": name, "torch": torch.__version__,
                                                                "triton": triton.__version__, "failures": failures,
                                                                "rows": rows}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
