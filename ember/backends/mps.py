"""``ember.backends.mps``: no Metal (Apple GPU) device in ember."""


def is_available():
    return False


def is_built():
    return False
