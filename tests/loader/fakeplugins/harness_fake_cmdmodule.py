"""A command entry point without an attribute: the module itself is no click command."""
