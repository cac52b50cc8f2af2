"""Proof under hostile load: a seeded workload (`workload`), a run of it on the real stack with
injected faults (`runner`), the figures of its event log (`metrics`) and the report (`report`),
written by one renderer (`document`)."""
