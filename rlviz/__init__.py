"""rlviz: see what your reinforcement-learning agent does and why."""

from .errors import RlvizError, UsageError
from .policy import Policy, PolicyOutput, TorchPolicy

__version__ = "0.1.0"

__all__ = ["RlvizError", "UsageError", "Policy", "PolicyOutput", "TorchPolicy", "__version__"]
