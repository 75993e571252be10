"""Reading the log back: the replay, explain and tail engines and their rendering
(docs/architecture.md: "Packages", "Observability").
"""
