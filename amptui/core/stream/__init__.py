"""The event stream: the record kinds (records), the line framer, reader and writer (events), a file's ends (eventends)."""
