"""The project's maintenance tools (the README generator, the test-run recorder): run from a checkout,
never installed."""
