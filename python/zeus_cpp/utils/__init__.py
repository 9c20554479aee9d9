"""Utilities: the Zeus cost, learning-rate scalers and framework (PyTorch) helpers."""
