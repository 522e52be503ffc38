"""``ember.utils.model_zoo``: torch's old name for ``hub.load_state_dict_from_url``."""
from ..hub import load_state_dict_from_url as load_url

__all__ = ["load_url"]
