"""MinAtar imported and drawn without seaborn: the palette rlviz computes is seaborn's, to the bit."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("minatar")


def test_cubehelix_colors_are_seaborns():
    sns = pytest.importorskip("seaborn")
    from rlviz.envs.minatar_import import cubehelix_colors

    for n in range(1, 33):
        assert cubehelix_colors(n) == list(sns.color_palette("cubehelix", n)), n


def test_a_minatar_frame_is_drawn_without_seaborn():
    """A fresh process: MinAtar's rgb_array frame, drawn through rlviz's stand-in, with neither seaborn nor matplotlib
    imported; then the same frame from seaborn's own palette."""
    code = (
        "import sys, numpy as np\n"
        "from rlviz.envs import make_env\n"
        "from rlviz.envs.recipe import EnvRecipe\n"
        "e = make_env(EnvRecipe.for_env_id('MinAtar/Breakout-v1'), render_mode='rgb_array')\n"
        "e.reset(seed=3)\n"
        "for a in (0, 1, 2, 1): e.step(a)\n"
        "f = e.render()\n"
        "assert 'seaborn' not in sys.modules and 'matplotlib' not in sys.modules, 'imported'\n"
        "import seaborn as sns\n"
        "state = e.unwrapped.game.state()\n"
        "pal = list(sns.color_palette('cubehelix', state.shape[2])); pal.insert(0, (0, 0, 0))\n"
        "idx = np.amax(state * np.reshape(np.arange(state.shape[2]) + 1, (1, 1, -1)), 2)\n"
        "assert np.array_equal(f, np.stack(pal)[idx]), 'frame'\n"
        "print('ok', f.shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok (10, 10, 3)")
