"""Joins of keyed data in one run: the verbs, the plan (every strategy choice, and where a host side beside a resident
one will go: ``placed``), the kind that builds the graph, and the result types.
"""
