"""pytest puts this directory on sys.path, so tests can ``from helpers import ort_run``."""
