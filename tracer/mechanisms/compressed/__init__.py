"""DeepSeek V4's compressed attention: besides a sliding window over the tokens, each query reads a
pool of compressed entries, each a learned softmax pooling of m tokens (`pool`), through one
key/value head with sinks, its output turned back and projected group by group (`attention`)."""
