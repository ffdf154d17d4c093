"""The docs' notebook example (docs/record.md, "Notebooks"), executed as a notebook by nbconvert: the render's outputs show inline, video
included; and the inline views of an EpisodeResult."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _docs_notebook_example() -> str:
    section = (ROOT / "docs" / "record.md").read_text().split("## Notebooks", 1)[1]
    return re.search(r"^```python\n(.*?)^```", section, flags=re.S | re.M).group(1)


@pytest.mark.slow  # a kernel start and a real render: ~30-60 s on 2 busy cores
def test_docs_notebook_example_shows_the_video_inline(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="NOTEBOOK TEST SKIPPED: pip install -e '.[dev]' (nbformat)")
    pytest.importorskip("ipykernel", reason="NOTEBOOK TEST SKIPPED: pip install -e '.[dev]' (ipykernel)")
    from nbconvert.preprocessors import ExecutePreprocessor

    (tmp_path / "samples").symlink_to(ROOT / "samples")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's rlviz
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(_docs_notebook_example())])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    ExecutePreprocessor(timeout=300, kernel_name="python3").preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["execute_result"], outputs  # nothing printed, one result
    html = outputs[0].data["text/html"]
    video = re.search(r"<video[^>]* src=\"data:video/mp4;base64,([A-Za-z0-9+/=]{1000,})\"", html)
    assert video is not None
    assert "data:image/png;base64," in html  # the heatmap


def test_episode_result_shows_its_video(tmp_path):
    import base64

    from rlviz.episode import EpisodeResult

    mp4 = tmp_path / "e.mp4"
    mp4.write_bytes(b"\x00\x00\x00\x18ftypmp42")
    html = EpisodeResult(index=3, seed=7, ret=2.5, length=9, video_path=mp4)._repr_html_()
    src = re.search(r'src="data:video/mp4;base64,([^"]+)"', html).group(1)
    assert base64.b64decode(src) == mp4.read_bytes()
    assert "<td>2.5</td>" in html and "<td>9</td>" in html
    assert "<video" not in EpisodeResult(index=0, seed=None, ret=0.0, length=1)._repr_html_()
