"""The lightning indexer of DeepSeek Sparse Attention (DeepSeek V3.2, GLM-5, DeepSeek V4's sparse
layers): a few small, ReLU'd heads score every earlier key, and each query keeps its top k.
`scores` holds the formula, `topk` the choice and why a key was kept, `rotary` the turns."""
