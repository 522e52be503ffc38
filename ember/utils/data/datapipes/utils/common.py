"""PyTorch's import path for the datapipe helpers (``datapipes.utils.common``)."""
from .._common import (StreamWrapper, check_unpickable_fn, file_binaries_from_pathnames, file_pathnames_from_root,
                       match_masks, validate_input_col)

_check_unpickable_fn = check_unpickable_fn
get_file_pathnames_from_root = file_pathnames_from_root
get_file_binaries_from_pathnames = file_binaries_from_pathnames

__all__ = ["StreamWrapper", "get_file_binaries_from_pathnames", "get_file_pathnames_from_root", "match_masks",
           "validate_input_col"]
