"""The planted memory probe (importable as ``_memory_probe`` from tests/): an env whose cue appears only in the
first observation and whose reward depends on acting on it K steps later, and hand-built recurrent agents that
follow rlviz's recurrent contract (docs/memory.md).

``rlviz-probe/Cue-v0``: obs float32 [2] = (cue, go); Discrete(2). reset(seed) draws cue = +1 or -1, shown at t = 0
only; t = 1..K-1 show (0, 0); t = K shows (0, 1): the decision step, where action 1 (cue +1) or 0 (cue -1) earns
reward 1 and ends the episode (every other step: reward 0). rgb_array frame 16x16: the cue's colour at t = 0
(green +1, red -1), white at the decision step, black otherwise.

Agents (:class:`TinyMemory`, hidden 2, tanh; h' = tanh(A h + B x)): ``"cue"`` latches the cue in unit 0
(A = diag(1.5, 0.5), B = [[2, 0], [0, 0.3]]) and acts on it at every step (logits 5 h0 [-1, 1]): it solves the
task, with |h0| < 0.95 after its first two steps; ``"memoryless"`` has the same memory but acts on the current
observation only (logits 5 (cue + 0.2 go) [-1, 1]); ``"saturated"`` latches with A = 10 I, B = 10: every unit at
|h| > 0.95 from the first step.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlviz.agent.policy import Policy, PolicyOutput

K = 8
CUE_ID = "rlviz-probe/Cue-v0"


class CueEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, render_mode=None, delay: int = K):
        self.render_mode, self.delay = render_mode, int(delay)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t, self.cue = 0, 1.0

    def _obs(self):
        cue = self.cue if self.t == 0 else 0.0
        return np.array([cue, float(self.t == self.delay)], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.cue = 0, float(self.np_random.choice([-1.0, 1.0]))
        return self._obs(), {}

    def step(self, action):
        decide = self.t == self.delay
        reward = float(decide and (int(action) == 1) == (self.cue > 0))
        self.t += 1
        return self._obs(), reward, decide, False, {}

    def render(self):
        frame = np.zeros((16, 16, 3), np.uint8)
        if self.t == 0:
            frame[4:12, 4:12] = (0, 200, 0) if self.cue > 0 else (200, 0, 0)
        elif self.t == self.delay:
            frame[4:12, 4:12] = 255
        return frame


if CUE_ID not in gym.registry:
    gym.register(CUE_ID, entry_point=CueEnv)


class TinyMemory(Policy):
    """A hand-built tanh RNN policy (see the module docstring) with rlviz's recurrent contract."""

    stateful = True
    memory_kind = "gru"

    def __init__(self, mode: str = "cue"):
        self.mode, self.num_actions, self.kind = mode, 2, "actor_critic"
        big = mode == "saturated"
        self.A = torch.eye(2) * 10.0 if big else torch.diag(torch.tensor([1.5, 0.5]))
        self.B = torch.full((2, 2), 10.0) if big else torch.tensor([[2.0, 0.0], [0.0, 0.3]])
        self.sign = torch.tensor([-1.0, 1.0])

    def initial_state(self, n: int) -> tuple:
        return (np.zeros((int(n), 2), np.float32),)

    def state_tensors(self, rows) -> tuple:
        return (torch.as_tensor(np.asarray(rows[0], np.float32)),)

    @staticmethod
    def state_arrays(tensors) -> tuple:
        return (tensors[0].detach().numpy().astype(np.float32),)

    def memory_of(self, rows) -> np.ndarray:
        return np.asarray(rows[0], np.float32)

    def torch_step(self, obs, state):
        h = torch.tanh(state[0] @ self.A.T + obs @ self.B.T)
        drive = h[:, :1] if self.mode != "memoryless" else obs[:, :1] + 0.2 * obs[:, 1:]
        logits = torch.log_softmax(5.0 * drive * self.sign, dim=-1)
        return {"logits": logits, "value": h[:, 0] * 0.5}, (h,)

    def _out(self, heads) -> PolicyOutput:
        logits = heads["logits"].detach()
        return PolicyOutput(logits.numpy(), torch.exp(logits).numpy(), heads["value"].detach().numpy(), self.kind)

    @torch.no_grad()
    def step(self, obs, state, masks=None):
        heads, new = self.torch_step(self.to_tensor(obs), self.state_tensors(state))
        return self._out(heads), self.state_arrays(new)

    @torch.no_grad()
    def evaluate(self, obs, batch_size=None) -> PolicyOutput:
        x, state, parts = self.to_tensor(np.asarray(obs)), self.state_tensors(self.initial_state(1)), []
        for i in range(x.shape[0]):
            heads, state = self.torch_step(x[i : i + 1], state)
            parts.append(heads)
        return self._out({k: torch.cat([p[k] for p in parts]) for k in ("logits", "value")})


def play(policy: TinyMemory, seed: int, delay: int = K) -> tuple[np.ndarray, np.ndarray, float]:
    """One greedy episode: (observations [T+1, 2], actions [T], return)."""
    env = CueEnv(delay=delay)
    obs, _ = env.reset(seed=seed)
    state, observations, actions, ret, done = policy.initial_state(1), [obs], [], 0.0, False
    while not done:
        out, state = policy.step(obs[None], state)
        action = int(out.logits[0].argmax())
        obs, reward, done, _, _ = env.step(action)
        observations.append(obs)
        actions.append(action)
        ret += reward
    return np.stack(observations), np.asarray(actions, np.int64), ret


class CueModule(torch.nn.Module):
    """:class:`TinyMemory`'s ``"cue"`` agent as a torch module with the recurrent protocol (``initial_state``,
    ``step``), for ``rlviz render state.pt --model tests/_memory_probe.py:CueModule --env rlviz-probe/Cue-v0``.
    :class:`MemorylessModule` and :class:`SaturatedModule`: the other two agents."""

    memory_kind = "gru"
    MODE = "cue"

    def __init__(self):
        super().__init__()
        big = self.MODE == "saturated"
        self.A = torch.nn.Parameter(torch.eye(2) * 10.0 if big else torch.diag(torch.tensor([1.5, 0.5])))
        self.B = torch.nn.Parameter(torch.full((2, 2), 10.0) if big else torch.tensor([[2.0, 0.0], [0.0, 0.3]]))

    def initial_state(self, batch):
        return torch.zeros(batch, 2)

    def step(self, obs, state):
        h = torch.tanh(state @ self.A.T + obs @ self.B.T)
        drive = h[:, :1] if self.MODE != "memoryless" else obs[:, :1] + 0.2 * obs[:, 1:]
        return 5.0 * drive * torch.tensor([-1.0, 1.0]), 0.5 * h[:, 0], h


class MemorylessModule(CueModule):
    MODE = "memoryless"


class SaturatedModule(CueModule):
    MODE = "saturated"
