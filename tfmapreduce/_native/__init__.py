"""The custom TensorFlow ops (C++ sources in this folder) and their loader.

``loader.library()`` builds the sources once per digest into a cache and loads them; a kernel
family that cannot be built or loaded is left out with one warning, and callers fall back to
stock TensorFlow ops.
"""
