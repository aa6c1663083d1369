import sys

from raytune_attn.tune.sweep import main

sys.exit(main())
