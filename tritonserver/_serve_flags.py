"""The flags of ``python -m tritonserver serve``: NVIDIA's tritonserver
binary's names and value forms (``--flag=value`` or ``--flag value``;
booleans as true/false, on/off, 1/0), turned into the Server's Options and
the frontends' settings. A flag the binary has and this package cannot honour
is refused (exit status 2) with the reason, never ignored; an unknown flag or
a malformed value exits 2 naming it, as argparse does."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ._api._enums import LogFormat, ModelControlMode, RateLimitMode
from ._kserve.restricted import parse_restrictions


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "on", "1", "yes"):
        return True
    if lowered in ("false", "off", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid value for bool option: {text!r} (true or false)")


def _uint(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def _verbosity(text: str) -> int:
    """--log-verbose: a level, or true/false (1/0), as the binary reads it."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return int(lowered == "true")
    return _uint(text)


def _port(text: str) -> int:
    value = _uint(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535, not {value}")
    return value


def _choice(*names: str) -> Any:
    def parse(text: str) -> str:
        if text.lower() not in names:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(names)}")
        return text.lower()
    return parse


def _key_value(separator: str, shape: str) -> Callable[[str], tuple[str, str, str]]:
    """'<group>,<setting>=<value>' (separator ',') or '<a>:<b>=<c>' (':')."""
    def parse(text: str) -> tuple[str, str, str]:
        head, eq, value = text.partition("=")
        group, sep, setting = head.partition(separator)
        if not eq or not sep or not group or not setting:
            raise argparse.ArgumentTypeError(f"{text!r} is not of the form {shape}")
        return group, setting, value
    return parse


def _header_pattern(text: str) -> str:
    """A header forward pattern as the binary's command line gives it to
    its frontend: case-insensitive ("(?i)" before it, header names being
    case-insensitive), so that even "" forwards every header."""
    return "(?i)" + text


def _metrics_setting(text: str) -> tuple[str, str, str]:
    """'<setting>=<value>' or '<group>,<setting>=<value>' (the group "" for the first)."""
    if "," in text.partition("=")[0]:
        return _key_value(",", "<group>,<setting>=<value>")(text)
    setting, eq, value = text.partition("=")
    if not eq or not setting:
        raise argparse.ArgumentTypeError(f"{text!r} is not of the form <setting>=<value>")
    return "", setting, value


# Binary flags this package has no equivalent for: the reason each is refused.
_REFUSED = {
    "--allow-sagemaker": "the SageMaker frontend is not served by this package (KServe HTTP and gRPC are)",
    "--allow-vertex-ai": "the Vertex AI frontend is not served by this package (KServe HTTP and gRPC are)",
    "--trace-config": "tracing is not served by this package's frontends",
    "--model-config-name": "custom model config names are not settable through this package's Options",
}

# Value-taking flags the binary has for frontends this package does not serve:
# accepted only with their "off" values.
_OFF_ONLY = ("--allow-sagemaker", "--allow-vertex-ai")


@dataclass
class ServeSettings:
    """What the flags ask for: the Server's Options (keyword arguments) and each frontend's."""

    server: dict[str, Any] = field(default_factory=dict)
    http: Optional[dict[str, Any]] = None
    grpc: Optional[dict[str, Any]] = None
    metrics: Optional[dict[str, Any]] = None
    repository_poll_secs: int = 15
    exit_timeout_secs: int = 30


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tritonserver serve",
        description="Serve models over the network as NVIDIA's tritonserver binary does (KServe v2 HTTP and "
                    "gRPC, Prometheus metrics), from this process: the binary's flags, in-process python models. "
                    "See docs/serving.md.",
        allow_abbrev=True)  # as the binary's getopt_long: a flag's unambiguous prefix names it
    add = p.add_argument
    add("--id", dest="server_id", default="triton", help="the server's identifier (metadata's name)")
    add("--exit-timeout-secs", type=_uint, default=30,
        help="on SIGINT/SIGTERM, how long in-flight requests may take to finish (default 30)")
    add("--log-verbose", type=_verbosity, default=0)
    add("--log-info", type=_bool, default=True)
    add("--log-warning", type=_bool, default=True)
    add("--log-error", type=_bool, default=True)
    add("--log-format", type=_choice("default", "iso8601"), default="default")
    add("--log-file", default=None)
    add("--model-repository", "--model-store", dest="model_repository", action="append", default=[],
        help="a model repository (repeatable)")
    add("--exit-on-error", type=_bool, default=True)
    add("--disable-auto-complete-config", action="store_true")
    add("--strict-model-config", type=_bool, default=None)
    add("--strict-readiness", type=_bool, default=True)
    add("--model-control-mode", type=_choice("none", "poll", "explicit"), default="none")
    add("--repository-poll-secs", type=_uint, default=15)
    add("--load-model", action="append", default=[],
        help="with --model-control-mode=explicit: a model to load at start (repeatable; '*' for all)")
    add("--model-load-thread-count", type=_uint, default=4)
    add("--model-load-retry-count", type=_uint, default=0)
    add("--model-namespacing", type=_bool, default=False)
    add("--enable-peer-access", type=_bool, default=True)
    for kind, port in (("http", 8000), ("grpc", 8001)):
        add(f"--allow-{kind}", type=_bool, default=True)
        add(f"--{kind}-address", default="0.0.0.0")
        add(f"--{kind}-port", type=_port, default=port)
        add(f"--reuse-{kind}-port", type=_bool, default=False)
        add(f"--{kind}-header-forward-pattern", type=_header_pattern, default=None)
    add("--http-thread-count", type=_uint, default=8)
    add("--http-restricted-api", type=_key_value(":", "<api>[,<api>...]:<key>=<value>"), action="append",
        default=[])
    add("--http-max-input-size", type=_uint, default=None,
        help="the largest request body in bytes (this package's; default: no limit, as the binary)")
    add("--http-transport", choices=("uvicorn", "native"), default=None,
        help="the HTTP transport (this package's): the extension's own (native, the default where the build "
             "has it) or uvicorn")
    add("--grpc-infer-allocation-pool-size", type=_uint, default=8)
    add("--grpc-transport", choices=("grpcio", "native"), default=None,
        help="the gRPC transport (this package's): the extension's own (native, the default where the build has "
             "it and no TLS or keepalive flag needs grpcio) or grpcio")
    add("--grpc-use-ssl", type=_bool, default=False)
    add("--grpc-use-ssl-mutual", type=_bool, default=False)
    add("--grpc-server-cert", default="")
    add("--grpc-server-key", default="")
    add("--grpc-root-cert", default="")
    add("--grpc-infer-response-compression-level", type=_choice("none", "low", "medium", "high"), default="none",
        help="compress infer responses, as the binary, with an algorithm the client accepts (gzip or deflate: "
             "low the first, medium the middle one, high the last it accepts); either transport")
    add("--grpc-keepalive-time", type=_uint, default=7_200_000)
    add("--grpc-keepalive-timeout", type=_uint, default=20_000)
    add("--grpc-keepalive-permit-without-calls", type=_bool, default=False)
    add("--grpc-http2-max-pings-without-data", type=_uint, default=2)
    add("--grpc-http2-min-recv-ping-interval-without-data", type=_uint, default=300_000)
    add("--grpc-http2-max-ping-strikes", type=_uint, default=2)
    add("--grpc-max-connection-age", type=_uint, default=0)
    add("--grpc-max-connection-age-grace", type=_uint, default=0)
    add("--grpc-restricted-protocol", type=_key_value(":", "<protocol>[,<protocol>...]:<key>=<value>"),
        action="append", default=[])
    add("--allow-metrics", type=_bool, default=True)
    add("--allow-gpu-metrics", type=_bool, default=True)
    add("--allow-cpu-metrics", type=_bool, default=True)
    add("--metrics-address", default="0.0.0.0")
    add("--metrics-port", type=_port, default=8002)
    add("--metrics-interval-ms", type=float, default=2000.0)
    add("--metrics-config", type=_metrics_setting, action="append", default=[])
    add("--backend-directory", default=None)
    add("--backend-config", type=_key_value(",", "<backend>,<setting>=<value>"), action="append", default=[])
    add("--repoagent-directory", default=None)
    add("--cache-config", type=_key_value(",", "<cache>,<setting>=<value>"), action="append", default=[])
    add("--cache-directory", default=None)
    add("--response-cache-byte-size", type=_uint, default=None)
    add("--rate-limit", type=_choice("off", "execution_count"), default="off")
    add("--pinned-memory-pool-byte-size", type=_uint, default=1 << 28)
    add("--min-supported-compute-capability", type=float, default=6.0)
    add("--buffer-manager-thread-count", type=_uint, default=0)
    add("--host-policy", type=_key_value(",", "<policy>,<setting>=<value>"), action="append", default=[])
    add("--python-models", choices=("auto", "stub", "in-process"), default="auto",
        help="this package's: how python-backend models run (default auto: in-process where the stub cannot)")
    for flag in _REFUSED:
        if flag not in _OFF_ONLY:
            add(flag, dest=flag[2:].replace("-", "_"), default=None, help=argparse.SUPPRESS)
    for flag in _OFF_ONLY:
        add(flag, type=_bool, default=False, help=argparse.SUPPRESS)
    for flag in ("--sagemaker-port", "--sagemaker-thread-count", "--sagemaker-safe-port-range", "--vertex-ai-port",
                 "--vertex-ai-thread-count", "--vertex-ai-default-model"):
        add(flag, default=None, help=argparse.SUPPRESS)  # inert while their frontend is off, as in the binary
    return p


def settings(argv: list[str]) -> ServeSettings:
    """The settings for `argv` (SystemExit(2) with a message naming the flag when it cannot be served;
    InvalidArgumentError in the binary's words for a restricted group it refuses, which exits 1)."""
    p = parser()
    a = p.parse_args(argv)
    for flag, specs, noun in (("--http-restricted-api", a.http_restricted_api, "api"),
                              ("--grpc-restricted-protocol", a.grpc_restricted_protocol, "protocol")):
        parse_restrictions(specs, flag, noun)
    for flag, reason in _REFUSED.items():
        if getattr(a, flag[2:].replace("-", "_")):
            p.error(f"{flag}: {reason}")
    if not a.model_repository:
        p.error("--model-repository is required (a folder of models; repeatable)")
    if a.load_model and a.model_control_mode != "explicit":
        p.error("--load-model takes effect only with --model-control-mode=explicit (as in NVIDIA's binary)")
    strict = a.strict_model_config if a.strict_model_config is not None else a.disable_auto_complete_config
    cache = _grouped(a.cache_config)
    if a.response_cache_byte_size is not None:
        cache.setdefault("local", {})["size"] = str(a.response_cache_byte_size)
    metrics_config: dict[str, dict[str, str]] = {}
    for group, setting, value in a.metrics_config:
        metrics_config.setdefault(group, {})[setting] = value
    server: dict[str, Any] = dict(
        model_repository=a.model_repository, server_id=a.server_id,
        model_control_mode=ModelControlMode[a.model_control_mode.upper()], startup_models=a.load_model,
        strict_model_config=strict, strict_readiness=a.strict_readiness, exit_on_error=a.exit_on_error,
        exit_timeout=a.exit_timeout_secs, model_load_thread_count=a.model_load_thread_count,
        model_load_retry_count=a.model_load_retry_count, model_namespacing=a.model_namespacing,
        enable_peer_access=a.enable_peer_access, log_verbose=a.log_verbose, log_info=a.log_info,
        log_warn=a.log_warning, log_error=a.log_error,
        log_format=LogFormat.ISO8601 if a.log_format == "iso8601" else LogFormat.DEFAULT,
        metrics=a.allow_metrics, gpu_metrics=a.allow_gpu_metrics, cpu_metrics=a.allow_cpu_metrics,
        metrics_interval=int(a.metrics_interval_ms), metrics_configuration=metrics_config,
        backend_configuration=_grouped(a.backend_config), host_policies=_grouped(a.host_policy),
        cache_config=cache, rate_limiter_mode=RateLimitMode.EXEC_COUNT if a.rate_limit == "execution_count"
        else RateLimitMode.OFF, pinned_memory_pool_size=a.pinned_memory_pool_byte_size,
        min_supported_compute_capability=a.min_supported_compute_capability,
        buffer_manager_thread_count=a.buffer_manager_thread_count, python_models=a.python_models,
    )
    for flag, key in (("log_file", "log_file"), ("backend_directory", "backend_directory"),
                      ("repoagent_directory", "repo_agent_directory"), ("cache_directory", "cache_directory")):
        if getattr(a, flag) is not None:
            server[key] = getattr(a, flag)
    result = ServeSettings(server=server, repository_poll_secs=a.repository_poll_secs,
                           exit_timeout_secs=a.exit_timeout_secs)
    if a.allow_http:
        result.http = dict(address=a.http_address, port=a.http_port, reuse_port=a.reuse_http_port,
                           thread_count=max(a.http_thread_count, 1),
                           header_forward_pattern=a.http_header_forward_pattern or "",
                           restricted_apis=[(group, key, value) for group, key, value in a.http_restricted_api],
                           max_input_size=a.http_max_input_size,
                           **({"transport": a.http_transport} if a.http_transport else {}))
    if a.allow_grpc:
        result.grpc = dict(
            address=a.grpc_address, port=a.grpc_port, reuse_port=a.reuse_grpc_port, use_ssl=a.grpc_use_ssl,
            use_mutual_auth=a.grpc_use_ssl_mutual, server_cert=a.grpc_server_cert, server_key=a.grpc_server_key,
            root_cert=a.grpc_root_cert,
            infer_compression_level=("none", "low", "medium", "high").index(a.grpc_infer_response_compression_level),
            keepalive_time_ms=a.grpc_keepalive_time, keepalive_timeout_ms=a.grpc_keepalive_timeout,
            keepalive_permit_without_calls=a.grpc_keepalive_permit_without_calls,
            http2_max_pings_without_data=a.grpc_http2_max_pings_without_data,
            http2_min_recv_ping_interval_without_data_ms=a.grpc_http2_min_recv_ping_interval_without_data,
            http2_max_ping_strikes=a.grpc_http2_max_ping_strikes, max_connection_age_ms=a.grpc_max_connection_age,
            max_connection_age_grace_ms=a.grpc_max_connection_age_grace,
            infer_allocation_pool_size=a.grpc_infer_allocation_pool_size,
            forward_header_pattern=a.grpc_header_forward_pattern or "",
            restricted_protocols=[(group, key, value) for group, key, value in a.grpc_restricted_protocol],
            transport=a.grpc_transport)
    if a.allow_metrics:
        result.metrics = dict(address=a.metrics_address, port=a.metrics_port)
    return result


def _grouped(triples: list[tuple[str, str, str]]) -> dict[str, dict[str, str]]:
    grouped: dict[str, dict[str, str]] = {}
    for group, setting, value in triples:
        grouped.setdefault(group, {})[setting] = value
    return grouped
