"""Variable trackers (see base.py)."""
from .base import VariableTracker
from .builder import wrap, wrap_constant_result
from .builtin import BuiltinVariable, binary_op, unary_op
from .constant import ConstantVariable, NullVariable, UndefinedVariable
from .functions import (BaseUserFunctionVariable, CellVariable, NestedFunctionVariable, UserFunctionVariable,
                        UserMethodVariable, bind_args)
from .lists import BaseListVariable, DictVariable, IteratorVariable, ListVariable, TupleVariable
from .objects import (ClassVariable, EmberFunctionVariable, NNModuleVariable, PythonModuleVariable,
                      UserObjectVariable)
from .tensor import TensorMethodVariable, TensorVariable
