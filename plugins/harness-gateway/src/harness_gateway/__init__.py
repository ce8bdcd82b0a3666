"""harness-gateway: ``harness serve``, an OpenAI- and Anthropic-compatible HTTP gateway over the
harness runtime, with API keys, budgets and rate limits held in SQLite or PostgreSQL.

See the deployment guide: docs/gateway.md of the harness repository.
"""

from harness_gateway.app import build_app
from harness_gateway.config import GatewayConfig, GatewayPlugin
from harness_gateway.console import Console, ConsoleObserver, RecordStore
from harness_gateway.errors import GatewayError
from harness_gateway.gateway import Gateway
from harness_gateway.keys import KeyRecord, KeySpec
from harness_gateway.observe import Observer, RunEnd, RunInfo, RunWatch
from harness_gateway.runtime import GatewayRuntime, RuntimeHolder, load_runtime
from harness_gateway.server import GatewayServer
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import SqlStore

__all__ = [
    "Console",
    "ConsoleObserver",
    "Gateway",
    "GatewayConfig",
    "GatewayError",
    "GatewayPlugin",
    "GatewayRuntime",
    "GatewayServer",
    "KeyRecord",
    "KeySpec",
    "Observer",
    "RecordStore",
    "RunEnd",
    "RunInfo",
    "RunWatch",
    "RuntimeHolder",
    "SQLiteStore",
    "SqlStore",
    "build_app",
    "load_runtime",
]
