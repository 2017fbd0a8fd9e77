"""The query temperature of Llama 4's layers without positions (`[rope] temperature`, step
`h{h}.q_temp`): each query is multiplied by a factor that grows with its position, so that far
into a long text the softmax stays sharp. The formula is in formula.py."""
