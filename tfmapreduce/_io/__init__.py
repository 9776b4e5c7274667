"""Data in and out of the workers: host sources and their feeds, strings, shared memory, resident
shards (the public ``Sharded`` in ``resident``), model variables kept on the devices (``models``),
shard files; ``files/`` reads and writes file formats on the workers.
"""
