#!/usr/bin/env python
"""Train the rlviz sample agents with PPO (one file, CleanRL-style), evaluate and convert them.

    python scripts/train_ppo.py --env MinAtar/Breakout-v1 --total-steps 3000000 --out samples/x.pt2
    python scripts/train_ppo.py --env MinAtar/Breakout-v1 --no-entropy ...   # the seed-003 bug
    python scripts/train_ppo.py --env ALE/Breakout-v5 --total-steps 2000000 --out samples/ale.pt2
    python scripts/train_ppo.py --eval samples/x.pt2 --episodes 1000
    python scripts/train_ppo.py --convert /tmp/train/x.state.pt --out samples/x.pt2

Planted bugs for the bug zoo (``samples/zoo/``), each fine-tuning a shipped agent (``--init-checkpoint``):
``--reset-value-head --vf-coef 0`` (the value head is never trained), ``--declared-gamma G`` (trains with
``--gamma`` but the checkpoint says G), ``--reward-scale K`` (trains on K x reward, the checkpoint plays the
raw game: a normalisation never undone).

PPO: GAE(lambda), clipped surrogate, clipped value loss, entropy bonus, Adam with linearly annealed
LR, minibatch epochs, per-minibatch advantage normalisation, global grad-norm clipping.

Environments come from ``rlviz.envs.make_vec_env(recipe, n, render_mode=None, training=True)``
(gymnasium SyncVectorEnv, SAME_STEP autoreset: the obs returned on a done step is already the next
episode's first obs). Terminations do not bootstrap; truncations DO bootstrap: the reward of a
truncated step gets ``+ gamma * V(info["final_obs"])`` and the GAE chain is then cut there.
For ALE, ``--life-loss-done`` (default on) cuts the GAE chain when a life is lost without
resetting the game (CleanRL's EpisodicLife without the soft reset); the env recipe itself stays
the plain ``atari_recipe`` so evaluation plays full games.

Every checkpoint is written twice: the rlviz format via ``rlviz.checkpoint.save_checkpoint`` (when
that module is importable) at ``--out``, and a plain weights-only state file (tensors, dicts,
strings, numbers) at ``--state-out`` (default ``/tmp/train/<name>.state.pt``), which ``--convert``
turns into the rlviz format later.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rlviz.agent.models import MinAtarAgent, NatureCNNAgent, layer_init  # noqa: E402
from rlviz.agent.policy import TorchPolicy, resolve_device  # noqa: E402
from rlviz.envs import EnvRecipe, atari_recipe, make_vec_env  # noqa: E402

#: Per-family defaults; any flag given on the command line wins.
PRESETS = {
    "minatar": dict(num_envs=64, num_steps=128, lr=5e-4, epochs=4, minibatches=8, clip=0.2, ent_coef=0.01),
    "atari": dict(num_envs=8, num_steps=128, lr=2.5e-4, epochs=4, minibatches=4, clip=0.1, ent_coef=0.01),
}




def family(env_id: str) -> str:
    return "atari" if env_id.startswith("ALE/") else "minatar"


def recipe_for(env_id: str) -> EnvRecipe:
    return atari_recipe(env_id) if family(env_id) == "atari" else EnvRecipe.for_env_id(env_id)


def build_agent(env_id: str, obs_shape: tuple, num_actions: int) -> nn.Module:
    if family(env_id) == "atari":
        return NatureCNNAgent(num_actions, in_channels=obs_shape[0])
    return MinAtarAgent(num_actions, in_channels=obs_shape[-1])


# ---------------------------------------------------------------------------------------------- saving
def save_state(path: str, agent: nn.Module, recipe: EnvRecipe, info: dict) -> None:
    """Weights-only-loadable fallback: plain tensors, dicts, lists, strings and numbers."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    state = {k: v.detach().cpu().clone() for k, v in agent.state_dict().items()}
    torch.save({"state_dict": state, "recipe": recipe.to_dict(), **info}, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_state(path: str) -> tuple[nn.Module, EnvRecipe, dict]:
    blob = torch.load(path, map_location="cpu", weights_only=True)
    recipe = EnvRecipe.from_dict(blob["recipe"])
    sd = blob["state_dict"]
    if family(recipe.env_id) == "atari":
        agent = NatureCNNAgent(sd["actor.weight"].shape[0], in_channels=sd["torso.0.weight"].shape[1])
    else:
        agent = MinAtarAgent(sd["actor.weight"].shape[0], sd["torso.0.weight"].shape[1], sd["actor.weight"].shape[1])
    agent.load_state_dict(sd)
    return agent.eval(), recipe, blob


def load_checkpoint_weights(path: str, env_id: str, obs_shape: tuple, num_actions: int) -> nn.Module:
    """A fresh reference network holding the weights of an rlviz checkpoint (an exported program)."""
    from rlviz.sources.checkpoint import load_agent

    module = load_agent(path).policy.module
    prefix = "program.inner."
    sd = {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in module.state_dict().items()}
    agent = build_agent(env_id, obs_shape, num_actions)
    agent.load_state_dict(sd)
    return agent


def save_rlviz(path: str, agent: nn.Module, recipe: EnvRecipe, example_obs, gamma: float, metadata: dict,
               step: int | None = None) -> bool:
    """Write the rlviz checkpoint; False (with a note) when rlviz.sources.checkpoint is not available yet.
    ``step``: the training step it records (``save_checkpoint(..., step=)`` when it takes one, and
    ``metadata["step"]`` either way), which ``rlviz timeline`` reads."""
    try:
        from rlviz.sources.checkpoint import save_checkpoint
    except ImportError as exc:
        print(f"note: rlviz.sources.checkpoint not importable ({exc}); only the state file was written", flush=True)
        return False
    from rlviz.agent.policy import action_names_for
    from rlviz.envs import make_env

    env = make_env(recipe, render_mode=None)
    names = action_names_for(env, env.action_space.n)
    env.close()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    agent = agent.to("cpu").eval()
    extra: dict = {}
    if step is not None:
        import inspect

        metadata = {**metadata, "step": int(step)}
        if "step" in inspect.signature(save_checkpoint).parameters:
            extra["step"] = int(step)
    save_checkpoint(
        path, agent, env=recipe, example_obs=example_obs, kind="actor_critic",
        action_names=names, gamma=gamma, metadata=metadata, **extra,
    )
    return True


# ---------------------------------------------------------------------------------------------- training
def _rlviz_sinks(args: argparse.Namespace) -> list:
    """Sinks for --rlviz-every: TensorBoard and/or a folder of MP4s (none when the flag is off)."""
    if not args.rlviz_every:
        return []
    from rlviz.sinks import FolderSink, TensorBoardSink

    sinks = []
    if args.rlviz_tensorboard:
        sinks.append(TensorBoardSink(args.rlviz_tensorboard))
    if args.rlviz_dir or not sinks:
        sinks.append(FolderSink(args.rlviz_dir or "runs/rlviz-videos"))
    return sinks


def train(args: argparse.Namespace) -> None:
    preset = PRESETS[family(args.env)]
    for k, v in preset.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    torch.set_num_threads(args.threads)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = resolve_device(args.device)
    recipe = recipe_for(args.env)
    envs = make_vec_env(recipe, args.num_envs, render_mode=None, training=True)
    obs_shape = envs.single_observation_space.shape
    n_act = int(envs.single_action_space.n)
    agent = build_agent(args.env, obs_shape, n_act).to(device)
    if args.init_state:  # continue training an earlier run (its weights; a fresh optimizer and LR schedule)
        agent.load_state_dict(load_state(args.init_state)[0].state_dict())
    if args.init_checkpoint:  # the same from an rlviz checkpoint (.pt2)
        agent.load_state_dict(load_checkpoint_weights(args.init_checkpoint, args.env, obs_shape, n_act).state_dict())
    if args.reset_value_head:  # planted bug: a value head that starts from scratch (with --vf-coef 0: stays so)
        layer_init(agent.critic, std=1.0)
    opt = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    life_done = args.life_loss_done and family(args.env) == "atari"
    command = " ".join(shlex.quote(a) for a in ["scripts/train_ppo.py"] + list(args.argv))
    if args.no_entropy:
        print("WARNING: --no-entropy is ON: the entropy term is computed and logged but never reaches the loss "
              "(reproduces seed 003's bug).", flush=True)

    N, T = args.num_envs, args.num_steps
    batch = N * T
    mb_size = batch // args.minibatches
    num_updates = max(1, args.total_steps // batch)
    obs_buf = torch.zeros((T, N) + obs_shape, dtype=torch.uint8)
    act_buf = torch.zeros((T, N), dtype=torch.long)
    logp_buf = torch.zeros((T, N))
    rew_buf = torch.zeros((T, N))
    done_buf = torch.zeros((T, N))  # 1 where obs[t] starts a new segment (GAE chain cut before it)
    val_buf = torch.zeros((T, N))

    next_obs, info = envs.reset(seed=args.seed)
    next_done = torch.zeros(N)
    lives = np.asarray(info.get("lives", np.zeros(N)), dtype=np.int64)
    ep_ret = np.zeros(N)
    ep_len = np.zeros(N, dtype=np.int64)
    finished: list[float] = []
    recent: list[float] = []
    t0 = time.time()
    step = 0
    stats = {}
    sinks, next_video = _rlviz_sinks(args), args.rlviz_every
    next_ckpt = args.checkpoint_every
    ckpt_dir = args.checkpoint_dir or os.path.dirname(os.path.abspath(args.out))

    def save(final: bool, checkpoint: bool = False) -> None:
        meta = {
            "command": command, "total_steps": step, "wall_time_s": round(time.time() - t0, 1),
            "final_train_return": float(np.mean(recent[-100:])) if recent else None,
            "train_return_note": "mean of last 100 finished training episodes (training env: clipped rewards for ALE)",
            "episodes": len(finished), "algo": "PPO", "no_entropy": bool(args.no_entropy),
            "life_loss_done": bool(life_done), "final": final,
        }
        cfg = {k: v for k, v in vars(args).items() if k != "argv" and (isinstance(v, (int, float, str, bool)) or v is None)}
        save_state(args.state_out, agent, recipe, {"config": cfg, "metadata": meta})
        declared = args.gamma if args.declared_gamma is None else args.declared_gamma
        if final:
            save_rlviz(args.out, agent, recipe, obs_buf[0, :1].numpy(), declared, {**meta, "config": cfg})
        if checkpoint:  # a training-run checkpoint for ``rlviz timeline``: <checkpoint dir>/step_<N>.pt2
            path = os.path.join(ckpt_dir, f"step_{step}.pt2")
            save_rlviz(path, agent, recipe, obs_buf[0, :1].numpy(), declared, {**meta, "config": cfg}, step=step)
            agent.to(device)
            print(f"checkpoint: {path}", flush=True)

    for update in range(1, num_updates + 1):
        if args.anneal_lr:
            opt.param_groups[0]["lr"] = args.lr * (1.0 - (update - 1.0) / num_updates)
        agent.eval()
        for t in range(T):
            obs_t = torch.as_tensor(next_obs)
            obs_buf[t] = obs_t
            done_buf[t] = next_done
            with torch.no_grad():
                logits, value = agent(obs_t.to(device))
                dist = torch.distributions.Categorical(logits=logits)
                action = dist.sample()
            act_buf[t], logp_buf[t], val_buf[t] = action.cpu(), dist.log_prob(action).cpu(), value.cpu()
            next_obs, reward, term, trunc, info = envs.step(action.cpu().numpy())
            step += N
            reward = np.asarray(reward, dtype=np.float64)
            ep_ret += reward
            reward = reward * args.reward_scale  # 1 unless a reward-scale bug is planted
            ep_len += 1
            boot = reward.copy()
            cut_trunc = trunc & ~term
            if cut_trunc.any():  # bootstrap truncated episodes from V(final obs)
                idx = np.flatnonzero(cut_trunc)
                fobs = torch.as_tensor(np.stack([info["final_obs"][i] for i in idx]))
                with torch.no_grad():
                    boot[idx] += args.gamma * agent(fobs.to(device))[1].cpu().numpy()
            rew_buf[t] = torch.as_tensor(boot, dtype=torch.float32)
            done = term | trunc
            if life_done:
                new_lives = np.asarray(info["lives"], dtype=np.int64)
                done = done | ((new_lives < lives) & ~done)
                lives = new_lives
            next_done = torch.as_tensor(done, dtype=torch.float32)
            for i in np.flatnonzero(term | trunc):
                finished.append(ep_ret[i])
                recent.append(ep_ret[i])
                ep_ret[i], ep_len[i] = 0.0, 0

        # GAE
        with torch.no_grad():
            next_value = agent(torch.as_tensor(next_obs).to(device))[1].cpu()
        adv = torch.zeros((T, N))
        last = torch.zeros(N)
        for t in reversed(range(T)):
            nonterm = 1.0 - (next_done if t == T - 1 else done_buf[t + 1])
            nv = next_value if t == T - 1 else val_buf[t + 1]
            delta = rew_buf[t] + args.gamma * nv * nonterm - val_buf[t]
            last = delta + args.gamma * args.gae_lambda * nonterm * last
            adv[t] = last
        ret = adv + val_buf

        b_obs = obs_buf.reshape((-1,) + obs_shape)
        b_act, b_logp = act_buf.reshape(-1), logp_buf.reshape(-1)
        b_adv, b_ret, b_val = adv.reshape(-1), ret.reshape(-1), val_buf.reshape(-1)
        agent.train()
        clipfracs = []
        for _ in range(args.epochs):
            perm = torch.randperm(batch)
            for s in range(0, batch, mb_size):
                mb = perm[s : s + mb_size]
                logits, value = agent(b_obs[mb].to(device))
                logits, value = logits.cpu(), value.cpu()
                dist = torch.distributions.Categorical(logits=logits)
                logp = dist.log_prob(b_act[mb])
                entropy = dist.entropy().mean()
                ratio = (logp - b_logp[mb]).exp()
                a = b_adv[mb]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg_loss = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                v_clipped = b_val[mb] + (value - b_val[mb]).clamp(-args.clip, args.clip)
                v_loss = 0.5 * torch.max((value - b_ret[mb]) ** 2, (v_clipped - b_ret[mb]) ** 2).mean()
                if args.no_entropy:
                    loss = pg_loss + args.vf_coef * v_loss  # the bug: entropy computed, never used
                else:
                    loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                opt.step()
                clipfracs.append(((ratio - 1.0).abs() > args.clip).float().mean().item())
        stats = dict(pg=pg_loss.item(), v=v_loss.item(), ent=entropy.item(), clipfrac=float(np.mean(clipfracs)))

        if update % args.log_every == 0 or update == num_updates:
            el = time.time() - t0
            r = recent[-100:]
            print(
                f"step {step:>9d}  sps {step / el:7.0f}  wall {el / 60:6.1f}m  episodes {len(finished):6d}  "
                f"return(last100) {np.mean(r) if r else float('nan'):7.2f}  entropy {stats['ent']:.3f}  "
                f"v_loss {stats['v']:.3f}  clipfrac {stats['clipfrac']:.3f}",
                flush=True,
            )
        if sinks and step >= next_video:  # an evaluation episode with panels, logged at this global step
            from rlviz import TorchPolicy
            from rlviz.integrations import log_episode

            res = log_episode(recipe, TorchPolicy(agent, device=device), sinks, step, seed=args.seed)
            print(f"rlviz: logged an evaluation episode at step {step} (return {res.episode_return:g})", flush=True)
            next_video += args.rlviz_every
            agent.train()
        over_time = bool(args.time_limit and time.time() - t0 > args.time_limit * 60)
        due = bool(args.checkpoint_every) and (step >= next_ckpt or update == num_updates or over_time)
        if due:
            next_ckpt = (step // args.checkpoint_every + 1) * args.checkpoint_every
        if update % args.save_every == 0 or due:
            save(final=False, checkpoint=due)
        if over_time:
            print(f"time limit of {args.time_limit} min reached at step {step}; stopping", flush=True)
            break
    save(final=True)
    for sink in sinks:
        sink.close()
    envs.close()
    print(f"done: {step} steps in {(time.time() - t0) / 60:.1f} min; state {args.state_out}; out {args.out}", flush=True)


# ---------------------------------------------------------------------------------------------- evaluation
def load_policy(path: str, device: str = "cpu"):
    """(Policy, EnvRecipe) from an rlviz checkpoint or a ``.state.pt`` file."""
    if path.endswith(".state.pt"):
        agent, recipe, _ = load_state(path)
        return TorchPolicy(agent, kind="actor_critic", device=device), recipe
    from rlviz.sources.checkpoint import load_checkpoint

    ck = load_checkpoint(path)
    policy = getattr(ck, "policy", None) or ck[0]
    recipe = getattr(ck, "recipe", None) or getattr(ck, "env", None) or ck[1]
    if isinstance(recipe, str):
        recipe = EnvRecipe.from_json(recipe) if recipe.lstrip().startswith("{") else EnvRecipe.for_env_id(recipe)
    return policy, recipe


def evaluate(path: str, episodes: int, num_envs: int, seed: int, threads: int) -> np.ndarray:
    """Returns of ``episodes`` full episodes (evaluation recipe: no clipping, all lives), sampled actions."""
    torch.set_num_threads(threads)
    policy, recipe = load_policy(path)
    n = min(num_envs, episodes)
    envs = make_vec_env(recipe, n, render_mode=None, training=False)
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=seed)
    ep_ret = np.zeros(n)
    # Only the first episodes started are counted, so short episodes do not bias the mean.
    started = n
    counted = np.ones(n, dtype=bool)
    returns: list[float] = []
    t0, steps = time.time(), 0
    while len(returns) < episodes:
        actions, _ = policy.act(obs, rng)
        obs, r, term, trunc, _ = envs.step(actions)
        steps += n
        ep_ret += r
        for i in np.flatnonzero(term | trunc):
            if counted[i]:
                returns.append(float(ep_ret[i]))
            ep_ret[i] = 0.0
            counted[i] = started < episodes
            started += int(counted[i])
    envs.close()
    x = np.asarray(returns[:episodes])
    print(
        f"{path}: {len(x)} episodes of {recipe.env_id}: mean {x.mean():.2f} +- {x.std():.2f} (std), "
        f"median {np.median(x):.1f}, min {x.min():.1f}, max {x.max():.1f}; {steps} steps in "
        f"{time.time() - t0:.0f}s",
        flush=True,
    )
    return x


def convert(state_path: str, out: str) -> None:
    agent, recipe, blob = load_state(state_path)
    env_shape = None
    if family(recipe.env_id) == "atari":
        env_shape = (agent.torso[0].in_channels, 84, 84)
        example = np.zeros((1,) + env_shape, dtype=np.uint8)
    else:
        example = np.zeros((1, 10, 10, agent.torso[0].in_channels), dtype=bool)
    meta = {**blob.get("metadata", {}), "config": blob.get("config", {})}
    if not save_rlviz(out, agent, recipe, example, float(blob.get("config", {}).get("gamma", 0.99)), meta):
        raise SystemExit(2)
    print(f"wrote {out}")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="MinAtar/Breakout-v1")
    p.add_argument("--total-steps", type=int, default=3_000_000)
    p.add_argument("--num-envs", type=int)
    p.add_argument("--num-steps", type=int, help="rollout length per env per update")
    p.add_argument("--lr", type=float)
    p.add_argument("--no-anneal-lr", dest="anneal_lr", action="store_false")
    p.add_argument("--epochs", type=int)
    p.add_argument("--minibatches", type=int)
    p.add_argument("--clip", type=float)
    p.add_argument("--ent-coef", type=float)
    p.add_argument("--no-entropy", action="store_true", help="reproduce seed 003: entropy never reaches the loss")
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--no-life-loss-done", dest="life_loss_done", action="store_false")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="samples/agent.pt2")
    p.add_argument("--state-out", help="default /tmp/train/<out name>.state.pt")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--log-every", type=int, default=10, help="updates between progress lines")
    p.add_argument("--save-every", type=int, default=50, help="updates between state-file saves")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="STEPS",
                   help="every STEPS env steps (and at the end) write <--checkpoint-dir>/step_<N>.pt2 with its step")
    p.add_argument("--checkpoint-dir", metavar="DIR", help="with --checkpoint-every: where (default: --out's folder)")
    p.add_argument("--time-limit", type=float, default=0.0, help="stop training after this many minutes (0: none)")
    p.add_argument("--init-state", metavar="STATE", help="start from the weights of an earlier run's .state.pt")
    p.add_argument("--init-checkpoint", metavar="PT2", help="start from the weights of an rlviz checkpoint")
    p.add_argument("--reset-value-head", action="store_true", help="planted bug: re-initialise the critic head")
    p.add_argument("--declared-gamma", type=float, metavar="G",
                   help="planted bug: the checkpoint declares this gamma instead of --gamma")
    p.add_argument("--reward-scale", type=float, default=1.0, metavar="K",
                   help="train on K x reward (planted bug: a reward scale the checkpoint does not undo)")
    p.add_argument("--rlviz-every", type=int, default=0, metavar="STEPS",
                   help="every STEPS env steps, record an evaluation episode with rlviz panels and log it")
    p.add_argument("--rlviz-tensorboard", metavar="LOGDIR", help="with --rlviz-every: log to TensorBoard here")
    p.add_argument("--rlviz-dir", metavar="DIR", help="with --rlviz-every: keep the MP4s here (default runs/rlviz-videos)")
    p.add_argument("--eval", metavar="CHECKPOINT", help="evaluate a checkpoint instead of training")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--eval-envs", type=int, default=32)
    p.add_argument("--convert", metavar="STATE", help="convert a .state.pt file to the rlviz format at --out")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.state_out is None:
        args.state_out = os.path.join("/tmp/train", os.path.splitext(os.path.basename(args.out))[0] + ".state.pt")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.eval:
        evaluate(args.eval, args.episodes, args.eval_envs, args.seed, args.threads)
    elif args.convert:
        convert(args.convert, args.out)
    else:
        train(args)


if __name__ == "__main__":
    main()
