"""The gateway's web console at ``/console``: Spend, Traffic, Live, the request inspector, Keys.

Turned on by the gateway's ``master_key`` (see :mod:`harness_gateway.console.auth` for access
and docs/gateway.md for a tour). Server-rendered pages; charts by a vendored Chart.js
(``static/VENDORED.md``); no asset is loaded from anywhere but the gateway itself.
"""

from harness_gateway.console.live import ConsoleObserver, LiveStream
from harness_gateway.console.pages import Console, console_routes
from harness_gateway.console.records import RecordStore
from harness_gateway.console.timeline import Timeline

__all__ = ["Console", "ConsoleObserver", "LiveStream", "RecordStore", "Timeline", "console_routes"]
