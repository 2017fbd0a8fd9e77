"""The weightless QK-norm of Llama 4's rotary layers (`q_norm = "l2"`, `k_norm = "l2"`): each
token's query and key divided by their root mean square, with no gain. formula.py has it."""
