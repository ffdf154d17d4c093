"""Exact classic-control and LunarLander extractors: the positions computed from the env's state are where the
objects are on env.render()'s frames, and their heatmaps are those of measuring the frames (without rendering)."""

import gymnasium as gym
import numpy as np
import pytest
from _envs import seeded_mlp

from rlviz.agent.policy import TorchPolicy
from rlviz.errors import UsageError
from rlviz.evaluate import RolloutPlan
from rlviz.evaluate.failures.classic_objects import CLASSIC_OBJECTS
from rlviz.evaluate.failures.objects import StateExtractor, extractor_for
from rlviz.evaluate.rollouts.rollout import rollout

# -- measuring the objects on rendered frames (colours and shapes from the gymnasium renderers) --------------


def _colour(frame, rgb):
    """Where the frame is exactly this colour, compared channel by channel: the same mask as
    ``(frame == rgb).all(-1)``, whose reduction over the last axis took ten times as long (most of this file's time)."""
    r, g, b = (int(v) for v in rgb)
    return (frame[..., 0] == r) & (frame[..., 1] == g) & (frame[..., 2] == b)


def _points(mask):
    return np.argwhere(mask).astype(float)


def _far_end(points, origin, back):
    """The mean of the points within ``back`` of the farthest one along the axis from ``origin`` to their centroid."""
    axis = points.mean(0) - origin
    proj = (points - origin) @ (axis / np.linalg.norm(axis))
    return points[proj >= proj.max() - back].mean(0)


def _eroded(mask, times=2):
    for _ in range(times):
        m = mask.copy()
        m[1:] &= mask[:-1]
        m[:-1] &= mask[1:]
        m[:, 1:] &= mask[:, :-1]
        m[:, :-1] &= mask[:, 1:]
        mask = m
    return mask


def _cartpole(frame):
    black = _colour(frame, (0, 0, 0))
    track = np.flatnonzero(black.all(1))  # the track line, across the frame
    black[track] = False
    rows = np.flatnonzero(black.any(1))
    cols = np.flatnonzero(black[track[0] + 1 :].any(0))  # the cart's lower half: no pole, no axle
    axle = _points(_colour(frame, (129, 132, 203))).mean(0)
    pole_tip = _far_end(_points(_colour(frame, (202, 152, 101))), axle, 10)  # the last polewidth of the pole
    return [((rows.min() + rows.max()) / 2, (cols.min() + cols.max()) / 2), pole_tip]


def _acrobot(frame):
    base = np.array([249.0, 250.0])
    joints = _points(_colour(frame, (204, 204, 0)))
    elbow = joints[np.linalg.norm(joints - base, axis=1) > 20].mean(0)
    links = _points(_colour(frame, (0, 204, 204)))
    along = (elbow - base) / np.linalg.norm(elbow - base)
    t = np.clip((links - base) @ along, 0, np.linalg.norm(elbow - base))
    link2 = links[np.linalg.norm(links - (base + t[:, None] * along), axis=1) > 14]  # off link 1
    return [elbow, _far_end(link2, elbow, 0.2 * 500 / 4.4)]  # the end square of a link 0.2 scale wide


def _mountain_car(frame):
    return [_points(_colour(frame, (128, 128, 128))).mean(0)]  # midway between the two wheels


def _pendulum(frame):
    pivot = np.array([249.0, 250.0])
    rod = _points(_colour(frame, (204, 77, 77)))
    axis = (rod.mean(0) - pivot) / np.linalg.norm(rod.mean(0) - pivot)
    return [_far_end(rod, pivot, 1) - 11 * axis]  # the bob: a disc of radius 11 at the rod's end


def _lander(frame):
    return [_points(_eroded(_colour(frame, (128, 102, 230)))).mean(0)]  # legs (4 px wide) eroded away


MEASURE = {"CartPole-v1": _cartpole, "Acrobot-v1": _acrobot, "MountainCar-v0": _mountain_car,
           "Pendulum-v1": _pendulum, "LunarLander-v3": _lander}


def _needs(env_id):
    if env_id.startswith("LunarLander"):
        pytest.importorskip("Box2D")


@pytest.mark.parametrize("env_id", sorted(MEASURE))
def test_positions_from_state_are_where_the_renderer_draws(env_id):
    _needs(env_id)
    env = gym.make(env_id, render_mode="rgb_array")
    ex = extractor_for(env_id)
    assert isinstance(ex, StateExtractor) and not ex.needs_frame
    env.reset(seed=0)
    env.action_space.seed(0)
    errors = []
    for i in range(200):
        shape, centres = ex.capture(None, env)
        frame = env.render()
        assert frame.shape[:2] == shape
        margin = max(ex.radii) + 12
        if all(margin <= c[0] <= shape[0] - margin and margin <= c[1] <= shape[1] - margin for c in centres):
            errors.append(np.abs(np.subtract(centres, MEASURE[env_id](frame))).max(1))  # whole object on screen
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset(seed=i)
    env.close()
    errors = np.array(errors)
    assert len(errors) >= 100, len(errors)
    # within 1.25 px (row and column) on 95% of the frames, 2 px on all (centres of rasterised shapes)
    assert np.quantile(errors, 0.95) <= 1.25 and errors.max() <= 2.0, (np.quantile(errors, 0.95), errors.max())


class _FromPixels(StateExtractor):
    """The same objects and markers, the centres measured on the rendered frames (the pixel path)."""

    needs_frame = True

    def __init__(self, env_id):
        super().__init__(*CLASSIC_OBJECTS[env_id][:2], locate=None)
        self.measure = MEASURE[env_id]

    def capture(self, frame, env):
        return frame.shape[:2], [tuple(c) for c in self.measure(frame)]


@pytest.mark.parametrize("env_id,episodes,fail_on,max_steps", [
    ("CartPole-v1", 6, "termination", None),
    ("Acrobot-v1", 2, "negative-reward", 30),  # -1 a step: every step fails
    ("LunarLander-v3", 4, "termination", None),
])
def test_heatmap_equals_the_pixel_paths_up_to_a_pixel_and_renders_one_frame(env_id, episodes, fail_on, max_steps,
                                                                            monkeypatch):
    _needs(env_id)
    probe = gym.make(env_id)
    policy = TorchPolicy(seeded_mlp(probe.observation_space.shape[0], probe.action_space.n), device="cpu")
    probe.close()
    kw = dict(num_envs=2, seed=3, heatmap=True, progress=False, fail_on=fail_on, max_steps=max_steps)
    renders = []
    cls = type(gym.make(env_id).unwrapped)
    real = cls.render
    monkeypatch.setattr(cls, "render", lambda self: renders.append(1) or real(self))
    exact = rollout(env_id, policy, RolloutPlan(episodes, **kw))
    assert len(renders) == 1  # the heatmap's background frame, nothing else
    monkeypatch.undo()
    pixels = rollout(env_id, policy, RolloutPlan(episodes, objects=_FromPixels(env_id), **kw))
    assert exact.heatmap.failures == pixels.heatmap.failures > 0
    assert [(e.seed, e.ret, e.length) for e in exact.episodes] == [(e.seed, e.ret, e.length) for e in pixels.episodes]
    rows, cols = np.indices(exact.heatmap.frame_shape)
    for name in exact.heatmap.object_names:
        a, b = exact.heatmap.counts[name], pixels.heatmap.counts[name]
        assert a.sum() > 0
        # every marker at most a pixel or two away: the same mass (markers off the frame's edge aside) and centre
        assert abs(a.sum() - b.sum()) <= 0.02 * a.sum(), name
        centre = [np.array([(w * rows).sum(), (w * cols).sum()]) / w.sum() for w in (a, b)]
        assert np.abs(centre[0] - centre[1]).max() <= 1.0, (name, centre)


def test_markers_are_discs_cut_at_the_frame_edge_and_names_need_radii():
    ex = StateExtractor(("a", "b"), (2, 1), locate=lambda u: ((6, 8), ((0.4, 7.6), (-5.0, 3.0))))
    m = ex.masks(ex.capture(None, gym.make("CartPole-v1")))
    assert np.argwhere(m["a"]).tolist() == [[0, 6], [0, 7], [1, 7]]  # within 2 px of (0, 8), cut at column 7
    assert not m["b"].any()  # off the frame
    assert StateExtractor(("a",), (1,), locate=lambda u: None).masks(None) == {}  # before a reset
    with pytest.raises(UsageError, match="radii"):
        StateExtractor(("a", "b"), (2,), locate=None)


def test_frames_rendered_at_another_size_get_scaled_markers():
    ex = StateExtractor(("a",), (4,), locate=lambda u: ((400, 600), ((100.0, 300.0),)))
    ex.frame_shape = (200, 300)  # as the rollout sets it from a rendered frame
    m = ex.masks(ex.capture(None, gym.make("CartPole-v1")))["a"]
    assert m.shape == (200, 300) and m[50, 150] and m.sum() == 13  # radius 2 at (50, 150)
