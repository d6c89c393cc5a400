"""ImportExampleGen that reads the span folders `data.spans` selects (`foundation.data.spans`), on any orchestrator."""
