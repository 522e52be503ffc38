"""The modules behind ``ember.utils.benchmark`` (laid out as PyTorch's, so imports such as
``from ember.utils.benchmark.utils.common import Measurement`` work)."""
