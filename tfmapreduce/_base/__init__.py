"""The vocabulary every layer uses: errors, tasks, devices, deadlines, partitions, placements, plans, logging.

Nothing here starts a process or builds a graph; every other package imports from here, and this
package imports from none of them.
"""
