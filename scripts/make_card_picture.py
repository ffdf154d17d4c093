"""docs/img/card.png: the model card `rlviz push` writes, as a model page shows it (docs/share.md).

A real run of the shipped MinAtar Breakout agent (``--episodes 30 --heatmap``), pushed with ``--dry-run`` (nothing is
uploaded), its README.md rendered to HTML (Markdown: tables, fenced code) beside a box of the card's metadata (the
model-index the Hub reads), the ``<video>`` shown as its poster frame (a frame of replay.mp4 decoded back: headless
Chromium may lack H.264), and photographed in headless Chromium through Selenium (as tests/test_report.py drives it),
then reduced to a 128-colour PNG under 300 KB.

    python scripts/make_card_picture.py [--out docs/img/card.png] [--episodes 30] [--keep DIR]

Needs chromium + chromedriver (/usr/bin), selenium, markdown and huggingface_hub (pip install -e ".[dev,docs,hub]").
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlviz.jobs.push import push  # noqa: E402
from rlviz.jobs.render import render  # noqa: E402
from rlviz.media.decode import read_video  # noqa: E402

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
REPO = "my-name/ppo-MinAtar-Breakout-v1"
WIDTH = 1180
MAX_BYTES = 300_000

STYLE = """
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2937; }
header { padding: 14px 28px 10px; border-bottom: 1px solid #e5e7eb; background: #fafafa; }
header .repo { font-size: 19px; font-weight: 600; } header .repo span { color: #6b7280; font-weight: 400; }
.tags { margin-top: 6px; } .tags span { display: inline-block; margin: 0 6px 4px 0; padding: 1px 8px;
  border: 1px solid #e5e7eb; border-radius: 6px; font-size: 12px; background: #fff; }
main { display: flex; gap: 28px; padding: 8px 28px 20px; }
article { flex: 1 1 auto; min-width: 0; }
aside { flex: 0 0 290px; padding-top: 18px; }
.box { border: 1px solid #e5e7eb; border-radius: 8px; padding: 10px 14px; font-size: 13px; }
.box h4 { margin: 0 0 6px; font-size: 13px; color: #6b7280; font-weight: 600; }
.box .value { font-size: 18px; font-weight: 600; } .box .what { color: #6b7280; }
h1 { font-size: 22px; margin: 16px 0 6px; } h2 { font-size: 17px; margin: 18px 0 6px; border-bottom: 1px solid #eee; }
table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #e5e7eb; padding: 2px 9px; }
pre { background: #f6f8fa; padding: 8px 10px; border-radius: 6px; font-size: 12px; white-space: pre-wrap; }
code { font-size: 12.5px; } p { margin: 6px 0; }
.poster { position: relative; display: inline-block; } .poster img { display: block; max-width: 100%; }
.poster::after { content: ""; position: absolute; left: 50%; top: 50%; margin: -26px 0 0 -18px;
  border-style: solid; border-width: 26px 0 26px 42px; border-color: transparent transparent transparent #fffd; }
img.heatmap { width: 100%; }
"""


def _front_matter(text: str) -> tuple[dict, str]:
    import yaml

    m = re.match(r"---\n(.*?)\n---\n", text, re.S)
    return (yaml.safe_load(m.group(1)), text[m.end():]) if m else ({}, text)


def _page(folder: Path, poster: str) -> str:
    """The card as a model page shows it: the repo's name and tags, the card, the model-index box."""
    import markdown

    meta, body = _front_matter((folder / "README.md").read_text())
    body = re.sub(r'<video[^>]*src="replay.mp4"[^>]*></video>', f'<span class="poster"><img src="{poster}"></span>',
                  body)
    article = markdown.markdown(body, extensions=["tables", "fenced_code"])
    article = article.replace('<img alt="where episodes failed"', '<img class="heatmap" alt="where episodes failed"')
    tags = "".join(f"<span>{html.escape(str(t))}</span>" for t in [meta.get("library_name"), *meta.get("tags", [])])
    results = meta["model-index"][0]["results"][0]
    box = "".join(f'<div class="what">{html.escape(m["name"])} on {html.escape(results["dataset"]["name"])}</div>'
                  f'<div class="value">{html.escape(str(m["value"]))}</div>' for m in results["metrics"])
    org, name = REPO.split("/")
    return (f"<!doctype html><html><head><meta charset='utf-8'><style>{STYLE}</style></head><body>"
            f"<header><div class='repo'><span>{org} /</span> {name}</div><div class='tags'>{tags}</div></header>"
            f"<main><article>{article}</article><aside><div class='box'><h4>Evaluation results</h4>{box}"
            "<div class='what' style='margin-top:6px'>self-reported, from the run's summary.json</div></div>"
            "</aside></main></body></html>")


def _photograph(page: Path, png: Path, profile: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                 "--disable-background-networking", f"--window-size={WIDTH},900", f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    try:
        driver.get(page.as_uri())
        driver.execute_script("return Promise.all([...document.images].map(i => i.decode()))")
        height = int(driver.execute_script("return document.documentElement.scrollHeight"))
        driver.set_window_size(WIDTH, height + (900 - driver.execute_script("return window.innerHeight")))
        driver.save_screenshot(str(png))
    finally:
        driver.quit()


def _small(src: Path, out: Path) -> int:
    """A 128-colour optimised PNG of ``src`` (the page is text, a game frame and a heatmap)."""
    from PIL import Image

    image = Image.open(src).convert("RGB")
    for colours in (128, 64, 32):
        image.quantize(colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out, optimize=True)
        if out.stat().st_size < MAX_BYTES:
            break
    return out.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img" / "card.png"))
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--keep", help="also keep the run, the dry-run folder and the page here")
    args = parser.parse_args()
    from PIL import Image

    with tempfile.TemporaryDirectory(prefix="rlviz-card-") as tmp:
        work = Path(tmp)
        render(checkpoint=str(ROOT / "samples" / "minatar_breakout_ppo.pt2"), episodes=args.episodes, heatmap=True,
               videos="none", out=str(work / "run"))
        push(run=str(work / "run"), repo=REPO, dry_run=str(work / "repo"), algo="PPO")
        frames = list(read_video(work / "repo" / "replay.mp4"))
        Image.fromarray(frames[len(frames) // 2]).save(work / "repo" / "poster.png")
        (work / "repo" / "card.html").write_text(_page(work / "repo", "poster.png"))
        _photograph(work / "repo" / "card.html", work / "card-full.png", work / "profile")
        size = _small(work / "card-full.png", Path(args.out))
        if args.keep:
            shutil.copytree(work, args.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("profile"))
    print(f"{args.out}: {Image.open(args.out).size[0]}x{Image.open(args.out).size[1]}, {size / 1000:.0f} KB")


if __name__ == "__main__":
    main()
