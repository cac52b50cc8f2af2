"""Examples that run beside fairsched without importing it: a Temporal worker and a webhook receiver."""
