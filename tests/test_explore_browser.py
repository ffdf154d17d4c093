"""``rlviz explore`` in headless Chromium (as the report's browser test): on a 200-episode MinAtar run, click the
hottest heatmap cell, open the first episode listed, wait for its render, jump to its failure step, and check the
frame shown against frame t of ``rlviz render ... --videos episode:N`` and the panel's numbers against its .npz.

The frame is read back from the page (the <video> drawn on a canvas, as the browser decoded it) and compared with
the same frame decoded by rlviz (:func:`rlviz.media.read_video`). The two decoders convert the H.264 file's YUV
4:2:0 to RGB each their own way, so the tolerance is the codec's: mean absolute difference <= 3 (of 255) and
99% of the pixels within 16; any other frame of the episode differs far more (checked: the frame is step t's)."""

from __future__ import annotations

import base64
import io
import os

import numpy as np
import pytest
from _explore import minatar_run, reference_video, serving
from test_report import _browser, _wait

from rlviz.evaluate.failures.heatmap import FailureHeatmap
from rlviz.media import read_video

pytest.importorskip("werkzeug")

#: The codec tolerance (see the module's docstring).
MEAN_TOLERANCE, PIXEL_TOLERANCE, PIXEL_SHARE = 3.0, 16, 0.99

_GRAB = """
const v = arguments[0], c = document.createElement('canvas');
c.width = v.videoWidth; c.height = v.videoHeight;
c.getContext('2d').drawImage(v, 0, 0);
return c.toDataURL('image/png');
"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = _browser(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


def _grab(driver, video) -> np.ndarray:
    from PIL import Image

    url = driver.execute_script(_GRAB, video)
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))


def _close(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return float(d.mean()), float((d <= PIXEL_TOLERANCE).mean())


def test_click_the_hottest_cell_open_its_first_episode_and_seek_to_its_failure(browser, tmp_path_factory):
    from selenium.webdriver.common.action_chains import ActionChains

    run = minatar_run(tmp_path_factory)
    h = FailureHeatmap.load(run / "heatmap.npz")
    total = h.total()
    y, x = np.unravel_index(int(np.argmax(total)), total.shape)
    want = [e for e, _, runs in sorted(h.contributions, key=lambda c: c[0])
            if any(s <= y * total.shape[1] + x < s + k for s, k in runs)]
    want = sorted(set(want))
    with serving(run) as srv:
        browser.get(srv.base + "/")
        _wait(browser, "return window.exploreReady === true", 60)
        canvas = browser.find_element("css selector", "#heatmap")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
        r = browser.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height]", canvas)
        H, W = total.shape
        ox, oy = (x + 0.5) * r[0] / W - r[0] / 2, (y + 0.5) * r[1] / H - r[1] / 2
        ActionChains(browser).move_to_element_with_offset(canvas, int(ox), int(oy)).click().perform()
        _wait(browser, "return document.querySelectorAll('#list tbody tr').length > 0", 60)
        listed = browser.execute_script("return [...document.querySelectorAll('#list tbody tr')]"
                                        ".map(tr => Number(tr.dataset.episode))")
        assert listed == want  # exactly the episodes whose contribution includes the cell, sorted
        n = listed[0]
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})",
                               browser.find_element("css selector", "#list tbody tr"))
        browser.find_element("css selector", "#list tbody tr").click()
        _wait(browser, "return window.exploreEpisodeReady === true", 600)  # rendered on demand, then loaded
        shots = os.environ.get("RLVIZ_EXPLORE_SCREENSHOTS")  # a folder: the pictures of docs/explore.md
        if shots:
            browser.execute_script("window.scrollTo(0, 0)")
            browser.save_screenshot(os.path.join(shots, "explore-cell.png"))
        browser.find_element("css selector", "#fail").click()
        t = browser.execute_script("return explore.tl.failure_step")
        video = browser.find_element("css selector", "#viewer video")
        _wait(browser, "const v = arguments[0]; return !v.seeking && v.readyState >= 2 && "
                       "Math.abs(v.currentTime - (arguments[1] + 0.5) / explore.tl.fps) < 1e-3", 60, video, t)
        shown = _grab(browser, video)
        assert browser.execute_script("return explore.trace.t") == t
        if shots:
            browser.execute_script("document.getElementById('viewer').scrollIntoView({block: 'start'})")
            browser.save_screenshot(os.path.join(shots, "explore-episode.png"))

    ref = reference_video(tmp_path_factory, n)
    frames = list(read_video(ref))
    with np.load(ref.with_suffix(".npz")) as z:
        npz = {k: z[k] for k in z.files}
    T = int(npz["rewards"].shape[0])
    assert t == T - 1 and bool(npz["terminated"])
    assert shown.shape == frames[t].shape
    mean, share = _close(shown, frames[t])
    assert mean <= MEAN_TOLERANCE and share >= PIXEL_SHARE, (mean, share)
    others = [_close(shown, frames[u])[0] for u in range(T + 1) if not np.array_equal(frames[u], frames[t])]
    assert min(others) > mean  # the frame shown is step t's, not a neighbour's

    # the panel's numbers at step t: those of the .npz (as page.js prints them: 4 significant digits)
    readout = browser.execute_script("return document.querySelector('#viewer .trace .readout').textContent")
    fields = dict(part.split(" ", 1) if part.count(" ") else (part, "") for part in readout.split(" \u00b7 "))
    shown_numbers = {k: fields[k] for k in ("value", "return-to-go", "entropy") if k in fields}
    assert set(shown_numbers) == {"value", "return-to-go", "entropy"}, readout
    for key, name in (("value", "value"), ("return-to-go", "returns_to_go"), ("entropy", "entropy")):
        assert float(shown_numbers[key]) == pytest.approx(float(npz[name][t]), rel=1e-3, abs=1e-4), key
    assert fields["action"] == str(npz["action_names"][int(npz["actions"][t])])
    assert fields["step"] == str(t)
