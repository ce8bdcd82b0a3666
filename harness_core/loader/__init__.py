"""The plugin loader: find ``plugins.yaml``, import the plugins it names, validate, build them.

``plugins.yaml`` (docs/loader.md)::

    plugins:
      trace: {path: traces.jsonl}            # entry-point name -> config (listed first = outermost)
      openai:groq:                           # "name:ident": a second instance of plugin "openai"
        api_key: ${{ env.GROQ_API_KEY }}     # env lookup only, never eval; secret from then on
      ~anthropic: {}                         # "~" disables it: never imported
    defaults: {route: mock, model: echo}

Steps, in order: parse (safe YAML, lines kept, explicit tags refused, alias expansion bounded;
``defaults:`` values get ``${{ env.NAME }}`` substitution too) → resolve every enabled name against the
entry-point group ``harness.plugins`` (importing only those) → validate every config
(``${{ env.NAME }}`` substitution, :class:`~harness_core.config.EnvFallback`, ``msgspec.convert``
with unknown fields rejected and YAML strings turned into :class:`~harness_core.Secret` for
``Secret`` fields) → when no problem was found anywhere, build the plugins (``Plugin(config)``).
Problems of every plugin are collected (every problem of each, field by field) and raised together as one
:class:`~harness_core.config.ConfigError`. A plugin that fails to import or to build is recorded
as a :class:`~harness_core.plugininfo.PluginFailure` instead (docs/loader.md failure policy); a plugin
that cannot even be imported counts as a middleware (fail closed). Every message produced here
is scrubbed of secrets (:meth:`LoadedConfig.redact`).

One module per concept (every public name is imported from here):

- :mod:`~harness_core.loader.find`: where the document comes from (search, reading, the built-in default);
- :mod:`~harness_core.loader.config`: what a load produced (:class:`LoadedConfig`, :class:`PluginEntry`);
- :mod:`~harness_core.loader.session`: one run over one document (how problems and failures are recorded);
- :mod:`~harness_core.loader.defaults`: the ``defaults:`` and ``aliases:`` sections, alias resolution;
- :mod:`~harness_core.loader.entries`: the ``plugins:`` section's keys;
- :mod:`~harness_core.loader.discover`: entry points (installed plugins, importing one, unknown names);
- :mod:`~harness_core.loader.validate` and :mod:`~harness_core.loader.convert`: one plugin's config checked;
- :mod:`~harness_core.loader.build`: the caller's :data:`Configure` defaults, building the plugins;
- :mod:`~harness_core.loader.load`: :func:`load_config`, :func:`inspect_config` and the order of the steps.
"""

from __future__ import annotations

from harness_core.loader.build import Configure
from harness_core.loader.config import LoadedConfig, PluginEntry
from harness_core.loader.discover import (
    ENTRY_POINT_GROUP,
    FIRST_PARTY_PLUGINS,
    installed_plugins,
    unknown_plugin_message,
)
from harness_core.loader.find import BUILTIN_DEFAULT, CONFIG_ENV, find_config
from harness_core.loader.find import BUILTIN_SOURCE as BUILTIN_SOURCE  # not in __all__: for messages and tests
from harness_core.loader.load import inspect_config, load_config

__all__ = [
    "BUILTIN_DEFAULT",
    "CONFIG_ENV",
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY_PLUGINS",
    "Configure",
    "LoadedConfig",
    "PluginEntry",
    "find_config",
    "inspect_config",
    "installed_plugins",
    "load_config",
    "unknown_plugin_message",
]
