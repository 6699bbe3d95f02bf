"""Assertions: verdicts (:mod:`.verdict`), the assertion (:mod:`.roundoff`), every failure
message (:mod:`.messages`) and the per-test collection of verdicts for the report
(:mod:`.record`)."""
