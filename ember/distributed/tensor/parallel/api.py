"""``parallelize_module``: apply tensor-parallel styles to a module tree by name pattern."""
from __future__ import annotations

from fnmatch import fnmatch

from .._utils import check_mesh
from .style import ParallelStyle


def parallelize_module(module, device_mesh=None, parallelize_plan=None, *, src_data_rank=0):
    """``parallelize_plan``: a ParallelStyle for ``module`` itself, or a dict from submodule names
    (dotted, ``*`` wildcards per component, as fnmatch) to styles."""
    if device_mesh is None:
        raise ValueError("parallelize_module: device_mesh is required (ember has no mesh context manager)")
    mesh = check_mesh(device_mesh, "parallelize_module")
    if parallelize_plan is None:
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan.src_data_rank = src_data_rank
        parallelize_plan._apply(module, mesh)
        return module
    if not isinstance(parallelize_plan, dict):
        raise TypeError(f"Expect Union[ParallelStyle, Dict] for parallelize_plan, {type(parallelize_plan)} found!")
    for path, style in parallelize_plan.items():
        if not path:
            raise ValueError("parallelize_module: expect module path to be non-empty, but got empty string!")
        atoms = path.split(".")
        head, rest = atoms[0], ".".join(atoms[1:])
        matched = False
        for name, child in module.named_children():
            if fnmatch(name, head):
                matched = True
                if rest:
                    parallelize_module(child, mesh, {rest: style}, src_data_rank=src_data_rank)
                else:
                    parallelize_module(child, mesh, style, src_data_rank=src_data_rank)
        if not matched:
            raise ValueError(f"parallelize_module: no submodule of {type(module).__name__} matches '{head}' "
                             f"(from the plan key '{path}')")
    return module
