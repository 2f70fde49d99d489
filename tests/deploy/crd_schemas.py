"""Structural schemas for the custom resources in deploy/ (Strimzi, Prometheus Operator).

kubernetes-validate knows only the built-in kinds, and the operators' CRDs are large files we do not vendor. These
JSON schemas check what the manifests use: apiVersion and kind, required fields, enums and types as the CRDs define
them (Strimzi 0.46+ `kafka.strimzi.io/v1beta2`, Prometheus Operator `monitoring.coreos.com/v1`), and no unknown
field where our files set fields (so a typo fails). A field the CRD has but this file lacks fails too: check the CRD,
then add it here.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

_STRING_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA: Schema = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
    "additionalProperties": False,
}
_STRIMZI_CLUSTER_METADATA: Schema = {
    **_METADATA,
    "properties": {**_METADATA["properties"], "labels": {**_STRING_MAP, "required": ["strimzi.io/cluster"]}},
    "required": ["name", "labels"],
}
_RESOURCES: Schema = {
    "type": "object",
    "properties": {"requests": _STRING_MAP, "limits": _STRING_MAP},
    "additionalProperties": False,
}


def _resource(api_version: str, kind: str, spec: Schema, metadata: Schema = _METADATA) -> Schema:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": metadata,
            "spec": spec,
        },
        "additionalProperties": False,
    }


def _closed(properties: Schema, required: list[str] | None = None) -> Schema:
    return {"type": "object", "properties": properties, "required": required or [], "additionalProperties": False}


_LISTENER = _closed(
    {
        "name": {"type": "string", "pattern": "^[a-z0-9]{1,11}$"},
        "port": {"type": "integer", "minimum": 9092, "not": {"enum": [9404, 9999]}},
        "type": {"enum": ["internal", "route", "loadbalancer", "nodeport", "ingress", "cluster-ip"]},
        "tls": {"type": "boolean"},
        "authentication": _closed({"type": {"enum": ["tls", "scram-sha-512", "oauth", "custom"]}}, required=["type"]),
        "configuration": {"type": "object"},
        "networkPolicyPeers": {"type": "array"},
    },
    required=["name", "port", "type", "tls"],
)
_KAFKA = _resource(
    "kafka.strimzi.io/v1beta2",
    "Kafka",
    _closed(
        {
            "kafka": _closed(
                {
                    "version": {"type": "string"},
                    "metadataVersion": {"type": "string"},
                    "listeners": {"type": "array", "minItems": 1, "items": _LISTENER},
                    "authorization": _closed(
                        {
                            "type": {"enum": ["simple", "opa", "keycloak", "custom"]},
                            "superUsers": {"type": "array", "items": {"type": "string"}},
                        },
                        required=["type"],
                    ),
                    "config": {"type": "object"},
                    "rack": {"type": "object"},
                    "resources": _RESOURCES,
                    "jvmOptions": {"type": "object"},
                    "template": {"type": "object"},
                    "metricsConfig": {"type": "object"},
                    "logging": {"type": "object"},
                },
                required=["listeners"],
            ),
            "entityOperator": _closed({"topicOperator": {"type": "object"}, "userOperator": {"type": "object"}}),
            "cruiseControl": {"type": "object"},
            "kafkaExporter": {"type": "object"},
        },
        required=["kafka"],
    ),
)
_VOLUME = _closed(
    {
        "id": {"type": "integer", "minimum": 0},
        "type": {"enum": ["ephemeral", "persistent-claim"]},
        "size": {"type": "string", "pattern": "^[0-9]+([KMGTPE]i?)?$"},
        "sizeLimit": {"type": "string"},
        "class": {"type": "string"},
        "deleteClaim": {"type": "boolean"},
        "kraftMetadata": {"enum": ["shared"]},
    },
    required=["type"],
)
_NODE_POOL = _resource(
    "kafka.strimzi.io/v1beta2",
    "KafkaNodePool",
    _closed(
        {
            "replicas": {"type": "integer", "minimum": 0},
            "roles": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": ["controller", "broker"]}},
            "storage": _closed(
                {
                    "type": {"enum": ["ephemeral", "persistent-claim", "jbod"]},
                    "volumes": {"type": "array", "minItems": 1, "items": _VOLUME},
                    "size": {"type": "string"},
                    "deleteClaim": {"type": "boolean"},
                },
                required=["type"],
            ),
            "resources": _RESOURCES,
            "jvmOptions": {"type": "object"},
            "template": {"type": "object"},
        },
        required=["replicas", "roles", "storage"],
    ),
    _STRIMZI_CLUSTER_METADATA,
)
_TOPIC = _resource(
    "kafka.strimzi.io/v1beta2",
    "KafkaTopic",
    _closed(
        {
            "topicName": {"type": "string", "pattern": "^[a-zA-Z0-9._-]{1,249}$"},
            "partitions": {"type": "integer", "minimum": 1},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 32767},
            "config": {"type": "object", "additionalProperties": {"type": ["string", "integer", "number", "boolean"]}},
        }
    ),
    _STRIMZI_CLUSTER_METADATA,
)
_ACL = _closed(
    {
        "type": {"enum": ["allow", "deny"]},
        "host": {"type": "string"},
        "resource": _closed(
            {
                "type": {"enum": ["topic", "group", "cluster", "transactionalId"]},
                "name": {"type": "string"},
                "patternType": {"enum": ["literal", "prefix"]},
            },
            required=["type"],
        ),
        "operations": {
            "type": "array",
            "minItems": 1,
            "items": {
                "enum": [
                    "Read",
                    "Write",
                    "Create",
                    "Delete",
                    "Alter",
                    "Describe",
                    "ClusterAction",
                    "AlterConfigs",
                    "DescribeConfigs",
                    "IdempotentWrite",
                    "All",
                ]
            },
        },
    },
    required=["resource", "operations"],
)
_USER = _resource(
    "kafka.strimzi.io/v1beta2",
    "KafkaUser",
    _closed(
        {
            "authentication": _closed({"type": {"enum": ["tls", "tls-external", "scram-sha-512"]}}, required=["type"]),
            "authorization": _closed(
                {"type": {"enum": ["simple"]}, "acls": {"type": "array", "items": _ACL}}, required=["type", "acls"]
            ),
            "quotas": {"type": "object"},
        }
    ),
    _STRIMZI_CLUSTER_METADATA,
)
_LABEL_SELECTOR = _closed({"matchLabels": _STRING_MAP, "matchExpressions": {"type": "array"}})
_SERVICE_MONITOR = _resource(
    "monitoring.coreos.com/v1",
    "ServiceMonitor",
    _closed(
        {
            "selector": _LABEL_SELECTOR,
            "namespaceSelector": {"type": "object"},
            "jobLabel": {"type": "string"},
            "endpoints": {
                "type": "array",
                "minItems": 1,
                "items": _closed(
                    {
                        "port": {"type": "string"},
                        "path": {"type": "string", "pattern": "^/"},
                        "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                        "scrapeTimeout": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                        "scheme": {"enum": ["http", "https"]},
                        "honorLabels": {"type": "boolean"},
                    },
                    required=["port"],
                ),
            },
        },
        required=["selector", "endpoints"],
    ),
)
_RULE = {
    "type": "object",
    "required": ["expr"],
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "properties": {
        "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
        "record": {"type": "string"},
        "expr": {"type": "string", "minLength": 1},
        "for": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h|d|w|y)$"},
        "keep_firing_for": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
    "additionalProperties": False,
}
_PROMETHEUS_RULE = _resource(
    "monitoring.coreos.com/v1",
    "PrometheusRule",
    _closed(
        {
            "groups": {
                "type": "array",
                "minItems": 1,
                "items": _closed(
                    {
                        "name": {"type": "string", "minLength": 1},
                        "interval": {"type": "string"},
                        "rules": {"type": "array", "minItems": 1, "items": _RULE},
                    },
                    required=["name", "rules"],
                ),
            }
        },
        required=["groups"],
    ),
)

CRD_SCHEMAS: dict[str, Schema] = {
    "Kafka": _KAFKA,
    "KafkaNodePool": _NODE_POOL,
    "KafkaTopic": _TOPIC,
    "KafkaUser": _USER,
    "ServiceMonitor": _SERVICE_MONITOR,
    "PrometheusRule": _PROMETHEUS_RULE,
}
