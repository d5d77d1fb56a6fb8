"""`conductor serve` flags that override the config's [server] section: a bad value is a clear error
naming the flag's field, not a traceback (the overrides were validated by a function that did not exist)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from openconductor.cli import app
from openconductor.server.config import ServerConfigError, default_config, with_server_overrides


@pytest.mark.parametrize("overrides, message", [
    ({"workers": 0}, "command line: workers: Input should be greater than or equal to 1"),
    ({"counters": "http://localhost:6379"}, "command line: counters: give a redis://, rediss:// or unix:// URL"),
])
def test_a_bad_override_is_a_config_error_naming_the_field(overrides, message):
    with pytest.raises(ServerConfigError, match=message):
        with_server_overrides(default_config(), overrides)
    assert with_server_overrides(default_config(), {"workers": 2}).server.workers == 2


def test_serve_with_a_bad_flag_exits_with_the_message():
    result = CliRunner().invoke(app, ["serve", "--workers", "0"])
    assert result.exit_code == 2 and "command line: workers: Input should be greater than or equal to 1" in " ".join(result.output.split())
    assert "Traceback" not in result.output and "NameError" not in result.output
