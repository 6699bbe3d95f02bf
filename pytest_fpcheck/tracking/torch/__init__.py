"""The PyTorch backend of tracking: the dispatch mode (:mod:`.mode`), what a rule sees of one
operation (:mod:`.context`), the kernels run as compositions of ruled operations
(:mod:`.substitutes`) and the rules by family (:mod:`.rules`). Importing it imports torch.
"""
