"""The JAX engine's rollout: N episodes in batches of ``num_envs``, each batch one jit-compiled, vmapped
``lax.scan`` over steps (run in chunks of :data:`CHUNK` steps until every episode of the batch ended), met with the
rest of rlviz at the run record: a :class:`~rlviz.evaluate.RolloutResult` of
:class:`~rlviz.episode.EpisodeResult` per episode (return, length, terminated / truncated, failures, mean relative
entropy, value-vs-return sums, diagnostics) and a :class:`~rlviz.evaluate.failures.heatmap.FailureHeatmap` of the
objects' positions on the step before each failure.

What runs where: the policy, the env, the sampling, the entropy, the objects' positions and the observations' loop
keys on the device, inside the scan; per batch, its per-step scalars come to the host once and are folded into each
episode there (float64, as the gymnasium path folds its step log). Only per-episode results and heatmap counts are
kept, so memory is flat in the episode count. Episode ``k`` depends on (seed, k) only (:mod:`rlviz.jax.scan`): the
same episodes with any ``num_envs`` or device count. With several devices the batch is sharded over them
(``jax.sharding``: a 1-D mesh over the batch axis). Once the running episodes of a batch fit in a power of two
(times 8 rows per device) at most three quarters of it, they go on in a compiled batch of that size (rows do not
interact: the same numbers), so that the episodes that ended early and a few long ones do not keep every lane of
the batch stepping: as episodes end, the batch halves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..episode.result import EpisodeResult
from ..errors import UsageError
from ..evaluate.failures.heatmap import FailureHeatmap
from ..evaluate.rollouts.rollout import RolloutResult, episode_seed_for
from .fold import FoldSpec, fold_batch
from .scan import Carry, initial_carry, make_step

__all__ = ["JaxEngine", "jax_rollout", "CHUNK", "ROWS"]

#: steps per compiled chunk of the scan (the host checks between chunks whether any episode of the batch still runs)
CHUNK = 32


@dataclass
class JaxEngine:
    """One (env, policy, greedy, fail_on, heatmap) and its compiled functions, one per batch size (compiled on first
    use, then reused). ``max_steps``: the episode cap (default the env's)."""

    env: Any
    policy: Any
    greedy: bool = False
    fail_on: str = "termination"
    heatmap: bool = False
    max_steps: int | None = None
    _compiled: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.fail_on == "auto":
            self.fail_on = "termination"
        if self.fail_on not in ("termination", "negative-reward"):
            raise UsageError(f"fail_on={self.fail_on!r} for a JAX env; expected auto, termination or negative-reward "
                             "(JAX envs report no lives).")
        if self.heatmap and not getattr(self.env, "object_names", ()):
            raise UsageError(f"--heatmap: rlviz knows no object positions of {self.env.env_id}; heatmaps of JAX envs "
                             "cover gymnax Breakout-MinAtar and Catch-bsuite, Craftax's player and Brax's torso.")
        self.max_steps = int(self.max_steps or self.env.max_steps)
        if self.policy.kind != "q" and self.policy.kind not in ("logits", "gaussian"):
            raise UsageError(f"policy.kind={self.policy.kind!r}; expected logits, gaussian or q.")

    def functions(self, batch: int, keep: bool = False) -> tuple[Any, Any]:
        """(start(params, env_params, seeds [B]) -> carry, chunk(params, env_params, carry) -> (carry, outputs
        [CHUNK, B])), jit-compiled for ``batch`` episodes at a time."""
        key = (int(batch), bool(keep))
        if key not in self._compiled:
            import jax

            step = make_step(self.env, self.policy, greedy=self.greedy, fail_on=self.fail_on, heatmap=self.heatmap,
                             keep=keep, max_steps=int(self.max_steps or 0))
            env, policy = self.env, self.policy

            # (the carry leaves both functions with no weak type: an env whose step makes a leaf weakly typed that its
            # reset did not (Brax's reward, done) would otherwise compile the chunk twice, for the start's carry and
            # for its own; the values are the same)
            def strong(tree: Any) -> Any:
                return jax.tree_util.tree_map(lambda a: a.astype(a.dtype), tree)

            def start(params: Any, env_params: Any, seeds: Any) -> Carry:
                return strong(jax.vmap(lambda s: initial_carry(env, policy, env_params, s))(seeds))

            def chunk(params: Any, env_params: Any, carry: Carry) -> tuple[Carry, Any]:
                one = jax.vmap(lambda c: step(params, env_params, c))
                carry, ys = jax.lax.scan(lambda c, _: one(c), carry, None, length=CHUNK)
                return strong(carry), ys

            self._compiled[key] = (jax.jit(start), jax.jit(chunk))
        out: tuple[Any, Any] = self._compiled[key]
        return out

    def jitted(self, name: str, fn: Any) -> Any:
        """``jax.jit(fn)`` made once per engine under ``name`` (the replay's own functions: compiled on first use,
        not on every video)."""
        key = ("jitted", name)
        if key not in self._compiled:
            import jax

            self._compiled[key] = jax.jit(fn)
        return self._compiled[key]

    def run_batch(self, seeds: np.ndarray, keep: bool = False) -> tuple[dict, Any]:
        """The episodes of ``seeds`` (uint32 [B]): per-step outputs as numpy [T, B] (T: the steps until the last
        ended, a multiple of CHUNK; a step after an episode ended reads as not alive) and the last carry (with
        ``keep``: its first B rows are theirs; without, the running episodes moved to smaller batches as
        :meth:`run_chunks` says)."""
        parts, carry = self.run_chunks(seeds, keep)
        return _assemble(parts, len(seeds)), carry

    def run_packed(self, seeds: np.ndarray, count: int) -> tuple[dict, np.ndarray]:
        """The first ``count`` episodes of ``seeds`` (uint32 [B], the rest padding), their steps only: per-step
        outputs flat [S, ...] in (episode, step) order and each episode's number of steps (int64 [count], summing to
        S) (:func:`rlviz.jax.fold.pack_chunks`: the host touches the steps taken, not the batch's idle lanes)."""
        from .fold import pack_chunks

        parts, _ = self.run_chunks(seeds)
        return pack_chunks(parts, int(count), CHUNK)

    def run_chunks(self, seeds: np.ndarray, keep: bool = False) -> tuple[list, Any]:
        """The episodes of ``seeds`` (uint32 [B]), chunk by chunk until all ended: ([(outputs numpy [CHUNK, columns]
        per output, the episode (index into seeds) each column runs: int [columns]) per chunk], the last carry).
        The compiled batch is B padded to a multiple of :data:`ROWS` per device. Without ``keep``, when the running
        episodes fit in a smaller batch (:func:`_compacted`), they go on in it after the chunk: the ended episodes
        and a few long ones do not keep the whole batch stepping (their outputs are their own: rows do not
        interact)."""
        import jax

        n = len(seeds)
        rows = _padded(n)
        seeds = np.concatenate([np.asarray(seeds, np.uint32), np.full(rows - n, seeds[-1], np.uint32)])
        start, chunk = self.functions(rows, keep)
        params, env_params = self.policy.params, self.env.params
        seeds_dev = _shard(seeds)
        carry = start(params, env_params, seeds_dev)
        parts: list[Any] = []
        lanes = np.arange(rows)  # the batch's column -> the episode (of seeds) it runs
        steps = 0
        while steps < int(self.max_steps or 0):
            carry, ys = chunk(params, env_params, carry)
            parts.append((ys, lanes))
            steps += CHUNK
            alive = np.asarray(carry.alive)
            if not bool(alive.any()):
                break
            live = np.flatnonzero(alive)
            smaller = _compacted(len(live), len(lanes))
            if smaller and not keep:
                take = np.concatenate([live, np.full(smaller - len(live), live[-1])])
                carry = self.jitted("take", _take)(carry, jax.numpy.asarray(take, jax.numpy.int32))
                if _device_count() > 1:
                    carry = jax.tree_util.tree_map(_shard_like, carry)
                lanes = lanes[take]
                chunk = self.functions(smaller, keep)[1]
        return jax.device_get(parts), carry


def _compacted(live: int, batch: int) -> int:
    """The smaller batch the ``live`` running episodes of a ``batch`` go on in: the smallest power of two times the
    unit of :func:`_padded` that holds them (a few compiled sizes, each a compilation on first use), or 0 to keep the
    batch (that size would spare less than a quarter of its lanes)."""
    unit = ROWS * _device_count()
    if batch <= unit:
        return 0
    size = unit
    while size < live:
        size *= 2
    return size if size * 4 <= batch * 3 else 0


def _take(carry: Carry, index: Any) -> Carry:
    """The rows ``index`` (int32 [B']) of every leaf of ``carry``: one compiled gather (per pair of sizes)."""
    import jax

    return jax.tree_util.tree_map(lambda a: a[index], carry)


def _shard_like(a: Any) -> Any:
    """A compacted carry leaf back on the devices as :func:`_shard` puts a batch (split over several devices)."""
    import jax

    devices = jax.devices()
    if len(devices) > 1 and a.shape and a.shape[0] % len(devices) == 0:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(np.array(devices), ("batch",))
        return jax.device_put(a, NamedSharding(mesh, PartitionSpec("batch")))
    return a


def _assemble(parts: list[Any], n: int) -> Any:
    """The chunks' outputs ([CHUNK, columns] each, with the episode of each column) as [T, n] per episode: a column
    after its episode left the batch reads as not alive (zeros); a padding column repeating an episode is dropped."""
    import jax

    first = parts[0][0]

    def leaf_out(path_leaf: Any) -> np.ndarray:
        return np.zeros((CHUNK * len(parts), n, *np.shape(path_leaf)[2:]), np.asarray(path_leaf).dtype)

    out = jax.tree_util.tree_map(leaf_out, first)
    for c, (ys, lanes) in enumerate(parts):
        lanes = np.asarray(lanes)
        cols = np.flatnonzero((lanes < n) & np.r_[True, lanes[1:] != lanes[:-1]])  # each episode's first column
        rows = slice(c * CHUNK, (c + 1) * CHUNK)

        def put(o: np.ndarray, y: Any, rows: slice = rows, cols: np.ndarray = cols, lanes: np.ndarray = lanes) -> None:
            o[rows, lanes[cols]] = np.asarray(y)[:, cols]

        jax.tree_util.tree_map(put, out, ys)
    return out


#: the compiled batch is a multiple of this many rows: XLA's CPU kernels treat the rows of a batch in groups of 8
#: (AVX), and a remainder group is computed with other rounding (measured: a Dense layer's outputs differ in the last
#: bit between batches of 7 and 8 rows, never between multiples of 8). So an episode's numbers do not depend on
#: --num-envs; the padding rows repeat the last episode and are dropped.
ROWS = 8


def _padded(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ROWS` times the device count: each device's share of the batch a
    multiple of ROWS too (a share of 2 rows would round as a remainder group does)."""
    unit = ROWS * _device_count()
    return -(-int(n) // unit) * unit


def _shard(seeds: np.ndarray) -> Any:
    """The seeds on the devices: split over them along the batch (a 1-D mesh) when there are several and the batch
    divides; else on the default device."""
    import jax

    devices = jax.devices()
    if len(devices) > 1 and len(seeds) % len(devices) == 0:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(np.array(devices), ("batch",))
        return jax.device_put(seeds, NamedSharding(mesh, PartitionSpec("batch")))
    return jax.numpy.asarray(seeds)


def jax_rollout(engine: JaxEngine, episodes: int, *, seed: int = 0, num_envs: int = 128, gamma: float = 0.99,
                progress: Any = None, indices: Any = None) -> RolloutResult:
    """``episodes`` episodes of ``engine`` in batches of ``num_envs`` (the last one padded): the run record.
    ``progress``: called with each batch's number of episodes, or None. ``indices``: only these episodes of the
    ``episodes`` (each the same episode it is in the whole run: the explorer's replay of one), default all."""
    env = engine.env
    episodes = int(episodes)
    if episodes < 1:
        raise UsageError(f"episodes={episodes}; expected at least 1.")
    wanted = np.arange(episodes) if indices is None else np.asarray(sorted({int(k) for k in indices}), np.int64)
    if len(wanted) == 0 or wanted[0] < 0 or wanted[-1] >= episodes:
        raise UsageError(f"indices={list(indices or [])}; expected episodes of 0-{episodes - 1}.")
    batch = max(1, min(int(num_envs), len(wanted)))
    hm = None
    if engine.heatmap:
        hm = FailureHeatmap(tuple(env.object_grid), env.object_names, env.env_id)
    records: list[EpisodeResult] = []
    steps, t0 = 0, time.perf_counter()
    num_actions = len(env.action_names) if env.discrete else 1
    spec = FoldSpec(engine.policy.kind, bool(engine.greedy), gamma, num_actions)
    for first in range(0, len(wanted), batch):
        idx = wanted[first:first + batch]
        seeds = np.array([episode_seed_for(seed, int(k)) for k in idx], np.uint32)
        padded = np.concatenate([seeds, np.full(batch - len(seeds), seeds[-1], np.uint32)])
        ys, lengths = engine.run_packed(padded, len(idx))
        folded = fold_batch(ys, lengths, idx, seeds, spec, hm)
        records.extend(folded)
        steps += sum(r.length for r in folded)
        if progress is not None:
            progress(len(idx))
    if hm is not None:
        hm.episodes += len(records)
        hm.background = _background(engine, seed)
    wall = time.perf_counter() - t0
    recipe_json = _recipe_json(env)
    space = None
    if not env.discrete:  # as rlviz.agent.actions.space_to_json describes a Box, with the policy's squash
        d = len(env.action_names)
        low = env.action_low if env.action_low is not None else np.full(d, -np.inf)
        high = env.action_high if env.action_high is not None else np.full(d, np.inf)
        space = {"kind": "box", "shape": [d], "low": [float(v) for v in low], "high": [float(v) for v in high],
                 "squash": bool(engine.policy.squash)}
    return RolloutResult(env.env_id, tuple(records), hm, steps, wall, float(gamma), int(seed), engine.fail_on,
                         recipe_json, space)


def _device_count() -> int:
    import jax

    return int(jax.device_count())


def _background(engine: JaxEngine, seed: int) -> np.ndarray | None:
    """The heatmap's background: the env's first state of episode 0, drawn in the heatmap's plane."""
    import jax

    key = jax.random.split(jax.random.key(episode_seed_for(seed, 0)))[0]
    _, state = engine.env.reset(key, engine.env.params)
    return np.asarray(engine.env.heatmap_background(jax.device_get(state)))


def _recipe_json(env: Any) -> str:
    from ..envs.recipe import EnvRecipe

    recipe = EnvRecipe.for_env_id(env.env_id)
    kwargs = getattr(env, "env_kwargs", None) or {}
    return EnvRecipe(recipe.env_id, dict(kwargs), (), recipe.saliency_mode).to_json()
