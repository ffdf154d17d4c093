"""The report page (report.html) in a real headless Chromium: loads offline with no console errors, videos play,
the per-step trace seeks the video and follows it, the episode table sorts, the heatmap shows. Plus its data, size and
the notebook views, without a browser."""

from __future__ import annotations

import csv
import functools
import http.server
import io
import json
import math
import os
import re
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rlviz.jobs import render
from rlviz.report import load_run, step_trace

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A small render of the shipped MinAtar agent: heatmap, two videos (worst, best) with saliency."""
    out = tmp_path_factory.mktemp("report") / "run"
    render(checkpoint=str(SAMPLES / "minatar_breakout_ppo.pt2"), episodes=6, out=str(out), heatmap=True,
           videos="worst:1,best:1", seed=3, saliency="gradient")
    return out


def _browser(profile: Path):
    """A headless Chromium driven by Selenium through the system driver, or a loud skip saying what is missing."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package (pip install -e '.[dev]')")
    if missing:
        pytest.skip("BROWSER TEST SKIPPED: missing " + ", ".join(missing) +
                    "; install with `apt-get install -y chromium chromium-driver` (.ci/run does where it can)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--autoplay-policy=no-user-gesture-required", "--window-size=1400,1000", "--hide-scrollbars",
                 f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = _browser(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


class _LoggingHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the folder, logs each request, and answers byte ranges (browsers seek videos with them)."""

    requests: list[str] = []

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        type(self).requests.append(self.path)

    def send_head(self):
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if m is None or not path.is_file():
            return super().send_head()
        data = path.read_bytes()
        start, end = int(m.group(1)), int(m.group(2) or len(data) - 1)
        end = min(end, len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        return io.BytesIO(data[start : end + 1])


@pytest.fixture()
def served(run_dir, tmp_path):
    """The run folder copied elsewhere (the page must not depend on where it was written), served on 127.0.0.1."""
    moved = tmp_path / "moved" / "copy-of-run"
    shutil.copytree(run_dir, moved)
    _LoggingHandler.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_LoggingHandler, directory=moved))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", moved
    server.shutdown()
    server.server_close()


def _wait(driver, script: str, timeout: float = 20.0, *args):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = driver.execute_script(script, *args)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for: {script}")


def _click_step(driver, canvas, t: int, T: int) -> None:
    """Click the per-step trace canvas where step t is drawn (x0 = 36 px pad, 8 px right margin, as page.js)."""
    from selenium.webdriver.common.action_chains import ActionChains

    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    width = driver.execute_script("return arguments[0].getBoundingClientRect().width", canvas)
    x = 36 + (width - 44) * t / T
    ActionChains(driver).move_to_element_with_offset(canvas, int(round(x - width / 2)), 0).click().perform()


def test_report_page_in_a_real_browser(browser, served):
    base, folder = served
    browser.get(f"{base}/report.html")
    _wait(browser, "return window.rlvizReady === true")
    # the heatmap image is shown
    assert browser.execute_script("const i = document.querySelector('.heatmap img'); "
                                  "return i.complete && i.naturalWidth > 0")
    # videos load and play
    video = browser.find_element("css selector", "#video-0-1 video")
    _wait(browser, "return arguments[0].readyState >= 2", 20, video)
    browser.execute_script("arguments[0].play()", video)
    _wait(browser, "return arguments[0].currentTime > 0.2", 20, video)
    # playing moves the trace's playhead
    canvas = browser.find_element("css selector", "#video-0-1 canvas")
    assert int(canvas.get_attribute("data-step")) > 0
    browser.execute_script("arguments[0].pause()", video)
    # clicking the trace at step t seeks the video to frame t (within one frame)
    tl = json.loads(browser.execute_script("return JSON.stringify(DATA.runs[0].videos[1].trace)"))
    T, fps = tl["T"], tl["fps"]
    assert T >= 4
    for t in (T // 4, (3 * T) // 4, 1):
        _click_step(browser, canvas, t, T)
        _wait(browser, "return !arguments[0].seeking", 10, video)
        frame = math.floor(browser.execute_script("return arguments[0].currentTime", video) * fps)
        assert abs(frame - t) <= 1, (frame, t)
        assert abs(int(canvas.get_attribute("data-step")) - t) <= 1
    # sorting the episode table by return orders it, both ways
    header = browser.find_element("xpath", "//div[@id='episodes-0']//th[text()='return']")
    col = browser.execute_script("return arguments[0].cellIndex", header)
    read = f"return [...document.querySelectorAll('#episodes-0 tbody tr')].map(r => Number(r.cells[{col}].textContent))"
    header.click()
    up = browser.execute_script(read)
    header.click()
    down = browser.execute_script(read)
    with open(folder / "episodes.csv") as f:
        returns = sorted(float(r["return"]) for r in csv.DictReader(f))
    assert up == returns and down == returns[::-1]
    # a row with a video opens it
    row = browser.find_element("css selector", "#episodes-0 tr.has-video")
    row.click()
    assert browser.execute_script("return document.querySelectorAll('.video.focus').length") == 1
    # no console errors; nothing requested beyond the page's folder
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    names = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(n.startswith(base + "/") or n.startswith("data:") for n in names), names
    assert all(not p.startswith("//") and ".." not in p for p in _LoggingHandler.requests)
    assert any(p.endswith(".mp4") for p in _LoggingHandler.requests)
    if os.environ.get("RLVIZ_SCREENSHOT"):  # README's picture: RLVIZ_SCREENSHOT=samples/report.png
        _screenshot(browser, Path(os.environ["RLVIZ_SCREENSHOT"]))


def _screenshot(browser, dest: Path) -> None:
    """The first video with its per-step trace mid-episode, below the summary and heatmap: a 1200x1300 PNG."""
    from PIL import Image

    browser.set_window_size(1200, 1300)
    browser.execute_script("const v = document.querySelector('#video-0-1 video'); v.pause(); "
                           "v.currentTime = v.duration * 0.6; window.scrollTo(0, 0)")
    time.sleep(1.0)
    browser.save_screenshot(str(dest))
    Image.open(dest).convert("RGB").quantize(64).save(dest, optimize=True)


def test_report_opens_from_a_file_url(browser, run_dir, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(run_dir, moved)
    browser.get((moved / "report.html").as_uri())
    _wait(browser, "return window.rlvizReady === true")
    video = browser.find_element("css selector", "#video-0-0 video")
    _wait(browser, "return arguments[0].readyState >= 2", 20, video)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def _npz(path: Path, T: int, A: int = 3, fps: float = 15.0) -> Path:
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(A), size=T + 1).astype(np.float32)
    np.savez(path.with_suffix(".npz"), actions=np.arange(T) % A, rewards=(np.arange(T) % 4 == 0).astype(np.float32),
             logits=np.log(probs), probs=probs, entropy=np.linspace(1, 0, T + 1, dtype=np.float32),
             returns_to_go=np.arange(T + 1, 0, -1, dtype=np.float32), value=np.full(T + 1, 0.5, np.float32),
             gamma=np.float32(0.9), fps=np.float32(fps), action_names=np.array(["NOOP", "LEFT", "RIGHT"][:A]),
             kind=np.array("pg"), terminated=np.bool_(True), truncated=np.bool_(False))
    return path


def test_step_trace_keeps_short_episodes_whole_and_downsamples_long_ones(tmp_path):
    tl = step_trace(_npz(tmp_path / "a.mp4", T=5))
    assert (tl["T"], tl["fps"], tl["stride"]) == (5, 15.0, 1)
    assert tl["return_to_go"] == [6, 5, 4, 3, 2, 1] and tl["value"] == [0.5] * 6
    assert tl["rewards"] == [1, 0, 0, 0, 1] and tl["actions"] == [0, 1, 2, 0, 1]
    assert tl["action_names"] == ["NOOP", "LEFT", "RIGHT"] and len(tl["probs"]) == 3
    long = step_trace(_npz(tmp_path / "b.mp4", T=2500), max_points=1000)
    assert long["stride"] == 3 and len(long["entropy"]) == 834 and long["T"] == 2500
    assert long["return_to_go"][:2] == [2501, 2498]
    assert sum(long["rewards"]) == 625 and long["rewards"][:3] == [1, 1, 1]  # summed per 3-step bucket


def test_report_of_1000_episodes_and_a_10000_step_video_is_under_2_mb(tmp_path):
    run = tmp_path / "run"
    (run / "videos").mkdir(parents=True)
    shutil.copy(SAMPLES / "out" / "minatar" / "summary.json", run)
    shutil.copy(SAMPLES / "out" / "minatar" / "episodes.csv", run)  # the 1000-episode MinAtar render's table
    shutil.copy(SAMPLES / "out" / "minatar" / "heatmap.png", run)
    for k in range(3):
        _npz(run / "videos" / f"worst-{k}-episode-0.mp4", T=10_000).with_suffix(".mp4").write_bytes(b"")
    from rlviz.report import write_report

    page = write_report(run / "report.html", [load_run(run)])
    assert len(load_run(run).episodes) == 1000
    assert page.stat().st_size < 2_000_000, page.stat().st_size
    text = page.read_text()
    assert "src='videos/worst-0-episode-0.mp4'" in text and "src='heatmap.png'" in text
    assert not re.search(r"(src|href)=['\"](https?:)?//", text)  # nothing from elsewhere


def test_findings_and_two_runs_side_by_side(tmp_path):
    from rlviz.report import RunData, build_html

    finding = {"id": "value-lag", "severity": "warning", "message": "value <lags> the return", "evidence": {}}
    a = RunData(title="agent A", folder=tmp_path / "a", summary={"episodes": 3, "diagnostics": [finding]},
                episodes=[{"episode": "0", "return": "1.5"}])
    b = RunData(title="agent B", folder=tmp_path / "b", summary={"episodes": 4})
    page = build_html([a, b], tmp_path)
    assert "<title>agent A vs agent B</title>" in page
    assert page.count("<section class='run'>") == 2 and "<h2>agent A</h2>" in page and "<h2>agent B</h2>" in page
    assert "<div class='finding warning'><b>value-lag</b>: value &lt;lags&gt; the return</div>" in page
    data = json.loads(re.search(r"id='rlviz-data'>(.*?)</script>", page).group(1))
    assert data["runs"][0]["rows"] == [[0, 1.5]] and data["runs"][1]["rows"] == []
