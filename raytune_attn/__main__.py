"""`python -m raytune_attn`: the tuner's command line (needs the `tune` extra)."""

import sys

from raytune_attn._entry import main

sys.exit(main())
