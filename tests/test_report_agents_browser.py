"""The multi-agent report.html (rlviz.report.agents_page) in headless Chromium, as the single-agent page's browser test:
opened from a file URL with no console error, the heatmap shown, the per-agent table, the episode table built from
episodes.csv (a row with a video opens and plays it)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pymunk")
pytest.importorskip("supersuit")
torch = pytest.importorskip("torch")

from test_render_agents import AGENTS, Agent, _recipe, _rows  # noqa: E402
from test_report import _browser, _wait  # noqa: E402

from rlviz.jobs.render import render  # noqa: E402
from rlviz.sources.pt2.saving import save_checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = _browser(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


def test_multi_agent_report_in_a_real_browser(browser, tmp_path):
    torch.manual_seed(2)
    ckpt = save_checkpoint(tmp_path / "agent.pt2", Agent(), env=_recipe())
    out = tmp_path / "run"
    render(checkpoint=str(ckpt), episodes=4, heatmap=True, videos="first:1", out=str(out))
    rows = _rows(out / "episodes.csv")
    browser.get((out / "report.html").as_uri())
    _wait(browser, "return window.rlvizReady === true")
    assert browser.execute_script("const i = document.querySelector('.heatmap img'); "
                                  "return i.complete && i.naturalWidth > 0")
    agents = browser.execute_script("return [...document.querySelectorAll('table.agents tr[data-agent]')]"
                                    ".map(r => r.dataset.agent)")
    assert agents == AGENTS
    # the episode table: one row per episode, episode 0 (the one with a video) highlighted; a click plays it
    table = browser.execute_script("return [...document.querySelectorAll('#episodes-0 tbody tr')]"
                                   ".map(r => [r.cells[0].textContent, r.className])")
    assert [int(e) for e, _ in table] == [int(r["episode"]) for r in rows] == [0, 1, 2, 3]
    assert [c for _, c in table] == ["has-video", "", "", ""]
    browser.execute_script("document.querySelector('#episodes-0 tbody tr.has-video').click()")
    video = browser.find_element("css selector", "#video-0-0 video")
    _wait(browser, "return document.querySelector('#video-0-0').classList.contains('focus')")
    _wait(browser, "return arguments[0].readyState >= 2", 20, video)
    _wait(browser, "return arguments[0].currentTime > 0.1", 20, video)
    data = json.loads(browser.execute_script("return document.getElementById('rlviz-data').textContent"))
    assert data["agents"] == json.loads((out / "summary.json").read_text())["agents"]
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
