"""Data in and out of the workers: host sources and their feeds, strings, shared memory, resident
shards (the public ``Sharded`` in ``resident``), shard files; ``files/`` reads and writes file
formats on the workers.
"""
