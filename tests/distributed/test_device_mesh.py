"""ember.distributed.DeviceMesh / init_device_mesh on 2 forked ranks vs torch's on 2 ranks:
printing, mesh tensor, coordinates, local ranks, group members, slicing, errors; collectives on
the mesh's groups."""
from __future__ import annotations

import numpy as np
import pytest

from ._launch import run_ranks

SHAPES = [((2,), ("dp",)), ((2,), None), ((2, 1), ("dp", "tp")), ((1, 2), ("dp", "tp")), ((2, 1), None)]


def _describe(rank, ws, lib):
    """The same questions asked of ember's or torch's meshes (lib: 'ember' or 'torch')."""
    if lib == "torch":
        import torch.distributed as dist
        from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    else:
        import ember.distributed as dist
        from ember.distributed import DeviceMesh, init_device_mesh
    out = []
    for shape, names in SHAPES:
        m = init_device_mesh("cpu", shape, mesh_dim_names=names)
        r = [repr(m), str(m), str(m.mesh).replace("torch.", "ember."), m.mesh.tolist(), m.get_coordinate(),
             [m.get_local_rank(i) for i in range(m.ndim)], m.get_rank(), m.size(), [m.size(i) for i in range(m.ndim)],
             m.shape, m.ndim, m.mesh_dim_names, m.device_type,
             [dist.get_process_group_ranks(m.get_group(i)) for i in range(m.ndim)],
             [m.get_group(i) is dist.group.WORLD for i in range(m.ndim)]]
        if names:
            r += [(repr(m[n]), m[n].mesh.tolist(), m[n].get_coordinate(), m[n].get_local_rank(),
                   dist.get_process_group_ranks(m[n].get_group())) for n in names]
            r += [dist.get_process_group_ranks(m.get_group(n)) for n in names]
            r.append(repr(m[tuple(reversed(names))]))
            r.append(m[names] is m)
        errs = []
        for f in [lambda: m.get_group(), lambda: m.get_local_rank(), lambda: m["zz"], lambda: m.get_group("zz")]:
            try:
                f()
                errs.append(None)
            except Exception as e:  # noqa: BLE001 - compared with torch's
                errs.append((type(e).__name__, e.args))
        r.append(errs)
        out.append(r)
    m = DeviceMesh("cpu", [1, 0])
    out.append((repr(m), m.get_coordinate(), dist.get_process_group_ranks(m.get_group())))
    m = DeviceMesh("cpu", [0])
    out.append((repr(m), m.get_coordinate(), m == DeviceMesh("cpu", [0]), m == DeviceMesh("cpu", [1])))
    for f in [lambda: init_device_mesh("cpu", (4,)), lambda: init_device_mesh("cpu", (2,), mesh_dim_names=("a", "b")),
              lambda: init_device_mesh("cpu", (2, 1), mesh_dim_names=("a", "a"))]:
        try:
            f()
            out.append(None)
        except Exception as e:  # noqa: BLE001 - compared with torch's
            out.append((type(e).__name__, str(e)))
    return out


def test_mesh_queries_match_torch():
    pytest.importorskip("torch")
    ours = run_ranks(_describe, 2, "ember")
    theirs = run_ranks(_describe, 2, "torch", backend="torch")
    for rank in range(2):
        assert len(ours[rank]) == len(theirs[rank])
        for a, b in zip(ours[rank], theirs[rank]):
            assert a == b


def test_collectives_on_mesh_groups():
    def body(rank, ws):
        import ember
        import ember.distributed as dist
        out = {}
        rng = np.random.default_rng(rank + 5)
        for shape in [(2,), (2, 1), (1, 2)]:
            names = ("dp",) if len(shape) == 1 else ("dp", "tp")
            mesh = dist.init_device_mesh("cpu", shape, mesh_dim_names=names)
            for name in names:
                x = rng.standard_normal(4)
                t = ember.tensor(x)
                dist.all_reduce(t, group=mesh.get_group(name))
                g = [ember.zeros(4, dtype=ember.float64) for _ in range(mesh.size(name))]
                dist.all_gather(g, ember.tensor(x), group=mesh[name].get_group())
                out[(shape, name)] = (x, t.numpy().copy(), [y.numpy().copy() for y in g], mesh.size(name))
        return out

    res = run_ranks(body, 2)
    for key, (x0, s0, g0, n) in res[0].items():
        x1, s1, g1, _ = res[1][key]
        if n == 2:
            np.testing.assert_array_equal(s0, x0 + x1)
            np.testing.assert_array_equal(s1, x0 + x1)
            for g in (g0, g1):
                np.testing.assert_array_equal(g[0], x0)
                np.testing.assert_array_equal(g[1], x1)
        else:   # a one-rank group: the collectives see this rank alone
            np.testing.assert_array_equal(s0, x0)
            np.testing.assert_array_equal(s1, x1)
            assert len(g0) == 1
            np.testing.assert_array_equal(g0[0], x0)
            np.testing.assert_array_equal(g1[0], x1)


def test_errors_without_process_group_and_bad_device():
    import ember.distributed as dist
    with pytest.raises(RuntimeError, match="device_type 'cuda' is not supported"):
        dist.init_device_mesh("cuda", (1,))
    if not dist.is_initialized():
        with pytest.raises(RuntimeError, match="init_process_group"):
            dist.DeviceMesh("cpu", [0])
    with pytest.raises(ValueError, match="mesh_shape"):
        dist.init_device_mesh("cpu", (0,))
    with pytest.raises(TypeError, match="mesh_shape must be a tuple"):
        dist.init_device_mesh("cpu", 2)
