"""The operator's console at `/console`: server-rendered pages of the facade's own queues, behind its API keys.

`install(app, config)` adds its routes, static files and security headers to the facade's app; the app's lifespan
runs `app.state.console_history.run` (the overview's last hour)."""

from __future__ import annotations

from kmq_api.console.install import install

__all__ = ["install"]
