import sys

from raytune_attn.sweep import main

sys.exit(main())
