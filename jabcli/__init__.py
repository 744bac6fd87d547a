"""jab: train small Transformers on algorithmic toy tasks and look at what they learned."""

__version__ = "0.1.0"
