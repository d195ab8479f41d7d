"""`amptui plan`'s planner (plan) and the roofline it reads (roofline)."""
