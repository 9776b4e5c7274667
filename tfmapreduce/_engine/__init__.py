"""The one driver that runs every kind of job (``driver.run``), the ``Kind`` contract it calls,
and what a run needs around it: programs and their cache, planning, routing, retries,
speculation, cancellation, progress, traces and run statistics.
"""
