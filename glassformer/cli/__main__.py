"""`python -m glassformer.cli ...` (and `torchrun ... -m glassformer.cli train ...`)."""

import sys

from glassformer.cli import main

sys.exit(main())
