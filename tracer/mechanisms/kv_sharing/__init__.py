"""Keys and values shared across layers (Gemma 3n, Gemma 4: `num_kv_shared_layers`): the last layers
compute no keys or values of their own and read those of an earlier layer of their kind.
formula.py says which layer each reads; cache.py what that saves in the KV cache."""
