"""One module per rule. Each rule is a pure function ``(view, context) -> (view, events)``."""
