"""Random number generation for eager tensors.

A ``Generator`` is PyTorch's CPU generator: a Mersenne Twister whose draws ``rand``, ``randn``,
``randint``, ``randperm``, ``uniform_``, ``normal_``, ``bernoulli_``, ``exponential_``,
``multinomial``, ``cauchy_``/``log_normal_``/``geometric_``, ``poisson``, ``binomial``,
``_standard_gamma``/``_sample_dirichlet`` (and so ``nn.init``, dropout, rrelu and
``torch.distributions``) turn into the numbers PyTorch gives for the same seed
(``ember/_mt19937.py``). A numpy PCG64 stream seeded with the same seed remains for the few
draws that are not PyTorch's (``ember/_mt19937.py`` lists them).
(Compiled code uses counter-based Philox from ember.prims; the streams are different by design,
as torch.compile's are from eager PyTorch's.)
"""
from __future__ import annotations

import contextlib

import numpy as np

from ._mt19937 import MTStream


class Generator:
    def __init__(self, device="cpu"):
        self.device = device
        self._seed = 67280421310721
        self._np = np.random.Generator(np.random.PCG64(self._seed))
        self._mt = MTStream(self._seed)

    def manual_seed(self, seed):
        seed = int(seed)
        if seed < 0:
            seed = seed & 0xFFFF_FFFF_FFFF_FFFF
        self._seed = seed
        self._np = np.random.Generator(np.random.PCG64(seed))
        self._mt = MTStream(seed)
        return self

    def seed(self):
        s = int(np.random.SeedSequence().entropy) & 0xFFFF_FFFF_FFFF_FFFF
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """The generator's state as a uint8 tensor (the JSON of the Mersenne Twister's and the
        numpy stream's states; not PyTorch's byte layout)."""
        from .ops import api
        import json
        state = json.dumps({"mt19937": self._mt.state(), "numpy": self._np.bit_generator.state,
                            "seed": self._seed}).encode()
        return api.tensor(np.frombuffer(state, dtype=np.uint8).copy())

    def set_state(self, state):
        import json
        from .tensor import Tensor
        if not isinstance(state, Tensor) or state.dtype.np != np.uint8:
            raise TypeError(f"set_state: expected a torch.ByteTensor (a state get_state returned), got "
                            f"{getattr(state, 'dtype', type(state).__name__)}")
        try:
            st = json.loads(bytes(state._data.tobytes()).decode())
        except ValueError as e:
            raise RuntimeError("set_state: this is not a state of an ember generator (PyTorch's byte "
                               "layout is not read)") from e
        if "mt19937" in st:
            self._mt.set_state(st["mt19937"])
            self._np.bit_generator.state = st["numpy"]
            self._seed = st.get("seed", self._seed)
        else:                      # a state saved before the Mersenne Twister: the numpy stream's
            self._np.bit_generator.state = st
        return self


default_generator = Generator()


def draw_seed(generator=None) -> int:
    """One int64 in [0, 2**63) from ``generator`` (the default one when None), as PyTorch's
    ``torch.empty((), dtype=torch.int64).random_(generator=g).item()``: how a DataLoader and a
    shuffling sampler seed themselves, so their orders follow ``manual_seed`` as PyTorch's do."""
    from ._mt19937 import randint
    g = default_generator if generator is None else generator
    return int(randint(g._mt, 1, 0, 2 ** 63)[0])


def manual_seed(seed):
    """Seed the default generator; returns it (like torch.manual_seed)."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True):
    if not enabled:
        yield
        return
    state = default_generator.get_state()
    try:
        yield
    finally:
        default_generator.set_state(state)


def thread_safe_generator():
    """The generator a DataLoader *thread* worker should draw from, None elsewhere (the default
    generator is then right). ember's DataLoader workers are processes -- each has its own
    default generator, seeded per worker -- so outside a thread worker, which ember does not
    create, this is None, as torch's in the main process and in process workers."""
    from .utils.data import get_worker_info
    info = get_worker_info()
    return getattr(info, "thread_generator", None) if info is not None else None
