"""What both tracking backends share: the side store of bounds beside storages (:mod:`.store`),
the precision policy and sum bounds (:mod:`.policy`), the operation interposition layer and the
user-site lookup (:mod:`.interpose`), and the subscription interface through which a tracker or a
watch listens to the instrumentation (:mod:`.observe`). Nothing here imports a backend package of
tracking or a diagnostic.
"""
