"""Reading deploy/ as its consumers do: Kustomize renders, PromQL, the metrics the code exports, a build context."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import yaml
from prometheus_client import CollectorRegistry

from kmq_api.metrics import ApiMetrics
from kmq_tracker.metrics import TrackerMetrics

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUSTOMIZE_ROOTS = {
    "dev": DEPLOY / "kubernetes" / "overlays" / "dev",
    "prod": DEPLOY / "kubernetes" / "overlays" / "prod",
    "kafka": DEPLOY / "kafka",
}
Resource = dict[str, Any]

# -- Kustomize ---------------------------------------------------------------------------------------------------------


def kubectl_path() -> str | None:
    return shutil.which("kubectl")


def render(kubectl: str, root: Path) -> list[Resource]:
    """`kubectl kustomize root`: offline, no cluster involved."""
    done = subprocess.run([kubectl, "kustomize", str(root)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"kubectl kustomize {root.relative_to(REPO)} failed:\n{done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def one(resources: list[Resource], kind: str, name: str | None = None) -> Resource:
    found = [r for r in resources if r["kind"] == kind and (name is None or r["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def of_kind(resources: list[Resource], kind: str) -> list[Resource]:
    return [r for r in resources if r["kind"] == kind]


def pod_spec(deployment: Resource) -> Resource:
    spec: Resource = deployment["spec"]["template"]["spec"]
    return spec


def container(deployment: Resource) -> Resource:
    containers = pod_spec(deployment)["containers"]
    assert len(containers) == 1, f"{deployment['metadata']['name']}: one container expected"
    found: Resource = containers[0]
    return found


def pod_environment(resources: list[Resource], deployment: Resource) -> dict[str, str]:
    """The variables the Deployment's container gets from its ConfigMaps and Secrets (those rendered here)."""
    env: dict[str, str] = {}
    for source in container(deployment).get("envFrom", []):
        if "configMapRef" in source:
            env.update(one(resources, "ConfigMap", source["configMapRef"]["name"]).get("data", {}))
        elif "secretRef" in source:
            secrets = [s for s in of_kind(resources, "Secret") if s["metadata"]["name"] == source["secretRef"]["name"]]
            for secret in secrets:
                env.update({k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()})
    for variable in container(deployment).get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
    return env


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def selected_deployments(resources: list[Resource], selector: dict[str, str]) -> list[Resource]:
    """The Deployments whose pods `selector` matches."""
    return [
        d for d in of_kind(resources, "Deployment") if selects(selector, d["spec"]["template"]["metadata"]["labels"])
    ]


# -- PromQL and the metrics the code exports --------------------------------------------------------------------------

# Series Prometheus itself writes for every target, not an exporter: the alerts may use them.
PROMETHEUS_SERIES = frozenset({"up"})
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}


def exported_families() -> dict[str, str]:
    """Every metric family the tracker and the REST facade register: name -> type."""
    families: dict[str, str] = {}
    for registry in (TrackerMetrics().registry, ApiMetrics().registry):
        families.update(_families(registry))
    return families


def exported_series() -> set[str]:
    """The sample names those families expose (a counter `x` is scraped as `x_total`, a histogram as `x_bucket`...)."""
    return {name + suffix for name, kind in exported_families().items() for suffix in _SUFFIXES[kind]}


def family_of(series: str, families: dict[str, str]) -> str | None:
    for name, kind in families.items():
        if any(series == name + suffix for suffix in _SUFFIXES[kind]):
            return name
    return None


def _families(registry: CollectorRegistry) -> dict[str, str]:
    return {family.name: family.type for family in registry.collect()}


_GRAFANA_INTERVALS = re.compile(r"\$(?:__rate_interval|__interval|__range)\b|\$\{__(?:rate_interval|interval|range)\}")


def grafana_to_promql(expr: str) -> str:
    """Grafana's interval variables become a plain duration; other variables only appear inside label strings."""
    return _GRAFANA_INTERVALS.sub("5m", expr)


def parse_promql(expr: str) -> promql_parser.Expr:
    """Parse (and type-check) an expression; raises ValueError naming the problem."""
    return promql_parser.parse(expr)


def metric_names(expr: str) -> set[str]:
    """The metric name of every vector selector in `expr` (a selector without one fails: keep names greppable)."""
    names: set[str] = set()

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"selector without a metric name in {expr!r}"
            names.add(node.name)

    promql_parser.walk(parse_promql(expr), visit)
    return names


def dashboard_expressions(dashboard: Resource) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL) for every query target, rows' nested panels included."""
    for panel in _all_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield panel["title"], grafana_to_promql(target["expr"])


def _all_panels(panels: list[Resource]) -> Iterator[Resource]:
    for panel in panels:
        yield panel
        yield from _all_panels(panel.get("panels", []))


def all_panels(dashboard: Resource) -> list[Resource]:
    return list(_all_panels(dashboard["panels"]))


# -- Docker build context ---------------------------------------------------------------------------------------------


def dockerignore_patterns(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(is_exception, regex) per line of a .dockerignore, in order (the last matching line decides)."""
    patterns = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.removeprefix("!").strip()).lstrip("/")
        patterns.append((negated, re.compile(_glob_to_regex(pattern))))
    return patterns


def _glob_to_regex(pattern: str) -> str:
    """Docker's (Go filepath.Match plus `**`) glob: `**/` any directories, `*` and `?` within one path element."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return f"^{out}$"


def excluded(path: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: a pattern matching the path or one of its parent directories applies; the last one wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for negated, regex in patterns:
        if any(regex.match(prefix) for prefix in prefixes):
            verdict = not negated
    return verdict


def build_context(root: Path, dockerignore: str) -> list[str]:
    """The files `docker build root` sends, as paths relative to `root`."""
    patterns = dockerignore_patterns(dockerignore)
    exceptions = [regex.pattern for negated, regex in patterns if negated]
    files: list[str] = []
    for directory, dirnames, filenames in os.walk(root):
        relative = Path(directory).relative_to(root).as_posix()
        prefix = "" if relative == "." else relative + "/"
        # Skip whole trees nothing can re-include (.git, .venv): the walk stays fast.
        dirnames[:] = [d for d in dirnames if not _pruned(prefix + d, patterns, exceptions)]
        files += [prefix + name for name in filenames if not excluded(prefix + name, patterns)]
    return sorted(files)


def _pruned(path: str, patterns: list[tuple[bool, re.Pattern[str]]], exceptions: list[str]) -> bool:
    return path == ".git" or (excluded(path, patterns) and not any(path in pattern for pattern in exceptions))


def dockerfile_stages(text: str) -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, (INSTRUCTION, arguments) with continuations joined, grouped by FROM."""
    joined = re.sub(r"\\\n", " ", text)
    stages: list[list[tuple[str, str]]] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, arguments = line.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instruction.upper(), arguments.strip()))
    return stages
