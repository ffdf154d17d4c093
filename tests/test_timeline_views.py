"""The views of ``rlviz timeline`` (rlviz.training.views): timeline.png, the heatmap small multiples,
progression.mp4 (decoded back), the sinks at the training step (TensorBoard event files and a W&B offline run,
read back) and the timeline report page in a real headless Chromium.

The run: three CartPole checkpoints of small torch networks saved with ``save_checkpoint`` (different weights per
step), each rolled out for real on the same seeds (render's code) with a heatmap, so the rows, heatmaps and
episodes are the real thing; the timeline numbers of ``data`` come from those rollouts."""

from __future__ import annotations

import functools
import glob
import http.server
import json
import shutil
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import tb_accumulator, wandb_flushed, wandb_items, wandb_records
from PIL import Image
from torch import nn

from rlviz.config import TimelineConfig
from rlviz.evaluate import RolloutPlan, rollout, summarize
from rlviz.evaluate.rollouts.rollout import episode_seed_for
from rlviz.media import probe_video, read_video
from rlviz.sinks import log_timeline_checkpoint, log_timeline_end
from rlviz.sources import load_agent, save_checkpoint
from rlviz.sources.run_folders import TimelineCheckpoint
from rlviz.training.plot import SIZE, plot_timeline, plot_timelines
from rlviz.training.progression import BAND
from rlviz.training.views import progression_seed, write_views

STEPS = (1000, 2000, 3000)
EPISODES = 4


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
    with torch.no_grad():  # a strong push towards one action, different per checkpoint: short, distinct episodes
        net[2].bias.copy_(torch.tensor([2.0, -2.0]) * (1 if seed % 2 else -1))
    return net


def _row(ck: TimelineCheckpoint) -> dict:
    s = summarize(ck.result).to_dict()
    ret = s["returns"]
    half = 1.96 * ret["std"] / np.sqrt(ret["n"])
    return {"step": ck.step, "checkpoint": ck.name, "episodes": ret["n"],
            "return": {**ret, "ci95": [ret["mean"] - half, ret["mean"] + half]},
            "mean_relative_entropy": s["mean_relative_entropy"],
            "value_explained_variance": s["value_explained_variance"], "diagnostics": s["diagnostics"],
            "policy_change": None if ck.step == STEPS[0] else {"vs_step": ck.step - 1000, "tv_mean": 0.25,
                                                                "kl_mean": 0.5},
            "regression": ck.step == STEPS[2]}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(data, checkpoints, config): three evaluated CartPole checkpoints and their timeline dict."""
    folder = tmp_path_factory.mktemp("timeline-run")
    cks = []
    for k, step in enumerate(STEPS):
        path = save_checkpoint(folder / f"step_{step}.pt2", _net(k + 1), env="CartPole-v1", kind="logits",
                               metadata={"step": step})
        agent = load_agent(path, device="cpu")
        result = rollout(agent.recipe, agent.policy, RolloutPlan(EPISODES, num_envs=EPISODES, seed=0, heatmap=True))
        cks.append(TimelineCheckpoint(step=step, path=path, name=path.name, agent=agent, result=result))
    rows = [_row(c) for c in cks]
    data = {"env_id": "CartPole-v1", "checkpoints": rows,
            "first_seen": {"planted_finding": {"step": STEPS[1], "persisted": True}},
            "regressions": [{"step": STEPS[2], "vs_step": STEPS[1],
                             "return_diff": {"mean": -3.0, "ci95": [-5.0, -1.0]}}]}
    return data, cks, TimelineConfig(run=str(folder), heatmap=True, episodes=EPISODES, seed=0, device="cpu")


@pytest.fixture(scope="module")
def views(run, tmp_path_factory):
    data, cks, config = run
    out = tmp_path_factory.mktemp("timeline-out")
    write_views(out, data, cks, config)
    return out


def test_timeline_png_has_its_size_and_the_return_line(views):
    img = np.asarray(Image.open(views / "timeline.png").convert("RGB"))
    assert img.shape == (SIZE[1], SIZE[0], 3)
    assert img.std() > 10  # not blank
    # the return line (#2f6db5) and the regression marker (#d62728) are drawn
    for rgb in ((0x2F, 0x6D, 0xB5), (0xD6, 0x27, 0x28)):
        assert (np.abs(img.astype(int) - rgb).sum(axis=-1) < 30).sum() > 20, rgb
    heat = Image.open(views / "timeline_heatmaps.png")
    assert heat.size[0] > heat.size[1] > 50  # three columns of one row (CartPole: one object)
    for step in STEPS:
        assert Image.open(views / "heatmaps" / f"step_{step}.png").size[0] > 50


def test_progression_is_the_same_seed_at_every_checkpoint_in_order(run, views):
    data, cks, _ = run
    meta = json.loads((views / "progression.json").read_text())
    assert meta["seed"] == episode_seed_for(0, 0) == progression_seed(SimpleNamespace(seed=0, videos="first:1"))
    parts = meta["parts"]
    assert [p["step"] for p in parts] == list(STEPS)
    # each part is the run's first episode of its checkpoint (what `rlviz render --seed 0` plays first)
    for p, ck in zip(parts, cks):
        first = ck.result.episodes[0]
        assert first.seed == meta["seed"] and (p["length"], p["ret"]) == (first.length, first.ret)
        assert p["frames"] == first.length + 1
    lengths = [p["frames"] for p in parts]
    assert len(set(lengths)) > 1  # the checkpoints really play differently
    assert [p["first_frame"] for p in parts] == [0, lengths[0], lengths[0] + lengths[1]]
    info = probe_video(views / "progression.mp4")
    assert (info.codec, info.pix_fmt) == ("h264", "yuv420p")
    assert info.width % 16 == 0 and info.height % 16 == 0
    assert info.num_frames == sum(lengths)
    # the label band says a different step in each part, and is constant within one
    starts = {p["first_frame"]: p["step"] for p in parts}
    bands = {}
    for i, frame in enumerate(read_video(views / "progression.mp4")):
        band = frame[:BAND].astype(int)
        if i in starts:
            bands[starts[i]] = band
        elif i - 1 in starts:
            assert _changed(band, bands[starts[i - 1]]) < 10
    assert all(_changed(bands[a], bands[b]) > 100 for a in STEPS for b in STEPS if a < b)


def _changed(a: np.ndarray, b: np.ndarray) -> int:
    """Pixels that differ by more than compression noise."""
    return int((np.abs(a - b).max(axis=-1) > 60).sum())


def test_followed_views_record_only_new_checkpoints(run, tmp_path):
    data, cks, config = run
    first = {**data, "checkpoints": data["checkpoints"][:2], "regressions": []}
    config = replace(config, heatmap=False)
    write_views(tmp_path, first, cks[:2], config)
    part = tmp_path / "progression" / f"step_{STEPS[0]}.mp4"
    before = part.stat().st_mtime_ns
    write_views(tmp_path, data, cks, config)  # a third checkpoint arrived
    assert part.stat().st_mtime_ns == before
    assert [p["step"] for p in json.loads((tmp_path / "progression.json").read_text())["parts"]] == list(STEPS)
    assert probe_video(tmp_path / "progression.mp4").num_frames == sum(c.result.episodes[0].length + 1 for c in cks)
    assert not list(tmp_path.rglob("*.partial*"))


def test_followed_views_draw_only_the_new_checkpoints_heatmap(run, tmp_path, monkeypatch):
    """After each checkpoint (--follow, a JAX loop's evaluations) the views are written again: an earlier
    checkpoint's heatmaps/step_<N>.png is drawn again only when its heatmap changed or its file is not the one drawn."""
    import rlviz.training.views as views
    from rlviz.evaluate.failures.heatmap import FailureHeatmap

    data, cks, config = run
    config = replace(config, videos="none")
    drawn: list[str] = []
    plot = FailureHeatmap.plot
    monkeypatch.setattr(FailureHeatmap, "plot", lambda self, path, **kw: (drawn.append(Path(path).name),
                                                                          plot(self, path, **kw))[1])
    for name in ("plot_timeline", "plot_timeline_heatmaps", "write_timeline_report"):  # (drawn every time: not here)
        monkeypatch.setattr(views, name, lambda *a, **kw: None)
    write_views(tmp_path, {**data, "checkpoints": data["checkpoints"][:2], "regressions": []}, cks[:2], config)
    first = tmp_path / "heatmaps" / f"step_{STEPS[0]}.png"
    pixels = np.asarray(Image.open(first))
    assert drawn == [f"step_{STEPS[0]}.png", f"step_{STEPS[1]}.png"]
    write_views(tmp_path, data, cks, config)  # a third checkpoint arrived
    assert drawn[2:] == [f"step_{STEPS[2]}.png"]
    first.write_bytes(b"not the png drawn")  # the file changed under it: drawn again
    write_views(tmp_path, data, cks, config)
    assert drawn[3:] == [f"step_{STEPS[0]}.png"] and np.array_equal(np.asarray(Image.open(first)), pixels)
    hm = cks[1].result.heatmap  # a heatmap that changed (one more episode counted): drawn again
    more = FailureHeatmap(hm.frame_shape, hm.object_names, hm.env_id)
    more.counts, more.failures, more.episodes, more.background = hm.counts, hm.failures, hm.episodes + 1, hm.background
    write_views(tmp_path, data, [cks[0], replace(cks[1], result=replace(cks[1].result, heatmap=more)), cks[2]], config)
    assert drawn[4:] == [f"step_{STEPS[1]}.png"]
    assert sorted(p.name for p in (tmp_path / "heatmaps").iterdir()) == [f"step_{s}.png" for s in STEPS]


def test_progression_plays_the_chosen_episode_or_none(run, tmp_path):
    data, cks, config = run
    worst = int(np.argmin(cks[-1].result.returns))
    write_views(tmp_path / "worst", data, cks, replace(config, videos="worst:1", heatmap=False))
    meta = json.loads((tmp_path / "worst" / "progression.json").read_text())
    assert meta["seed"] == cks[-1].result.episodes[worst].seed
    assert [p["length"] for p in meta["parts"]] == [c.result.episodes[worst].length for c in cks]
    write_views(tmp_path / "none", data, cks, replace(config, videos="none", heatmap=False))
    assert (tmp_path / "none" / "timeline.png").is_file() and (tmp_path / "none" / "report.html").is_file()
    assert not (tmp_path / "none" / "progression.mp4").exists() and not (tmp_path / "none" / "heatmaps").exists()


def test_a_checkpoint_that_no_longer_loads_is_left_out_of_the_progression(run, views, tmp_path):
    data, cks, config = run
    shutil.copytree(views / "progression", tmp_path / "progression")  # (the three parts recorded: only the gone
    # checkpoint's is recorded here, and fails)
    gone = TimelineCheckpoint(step=4000, path=tmp_path / "step_4000.pt2", name="step_4000.pt2", result=cks[0].result)
    rows = [*data["checkpoints"], {**data["checkpoints"][0], "step": 4000, "checkpoint": gone.name}]
    with pytest.warns(UserWarning, match=r"leaves out step_4000.pt2 \(step 4000\)"):
        write_views(tmp_path, {**data, "checkpoints": rows}, [*cks, gone], replace(config, heatmap=False))
    assert [p["step"] for p in json.loads((tmp_path / "progression.json").read_text())["parts"]] == list(STEPS)
    assert (tmp_path / "timeline.png").is_file() and (tmp_path / "report.html").is_file()


def test_plot_without_value_head_or_ci(tmp_path):
    rows = [{"step": s, "return": {"mean": float(s)}, "mean_relative_entropy": None} for s in (10, 20)]
    img = Image.open(plot_timeline(tmp_path / "t.png", {"checkpoints": rows}))
    assert img.size == SIZE


def test_two_runs_on_one_step_axis(run, tmp_path):
    data, _, _ = run
    twin = {**data, "checkpoints": [{**r, "return": {**r["return"], "mean": r["return"]["mean"] + 50}}
                                    for r in data["checkpoints"]]}
    img = np.asarray(Image.open(plot_timelines(tmp_path / "twins.png", {"a": data, "b": twin})).convert("RGB"))
    assert img.shape == (SIZE[1], SIZE[0], 3)
    for rgb in ((0x2F, 0x6D, 0xB5), (0xD6, 0x27, 0x28)):  # each run in its colour
        assert (np.abs(img.astype(int) - rgb).sum(axis=-1) < 30).sum() > 200, rgb


def test_tensorboard_scalars_at_the_training_steps(run, views, tmp_path):
    from rlviz.sinks import TensorBoardSink

    data, _, _ = run
    with TensorBoardSink(tmp_path / "tb") as sink:
        for row in data["checkpoints"]:
            log_timeline_checkpoint([sink], row)
        log_timeline_end([sink], views, STEPS[-1])
    acc = tb_accumulator(tmp_path / "tb")
    means = acc.Scalars("timeline/return/mean")
    assert [(e.step, e.value) for e in means] == [(r["step"], pytest.approx(r["return"]["mean"], rel=1e-6))
                                                  for r in data["checkpoints"]]
    assert [e.step for e in acc.Scalars("timeline/return/ci95_low")] == list(STEPS)
    assert [e.step for e in acc.Scalars("timeline/policy_change/tv_mean")] == list(STEPS[1:])
    assert [e.value for e in acc.Scalars("timeline/regression")] == [0.0, 0.0, 1.0]
    assert "timeline/policy_change/vs_step" not in acc.Tags()["scalars"]
    (video,) = acc.Images("timeline/progression")
    (png,) = acc.Images("timeline/timeline")
    assert video.step == png.step == STEPS[-1]


def test_wandb_offline_logs_at_the_training_steps(run, views, wandb_offline, no_network):
    from rlviz.sinks import WandbSink

    data, _, _ = run
    with WandbSink("rlviz-test", "timeline", dir=wandb_offline) as sink:
        for row in data["checkpoints"]:
            log_timeline_checkpoint(sink, row)
        log_timeline_end(sink, views, STEPS[-1])
    wandb_flushed()
    (log,) = Path(glob.glob(str(wandb_offline / "wandb" / "offline-run-*"))[0]).glob("run-*.wandb")
    history = [wandb_items(r.history.item) for r in wandb_records(log) if r.WhichOneof("record_type") == "history"]
    means = [(h[("_step",)], h[("timeline/return/mean",)]) for h in history if ("timeline/return/mean",) in h]
    assert means == [(r["step"], pytest.approx(r["return"]["mean"])) for r in data["checkpoints"]]
    (last,) = [h for h in history if ("timeline/progression", "_type") in h]
    assert last[("_step",)] == STEPS[-1] and last[("timeline/progression", "_type")] == "video-file"
    assert last[("timeline/timeline", "_type")] == "image-file"


# -- the page, in a real browser -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from test_report import _browser

    driver = _browser(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


@pytest.fixture()
def served(views):
    from test_report import _LoggingHandler

    _LoggingHandler.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_LoggingHandler, directory=views))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_report_click_a_checkpoint(browser, served, run):
    from selenium.webdriver.common.action_chains import ActionChains
    from test_report import _wait

    data, cks, _ = run
    browser.get(f"{served}/report.html")
    _wait(browser, "return window.rlvizTimelineReady === true")
    canvas = browser.find_element("css selector", "#tl-canvas")
    assert canvas.get_attribute("data-selected") == str(STEPS[-1])  # the latest checkpoint opens first
    # click the first checkpoint's point on the training-step axis (x = 56 px pad on the left, 16 on the right)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    width = browser.execute_script("return arguments[0].getBoundingClientRect().width", canvas)
    ActionChains(browser).move_to_element_with_offset(canvas, int(56 - width / 2) + 1, 0).click().perform()
    _wait(browser, f"return arguments[0].dataset.selected === '{STEPS[0]}'", 5, canvas)
    heading = browser.find_element("id", "tl-heading").text
    assert f"{STEPS[0]:,}" in heading and cks[0].name in heading
    numbers = dict(browser.execute_script(
        "return [...document.querySelectorAll('#tl-numbers tr')]"
        ".map(r => [r.cells[0].textContent, r.cells[1].textContent])"))
    assert float(numbers["return.mean"]) == pytest.approx(data["checkpoints"][0]["return"]["mean"], rel=1e-3)
    assert int(numbers["episodes"]) == EPISODES
    # its heatmap and its episode (its part of the progression, with the per-step trace)
    _wait(browser, "const i = document.querySelector('#tl-heatmap img'); return i && i.complete && i.naturalWidth > 0")
    assert browser.execute_script("return document.querySelector('#tl-heatmap img').getAttribute('src')") == \
        f"heatmaps/step_{STEPS[0]}.png"
    video = browser.find_element("css selector", "#tl-episode video")
    assert video.get_attribute("src").endswith(f"progression/step_{STEPS[0]}.mp4")
    _wait(browser, "return arguments[0].readyState >= 2", 20, video)
    assert "per-step trace" in browser.find_element("css selector", "#tl-episode .trace-title").text
    assert browser.execute_script("return document.querySelector('#tl-episode').trace.tl.T") == \
        cks[0].result.episodes[0].length
    # the regression's button is marked; clicking it shows the regression as a finding
    button = browser.find_elements("css selector", "#tl-steps button")[2]
    assert "regression" in button.get_attribute("class")
    button.click()
    assert "regression" in browser.find_element("id", "tl-findings").text
    assert canvas.get_attribute("data-selected") == str(STEPS[2])
    # the whole progression plays
    _wait(browser, "return document.getElementById('tl-progression').readyState >= 1", 20)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    names = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(n.startswith(served + "/") or n.startswith("data:") for n in names), names


def test_concat_videos_joins_without_reencoding(tmp_path):
    from rlviz.errors import UsageError, VideoError
    from rlviz.media import VideoWriter, concat_videos

    paths = []
    for k, n in enumerate((5, 9)):
        with VideoWriter(tmp_path / f"p{k}.mp4", 10.0, (32, 16)) as w:
            for i in range(n):
                w.write(np.full((16, 32, 3), 150 * k + 10 * i, np.uint8))
        paths.append(tmp_path / f"p{k}.mp4")
    out = concat_videos(paths, tmp_path / "joined's.mp4")  # a quote in the name is escaped for ffmpeg
    frames = list(read_video(out))
    assert len(frames) == 14 and probe_video(out).fps == 10.0
    assert np.allclose([f.mean() for f in frames[4:7]], [40, 150, 160], atol=3)  # the second part from frame 5
    with pytest.raises(UsageError, match="not found"):
        concat_videos([paths[0], tmp_path / "missing.mp4"], tmp_path / "x.mp4")
    with VideoWriter(tmp_path / "big.mp4", 10.0, (64, 32)) as w:
        w.write(np.zeros((32, 64, 3), np.uint8))
    try:  # another size: ffmpeg refuses or writes a file; either way no temporary file is left
        concat_videos([paths[0], tmp_path / "big.mp4"], tmp_path / "mixed.mp4")
    except VideoError:
        assert not (tmp_path / "mixed.mp4").exists()
    assert not list(tmp_path.glob(".*partial*"))


def test_timeline_png_draws_the_attention_shares_across_training(tmp_path):
    """Rows with attention (``--saliency METHOD --heatmap``) get a fourth panel: each object's share over all steps
    and before failures per checkpoint; rows without it keep three panels. The picture keeps its size."""
    from PIL import Image

    from rlviz.training.plot import SIZE, attention_objects, plot_timeline

    def row(step: int, ball: float) -> dict:
        return {"step": step, "return": {"mean": 1.0 + step / 1000, "ci95": [0.5, 1.5 + step / 1000]},
                "mean_relative_entropy": 0.5, "value_explained_variance": 0.8,
                "attention": {"objects": {"ball": {"share": ball, "share_before_failure": ball / 2},
                                          "paddle": {"share": 0.2, "share_before_failure": 0.3}}}}

    rows = [row(1000, 0.4), row(2000, 0.3), row(3000, 0.1)]
    assert attention_objects(rows) == ["ball", "paddle"]
    plain = [{k: v for k, v in r.items() if k != "attention"} for r in rows]
    assert attention_objects(plain) == []
    with_att = np.asarray(Image.open(plot_timeline(tmp_path / "a.png", {"checkpoints": rows})).convert("RGB"))
    without = np.asarray(Image.open(plot_timeline(tmp_path / "b.png", {"checkpoints": plain})).convert("RGB"))
    assert with_att.shape == without.shape == (SIZE[1], SIZE[0], 3)
    # tab10's first colour (the ball's line) appears only in the attention panel, at the bottom of the picture
    ball = np.all(np.abs(with_att.astype(int) - (31, 119, 180)) < 6, axis=-1)
    assert ball[int(SIZE[1] * 0.75):].sum() > 100 and ball[: int(SIZE[1] * 0.5)].sum() == 0
    assert not np.all(np.abs(without.astype(int) - (31, 119, 180)) < 6, axis=-1).any()
