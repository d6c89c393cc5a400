"""ImportExampleGen that reads the span folders `data.spans` selects (`components.data.spans`), on any orchestrator."""
