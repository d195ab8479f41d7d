"""amptui's core: what every other part shares. Standard library only (torch lazily, inside the
few functions that ask the machine; Textual never), so the dashboard and `amptui --help` stay light.

Where things live:

    config/       a preset made into one typed value
      schema      the sections as frozen dataclasses: every key's type, default, doc, choices
      values      Config: parsing TOML and --set, merging, validation (ConfigError names the key)
      keychecks   one key's value against the schema (type, choices, minimum, torch's ranges)
      presets     built-in and saved presets: find, load, save atomically
      precision   Precision (autocast, dtype, GradScaler): the value a run records
      modes       the precision modes (fp32, tf32, autocast, FSDP policy): one class each
      dtypes      the DTYPES table: the autocast dtypes and their ranges
      resolve     "auto" values decided for a device; variants: `amptui ab`'s precision setups
    modes/        the precision modes, one module each (fp32, autocast, torchao's fp8 recipes, pure bfloat16, ...)
    run/          a run folder and what it says
      runfiles    the file names in a run folder; runlock: one writer per folder (flock)
      runs        listing runs, their status and duration; runstate: the fold of a run's records
      runops      delete, resume refusals, the equivalent command line (for the CLI and dashboard)
      runids      run ids as people type them (prefix, short tail, `last`): resolve_run_dir
      folders     the runs folders this user has used (recorded in the state directory)
      trust       which run folders may run the code their config names
      turns       the turn file of `ab --interleave`: one variant trains at a time, in turn
      checkpoints last.json, what a resume check knows of last.pt without torch
    stream/       the event stream
      records     the record kinds, one dataclass each; readers get them back (from_wire)
      events      the one line framer, EventReader and EventWriter; eventends: a file's head and tail
    comparison/   comparing runs
      runsummary  a run read for comparison (RunSummary); compare: the tutorials' table
      comparenotes  the lines under the table (warnings, TF32, headroom, what was measured);
                  comparestep: the common step and the speed verdict; tf32note, whyamp: their words
      lossgaps    each run's loss against the baseline's noise band (the compare screen)
    planning/     `amptui plan`'s planner (plan) and the roofline it reads (roofline)
    prepare/      before a run folder exists: preflight (device, data, weights), usercode (factories),
                  pretrained (the torchvision weights table), fsdp_checks, textcorpus
    statedir      amptui's state directory ($XDG_STATE_HOME/amptui) and its JSON files
    safefile      opening what a run folder holds as data (no links out, no FIFOs, bounded)
    inputbound    the data-wait share; series, axis, fmt, figures: figures and how they are said
    distribution  how a run was spread ("bf16 FSDP x2"); rankmemory: its memory per rank
    export        a run's step series as CSV or JSON (`amptui export`)
    autopilot     the precision autopilot's rules; urls: where amptui may send; errors: UserError, ConfigError
    hygiene       precision hygiene's findings: codes, thresholds, words (telemetry/hygiene.py measures)
"""
