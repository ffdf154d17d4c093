"""Benchmark batched saliency against frame-by-frame computation, in one run.

Models (random weights): rlviz.models.NatureCNNAgent on [N, 4, 84, 84] uint8 and MinAtarAgent on
[N, 10, 10, 4] bool. Three ways per method, frames/s:

* naive: what the reference code / a user's loop does. gradient: per frame, ``backward()`` of the
  chosen logit with the parameters requiring grad (their .grad filled too). perturbation: as
  Greydanus et al.'s visualize_atari: per mask, build the mask (a disc blurred by
  scipy.ndimage.gaussian_filter), blur the frame again (``fuzz``), one batch-1 forward with
  autograd on. (smoothgrad has no reference loop: "-".)
* batch-1: rlviz's own code with batch_size=1 (shared masks and blur, no autograd graph for
  perturbation): the effect of batching alone.
* batched: rlviz defaults (chunks sized by the memory budget, at most 256 inputs on a CPU).

Ratios are within this run; absolute speeds drift on a shared machine. With more runnable threads
than cores, torch's thread pool makes batch-1 calls very slow (spinning): use --threads 1 there.

    python scripts/bench_saliency.py                  # CPU, well under 2 min unless the machine is oversubscribed
    python scripts/bench_saliency.py --device cuda --scale 8
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

from rlviz.agent.models import MinAtarAgent, NatureCNNAgent
from rlviz.agent.policy import TorchPolicy
from rlviz.explain.layout import detect_layout
from rlviz.explain.perturbation import default_options
from rlviz.explain.saliency import AttributionOptions, attribute

TARGETS = {"gradient": 5.0, "perturbation": 4.0}  # CPU targets (Nature CNN) for batched vs naive


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best(fn, n_frames: int, repeats: int, device) -> float:
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return n_frames / best


def _rlviz_fps(policy, obs, method, repeats, batch_size=None, memory_budget_mb=512.0, **kw) -> float:
    options = AttributionOptions(batch_size=batch_size, memory_budget_mb=memory_budget_mb)
    warm = dict(kw, stride=42) if method == "perturbation" else kw  # cheap warm-up (kernels, allocator)
    attribute(policy, obs[:1], method, options=options, **warm)
    if method == "perturbation":  # builds the default masks once
        attribute(policy, obs[:1], method, options=AttributionOptions(batch_size=64), **kw)
    return _best(lambda: attribute(policy, obs, method, options=options, **kw), obs.shape[0], repeats,
                 policy.device)


def _naive_gradient(policy, obs):
    module = policy.module
    for frame in obs:
        x = torch.tensor(frame[None], dtype=torch.float32, device=policy.device, requires_grad=True)
        logits, _ = module(x)
        logits[0, int(logits.argmax())].backward()
        x.grad.abs().amax(dim=1 if x.shape[1] < x.shape[-1] else -1)
        module.zero_grad(set_to_none=True)


def _naive_perturbation(policy, obs):
    from scipy.ndimage import gaussian_filter

    lay = detect_layout(obs.shape[1:], obs.dtype)
    h, w = lay.hw
    opts = default_options(h, w)
    r, d, sigma = opts["radius"], opts["stride"], opts["blur_sigma"]
    module = policy.module
    for frame in obs:
        img = lay.to_canonical(torch.as_tensor(frame[None], dtype=torch.float32))[0].numpy()  # [C, H, W]
        x = torch.tensor(frame[None], dtype=torch.float32, device=policy.device)
        base, _ = module(x)
        scores = np.zeros(((h - 1) // d + 1, (w - 1) // d + 1), np.float32)
        for i in range(0, h, d):
            for j in range(0, w, d):
                yy, xx = np.ogrid[-i : h - i, -j : w - j]
                mask = np.zeros((h, w))
                mask[xx * xx + yy * yy <= 1] = 1
                mask = gaussian_filter(mask, sigma=r)
                mask /= mask.max()
                if sigma is None:
                    blurred = np.broadcast_to(img.mean(axis=(1, 2), keepdims=True), img.shape)
                else:
                    blurred = np.stack([gaussian_filter(c, sigma=sigma) for c in img])
                perturbed = img * (1 - mask) + blurred * mask
                p = lay.from_canonical(torch.as_tensor(perturbed[None], dtype=torch.float32, device=policy.device))
                logits, _ = module(p)
                scores[i // d, j // d] = float(0.5 * ((base - logits) ** 2).sum().detach())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu | cuda | auto (default cpu)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of frames (default 1)")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per cell; the best is kept (default 2)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: leave torch's)")
    ap.add_argument("--memory-budget-mb", type=float, default=512.0, help="batched runs' memory budget")
    ap.add_argument("--batch-size", type=int, default=None, help="batched runs' inputs per forward (overrides budget)")
    ap.add_argument("--methods", default="gradient,smoothgrad,perturbation")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    def n(k):
        return max(1, int(round(k * args.scale)))

    # frames per cell: (naive and batch-1, batched); a perturbation frame costs 289 forwards on Atari
    counts = {
        "nature": {"gradient": (n(32), n(256)), "smoothgrad": (n(4), n(16)), "perturbation": (n(2), n(8))},
        "minatar": {"gradient": (n(128), n(2048)), "smoothgrad": (n(16), n(256)), "perturbation": (n(8), n(128))},
    }
    models = {
        "nature": (TorchPolicy(NatureCNNAgent(4), device=args.device),
                   lambda k: rng.integers(0, 256, (k, 4, 84, 84), dtype=np.uint8)),
        "minatar": (TorchPolicy(MinAtarAgent(3), device=args.device), lambda k: rng.random((k, 10, 10, 4)) < 0.1),
    }
    naive = {"gradient": _naive_gradient, "perturbation": _naive_perturbation}
    try:
        import scipy.ndimage  # noqa: F401
    except ImportError:
        print("scipy is not installed: no naive perturbation column")
        naive.pop("perturbation")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    load0 = os.getloadavg()
    if load0[0] > (os.cpu_count() or 1) and torch.get_num_threads() > 1:
        print(f"note: load {load0[0]:.1f} > {os.cpu_count()} cpus with {torch.get_num_threads()} torch threads: "
              "batch-1 calls lose most of their time synchronising threads; compare --threads 1.")
    print(f"device={models['nature'][0].device} torch={torch.__version__} threads={torch.get_num_threads()} "
          f"cpus={os.cpu_count()} loadavg(1,5,15)={load0[0]:.2f},{load0[1]:.2f},{load0[2]:.2f}", flush=True)
    print(f"{'model':<8} {'method':<13} {'frames':>9} {'naive fps':>10} {'batch-1 fps':>12} {'batched fps':>12} "
          f"{'vs naive':>9} {'vs batch-1':>11}  target")
    t_start = time.perf_counter()
    for name, (policy, make) in models.items():
        for method in methods:
            n_single, n_batch = counts[name][method]
            obs = make(max(n_single, n_batch))
            opts = {"n_samples": 16} if method == "smoothgrad" else {}
            ref = float("nan")
            if method in naive:
                naive[method](policy, obs[:1])  # warm-up
                part = obs[:n_single]
                ref = _best(lambda f=naive[method], p=policy, o=part: f(p, o), n_single, args.repeats, policy.device)
            single = _rlviz_fps(policy, obs[:n_single], method, args.repeats, batch_size=1, **opts)
            batched = _rlviz_fps(policy, obs[:n_batch], method, args.repeats, batch_size=args.batch_size,
                                 memory_budget_mb=args.memory_budget_mb, **opts)
            goal = TARGETS.get(method) if name == "nature" else None
            mark = "" if goal is None else f">= {goal:.0f}x " + ("ok" if batched / ref >= goal else "MISSED")
            ref_s = f"{ref:>10.1f}" if ref == ref else f"{'-':>10}"
            vs_ref = f"{batched / ref:>8.1f}x" if ref == ref else f"{'-':>9}"
            print(f"{name:<8} {method:<13} {n_single:>4}/{n_batch:<4} {ref_s} {single:>12.1f} {batched:>12.1f} "
                  f"{vs_ref} {batched / single:>10.1f}x  {mark}", flush=True)
    load1 = os.getloadavg()
    print(f"total {time.perf_counter() - t_start:.0f} s; loadavg(1,5,15) after = {load1[0]:.2f},{load1[1]:.2f},"
          f"{load1[2]:.2f} on {os.cpu_count()} cpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
