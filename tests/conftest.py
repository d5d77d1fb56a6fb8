
import pytest


@pytest.fixture(autouse=True)
def _isolated_traces(tmp_path, monkeypatch):
    """Every test writes traces into its own temp dir, never the user's store."""
    monkeypatch.setenv("OPENCONDUCTOR_TRACES", str(tmp_path / "traces.sqlite3"))
    yield
