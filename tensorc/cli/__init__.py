"""The ``tensorc`` command: ``main.py`` assembles the parser and runs a command; each command
(compile, run, check, inspect, bench, profile, tune) is the module of its name, and
``arguments.py`` holds what they share."""
