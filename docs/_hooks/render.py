"""Markdown for the generated reference pages: the command line, the HTTP API and the metrics, from the code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

_GENERATED = "<!-- generated at build time by docs/_hooks/render.py: edit the code, not this page -->"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


# -- the command line ---------------------------------------------------------------------------------------------
# Typer builds its command tree on Click's classes (its own copy of them): read duck-typed, through the attributes
# Click documents (params, help, list_commands, get_command, context_class, collect_usage_pieces).


def _kmq_command() -> Any:
    import typer.main

    from kmq.cli import _app

    _app._register_all()
    return typer.main.get_command(_app.app)


def _context(command: Any, path: list[str]) -> Any:
    return command.context_class(command, info_name=" ".join(path))


def _walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, command
    if hasattr(command, "list_commands"):
        ctx = _context(command, path)
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, [*path, name])


def _default(param: Any) -> str:
    if param.required:
        return "required"
    default = param.default
    if callable(default) or default in (None, "", ()):
        return ""
    if param.param_type_name == "option" and param.is_flag:
        if param.secondary_opts:
            return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
        return "on" if default else "off"
    if isinstance(default, (list, tuple)):
        default = ",".join(str(value) for value in default)
    return f"`{default}`"


def _option_row(param: Any) -> str:
    if param.param_type_name == "argument":
        names = f"`{(param.metavar or param.name or '').upper()}`"
    else:
        names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
    help_text = getattr(param, "help", None) or ""
    return f"| {names} | {_cell(help_text)} | {_cell(_default(param))} |"


def _command_section(path: list[str], command: Any) -> list[str]:
    usage = " ".join(path + command.collect_usage_pieces(_context(command, path)))
    lines = [f"## `{' '.join(path)}`", "", command.help or command.short_help or "", "", f"```text\n{usage}\n```", ""]
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    if params:
        lines += ["| option | meaning | default |", "|---|---|---|", *(_option_row(p) for p in params), ""]
    return lines


def cli_page() -> str:
    root = _kmq_command()
    lines = [
        "# Command line",
        "",
        _GENERATED,
        "",
        "Every `kmq` command, its arguments and options, read from the command tree `kmq --help` prints. Commands "
        "that talk to Kafka take `--bootstrap-servers` (`-b`) or read `KMQ_BOOTSTRAP_SERVERS`; errors are one line "
        "on stderr with a non-zero exit code. Settings not given as flags come from the `KMQ_*` variables "
        "([configuration](configuration.md)).",
        "",
    ]
    for path, command in _walk(root, ["kmq"]):
        if path == ["kmq"]:
            continue
        if hasattr(command, "list_commands"):
            lines += [f"## `{' '.join(path)}`", "", command.help or "", ""]
        else:
            lines += _command_section(path, command)
    return "\n".join(lines)


# -- the HTTP API -------------------------------------------------------------------------------------------------


def openapi_schema() -> dict[str, Any]:
    """The REST facade's OpenAPI schema, from an app that is built but never started (no Kafka is reached)."""
    from kmq.config import KmqConfig
    from kmq_api.app import create_app
    from kmq_api.config import ApiConfig

    queue = KmqConfig(bootstrap_servers="localhost:9092", queue_topic="QUEUE")
    config = ApiConfig(queues=(queue,), receipt_secret="s" * 64, allow_anonymous=True)
    return create_app(config).openapi()


def _schema_name(schema: dict[str, Any] | None) -> str:
    if not schema:
        return ""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{name.lower()})"
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items'))}"
    return f"`{schema.get('type', 'object')}`"


def _body(operation: dict[str, Any]) -> str:
    content = operation.get("requestBody", {}).get("content", {})
    return ", ".join(f"{_schema_name(media.get('schema'))} ({kind})" for kind, media in content.items())


def _responses(operation: dict[str, Any]) -> list[str]:
    rows = []
    for status, response in operation.get("responses", {}).items():
        content = response.get("content", {})
        schema = next(iter(content.values()), {}).get("schema") if content else None
        rows.append(f"| {status} | {_cell(response.get('description', ''))} | {_schema_name(schema)} |")
    return rows


def _operation(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if operation.get("summary"):
        lines += [f"**{operation['summary']}**", ""]
    if operation.get("description"):
        lines += [operation["description"], ""]
    params = operation.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required |", "|---|---|---|---|"]
        lines += [
            f"| `{p['name']}` | {p['in']} | {_schema_name(p.get('schema'))} | {'yes' if p.get('required') else 'no'} |"
            for p in params
        ]
        lines.append("")
    if _body(operation):
        lines += [f"Request body: {_body(operation)}", ""]
    lines += ["| status | meaning | body |", "|---|---|---|", *_responses(operation), ""]
    return lines


def _model(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [schema["description"], ""]
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | meaning |", "|---|---|---|---|"]
        for field, spec in properties.items():
            kind = _schema_name(spec) if ("$ref" in spec or "type" in spec) else "`any`"
            if "anyOf" in spec:
                kind = " or ".join(_schema_name(option) for option in spec["anyOf"])
            meaning = _cell(spec.get("description", ""))
            lines.append(f"| `{field}` | {kind} | {'yes' if field in required else 'no'} | {meaning} |")
        lines.append("")
    elif "enum" in schema:
        lines += [", ".join(f"`{value}`" for value in schema["enum"]), ""]
    return lines


def http_page() -> str:
    schema = openapi_schema()
    lines = [
        "# HTTP API",
        "",
        _GENERATED,
        "",
        "The REST facade's endpoints and bodies, from its OpenAPI schema (a running facade serves the same schema at "
        "`/openapi.json` and interactive docs at `/docs`). How receipts, settling and replicas work: "
        "[the REST facade](../guides/rest-facade.md).",
        "",
        f"OpenAPI {schema['openapi']}, API version {schema['info']['version']}.",
        "",
        "## Endpoints",
        "",
    ]
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            lines += _operation(method, path, operation)
    lines += ["## Schemas", ""]
    for name, model in sorted(schema.get("components", {}).get("schemas", {}).items()):
        lines += _model(name, model)
    lines += ["## The schema", "", '??? note "openapi.json"', "    ```json"]
    lines += [f"    {line}" for line in json.dumps(schema, indent=2).splitlines()]
    lines += ["    ```", ""]
    return "\n".join(lines)


# -- metrics ------------------------------------------------------------------------------------------------------


def _metric_rows(registry: Any) -> list[str]:
    rows = []
    # The registry's collectors, as registered: their label names are known before any sample exists (collect()
    # yields a labelled metric only once it has samples).
    for collector in registry._collector_to_names:
        kind = collector._type
        name = collector._name + ("_total" if kind == "counter" else "")
        labels = ", ".join(f"`{label}`" for label in collector._labelnames) or "none"
        rows.append(f"| `{name}` | {kind} | {labels} | {_cell(collector._documentation)} |")
    return rows


def metrics_page() -> str:
    from kmq.worker.metrics import WorkerMetrics
    from kmq_api.metrics import ApiMetrics
    from kmq_tracker.metrics import TrackerMetrics

    components = [
        ("The tracker", "`kmq tracker`: `/metrics` on `KMQ_TRACKER_HTTP_PORT`.", TrackerMetrics().registry),
        ("The REST facade", "`kmq api`: `/metrics` on the API's port (no API key).", ApiMetrics().registry),
        ("The worker", "`kmq worker --metrics-port N`; `worker.metrics.registry` in Python.", None),
    ]
    lines = ["# Metrics", "", _GENERATED, "", "Every Prometheus metric kmq's components export, by component.", ""]
    for title, where, registry in components:
        registry = registry if registry is not None else WorkerMetrics("QUEUE").registry
        lines += [f"## {title}", "", where, "", "| metric | type | labels | meaning |", "|---|---|---|---|"]
        lines += [*_metric_rows(registry), ""]
    return "\n".join(lines)
