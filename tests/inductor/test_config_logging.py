"""``config.configure_logging`` turns the inductor's loggers on and, called again
without them, off: a logger left at DEBUG would keep the FX graph cache bypassed
(it skips graphs whose schedule/fusion logging is on) for the rest of the process."""
import logging

from ember.inductor import config


def test_configure_logging_turns_loggers_off_again():
    lg = logging.getLogger("ember.inductor.schedule")
    try:
        config.configure_logging("schedule,fusion")
        assert lg.isEnabledFor(logging.DEBUG)
        assert any(getattr(h, "_ember", False) for h in lg.handlers)
        config.configure_logging("")
        assert not lg.isEnabledFor(logging.DEBUG)
        assert not any(getattr(h, "_ember", False) for h in lg.handlers)
        assert not logging.getLogger("ember.inductor.fusion").isEnabledFor(logging.DEBUG)
    finally:
        config.configure_logging("")


def test_configure_logging_keeps_user_handlers():
    lg = logging.getLogger("ember.inductor.output_code")
    mine = logging.NullHandler()
    lg.addHandler(mine)
    try:
        config.configure_logging("")
        assert mine in lg.handlers
    finally:
        lg.removeHandler(mine)
