import sys

from raytune_attn.cli import main

sys.exit(main())
