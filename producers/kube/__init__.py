"""The Kubernetes producer: pure translation (:mod:`.translate`) and the watchers
(:mod:`.watch`)."""
