"""Fuser methods: for each run of module types ``fuse_modules`` can merge (conv-bn, conv-bn-relu,
conv-relu, linear-bn, linear-relu, bn-relu, convtranspose-bn), the function building the fused
module, as torch's ``fuser_method_mappings``. ``is_qat`` picks the training form (the batch norm
stays, as ``ConvBn2d``) or the eval form (its statistics folded into the weights)."""
from __future__ import annotations

from ember import nn

__all__ = ["fuse_conv_bn", "fuse_conv_bn_relu", "fuse_linear_bn", "fuse_convtranspose_bn", "get_fuser_method",
           "get_fuser_method_new"]


def _check_bn_for_qat(bn, out_channels, what="Conv2d", bn_name="BatchNorm2d", which="Output channel"):
    if bn.num_features != out_channels:
        raise AssertionError(f"{which} of {what} must match num_features of {bn_name}")
    if not bn.affine:
        raise AssertionError(f"Only support fusing {bn_name} with affine set to True")
    if not bn.track_running_stats:
        raise AssertionError(f"Only support fusing {bn_name} with tracking_running_stats set to True")


def _qat_class(name, conv):
    """The QAT fused class for ``conv``'s dimensionality (ember has the 2-d ones)."""
    from ..nn import intrinsic as nni
    dims = {nn.Conv1d: "1d", nn.Conv2d: "2d", nn.Conv3d: "3d"}.get(type(conv))
    if dims is None:
        return None
    return getattr(nni, name + dims)


def fuse_conv_bn(is_qat, conv, bn):
    """Conv + BatchNorm: ``ConvBnNd`` for QAT, else a conv with the batch norm folded in."""
    if conv.training != bn.training:
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if is_qat:
        if bn.num_features != conv.out_channels:
            raise AssertionError("Output channel of Conv2d must match num_features of BatchNorm2d.")
        _check_bn_for_qat(bn, conv.out_channels)
        cls = _qat_class("ConvBn", conv)
        if cls is None:
            raise NotImplementedError(f"Cannot fuse train modules: {(conv, bn)}")
        return cls(conv, bn)
    return nn.utils.fuse_conv_bn_eval(conv, bn)


def fuse_conv_bn_relu(is_qat, conv, bn, relu):
    """Conv + BatchNorm + ReLU: ``ConvBnReLUNd`` for QAT, else ``ConvReLUNd`` of the folded conv."""
    from ..nn import intrinsic as nni
    if not (conv.training == bn.training == relu.training):
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if is_qat:
        _check_bn_for_qat(bn, conv.out_channels)
        cls = _qat_class("ConvBnReLU", conv)
        if cls is None:
            raise NotImplementedError(f"Cannot fuse train modules: {(conv, bn, relu)}")
        return cls(conv, bn, relu)
    cls = {nn.Conv1d: nni.ConvReLU1d, nn.Conv2d: nni.ConvReLU2d, nn.Conv3d: nni.ConvReLU3d}.get(type(conv))
    if cls is None:
        raise NotImplementedError(f"Cannot fuse eval modules: {(conv, bn, relu)}")
    return cls(nn.utils.fuse_conv_bn_eval(conv, bn), relu)


def fuse_linear_bn(is_qat, linear, bn):
    """Linear + BatchNorm1d: ``LinearBn1d`` for QAT, else a linear layer with the batch norm folded in."""
    from ..nn import intrinsic as nni
    if linear.training != bn.training:
        raise AssertionError("Linear and BN both must be in the same mode (train or eval).")
    if is_qat:
        _check_bn_for_qat(bn, linear.out_features, "Linear", "BatchNorm1d", "Output features")
        return nni.LinearBn1d(linear, bn)
    return nn.utils.fuse_linear_bn_eval(linear, bn)


def fuse_convtranspose_bn(is_qat, convt, bn):
    """ConvTranspose + BatchNorm (eval only): the batch norm folded into the output channels (dim 1)."""
    if convt.training != bn.training:
        raise AssertionError("ConvTranspose and BN both must be in the same mode (train or eval).")
    if is_qat:
        raise Exception("Fusing ConvTranspose+BatchNorm not yet supported in QAT.")  # noqa: TRY002
    return nn.utils.fuse_conv_bn_eval(convt, bn, transpose=True)


def _sequential_wrapper2(sequential_name):
    """A fuser method that puts the two modules in the fused Sequential ``sequential_name`` of
    ``ember.ao.nn.intrinsic`` whatever ``is_qat`` is."""
    def fuser_method(is_qat, m1, m2):
        from ..nn import intrinsic as nni
        return getattr(nni, sequential_name)(m1, m2)
    fuser_method.__qualname__ = fuser_method.__name__ = f"fuse_{sequential_name}"
    return fuser_method


def _default_op_list_to_fuser_method():
    return {
        (nn.Conv1d, nn.BatchNorm1d): fuse_conv_bn,
        (nn.Conv1d, nn.BatchNorm1d, nn.ReLU): fuse_conv_bn_relu,
        (nn.Conv2d, nn.BatchNorm2d): fuse_conv_bn,
        (nn.Conv2d, nn.BatchNorm2d, nn.ReLU): fuse_conv_bn_relu,
        (nn.Conv3d, nn.BatchNorm3d): fuse_conv_bn,
        (nn.Conv3d, nn.BatchNorm3d, nn.ReLU): fuse_conv_bn_relu,
        (nn.Conv1d, nn.ReLU): _WRAPPERS["ConvReLU1d"],
        (nn.Conv2d, nn.ReLU): _WRAPPERS["ConvReLU2d"],
        (nn.Conv3d, nn.ReLU): _WRAPPERS["ConvReLU3d"],
        (nn.Linear, nn.BatchNorm1d): fuse_linear_bn,
        (nn.Linear, nn.ReLU): _WRAPPERS["LinearReLU"],
        (nn.BatchNorm2d, nn.ReLU): _WRAPPERS["BNReLU2d"],
        (nn.BatchNorm3d, nn.ReLU): _WRAPPERS["BNReLU3d"],
        (nn.ConvTranspose1d, nn.BatchNorm1d): fuse_convtranspose_bn,
        (nn.ConvTranspose2d, nn.BatchNorm2d): fuse_convtranspose_bn,
        (nn.ConvTranspose3d, nn.BatchNorm3d): fuse_convtranspose_bn,
    }


_WRAPPERS = {n: _sequential_wrapper2(n) for n in ("ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "LinearReLU",
                                                   "BNReLU2d", "BNReLU3d")}
_DEFAULT_OP_LIST_TO_FUSER_METHOD = _default_op_list_to_fuser_method()


def get_fuser_method(op_list, additional_fuser_method_mapping=None):
    """The fuser method for the tuple of module types ``op_list`` (``additional_fuser_method_mapping``
    entries win over the defaults)."""
    mapping = {**_DEFAULT_OP_LIST_TO_FUSER_METHOD, **(additional_fuser_method_mapping or {})}
    fuser_method = mapping.get(op_list, None)
    if fuser_method is None:
        raise AssertionError(f"did not find fuser method for: {op_list} ")
    return fuser_method


def get_fuser_method_new(op_pattern, fuser_method_mapping):
    """The fuser method ``fuser_method_mapping`` holds for the pattern ``op_pattern`` (the FX form,
    looked up as given)."""
    fuser_method = fuser_method_mapping.get(op_pattern, None)
    if fuser_method is None:
        raise AssertionError(f"did not find fuser method for: {op_pattern} ")
    return fuser_method
