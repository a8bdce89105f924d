"""specd's engine: models, prompts, KV cache, drafters, verification and the decode loop."""
