"""A config-less module plugin: registers the mock adapter on route ``modroute``."""

from harness_core import hookimpl
from harness_core.hookspecs import RegisterAdapter
from harness_llm_mock import MockAdapter, MockConfig


@hookimpl
def register_adapter(register: RegisterAdapter) -> None:
    register(["modroute"], MockAdapter(MockConfig(routes=["modroute"])))
