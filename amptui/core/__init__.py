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
    run/          a run folder and what it says
      runfiles    the file names in a run folder; runlock: one writer per folder (flock)
      runs        listing runs, their status and duration; runstate: the fold of a run's records
      runops      delete, resume refusals, the equivalent command line (for the CLI and dashboard)
      runids      run ids as people type them (prefix, short tail, `last`): resolve_run_dir
      folders     the runs folders this user has used (recorded in the state directory)
    statedir      amptui's state directory ($XDG_STATE_HOME/amptui) and its JSON files
    records       the event stream's record kinds, one dataclass each; readers get them back (from_wire)
    events        the one line framer, EventReader and EventWriter; eventends: a file's head and tail
    safefile      opening what a run folder holds as data (no links out, no FIFOs, bounded)
    trust         which run folders may run the code their config names
    compare       the tutorials' table (of runsummary's RunSummary: a run read for comparison);
                  inputbound: the data-wait share; series, axis, fmt: figures
    comparenotes  the lines under compare's table (warnings, TF32, headroom, what was measured)
    hygiene       precision hygiene's findings: codes, thresholds, words (telemetry/hygiene.py measures)
    distribution  how a run was spread ("bf16 FSDP x2"); rankmemory: its memory per rank
    lossgaps      each run's loss against the baseline's noise band (the compare screen)
    turns         the turn file of `ab --interleave`: one variant trains at a time, in turn
    export        a run's step series as CSV or JSON (`amptui export`)
    preflight     checks before a run folder exists (device, data, weights); usercode: factories
    checkpoints   last.json, what a resume check knows of last.pt without torch
    pretrained    the torchvision weights table; errors: UserError and ConfigError
"""
