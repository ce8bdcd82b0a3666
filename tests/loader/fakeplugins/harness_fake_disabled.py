"""A valid plugin; the tests check it is never imported while disabled (``~disabledone``)."""


class Plugin:
    pass
