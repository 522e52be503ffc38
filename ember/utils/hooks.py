"""ember.utils.hooks: where PyTorch code imports ``RemovableHandle`` from (the class lives
beside the module hooks that return it)."""
from ..nn.modules.module import RemovableHandle

__all__ = ["RemovableHandle"]
