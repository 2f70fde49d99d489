"""The README cannot drift from the code: its configuration reference and every `KMQ_*` variable the code reads."""

from __future__ import annotations

import re

from kmq.config import KmqConfig
from kmq.settings import env_names
from kmq_api.config import ApiConfig
from kmq_tracker.config import TrackerConfig
from tests.config_reference import README, readme_block, render

ROOT = README.parent
SOURCES = [*ROOT.glob("kmq/**/*.py"), *ROOT.glob("tracker/**/*.py"), *ROOT.glob("api/**/*.py")]
SOURCES += [*ROOT.glob("examples/**/*.py"), *ROOT.glob("examples/**/*.sh"), *ROOT.glob("tests/**/*.py")]
SOURCES += [path for path in ROOT.glob("scripts/*") if path.is_file()]
# An environment read: os.environ.get(NAME / os.environ[NAME] / os.getenv(NAME / shell ${NAME, NAME a KMQ_ literal
READS = re.compile(r"""(?:environ(?:\.get)?\(?\[?|getenv\()\s*["'](KMQ_[A-Z0-9_]+)["']|\$\{(KMQ_[A-Z0-9_]+)""")


def variables_read_by_the_code() -> set[str]:
    names = {*env_names(KmqConfig), *TrackerConfig.env_names(), *ApiConfig.env_names()}
    for path in SOURCES:
        for match in READS.finditer(path.read_text()):
            names.add(match.group(1) or match.group(2))
    return names


def test_the_configuration_reference_is_the_one_the_code_generates() -> None:
    assert readme_block(README.read_text()) == render(), "run: python -m tests.config_reference --write"


def test_every_kmq_variable_the_code_reads_is_in_the_readme() -> None:
    readme = README.read_text()
    found = variables_read_by_the_code()
    assert {"KMQ_BOOTSTRAP_SERVERS", "KMQ_TRACKER_HTTP_PORT", "KMQ_API_KEYS", "KMQ_TEST_BACKEND", "KMQ_VENV"} <= found
    assert sorted(name for name in found if f"`{name}`" not in readme) == []
