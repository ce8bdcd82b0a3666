"""A plugin module whose import fails quoting the value of a variable (as a library that
checks its key at import may): the message must reach no one unmasked."""

import os

raise ImportError(f"the client refused the key {os.environ.get('FAKE_LEAKY_KEY')!r}")
