"""Chunked attention (Llama 4's rotary layers, `mask = "chunked:C"`): the text is cut into chunks of
C tokens and a query sees only the earlier keys of its own chunk. The formula is in formula.py."""
