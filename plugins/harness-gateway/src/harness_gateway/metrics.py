"""Prometheus metrics of the gateway (``GET /metrics``, text format 0.0.4 via ``prometheus-client``,
https://prometheus.io/docs/instrumenting/exposition_formats/).

Each :class:`GatewayMetrics` owns its registry, so several gateways in one process (tests) do not
collide. With ``--workers N`` every worker exposes its own counts; scrape each or use one worker per
container behind the load balancer.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["CONTENT_TYPE", "GatewayMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class GatewayMetrics:
    """Requests, streams in flight, tokens, cost, latency and time to first token by route and model."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ("route", "model")
        self.requests = Counter(
            "harness_gateway_requests", "Generation requests by API, route, model and outcome",
            ("api", *labels, "status"), registry=self.registry,
        )  # fmt: skip
        self.in_flight = Gauge(
            "harness_gateway_streams_in_flight", "Generations running now", labels, registry=self.registry
        )
        self.tokens = Counter(
            "harness_gateway_tokens", "Tokens by direction", (*labels, "direction"), registry=self.registry
        )
        self.cost = Counter("harness_gateway_cost_usd", "Spend charged, USD", labels, registry=self.registry)
        self.latency = Histogram(
            "harness_gateway_request_seconds", "Time from admission to the end of the generation", labels,
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.first_token = Histogram(
            "harness_gateway_time_to_first_token_seconds", "Time from admission to the first content delta", labels,
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip

    def render(self) -> bytes:
        """The exposition text of every metric."""
        return generate_latest(self.registry)
