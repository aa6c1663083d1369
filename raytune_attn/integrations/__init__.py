"""Clients of the kernels in other libraries. Each submodule imports its library, which the core never needs:
`import raytune_attn.integrations.transformers` registers the "raytune_attn" attention implementation with
Hugging Face transformers (install transformers yourself, or the package's `transformers` extra)."""
