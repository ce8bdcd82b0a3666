"""Benchmarks of harness (issue 7): never part of the test run.

Run ``nox -s bench`` (or ``python -m bench --help`` in an environment holding harness-core, its
plugins and the openai SDK). Layout:

- :mod:`bench.streams`   pre-generated OpenAI-format and Anthropic-format SSE bodies (scenarios)
- :mod:`bench.server`    the loopback server (raw asyncio, own process) serving them
- :mod:`bench.consumers` the consumers compared side by side (floor, raw bytes, msgspec, harness …)
- :mod:`bench.worker`    one measurement in a fresh process (µs/chunk, CPU, peak RSS, TTFC)
- :mod:`bench.startup`   whole-process start-up of the CLI, import-time summary
- :mod:`bench.__main__`  the driver: rounds, interleaving, medians, targets, markdown tables
"""
