"""Transitional: sweep/prefetch.py imports the coupled knob pairs from here as `FEATURES` (pair, function).

They are data of each space file now (`coupled:`, read into `SearchSpace.priors.coupled`, see priors.py); this
module only re-exposes the shipped Hopper file's pairs in the old shape. Delete it once prefetch.py reads
`space.priors.coupled` of the search's own space.
"""

from __future__ import annotations

from raytune_attn.tune.search.space import load_space

FEATURES = {"/".join(c.knobs): (c.knobs, c.log_keep) for c in load_space("nvidia/sm90").priors.coupled}
