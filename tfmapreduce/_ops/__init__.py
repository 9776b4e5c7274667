"""Graph pieces with no cluster: tracing map functions (those that read a model's variables too),
combiners and their merges, per-key and per-group operations, range splitters, bit tricks and
memory budgets.  Each builds TensorFlow ops on whatever device the caller has chosen.
"""
