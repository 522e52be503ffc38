"""Small models exported by the tests (the same architecture is built in torch for signature checks)."""
import ember
import ember.nn as nn


class LinBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x, y=None):
        h = self.bn(self.fc(x))
        return {"a": (h.relu(), h * 2), "b": h + y}


def randomize_bn(m):
    """Non-default running statistics, so eval mode really uses them."""
    with ember.no_grad():
        m.bn.running_mean.copy_(ember.randn(3))
        m.bn.running_var.copy_(ember.rand(3) + 0.5)
        m.bn.weight.copy_(ember.randn(3))
        m.bn.bias.copy_(ember.randn(3))
    return m


def torch_linbn():
    import torch

    class TLinBN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)
            self.bn = torch.nn.BatchNorm1d(3)

        def forward(self, x, y=None):
            h = self.bn(self.fc(x))
            return {"a": (h.relu(), h * 2), "b": h + y}
    return TLinBN()
