#!/usr/bin/env python3
"""PyTorch on the GPU, on the networks crossover trains: the time per training step of the disc-L
models (disc-2 ... disc-12) and the classic Keras networks (mnist-mlp, mnist-cnn, imdb-lstm), the
peer that scripts/gpu-check puts next to crossover's CUDA backend.

The models, batch sizes, optimizers and losses are those of crossover's built-in specs (specs/*.toml;
the same torch.nn modules as bench/disc_vs_torch.py and bench/classic_vs_torch.py). The data is
random of the right shape (the disc rule for disc-L, images in [0, 1) and classes for the MNIST
networks, token ids below the vocabulary and 0/1 labels for imdb-lstm), resident on the device; the
step takes its batch from it in order, as crossover's does.

Arithmetic is f32 with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False,
torch.backends.cudnn.allow_tf32 = False), crossover's default. Each model is timed two ways:

  eager  forward, loss, backward and optimizer.step() launched from Python every step, with the
         optimizer's default implementation (foreach on CUDA) and no host synchronisation inside
         a timed block;
  graph  the whole step (forward + loss + backward + optimizer.step) captured once as a CUDA Graph
         with torch.cuda.graph over static input and label tensors (warmed up on a side stream
         first, gradients set to None before capture, optimizers built with capturable=True where
         they take it); each step copies its batch into the static tensors and replays the graph.
         When capture fails for a model its error is recorded instead.

Timing: warm-up steps (excluded), then blocks of N steps, torch.cuda.synchronize() before each block
and CUDA events around it; the result is the median over blocks of the block's time / N (min, max
and the spread are kept too).

    python3 bench/gpu_vs_torch.py [--out bench/out/gpu_vs_torch.json] [--models disc-2,mnist-cnn]
                                  [--quick] [--device cuda|cpu] [--blocks B] [--steps N]

--device cpu (times with perf_counter, no graphs) only exists to test this script on a machine
without a GPU; the numbers that matter are --device cuda's.
"""
import argparse
import inspect
import os
import platform
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402  (bench/peer.py: the networks, built once for every comparison)

DISC_SAMPLES = peer.DISC_SAMPLES
DISC_BATCH = peer.DISC_BATCH
ALL_MODELS = peer.BUILTIN_MODELS
POOL_BATCHES = 8  # batches of random data resident on the device for the classic models


def optimizer_spec(name):
    """(torch.optim class name, keyword arguments) of the spec's [train] optimizer."""
    return peer.torch_optimizer_args(peer.builtin_optimizer(name))


def make_optimizer(torch, name, params, capturable):
    cls_name, kwargs = optimizer_spec(name)
    cls = getattr(torch.optim, cls_name)
    if capturable and "capturable" in inspect.signature(cls.__init__).parameters:
        kwargs = {**kwargs, "capturable": True}
    return cls(params, **kwargs), kwargs


def make_data(torch, name, device):
    """(inputs, labels, batch, steps per pass, loss function) on the device."""
    g = torch.Generator(device="cpu").manual_seed(0)
    if peer.disc_depth(name) is not None:
        # The disc rule: uniform [0,1]^2, x^2 + y^2 < 1/(2 pi), standardized.
        xy = torch.rand(DISC_SAMPLES, 2, generator=g, dtype=torch.float64)
        y = ((xy ** 2).sum(1) < 1.0 / (2.0 * 3.141592653589793)).long()
        xy = (xy - xy.mean()) / xy.std(unbiased=False)
        return (xy.float().to(device), y.to(device), DISC_BATCH, DISC_SAMPLES // DISC_BATCH,
                torch.nn.CrossEntropyLoss())
    batch, shape, vocab, classes, loss, _ = peer.CLASSIC[name]
    n = batch * POOL_BATCHES
    if vocab:
        x = torch.randint(0, vocab, (n, *shape), generator=g)
    else:
        x = torch.rand(n, *shape, generator=g)
    if loss == "bce":
        y = torch.randint(0, 2, (n,), generator=g).float()
        loss_fn = torch.nn.BCEWithLogitsLoss()
    else:
        y = torch.randint(0, classes, (n,), generator=g)
        loss_fn = torch.nn.CrossEntropyLoss()
    return x.to(device), y.to(device), batch, POOL_BATCHES, loss_fn


class Timer:
    """Times blocks of steps: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.type == "cuda"

    def block_ms(self, run_steps, steps):
        torch = self.torch
        if self.cuda:
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run_steps(steps)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / steps
        t0 = time.perf_counter()
        run_steps(steps)
        return (time.perf_counter() - t0) * 1e3 / steps


def summarize(per_step_ms, warmup, steps):
    median, cv = peer.median_cv(per_step_ms)
    return {"median_step_ms": median,
            "min_step_ms": min(per_step_ms), "max_step_ms": max(per_step_ms), "cv": cv,
            "blocks": len(per_step_ms), "steps_per_block": steps, "warmup_steps": warmup,
            "block_ms": per_step_ms}


def time_eager(torch, name, device, warmup, blocks, steps):
    torch.manual_seed(0)
    model = peer.builtin_model(name).to(device)
    model.train()
    opt, opt_args = make_optimizer(torch, name, model.parameters(), capturable=False)
    x, y, batch, batches, loss_fn = make_data(torch, name, device)
    state = {"i": 0, "loss": None}

    def run_steps(n):
        for _ in range(n):
            b = state["i"] % batches
            state["i"] += 1
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[b * batch:(b + 1) * batch]), y[b * batch:(b + 1) * batch])
            loss.backward()
            opt.step()
            state["loss"] = loss

    timer = Timer(torch, device)
    run_steps(warmup)
    per_step = [timer.block_ms(run_steps, steps) for _ in range(blocks)]
    result = summarize(per_step, warmup, steps)
    result["last_loss"] = float(state["loss"].item())
    params = sum(p.numel() for p in model.parameters())
    return result, params, batch, opt_args


def time_graph(torch, name, device, warmup, blocks, steps):
    """The whole training step as one CUDA Graph (PyTorch's documented whole-network recipe)."""
    torch.manual_seed(0)
    model = peer.builtin_model(name).to(device)
    model.train()
    opt, opt_args = make_optimizer(torch, name, model.parameters(), capturable=True)
    x, y, batch, batches, loss_fn = make_data(torch, name, device)
    static_x = x[:batch].clone()
    static_y = y[:batch].clone()

    # Warm-up on a side stream: lazy state (optimizer moments, cuBLAS/cuDNN handles and
    # workspaces, autograd's buffers) is created before capture, outside the graph's pool.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(3, min(warmup, 11))):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(static_x), static_y)
            loss.backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)  # backward inside the graph allocates .grad from its pool
    with torch.cuda.graph(graph):
        static_loss = loss_fn(model(static_x), static_y)
        static_loss.backward()
        opt.step()

    state = {"i": 0}

    def run_steps(n):
        for _ in range(n):
            b = state["i"] % batches
            state["i"] += 1
            static_x.copy_(x[b * batch:(b + 1) * batch])
            static_y.copy_(y[b * batch:(b + 1) * batch])
            graph.replay()

    timer = Timer(torch, device)
    run_steps(warmup)
    per_step = [timer.block_ms(run_steps, steps) for _ in range(blocks)]
    result = summarize(per_step, warmup, steps)
    result["last_loss"] = float(static_loss.item())
    result["optimizer_args"] = {k: v for k, v in opt_args.items() if k == "capturable"}
    return result


def error_text(e):
    lines = traceback.format_exception_only(type(e), e)
    return "".join(lines).strip()[:2000]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default="bench/out/gpu_vs_torch.json", help="JSON file to write")
    p.add_argument("--models", default=",".join(ALL_MODELS), help="comma-separated model names")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (only to test the script)")
    p.add_argument("--warmup", type=int, default=20, help="warm-up steps, excluded")
    p.add_argument("--blocks", type=int, default=20, help="timed blocks")
    p.add_argument("--steps", type=int, default=25, help="steps per timed block")
    p.add_argument("--quick", action="store_true", help="5 blocks of 10 steps after 10 warm-up steps")
    p.add_argument("--no-graph", action="store_true", help="eager only")
    args = p.parse_args()
    if args.quick:
        args.warmup, args.blocks, args.steps = 10, 5, 10
    if args.blocks < 1 or args.steps < 1 or args.warmup < 0:
        sys.exit("gpu_vs_torch: --blocks and --steps must be positive, --warmup not negative")

    try:
        import torch
    except ImportError as e:
        sys.exit(f"gpu_vs_torch: PyTorch is not importable by {sys.executable} ({e})")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit(f"gpu_vs_torch: torch {torch.__version__} (built for CUDA {torch.version.cuda}) "
                 f"sees no CUDA device; run on a GPU machine or pass --device cpu to test")
    models = [m for m in args.models.split(",") if m]
    for m in models:  # unknown names fail before any timing
        try:
            peer.builtin_model(m)
        except ValueError as e:
            sys.exit(f"gpu_vs_torch: {e}")

    # crossover's default arithmetic: f32, no TF32 anywhere.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")

    info = {"python": sys.version.split()[0], "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "device": str(device),
            "host": platform.node(), "cpu_threads": torch.get_num_threads(),
            "settings": {"matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                         "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                         "cudnn.benchmark": torch.backends.cudnn.benchmark,
                         "float32_matmul_precision": (torch.get_float32_matmul_precision()
                                                      if hasattr(torch, "get_float32_matmul_precision")
                                                      else None)}}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda.set_device(index)
        props = torch.cuda.get_device_properties(index)
        info.update({"gpu": torch.cuda.get_device_name(index),
                     "compute_capability": f"{props.major}.{props.minor}",
                     "gpu_memory_gib": props.total_memory / 2 ** 30,
                     "cudnn": torch.backends.cudnn.version()})
    print(f"gpu_vs_torch: torch {torch.__version__} on {info.get('gpu', device)}; "
          f"TF32 off; {args.warmup} warm-up steps, {args.blocks} blocks of {args.steps} steps",
          flush=True)

    rows = {}
    failed = False
    print(f"{'model':10} {'params':>9} {'batch':>5} {'eager ms':>10} {'graph ms':>10}", flush=True)
    for name in models:
        row = {}
        try:
            eager, params, batch, opt_args = time_eager(torch, name, device, args.warmup,
                                                        args.blocks, args.steps)
            row.update({"params": params, "batch": batch,
                        "optimizer": optimizer_spec(name)[0], "optimizer_args": opt_args,
                        "eager": eager})
        except Exception as e:  # recorded; the other models still run
            row["eager"] = {"error": error_text(e)}
            failed = True
        if args.no_graph:
            row["graph"] = {"error": "not measured (--no-graph)"}
        elif device.type != "cuda":
            row["graph"] = {"error": "not measured (CUDA Graphs need a CUDA device)"}
        else:
            try:
                row["graph"] = time_graph(torch, name, device, args.warmup, args.blocks, args.steps)
            except Exception as e:  # capture failed: say why
                row["graph"] = {"error": error_text(e)}
                try:  # leave no half-captured state behind for the next model
                    torch.cuda.synchronize()
                except Exception:
                    pass
        if device.type == "cuda":
            torch.cuda.empty_cache()
        rows[name] = row

        def ms(r):
            if "median_step_ms" in r:
                return f"{r['median_step_ms']:.4f}"
            return "-" if r.get("error", "").startswith("not measured") else "failed"

        print(f"{name:10} {row.get('params', 0):>9} {row.get('batch', 0):>5} "
              f"{ms(row['eager']):>10} {ms(row['graph']):>10}", flush=True)
        for kind in ("eager", "graph"):
            if "error" in row[kind] and not row[kind]["error"].startswith("not measured"):
                print(f"  {kind}: {row[kind]['error'].splitlines()[-1]}", flush=True)

    result = {"schema": "crossover.bench.gpu_vs_torch/1", "date": time.strftime("%Y-%m-%d"),
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **info,
              "timing": {"warmup_steps": args.warmup, "blocks": args.blocks,
                         "steps_per_block": args.steps,
                         "method": "median over blocks of (block time / steps); CUDA events "
                                   "after torch.cuda.synchronize() on a GPU, perf_counter on the CPU"},
              "models": rows}
    peer.write_json(args.out, result)
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
