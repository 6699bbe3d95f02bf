"""Tracking: the PyTorch dispatch-mode instrumentation that feeds the interval engine.

:mod:`.interpose` is the interposition layer shared with the non-finite watch and isolation;
:mod:`.store` keeps bounds beside storages; :mod:`.policy` says which precision operations
compute and accumulate in; :mod:`.torch_rules` holds the ATen rules; :mod:`.substitutes` the kernels run as compositions of
operations that have rules; :mod:`.track` the public entry points. Importing this package imports torch.
"""
