"""specd's engine, pure computation: prompts, KV cache, drafters, verification and the decode
loop, over the models specd.models loads."""
