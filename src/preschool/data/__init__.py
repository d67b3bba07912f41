"""Tokenizers, packing and memory-mapped token shards."""
