"""The custom TensorFlow ops (C++ sources in this folder, one file per family) and their loader.

``loader.kernels()`` builds each family's library once per digest into a cache and loads them; a kernel
family that cannot be built or loaded is left out with one warning, and callers (asking ``loader.has``)
fall back to stock TensorFlow ops for its ops.
"""
