"""The local runner: LocalDagRunner in this process, its live progress, recovery and failure diagnosis."""
