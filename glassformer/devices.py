"""Where the work runs: the threads of this process (`use_threads`) and the device of the PyTorch
engine (`check_device`: the CPU, or a CUDA GPU that PyTorch sees).

Threads belong to the process, not to one model: PyTorch keeps one count of intra-op threads
and NumPy's BLAS (OpenBLAS, MKL) one pool, so `use_threads` sets both and the last call wins.
BLAS, where the reference engine's matrix products run, is set through threadpoolctl when it is
installed (the serve and test extras); without it BLAS keeps what it read when NumPy loaded
(OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS), and `use_threads` says so. PyTorch is
not imported to be set: when it is not loaded yet, its count is set the moment it is (`_Hook`),
so that a NumPy-only command (explain, walkthrough) starts as fast with --threads as without.

The default (`default_threads`, when no count is given): the cores this process may use less the
other tasks runnable when it starts, at least 1. With today's one thread per core, a second
runnable process makes the threads wait for each other (a command ran 2.2-2.5x slower beside one
spinning process); taking one thread fewer costs at most 1.10x the best idle and stays within 1.03x
of one thread busy (docs/benchmarks.md, "Threads on a busy machine"). A count the environment
sets (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS) is kept.

The device is "cpu" (the default), "cuda" or "cuda:N". The PyTorch engine runs there (its
weights, inputs and KV cache; results come back to the CPU as NumPy); the reference engine is
NumPy float64 on the CPU, and int8 uses PyTorch's CPU kernels, so neither goes to a GPU.

Deliberately not here: putting a model or its inputs on the device (`inference.torch_engine` and
the functions that feed it), parsing options (cli/), the threads' default (the command line's).
"""

from __future__ import annotations

import os
import re
import sys
import time

from glassformer.errors import INSTALL_TORCH, GlassformerError, InputError, param

DEVICE_NAMES = "'cpu', 'cuda' or 'cuda:N'"  # what a device may be called
_DEVICE = re.compile(r"cpu|cuda(:\d+)?")


def is_device_name(value) -> bool:
    """A device as glassformer takes one: "cpu", "cuda" or "cuda:N" (a str)."""
    return isinstance(value, str) and _DEVICE.fullmatch(value) is not None


def check_device(device: str, engine: str = "auto", dtype: str | None = None) -> str:
    """`device` if the PyTorch engine can run there with this `engine` and `dtype`, else one
    line saying why not and what to use: the reference engine and int8 run on the CPU only,
    and "cuda:N" needs PyTorch built with CUDA and a GPU number N that it sees."""
    if not is_device_name(device):
        raise InputError(f"device={device!r}: must be {DEVICE_NAMES}")
    if device == "cpu":
        return device
    if engine == "reference":
        raise InputError(
            f"device={device!r} is where the PyTorch engine runs, and engine='reference' is "
            "NumPy float64 on the CPU: drop device, or use engine='auto' or 'torch'"
        )
    if dtype == "int8":
        raise InputError(
            f"dtype='int8' runs on the CPU only (PyTorch's quantized kernels): on "
            f"device={device!r} use dtype='float32' or 'float64'"
        )
    try:
        import torch
    except ImportError:
        raise GlassformerError(
            f"device={device!r} runs the PyTorch engine, which is not installed: {INSTALL_TORCH}"
        ) from None
    n, index = torch.cuda.device_count(), int(device.partition(":")[2] or 0)
    if index < n:
        return device
    if torch.version.cuda is None:
        why = f"this PyTorch ({torch.__version__}) is built without CUDA, so only the CPU is here"
        do = "use device='cpu', or install a CUDA build of PyTorch"
    elif not n:
        why = "PyTorch sees no CUDA GPU here, only the CPU (a driver, or CUDA_VISIBLE_DEVICES?)"
        do = "use device='cpu'"
    else:
        why = f"PyTorch sees {n} GPU(s) here: " + ", ".join(f"cuda:{k}" for k in range(n))
        do = "use one of them, or device='cpu'"
    raise GlassformerError(f"device={device!r}: {why}; {do}")


# -- threads --------------------------------------------------------------------------------------

_torch_threads: list[int] = []  # the count PyTorch takes when it loads (`_Hook`): [] none asked
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def default_threads() -> int | None:
    """The threads a computation takes when none are given: the cores this process may run on,
    less the other tasks runnable now, at least 1; None when the environment sets a count
    (THREAD_VARIABLES): the libraries keep what they read."""
    if any(os.environ.get(v) for v in THREAD_VARIABLES):
        return None
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores - others_runnable())


def others_runnable(readings: int = 3) -> int:
    """The tasks runnable now besides this one: the least of a few readings, 2 ms apart, of the
    kernel's count (/proc/loadavg: a task that runs for an instant is no load), less this
    process; 0 where the count cannot be read."""
    counts = []
    for i in range(readings):
        try:
            with open("/proc/loadavg") as f:
                counts.append(int(f.read().split()[3].split("/")[0]))
        except (OSError, ValueError, IndexError):
            return 0
        if i + 1 < readings:
            time.sleep(0.002)
    return max(0, min(counts) - 1)


MAX_THREADS = 4096  # more than any machine's cores; PyTorch and BLAS take a C int


def use_threads(n: int) -> str | None:
    """Run PyTorch and NumPy's BLAS on `n` threads from now on, in this whole process (see the
    module docstring); a note when BLAS cannot be set here (threadpoolctl not installed). More
    than MAX_THREADS is refused here, where the count meets PyTorch's and BLAS's C int (a larger
    one overflowed there), not in the argument's row, whose wording the command line shares."""
    if n > MAX_THREADS:
        raise InputError(f"{param('threads', n)}: must be at most {MAX_THREADS}")
    said = None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        said = (
            f"{n} thread(s) set for PyTorch only: NumPy's BLAS keeps the count it read at start "
            "(OPENBLAS_NUM_THREADS or OMP_NUM_THREADS); set one of those, or install threadpoolctl"
        )
    else:
        threadpool_limits(limits=n, user_api="blas")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    else:
        _torch_threads[:] = [n]
        if not any(isinstance(f, _Hook) for f in sys.meta_path):
            sys.meta_path.insert(0, _Hook())
    return said


class _Hook:
    """An import hook that sets PyTorch's threads as soon as `import torch` has run: it asks the
    other finders for torch's spec and runs the loader's own exec_module, then set_num_threads."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            vars(loader).pop("exec_module", None)  # the loader's own method again
            run(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            if _torch_threads:
                module.set_num_threads(_torch_threads[0])

        try:
            loader.exec_module = exec_module
        except AttributeError:  # a loader that takes no attribute: PyTorch keeps its own count
            pass
        return spec
