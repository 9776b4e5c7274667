"""Tables: named, typed, nullable columns (``tmr.table``) and their operations — group-by aggregates through one
keyed job, filters and new columns through map-only jobs — built on the kinds of job below.
"""
