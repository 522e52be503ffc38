"""Random number generation for eager tensors.

The eager generator is numpy's PCG64 behind a torch-like ``Generator``;
``manual_seed`` makes runs repeatable. (Compiled code uses counter-based
Philox from ember.prims; the two streams are different by design.)
"""
from __future__ import annotations

import contextlib

import numpy as np


class Generator:
    def __init__(self, device="cpu"):
        self.device = device
        self._seed = 67280421310721
        self._np = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed):
        seed = int(seed)
        if seed < 0:
            seed = seed & 0xFFFF_FFFF_FFFF_FFFF
        self._seed = seed
        self._np = np.random.Generator(np.random.PCG64(seed))
        return self

    def seed(self):
        s = int(np.random.SeedSequence().entropy) & 0xFFFF_FFFF_FFFF_FFFF
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        from .ops import api
        import json
        state = json.dumps(self._np.bit_generator.state).encode()
        return api.tensor(np.frombuffer(state, dtype=np.uint8).copy())

    def set_state(self, state):
        import json
        self._np.bit_generator.state = json.loads(bytes(state._data.tobytes()).decode())
        return self


default_generator = Generator()


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
