"""The wire contract of slurmbridge: events, actions, subjects, streams and well-known names.

Everything here is data. Producers, reconcilers, the runtime and programs in other languages
(through ``schemas/jsonschema/``) agree on these shapes; nothing in this package performs I/O,
and it imports only the standard library and msgspec (checked by import-linter).
"""
