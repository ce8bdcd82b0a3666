"""A plugin module that cannot be imported."""

raise ImportError("harness_fake_broken needs a missing library")
