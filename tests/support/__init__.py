"""Deterministic test fixtures shared across test packages (tiny models, tokenizers)."""
