"""Peak memory of RecordEpisode against episode length (and, optionally, gymnasium's RecordVideo).

Each measurement runs in a fresh subprocess: a synthetic env with Breakout-sized frames (210x160 RGB) and
Atari-shaped observations (uint8 [4, 84, 84]) lasting exactly --steps steps, a small CNN policy, actions
picked by the caller's own loop. Reports peak RSS (ru_maxrss) and the growth over the process's RSS before
the episode started.

    python scripts/bench_memory.py                       # 10,000 and 100,000 steps
    python scripts/bench_memory.py --steps 1000 10000 --recordvideo   # + RecordVideo (needs moviepy)
    python scripts/bench_memory.py --frames-only                      # RecordEpisode without a policy
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, resource, sys, tempfile, time
import gymnasium as gym, numpy as np, torch
n_steps, which, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.set_num_threads(1)

class LongEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    def __init__(self):
        self.render_mode = "rgb_array"
        self.observation_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self.t = 0
        self.frame = np.zeros((210, 160, 3), np.uint8); self.frame[:, :, 2] = 60
        self.obs = np.zeros((4, 84, 84), np.uint8)
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed); self.t = 0; return self.obs, {}
    def step(self, a):
        self.t += 1
        return self.obs, float(self.t % 97 == 0), self.t >= n_steps, False, {}
    def render(self):
        f = self.frame.copy(); y, x = (self.t * 3) % 200, (self.t * 5) % 150
        f[y:y + 8, x:x + 8] = 255
        return f

def rss_mb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 8, stride=8); self.pi = torch.nn.Linear(8 * 10 * 10, 4); self.v = torch.nn.Linear(800, 1)
    def forward(self, x):
        h = torch.relu(self.conv(x / 255.0)).flatten(1)
        return self.pi(h), self.v(h).squeeze(-1)

folder = tempfile.mkdtemp()
env = LongEnv()
if which == "rlviz":
    from rlviz import RecordEpisode, RecordOptions, TorchPolicy
    env = RecordEpisode(env, folder, TorchPolicy(Net(), device="cpu"), options=RecordOptions(preset="ultrafast"))
elif which == "rlviz-frames":
    from rlviz import RecordEpisode, RecordOptions
    env = RecordEpisode(env, folder, episode_trigger=lambda k: True, options=RecordOptions(preset="ultrafast"))
else:
    env = gym.wrappers.RecordVideo(env, folder, episode_trigger=lambda k: True, disable_logger=True)
rng = np.random.default_rng(0)
env.reset(seed=0)
before = rss_mb()
t0 = time.time()
done = False
while not done:
    _, _, term, trunc, _ = env.step(int(rng.integers(4)))
    done = term or trunc
env.close()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
json.dump({"steps": n_steps, "which": which, "rss_before_mb": before, "peak_mb": peak, "seconds": time.time() - t0}, open(out, "w"))
"""


def measure(steps: int, which: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-c", CHILD, str(steps), which, out.name], check=True)
        with open(out.name) as fh:
            return json.load(fh)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--recordvideo", action="store_true", help="also measure gymnasium RecordVideo (needs moviepy)")
    ap.add_argument("--frames-only", action="store_true", help="RecordEpisode without a policy (frames streamed)")
    args = ap.parse_args()
    rows = []
    ours_kind = "rlviz-frames" if args.frames_only else "rlviz"
    for steps in args.steps:
        for which in [ours_kind] + (["recordvideo"] if args.recordvideo else []):
            t = time.time()
            r = measure(steps, which)
            rows.append(r)
            print(f"{which:12s} {steps:>8,d} steps  peak RSS {r['peak_mb']:7.0f} MB  "
                  f"(before the episode {r['rss_before_mb']:5.0f} MB, growth {r['peak_mb'] - r['rss_before_mb']:6.0f} MB)"
                  f"  {time.time() - t:6.1f} s", flush=True)
    ours = [r for r in rows if r["which"] == ours_kind]
    if len(ours) >= 2:
        lo, hi = ours[0], ours[-1]
        print(f"\nrlviz peak RSS, {hi['steps']:,} vs {lo['steps']:,} steps: {hi['peak_mb'] - lo['peak_mb']:+.0f} MB "
              f"(target: within ~150 MB)")


if __name__ == "__main__":
    main()
