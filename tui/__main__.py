"""`python -m tui` runs the attnsim command line."""
from tui.cli import entry

entry()
