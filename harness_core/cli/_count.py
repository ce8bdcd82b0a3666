"""``harness run --count-tokens``: the input tokens a request would take on its route."""

from __future__ import annotations

import msgspec

from harness_core.cli._common import EXIT_OK, output_failure_code, report_error, warn_start_failures
from harness_core.cli._render import Renderer
from harness_core.cli._request import check_provider_options
from harness_core.errors import LlmError
from harness_core.loader import LoadedConfig
from harness_core.types import GenerateOptions

__all__ = ["count"]


async def count(
    loaded: LoadedConfig, options: GenerateOptions, renderer: Renderer, tools: tuple[str, ...], verbose: int
) -> int:
    """``harness run --count-tokens``: the input tokens of ``options`` (with the specs of the
    ``tools`` named) on its route, printed as a number (``--json``: an object with the route and
    model); errors are reported as for a generation (``UNSUPPORTED``: exit 2)."""
    from harness_core.runtime import Harness

    harness = Harness.from_loaded(loaded)
    try:
        async with harness:
            warn_start_failures(renderer.note, loaded.failures, harness.failures)
            options = harness.apply_defaults(options)
            check_provider_options(harness, options)
            route = options.route
            renderer.route, renderer.source = route, harness.routes().get(route) if route is not None else None
            selected = await harness.select_tools(tools)
            if selected:
                options = msgspec.structs.replace(options, tools=[item.spec for item in selected])
            counted = await harness.count_tokens(options)
    except LlmError as exc:  # the same report, cause and hint as a generation's error finish
        return renderer.report(exc)
    except Exception as exc:  # groups are unwrapped when reported
        return report_error(renderer.note, exc, route=renderer.route, source=renderer.source, verbose=verbose)
    out = renderer.out
    if renderer.as_json:
        body = {"input_tokens": counted, "route": options.route, "model": options.model}
        out.write(renderer.redact(msgspec.json.encode(body).decode()) + "\n")
    else:
        out.write(f"{counted}\n")
    return output_failure_code(out, renderer.err) if out.failure is not None else EXIT_OK
