"""Prometheus metrics of the gateway (``GET /metrics``, text format 0.0.4 via ``prometheus-client``,
https://prometheus.io/docs/instrumenting/exposition_formats/).

One ``harness serve`` process (one worker) serves the counts of its own in-process registry. With
``--workers N`` the counts of all workers are one gateway's: every worker writes its values to
memory-mapped files in a directory the supervisor created for this run (prometheus-client's
multiprocess mode, https://prometheus.github.io/client_python/multiprocess/), and whichever worker
answers a scrape merges the files of every worker, live or exited. Counters and histograms keep the
counts of workers that exited (a restarted worker loses nothing); the in-flight gauge sums only the
workers alive (``livesum``: the supervisor removes a dead worker's share, see
:mod:`harness_gateway.workers`).

The ``model`` label is bounded: a model keeps its own label once a route streamed content for it (at
most :data:`MAX_MODEL_LABELS` per process); every other model name a client sends (a typo, a
scan, a model the route does not have) counts as ``model="other"``, so clients cannot grow the
series without bound. The first stream of a model moves to its own label in the in-flight gauge at
its first content delta; every other metric is recorded when the stream ends.

Metrics are updated a few times per request (admission, end), never per chunk:
measured, the eight updates of one request cost 9.8 us in-process and 14.6 us in multiprocess mode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector

from harness_core import TokenUsage

__all__ = ["CONTENT_TYPE", "MAX_MODEL_LABELS", "MULTIPROC_DIR_ENV", "OTHER_MODEL", "GatewayMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

MULTIPROC_DIR_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
"""The environment variable prometheus-client reads when it is imported: set, every metric value of
the process lives in a file of that directory."""

MAX_MODEL_LABELS: Final = 200
"""``route/model`` pairs of one process that keep their own ``model`` label."""

OTHER_MODEL: Final = "other"
"""The ``model`` label of every model without its own (see the module docstring)."""

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class GatewayMetrics:
    """Requests, streams in flight, tokens, cost, latency and time to first token by route and model.

    Args:
        multiprocess_dir: ``None``: :meth:`render` exposes this object's own registry (one process;
            several gateways in one process, as in tests, do not collide). A directory: the
            metrics directory shared by every worker of one ``harness serve`` (its value of
            ``PROMETHEUS_MULTIPROC_DIR``); :meth:`render` merges the files of every worker there.

    Raises:
        RuntimeError: ``multiprocess_dir`` is given but prometheus-client was imported before
            ``PROMETHEUS_MULTIPROC_DIR`` was set (its values would stay in this process's memory,
            and the scrape would miss them).
    """

    def __init__(self, multiprocess_dir: str | Path | None = None) -> None:
        if multiprocess_dir is not None and values.ValueClass is values.MutexValue:
            raise RuntimeError(
                f"gateway metrics: {MULTIPROC_DIR_ENV} must be set before prometheus_client is imported "
                f"for a worker to share its counts through {str(multiprocess_dir)!r}"
            )
        self.multiprocess_dir = multiprocess_dir
        self.known: set[tuple[str, str]] = set()
        """``(route, model)`` pairs a route streamed content for: they keep their own ``model`` label."""
        self.registry = CollectorRegistry()
        labels = ("route", "model")
        self.requests = Counter(
            "harness_gateway_requests",
            "Requests by API (the endpoint: openai, anthropic, responses, embeddings), route, model and outcome",
            ("api", *labels, "status"), registry=self.registry,
        )  # fmt: skip
        self.member_requests = Counter(
            "harness_gateway_member_requests",
            "Generation requests by requested route, the route/model that served them (a balance member or "
            "fallback target) and outcome",
            ("route", "member", "status"), registry=self.registry,
        )  # fmt: skip
        self.in_flight = Gauge(
            "harness_gateway_streams_in_flight", "Generations running now", labels, registry=self.registry,
            multiprocess_mode="livesum",
        )  # fmt: skip
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

    def model_label(self, route: str, model: str) -> str:
        """The ``model`` label of ``model`` on ``route``: itself once served, else :data:`OTHER_MODEL`."""
        return model if (route, model) in self.known else OTHER_MODEL

    def served(self, route: str, model: str) -> None:
        """``route`` streamed content for ``model``: it keeps its own label from now on (while fewer
        than :data:`MAX_MODEL_LABELS` pairs have one)."""
        if len(self.known) < MAX_MODEL_LABELS:
            self.known.add((route, model))

    def ended(
        self,
        api: str,
        labels: tuple[str, str],
        member: tuple[str, str],
        status: str,
        *,
        latency: float,
        first_token: float | None,
        cost: float,
        usage: TokenUsage | None,
    ) -> None:
        """Count one request that ended: ``api`` the endpoint's label (a dialect's name, or
        ``embeddings``), ``labels`` its ``(route, model label)``, ``member`` the ``(route, model)``
        that served it, ``status`` its ledger status; ``latency`` and ``first_token`` in seconds
        from admission (``None``: no content was produced), ``cost`` in USD, ``usage`` its tokens."""
        served_route, served_model = member
        member_label = f"{served_route}/{self.model_label(served_route, served_model)}"
        self.member_requests.labels(labels[0], member_label, status).inc()
        self.latency.labels(*labels).observe(latency)
        if first_token is not None:
            self.first_token.labels(*labels).observe(first_token)
        self.cost.labels(*labels).inc(cost)
        if usage is not None:
            self.tokens.labels(*labels, "input").inc(usage.input_tokens or 0)
            self.tokens.labels(*labels, "output").inc(usage.output_tokens or 0)
        self.requests.labels(api, *labels, status).inc()

    def render(self) -> bytes:
        """The exposition text of every metric (of every worker in multiprocess mode)."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        MultiProcessCollector(merged, path=str(self.multiprocess_dir))  # type: ignore[no-untyped-call]
        return generate_latest(merged)
