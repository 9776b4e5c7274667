"""Processes and sessions: cluster specs, worker processes, local clusters, network namespaces,
the session backend that runs a graph with a deadline, and the version check of every task.
"""
