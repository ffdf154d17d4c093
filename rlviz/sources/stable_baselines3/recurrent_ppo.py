"""sb3-contrib ``RecurrentPPO`` (``RecurrentActorCriticPolicy``, ``RecurrentActorCriticCnnPolicy``) as a stateful
rlviz policy (:class:`~rlviz.agent.policy.Policy` ``stateful``; extra ``rlviz[sb3]``).

The state is SB3's ``RNNStates``: the actor LSTM's (h, c) and, with ``enable_critic_lstm`` (the default), the
critic LSTM's (h, c), each kept as float32 [rows, n_lstm_layers, hidden] (one row per env; SB3 keeps
[layers, envs, hidden]). A row starts at zeros, as SB3's ``episode_start`` resets it. Per step the outputs equal
SB3's: the probabilities ``policy.get_distribution(obs, states.pi, episode_starts)``'s (so the actions are
``predict``'s), the value ``policy.forward(obs, states, episode_starts)``'s, computed here in one pass through the
features extractor(s) as SB3's ``_process_sequence`` does. Observations are raw (SB3's ``preprocess_obs`` runs
inside), optionally normalised first by VecNormalize statistics (``obs_transform``).

The recurrent contract of 0.5 (docs/memory.md): :meth:`SB3RecurrentPolicy.torch_step` is one differentiable step
on batch-first torch states (what :meth:`~SB3RecurrentPolicy.step` computes, under ``no_grad``),
:meth:`~SB3RecurrentPolicy.state_tensors` / :meth:`~SB3RecurrentPolicy.state_arrays` convert the state rows,
:meth:`~SB3RecurrentPolicy.memory_of` is the actor LSTM's last-layer h (``memory_kind`` "lstm").
"""

from __future__ import annotations

import numpy as np
import torch

from ...agent.policy import Policy, PolicyOutput, resolve_device
from ...errors import UsageError

__all__ = ["SB3RecurrentPolicy", "is_recurrent"]


def is_recurrent(policy) -> bool:
    """True for an sb3-contrib recurrent policy (RecurrentPPO's)."""
    return type(policy).__module__.startswith("sb3_contrib.common.recurrent")


def _pad(a, rows: int) -> np.ndarray:
    """``a`` [k <= rows, ...] padded to [rows, ...] with copies of its first row."""
    a = np.asarray(a)
    return a if a.shape[0] == rows else np.concatenate([a, np.repeat(a[:1], rows - a.shape[0], axis=0)])


class SB3RecurrentPolicy(Policy):
    """RecurrentPPO's policy: ``step(obs [B], state [B rows]) -> (PolicyOutput, new state)``, one env step per row;
    ``evaluate(obs)`` / ``forward(obs)``: the observations of one episode in order, from the initial state."""

    stateful = True
    obs_format = "raw"  # SB3 preprocesses observations itself
    memory_kind = "lstm"

    def __init__(self, policy, num_actions: int, device="auto", obs_transform=None):
        if not is_recurrent(policy):
            raise UsageError(f"SB3RecurrentPolicy takes RecurrentPPO's policy; received {type(policy).__name__}.")
        self.device = resolve_device(device)
        policy.set_training_mode(False)
        self.policy = policy.to(self.device)
        self.num_actions, self.kind = int(num_actions), "actor_critic"
        self.obs_transform = obs_transform
        lstm = policy.lstm_actor
        self._shape = (int(lstm.num_layers), int(lstm.hidden_size))
        self._parts = 4 if policy.lstm_critic is not None else 2

    # -- the state ------------------------------------------------------------------------------
    def initial_state(self, n: int) -> tuple:
        """n rows of zeros: (h_pi, c_pi[, h_vf, c_vf]), each float32 [n, layers, hidden]."""
        return tuple(np.zeros((int(n),) + self._shape, np.float32) for _ in range(self._parts))

    def _check(self, state) -> None:
        want = self._shape
        if len(state) != self._parts or any(tuple(np.shape(s)[1:]) != want for s in state):
            got = [tuple(np.shape(s)) for s in state]
            raise UsageError(f"A RecurrentPPO state is {self._parts} arrays [rows, {want[0]}, {want[1]}]; received "
                             f"{got}. Start it with policy.initial_state(rows).")

    def _to_torch(self, state) -> tuple:
        """State rows -> SB3's layout: torch float32 [layers, rows, hidden] each."""
        return tuple(t.transpose(0, 1).contiguous() for t in self.state_tensors(state))

    def state_tensors(self, rows) -> tuple:
        """State rows (numpy, batch-first) -> torch float32 tensors [rows, layers, hidden] on the policy's device."""
        self._check(rows)
        return tuple(torch.as_tensor(np.asarray(s, np.float32), device=self.device) for s in rows)

    @staticmethod
    def state_arrays(tensors) -> tuple:
        """Batch-first torch state tensors -> state rows (numpy float32, detached)."""
        return tuple(t.detach().float().cpu().numpy() for t in tensors)

    def memory_of(self, rows) -> np.ndarray:
        """The hidden vector to show: the actor LSTM's last-layer h, float32 [rows, hidden] (not c, not the
        critic LSTM's)."""
        self._check(rows)
        return np.asarray(rows[0], np.float32)[:, -1, :]

    # -- the network ----------------------------------------------------------------------------
    @staticmethod
    def _lstm(lstm, features: torch.Tensor, state: tuple, rows: int):
        """features [rows * seq, F] (row-major: each row's sequence contiguous) -> (out [rows * seq, H], state)."""
        seq = features.reshape(rows, -1, lstm.input_size).swapaxes(0, 1)
        out, new = lstm(seq, state)
        return torch.flatten(out.transpose(0, 1), start_dim=0, end_dim=1), new

    def _run(self, obs: torch.Tensor, state: tuple, rows: int) -> tuple[dict, tuple]:
        """obs [rows * seq, *obs] -> ({"logits", "value"}, new state) with torch states [layers, rows, hidden]."""
        p = self.policy
        x = self.obs_transform(obs) if self.obs_transform is not None else obs
        features = p.extract_features(x)
        pi_f, vf_f = (features, features) if p.share_features_extractor else features
        latent_pi, s_pi = self._lstm(p.lstm_actor, pi_f, state[:2], rows)
        if p.lstm_critic is not None:
            latent_vf, s_vf = self._lstm(p.lstm_critic, vf_f, state[2:], rows)
        else:
            latent_vf, s_vf = (latent_pi if p.shared_lstm else p.critic(vf_f)), ()
        logits = torch.log_softmax(p.action_net(p.mlp_extractor.forward_actor(latent_pi)), dim=-1)
        value = p.value_net(p.mlp_extractor.forward_critic(latent_vf)).reshape(-1)
        return {"logits": logits, "value": value}, tuple(s_pi) + tuple(s_vf)

    def _output(self, logits: torch.Tensor, value: torch.Tensor) -> PolicyOutput:
        logits = logits.float()
        return PolicyOutput(logits.cpu().numpy(), torch.softmax(logits, -1).cpu().numpy(),
                            value.float().cpu().numpy(), self.kind)

    # -- the Policy contract --------------------------------------------------------------------
    def torch_step(self, obs: torch.Tensor, state: tuple) -> tuple[dict, tuple]:
        """One differentiable env step per row: obs [B, *obs] (:meth:`to_tensor`'s), state batch-first torch
        tensors (:meth:`state_tensors`) -> ({"logits": log-probabilities [B, A], "value": [B]}, the new state,
        batch-first). Gradients flow to ``obs`` and to the state tensors."""
        if len(state) != self._parts:
            raise UsageError(f"A RecurrentPPO state is {self._parts} tensors; received {len(state)}. Start it with "
                             "policy.state_tensors(policy.initial_state(rows)).")
        sb3 = tuple(t.transpose(0, 1).contiguous() for t in state)
        h, new = self._run(obs, sb3, rows=int(obs.shape[0]))
        return h, tuple(t.transpose(0, 1) for t in new)

    @torch.no_grad()
    def step(self, obs, state, masks=None) -> tuple[PolicyOutput, tuple]:
        """One env step per row: obs [B, *obs], state B rows (:meth:`initial_state`) -> (PolicyOutput [B], the new
        state rows). Forwards of exactly :meth:`rows_for` rows (the last padded with copies of its first row), so
        a row's result does not depend on the rows beside it: an episode gets the same numbers alone or among many."""
        if masks is not None:
            raise UsageError("RecurrentPPO takes no action masks; sb3-contrib has no masked recurrent PPO.")
        obs = np.asarray(obs)
        rows = self.rows_for(obs.shape[1:])
        n, logits, values, new = obs.shape[0], [], [], []
        for at in range(0, n, rows):
            o, s = _pad(obs[at : at + rows], rows), tuple(_pad(part[at : at + rows], rows) for part in state)
            h, out = self.torch_step(self.to_tensor(o), self.state_tensors(s))
            logits.append(h["logits"])
            values.append(h["value"])
            new.append(self.state_arrays(out))
        state = tuple(np.concatenate(parts)[:n] for parts in zip(*new))
        return self._output(torch.cat(logits)[:n], torch.cat(values)[:n]), state

    def heads(self, obs: torch.Tensor) -> dict:
        """The outputs on one episode's observations [T, *obs] in order, from the initial state (differentiable)."""
        return self._run(obs, self._to_torch(self.initial_state(1)), rows=1)[0]

    @torch.no_grad()
    def evaluate(self, obs, batch_size: int | None = None) -> PolicyOutput:
        """The outputs on one episode's observations [T, *obs] in order, from the initial state, ``batch_size``
        steps per LSTM call (the state carried from chunk to chunk)."""
        if not (hasattr(obs, "shape") and hasattr(obs, "__getitem__")):
            obs = np.asarray(obs)
        if obs.shape[0] == 0:
            raise UsageError("evaluate() received an empty batch of observations; pass at least one.")
        bs, state = int(batch_size or self.batch_size), self._to_torch(self.initial_state(1))
        logits, values = [], []
        for start in range(0, obs.shape[0], bs):
            h, state = self._run(self.to_tensor(np.asarray(obs[start : start + bs])), state, rows=1)
            logits.append(h["logits"])
            values.append(h["value"])
        return self._output(torch.cat(logits), torch.cat(values))
