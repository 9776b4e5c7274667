"""Queries: lazy tables (``tmr.lazy``) whose steps build a frozen logical plan, column expressions (``tmr.col``) the
planner can read, the optimizer's rules (plan → plan) and the execution of a plan through the eager table operations.
"""
