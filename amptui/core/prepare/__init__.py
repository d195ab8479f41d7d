"""Before a run folder exists: the checks (preflight), a user's factories (usercode), pretrained weights, FSDP's checks, the text corpus."""
