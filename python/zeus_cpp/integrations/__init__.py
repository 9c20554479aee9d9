"""Adapters to training frameworks (Hugging Face Transformers)."""
