"""Joins of keyed data in one run: the verbs, the plan (every strategy choice), the kind that
builds the graph, and the result types.
"""
