"""The README and the documentation site cannot drift from the code: the configuration reference (a site page the
README links) is the one the settings models render, every `KMQ_*` variable the code reads is documented on the
site, and the pages the README links exist."""

from __future__ import annotations

import re

import yaml

from kmq.config import KmqConfig
from kmq.settings import env_names
from kmq_api.config import ApiConfig
from kmq_tracker.config import TrackerConfig
from tests.config_reference import PAGE, ROOT, page_block, render

README = ROOT / "README.md"
DOCS = ROOT / "docs"
SOURCES = [*ROOT.glob("kmq/**/*.py"), *ROOT.glob("tracker/**/*.py"), *ROOT.glob("api/**/*.py")]
SOURCES += [*ROOT.glob("examples/**/*.py"), *ROOT.glob("examples/**/*.sh"), *ROOT.glob("tests/**/*.py")]
SOURCES += [path for path in ROOT.glob("scripts/*") if path.is_file()]
# An environment read: os.environ.get(NAME / os.environ[NAME] / os.getenv(NAME / shell ${NAME, NAME a KMQ_ literal
READS = re.compile(r"""(?:environ(?:\.get)?\(?\[?|getenv\()\s*["'](KMQ_[A-Z0-9_]+)["']|\$\{(KMQ_[A-Z0-9_]+)""")
LINK = re.compile(r"\]\(((?!https?:|#)[^)#\s]+)(?:#[^)]*)?\)")


def variables_read_by_the_code() -> set[str]:
    names = {*env_names(KmqConfig), *TrackerConfig.env_names(), *ApiConfig.env_names()}
    for path in SOURCES:
        for match in READS.finditer(path.read_text()):
            names.add(match.group(1) or match.group(2))
    return names


def site_pages() -> dict[str, str]:
    """Every page mkdocs.yml's nav names, by its path under docs/ (the generated reference pages excepted)."""

    def walk(entries: list[object]) -> list[str]:
        found = []
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found += walk(value) if isinstance(value, list) else [str(value)]
        return found

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    return {page: (DOCS / page).read_text() for page in walk(nav) if (DOCS / page).exists()}


def test_the_configuration_reference_is_the_one_the_code_generates() -> None:
    assert page_block(PAGE.read_text()) == render(), "run: python -m tests.config_reference --write"


def test_the_configuration_reference_is_a_page_of_the_site_that_the_readme_links() -> None:
    assert "reference/configuration.md" in site_pages()
    assert "](docs/reference/configuration.md)" in README.read_text()


def test_every_kmq_variable_the_code_reads_is_documented_on_the_site() -> None:
    documented = "\n".join(site_pages().values())
    found = variables_read_by_the_code()
    assert {"KMQ_BOOTSTRAP_SERVERS", "KMQ_TRACKER_HTTP_PORT", "KMQ_API_KEYS", "KMQ_TEST_BACKEND", "KMQ_VENV"} <= found
    assert sorted(name for name in found if f"`{name}`" not in documented) == []


def test_every_file_the_readme_links_exists() -> None:
    links = LINK.findall(README.read_text())
    assert "docs/getting-started.md" in links and "docs/PROTOCOL.md" in links
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_the_readme_stays_a_pitch() -> None:
    assert len(README.read_text().splitlines()) <= 200
