"""Objects the RAM maps read from the screen (rlviz.evaluate.failures.atari_ram.screen): Enduro's other cars, BeamRider's
saucers and other craft, Pitfall's hazards, Venture's room monsters. Their hit rates are asserted with the other
categories' in tests/test_atari_objects.py (the same screen check); here: the rule on synthetic screens with exact
boxes, recall on the real games (every pixel of a category's colours in the band it is read from lies in one of
its boxes), what the extractor captures, and a heatmap with a screen-read layer."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py")
gym.register_envs(ale_py)

from rlviz.evaluate import RolloutPlan  # noqa: E402
from rlviz.evaluate.failures.atari_ram import GAMES, RamExtractor  # noqa: E402
from rlviz.evaluate.failures.atari_ram.screen import blobs, colour_set, row_background  # noqa: E402

GRASS, SNOW, ROAD_LINE, PINK, RED = 0xC0, 0x0E, 0x08, 0x56, 0x46


def _road(rows: int = 12) -> np.ndarray:
    """A synthetic band of 160 columns: grass rows, then snow rows, a grey road line down column 80."""
    band = np.full((rows, 160), GRASS, dtype=np.uint8)
    band[rows // 2:] = SNOW
    band[:, 80] = ROAD_LINE
    return band


def test_row_background_is_each_rows_most_common_colour():
    band = _road()
    band[0, 10:100] = PINK  # 90 of 160: pink is that row's background
    assert row_background(band).tolist() == [PINK] + [GRASS] * 5 + [SNOW] * 6


def test_blobs_on_a_synthetic_screen_are_exact():
    """A car (pink, 6x3 with a hole), two tail lights 4 px apart (one object with gap 5, two with gap 1), a grey
    line (scenery), a grass-coloured pixel on the snow (the colour of another row's background: an object), and
    columns 0-7 (blanked by the 2600) left out."""
    band, top = _road(), 100
    band[1:4, 20:26] = PINK
    band[2, 22] = GRASS  # a hole in the car: still one car
    band[8:10, 40:42] = RED
    band[8:10, 46:48] = RED  # 4 px to the right: pixels 42-45 are snow
    band[10, 120] = GRASS
    band[3, 2:6] = PINK  # in the blanked columns
    scenery = colour_set(*range(0, 16, 2))
    joined = blobs(band, top, scenery, gap=5)
    assert sorted(joined) == [(20, 101, 6, 3, PINK, 17), (40, 108, 8, 2, RED, 8), (120, 110, 1, 1, GRASS, 1)]
    apart = blobs(band, top, scenery | colour_set(GRASS), gap=1)  # grass as scenery too: the pixel on the snow goes
    assert sorted((b.x, b.y, b.w, b.h) for b in apart) == [(20, 101, 6, 3), (40, 108, 2, 2), (46, 108, 2, 2)]
    assert (2, 103, 4, 1, PINK, 4) in blobs(band, top, scenery, left=0)
    assert blobs(_road(), top, scenery) == []  # nothing but background and scenery


def test_a_full_screen_flash_is_background_not_an_object():
    """BeamRider paints the whole screen in one colour when the ship is hit: rows are then that colour, and only
    the saucer on it is an object."""
    game = GAMES["beam_rider"]()
    band = np.full((118, 160), 0x30, dtype=np.uint8)  # the red flash
    band[40, :] = 0xA4  # a beam across the screen
    band[60:64, 70:77] = 0x0E  # a white saucer
    boxes = game.read_screen(band, np.zeros(128, dtype=np.int64))
    assert boxes == [(("saucer", 70, 106, 7, 4, True))]


def _frames(env_id: str, seed: int, decisions: int, skip: int = 0):
    """Random decisions of 4 frames on ``env_id`` (no frame skip, seeded): (ram, getScreen, getScreenRGB) after each
    decision past the first ``skip``."""
    env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0)
    env.reset(seed=seed)
    rng, ale = np.random.default_rng(seed), env.unwrapped.ale
    try:
        for t in range(decisions):
            a = int(rng.integers(env.action_space.n))
            for _ in range(4):
                _, _, term, trunc, _ = env.step(a)
                if term or trunc:
                    env.reset()
            if t >= skip:
                yield np.asarray(ale.getRAM(), dtype=np.int64), ale.getScreen(), ale.getScreenRGB()
    finally:
        env.close()


#: (ROM, env id, seed, decisions, decisions skipped, category, RGB colours whose every pixel in the band must lie in
#: one of the category's boxes, rows: the band's, cut where another category shares the colour)
RECALL = [
    ("enduro", "ALE/Enduro-v5", 0, 150, 0, "car", ((184, 70, 162), (66, 114, 194), (162, 162, 42), (66, 158, 130),
                                                   (162, 134, 56), (198, 108, 58), (110, 156, 66)), (52, 158)),
    ("beam_rider", "ALE/BeamRider-v5", 0, 150, 0, "saucer", ((236, 236, 236), (170, 170, 170)), (46, 164)),
    ("beam_rider", "ALE/BeamRider-v5", 0, 150, 0, "enemy", ((198, 108, 58),), (46, 164)),
    ("pitfall", "ALE/Pitfall-v5", 0, 150, 0, "pit", ((45, 109, 152),), (100, 185)),
    ("pitfall", "ALE/Pitfall-v5", 0, 150, 0, "crocodile", ((20, 60, 0),), (100, 185)),
    ("pitfall", "ALE/Pitfall-v5", 0, 150, 0, "scorpion", ((236, 236, 236),), (150, 185)),
    ("venture", "ALE/Venture-v5", 2, 520, 380, "monster", ((78, 50, 181), (82, 126, 45)), (20, 190)),
]


@pytest.mark.parametrize("rom, env_id, seed, decisions, skip, category, colours, rows", RECALL,
                         ids=[f"{r[0]}-{r[5]}" for r in RECALL])
def test_screen_read_categories_miss_no_pixel_of_their_colours(rom, env_id, seed, decisions, skip, category, colours,
                                                               rows):
    """Recall, which the hit rate does not measure: on the real game, every pixel of the category's colours in the
    rows it is read from (``getScreenRGB``, not the colour bytes the rule reads) lies in one of its boxes; and the
    category is seen (Venture: in a room, which seed 2 enters after ~380 decisions)."""
    game = GAMES[rom]()
    want = np.array([(r << 16) | (g << 8) | b for r, g, b in colours])
    seen = 0
    for ram, screen, rgb in _frames(env_id, seed, decisions, skip):
        covered = np.zeros((210, 160), dtype=bool)
        for b in game.objects(ram, game.band(screen)):
            if b.category == category:
                covered[max(b.y, 0):b.y + b.h, max(b.x, 0):b.x + b.w] = True
                seen += 1
        px = rgb.astype(np.int64)
        mine = np.isin((px[..., 0] << 16) | (px[..., 1] << 8) | px[..., 2], want)
        mine[:rows[0]], mine[rows[1]:] = False, False
        mine[:, :8] &= rom == "venture"  # (the 2600 blanks columns 0-7; Venture's monsters walk in from there)
        missed = np.argwhere(mine & ~covered)
        assert len(missed) == 0, f"{rom} {category}: {len(missed)} pixels outside its boxes, first {missed[:3]}"
    assert seen >= 10, f"{rom} {category}: seen {seen} times"


def test_the_extractor_captures_the_band_only_for_games_that_read_the_screen():
    """Enduro captures its RAM and rows 52-157 of ``getScreen()``; Seaquest (RAM only) captures its 128 bytes, as
    before. The masks of an Enduro capture hold the car boxes the game finds in it."""
    for rom, env_id in (("enduro", "ALE/Enduro-v5"), ("seaquest", "ALE/Seaquest-v5")):
        env = gym.make(env_id, repeat_action_probability=0.0)
        env.reset(seed=0)
        for _ in range(60):
            env.step(1)
        ex = RamExtractor(GAMES[rom]())
        cap = ex.capture(None, env)
        ram = np.asarray(env.unwrapped.ale.getRAM())
        if rom == "seaquest":
            assert isinstance(cap, np.ndarray) and cap.dtype == np.uint8 and np.array_equal(cap, ram)
        else:
            ram_cap, band = cap
            assert np.array_equal(ram_cap, ram) and band.dtype == np.uint8 and band.shape == (106, 160)
            assert np.array_equal(band, env.unwrapped.ale.getScreen()[52:158])
            cars = [b for b in ex.boxes(ram_cap, band) if b.category == "car"]
            masks = ex.masks(cap)
            assert cars and masks["car"].sum() == len(np.unique(np.concatenate(
                [np.ravel_multi_index(np.mgrid[b.y:b.y + b.h, b.x:b.x + b.w].reshape(2, -1), (210, 160))
                 for b in cars])))
            assert not masks["car"][:52].any() and not masks["car"][158:].any()
        env.close()


def test_heatmap_of_a_screen_read_game_has_its_layers_where_the_game_draws_them(tmp_path):
    """A rollout with the heatmap on Pitfall (a random-weight agent, lives lost in the pits, to the crocodiles and
    the scorpion): the layers are the map's categories, and the hazards' counts lie where the game draws them (the
    pits and crocodiles in the ground's rows 118-131, the scorpion underground, rows 150-184), read from the screen
    on the steps before each failure."""
    import torch

    import rlviz
    from rlviz.agent.models import NatureCNNAgent
    from rlviz.sources.checkpoint import save_checkpoint

    torch.manual_seed(0)
    path = save_checkpoint(tmp_path / "pitfall.pt2", NatureCNNAgent(18), env="ALE/Pitfall-v5")
    agent = rlviz.load_agent(path)
    res = rlviz.rollout(agent.recipe, agent.policy, RolloutPlan(1, num_envs=1, heatmap=True, seed=0, max_steps=1500))
    hm = res.heatmap
    assert tuple(hm.object_names) == GAMES["pitfall"].categories and hm.failures >= 1
    found = 0
    for category, (r0, r1) in (("pit", (118, 132)), ("crocodile", (118, 132)), ("scorpion", (150, 185)),
                               ("log", (100, 140))):
        rows, cols = np.nonzero(hm.counts[category])
        if len(rows):
            found += 1
            assert r0 <= rows.min() and rows.max() < r1 and cols.min() >= 8, (category, rows.min(), rows.max())
    assert found >= 2
