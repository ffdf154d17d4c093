"""Headless MuJoCo rendering: the OpenGL backend chosen before mujoco is imported.

MuJoCo renders off screen through EGL (a GPU driver's, or Mesa's), OSMesa (software) or GLFW (a display).
gymnasium's MuJoCo renderer tries glfw, egl and osmesa in turn when ``MUJOCO_GL`` is unset, but PyOpenGL binds its
platform at its first import: once EGL was tried, OSMesa cannot be (gymnasium #726: EGL fails on cluster nodes,
OSMesa is the way out). So before the first MuJoCo env is made (and only with no display and no ``MUJOCO_GL`` of
the user's), :func:`choose_gl` probes EGL with ``ctypes`` (``eglInitialize`` on its devices, as ``mujoco.egl``
opens them, or the default display: nothing is imported into PyOpenGL), then OSMesa (its library loads), and sets
``MUJOCO_GL`` and ``PYOPENGL_PLATFORM`` to the first that works; worker processes inherit them. When neither works
(or PyOpenGL was bound to another platform first), :func:`no_gl_wrapper` turns a failing ``render()`` into one line
naming the system packages (rollouts without frames still run).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Any

import gymnasium as gym

from ..errors import EnvError
from .families import families, family_of

__all__ = ["choose_gl", "uses_mujoco", "no_gl_wrapper", "NO_GL_MESSAGE"]

NO_GL_MESSAGE = ("MuJoCo cannot render headless here: EGL did not initialise and OSMesa is not installed; install "
                 "one (Debian/Ubuntu: apt-get install libegl1 libgl1 for EGL with your GPU driver or Mesa, or "
                 "libosmesa6 for software rendering; PyOpenGL either way) or set MUJOCO_GL=egl|osmesa|glfw yourself.")

_CHOSEN: list[str | None] = []  # the probe's answer, once per process ([None]: neither works)


def uses_mujoco(env_id: str) -> bool:
    """Whether ``env_id``'s family draws through MuJoCo's renderer (:attr:`Family.needs_gl
    <rlviz.envs.families.family.Family>`: a ``dm_control/`` id before Shimmy registered it, whose import
    imports dm_control and mujoco; ``brax:``, drawn by mujoco's renderer), or a registered id's entry point is in a
    MuJoCo family's package (:attr:`Family.entry_points`: gymnasium's MuJoCo envs, Gymnasium-Robotics), read from the
    registry without importing it."""
    family = family_of(env_id)
    if family is not None and family.needs_gl and family.prefixes:
        return True
    try:
        entry = gym.spec(env_id).entry_point
    except (gym.error.Error, ValueError, TypeError):
        return False
    text = entry if isinstance(entry, str) else f"{getattr(entry, '__module__', '')}.{getattr(entry, '__name__', '')}"
    return any(p in text for f in families() if f.needs_gl for p in f.entry_points)


def _egl_works() -> bool:
    """EGL initialises on one of its devices (as ``mujoco.egl`` opens it: ``eglQueryDevicesEXT``, then a platform
    display of the device) or on the default display."""
    name = ctypes.util.find_library("EGL") or "libEGL.so.1"
    try:
        egl = ctypes.CDLL(name)
        egl.eglGetProcAddress.restype = ctypes.c_void_p
        egl.eglGetProcAddress.argtypes = [ctypes.c_char_p]
        egl.eglGetDisplay.restype = ctypes.c_void_p
        egl.eglGetDisplay.argtypes = [ctypes.c_void_p]
        egl.eglInitialize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
        egl.eglTerminate.argtypes = [ctypes.c_void_p]
        displays = []
        query, platform = (egl.eglGetProcAddress(n) for n in (b"eglQueryDevicesEXT", b"eglGetPlatformDisplayEXT"))
        if query and platform:
            devices, count = (ctypes.c_void_p * 16)(), ctypes.c_int()
            ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))(query)(
                16, devices, ctypes.byref(count))
            get = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p)(platform)
            displays = [get(0x313F, devices[i], None) for i in range(min(count.value, 16))]  # EGL_PLATFORM_DEVICE_EXT
        displays.append(egl.eglGetDisplay(None))  # EGL_DEFAULT_DISPLAY
        for display in displays:
            major, minor = ctypes.c_int(), ctypes.c_int()
            if display and egl.eglInitialize(display, ctypes.byref(major), ctypes.byref(minor)):
                egl.eglTerminate(display)
                return True
        return False
    except (OSError, AttributeError):
        return False


def _osmesa_works() -> bool:
    name = ctypes.util.find_library("OSMesa")
    if not name:
        return False
    try:
        ctypes.CDLL(name)
        return True
    except OSError:
        return False


def choose_gl(env_id: str) -> str | None:
    """Set ``MUJOCO_GL`` (and ``PYOPENGL_PLATFORM``) for a MuJoCo ``env_id``: "egl", else "osmesa"; the backend in
    use, or None when neither works. Leaves everything as it is when the user set ``MUJOCO_GL``, when a display is
    there (GLFW), when PyOpenGL is already bound to another platform, or for other envs. Set before mujoco is imported,
    it is the backend of mujoco's own renderer too (dm_control, Brax's frames); mujoco imported first (by Brax, MJX or
    the user) chose GLFW for that one, but gymnasium's MuJoCo envs read ``MUJOCO_GL`` when their first frame is drawn,
    so they still render headless (without it they would take GLFW, which fails only at the first frame)."""
    if os.environ.get("MUJOCO_GL"):
        return os.environ["MUJOCO_GL"]
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    if not uses_mujoco(env_id):
        return None
    if not _CHOSEN:
        _CHOSEN.append("egl" if _egl_works() else "osmesa" if _osmesa_works() else None)
    backend = _CHOSEN[0]
    if backend is not None and "OpenGL" in sys.modules and os.environ.get("PYOPENGL_PLATFORM") != backend:
        return None  # PyOpenGL is bound to another platform already: render() says so (no_gl_wrapper)
    if backend is not None:
        os.environ["MUJOCO_GL"] = backend
        os.environ.setdefault("PYOPENGL_PLATFORM", backend)
    return backend


class _NoGL(gym.Wrapper):
    """A MuJoCo env on a machine where no headless backend works: ``render()`` says so in one line."""

    def render(self) -> Any:
        try:
            return self.env.render()
        except Exception as exc:  # (mujoco's FatalError, PyOpenGL's errors, gymnasium's RuntimeError)
            raise EnvError(f"{NO_GL_MESSAGE} ({type(exc).__name__}: {str(exc).strip()[:120]})") from None


def no_gl_wrapper(env: gym.Env, env_id: str) -> gym.Env:
    """``env`` wrapped by :class:`_NoGL` when no backend is set for a MuJoCo ``env_id`` (the probe found none, or
    mujoco was imported before it could choose), else ``env``."""
    if not os.environ.get("MUJOCO_GL") and uses_mujoco(env_id):
        return _NoGL(env)
    return env
