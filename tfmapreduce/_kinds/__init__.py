"""One module per kind of job, each a ``Kind`` the driver runs: whole-input combines, keyed
combines, group reducers, map-only jobs, writes, sorts, selections, top-k, joins (``join/``) and
what keyed kinds share (``shuffle/``).
"""
