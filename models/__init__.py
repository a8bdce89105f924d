"""specd's models: built-in manifest, fetching and assembling chunks, converting GGUF files,
resolving specs to cached folders, probing devices and dtypes, loading, and `specd models`' info.

This is the I/O beside the engine: it produces the `specd.decoding.loaded.LoadedModel` the
engine computes with, and the engine never imports it.
"""
