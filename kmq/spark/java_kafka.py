"""kmq's Kafka settings (librdkafka's names) as options of Spark's Kafka source (the Java client's, `kafka.*`).

One set of options reaches both Spark's consumer and the driver's marker producer: the security settings every kmq
client takes are translated here. The SASL password (`sasl_password`, or `sasl_password_file` read here on the
driver) travels only inside `kafka.sasl.jaas.config`, a value Spark redacts wherever it shows options (its
`spark.redaction.regex` matches "password") and the Kafka client logs as `[hidden]`; Spark's checkpoint holds
offsets, never source options.
"""

from __future__ import annotations

from kmq.config import KafkaValue, KmqConfig
from kmq.errors import ConfigError

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# librdkafka settings translated below, or that only a librdkafka client understands (the Java client would log each
# as an unknown config): never passed through as they are.
_TRANSLATED = frozenset(
    {"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
     "ssl.ca.location", "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification", "logger"}
)  # fmt: skip


def java_kafka_options(config: KmqConfig) -> dict[str, str]:
    """The `kafka.*` options of Spark's Kafka source for `config`'s cluster and credentials."""
    settings = config.kafka_settings()
    options: dict[str, str] = {"bootstrap.servers": config.bootstrap_servers}
    protocol = str(settings.get("security.protocol", "")).upper()
    if protocol:
        options["security.protocol"] = protocol
    mechanism = str(settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "").upper()
    if mechanism:
        options["sasl.mechanism"] = mechanism
    if "sasl.username" in settings:
        options["sasl.jaas.config"] = _jaas(mechanism, str(settings["sasl.username"]), settings.get("sasl.password"))
    if "ssl.ca.location" in settings:  # a PEM file, as librdkafka takes it (Java reads PEM truststores too)
        options["ssl.truststore.type"] = "PEM"
        options["ssl.truststore.location"] = str(settings["ssl.ca.location"])
    verify = settings.get("ssl.endpoint.identification.algorithm")
    if verify is not None:
        options["ssl.endpoint.identification.algorithm"] = "" if str(verify).lower() == "none" else str(verify)
    options.update({key: _text(value) for key, value in settings.items() if key not in _TRANSLATED})
    return {f"kafka.{key}": value for key, value in options.items()}


def _jaas(mechanism: str, username: str, password: KafkaValue | None) -> str:
    module = _LOGIN_MODULES.get(mechanism)
    if module is None:
        raise ConfigError(
            "sasl_mechanism",
            f"Spark's Kafka source logs in with a user name and password for {', '.join(sorted(_LOGIN_MODULES))}, "
            f"not {mechanism or 'no mechanism'}: set sasl_mechanism (kafka.sasl.mechanism) to one of them",
        )
    return f'{module} required username="{_quoted(username)}" password="{_quoted(str(password or ""))}";'


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _text(value: KafkaValue) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
