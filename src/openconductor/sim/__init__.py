"""The simulated world and its pool generator: every number measured with them is SIMULATED."""
