"""``ember.distributed.tensor``: DTensor -- tensors laid out over a DeviceMesh (torch.distributed.tensor).

``distribute_tensor`` / ``DTensor.from_local`` make one, ``redistribute`` / ``full_tensor`` /
``to_local`` move it between layouts, and ordinary ops on DTensors propagate the layout (see
``_dispatch``); ``ember.distributed.tensor.parallel`` builds tensor parallelism on top.
"""
from __future__ import annotations

from ..device_mesh import DeviceMesh, init_device_mesh
from ._api import (DTensor, distribute_tensor, empty, full, ones, rand, randn, zeros)
from ._module import distribute_module
from .placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "DeviceMesh", "init_device_mesh", "distribute_tensor", "distribute_module",
           "Shard", "Replicate", "Partial", "Placement", "zeros", "ones", "empty", "full", "rand", "randn"]
